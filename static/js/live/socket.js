// The connection behind a live page: the WebSocket first, live.json polling as the fallback.
//
// The server sends a `snapshot` on every connect, and every event carries whole current values
// (jobs/live/protocol.py), so a reconnect or a poll repairs whatever was missed; nothing here
// keeps state beyond the connection itself. When the WebSocket cannot connect three times in a
// row (a proxy that drops upgrades, say) the page polls live.json, the same snapshot over HTTP,
// and keeps trying the WebSocket now and then. The live indicator shows which of these is on.

import { word } from "./strings.js";

const RETRY_FIRST_MS = 1000, RETRY_MAX_MS = 15000; // reconnect backoff: 1 s doubling to 15 s
const FAILS_BEFORE_POLLING = 3;
const POLL_MS = 4000, WS_RETRY_WHILE_POLLING_MS = 30000, CONNECT_TIMEOUT_MS = 10000;
const RELOAD_AT_MOST_EVERY_MS = 60000;

/** The indicator beside the page's title: "live", "reconnecting", "polling", or hidden (null). */
function setIndicator(mode) {
  const ind = document.getElementById("live-indicator");
  if (!ind) return;
  ind.hidden = !mode;
  ind.className = "live-indicator" + (mode ? " is-" + mode : "");
  ind.textContent = mode ? word(mode) : "";
  ind.setAttribute("data-mode", mode || "");
}

// Logged out meanwhile: reload, and the server sends the reader to the login page (at most once
// a minute, so a session the socket cannot see never turns into a reload loop).
function toLogin() {
  const key = "ffp-live-reloaded", now = Date.now();
  let last = 0;
  try {
    last = Number(sessionStorage.getItem(key)) || 0;
    sessionStorage.setItem(key, String(now));
  } catch (e) {
    return; // no storage, no way to tell a loop: stay on the page
  }
  if (now - last > RELOAD_AT_MOST_EVERY_MS) location.reload();
}

export class Connection {
  /**
   * `wsPath` (/ws/jobs/...), `liveUrl` (its live.json), `closeCodes` (the consumers' refusals:
   * {unauthenticated, notFound}), `onMessage(msg)`: called with every snapshot and event, from
   * either source. Nothing happens before open().
   */
  constructor({ wsPath, liveUrl, closeCodes, onMessage }) {
    this.wsUrl = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + wsPath;
    this.liveUrl = liveUrl;
    this.closeCodes = closeCodes;
    this.onMessage = onMessage;
    this.ws = null;
    this.delay = RETRY_FIRST_MS;
    this.fails = 0; // connections in a row that never brought a message
    this.connectedOnce = false;
    this.wsTimer = null;
    this.pollTimer = null;
    this.polling = false;
    this.stopped = false;
    // Back from a hidden tab or from offline: whatever happened meanwhile, show it now.
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.resync();
    });
    window.addEventListener("online", () => this.resync());
  }

  open() {
    if (this.stopped || this.ws) return;
    clearTimeout(this.wsTimer);
    this.wsTimer = null;
    const reconnect = this.connectedOnce;
    let ws, heard = false;
    try {
      ws = new WebSocket(this.wsUrl);
    } catch (e) {
      this.closed(false);
      return;
    }
    this.ws = ws;
    const timeout = setTimeout(() => { if (ws.readyState === WebSocket.CONNECTING) ws.close(); }, CONNECT_TIMEOUT_MS);
    ws.onopen = () => {
      clearTimeout(timeout);
      // The server sends a snapshot on every connect; after a gap, ask for one explicitly too.
      if (reconnect) this.send({ type: "resync" });
    };
    ws.onmessage = (ev) => {
      let msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (!heard) { // only a message proves the connection works (an open socket may still be refused)
        heard = true;
        this.fails = 0;
        this.delay = RETRY_FIRST_MS;
        this.connectedOnce = true;
        this.stopPolling();
        if (!this.stopped) setIndicator("live");
      }
      if (this.ws === ws) this.onMessage(msg);
    };
    ws.onclose = (ev) => {
      clearTimeout(timeout);
      if (this.ws !== ws) return; // one this connection already gave up
      this.ws = null;
      if (ev.code === this.closeCodes.unauthenticated) { this.stop(); toLogin(); return; }
      if (ev.code === this.closeCodes.notFound) { this.stop(); return; }
      this.closed(heard);
    };
  }

  closed(heard) {
    if (this.stopped) return;
    if (!heard) this.fails += 1;
    if (this.fails >= FAILS_BEFORE_POLLING) {
      this.startPolling();
      this.scheduleOpen(WS_RETRY_WHILE_POLLING_MS);
    } else {
      setIndicator("reconnecting");
      this.scheduleOpen(this.delay);
      this.delay = Math.min(this.delay * 2, RETRY_MAX_MS);
    }
  }

  scheduleOpen(ms) {
    clearTimeout(this.wsTimer);
    this.wsTimer = setTimeout(() => { this.wsTimer = null; this.open(); }, ms);
  }

  /** Sends `msg` over the open WebSocket; false when none is open. */
  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify(msg));
      return true;
    }
    return false;
  }

  /** A fresh snapshot now: over the open WebSocket, by a poll, or by reconnecting at once. */
  resync() {
    if (this.stopped) return;
    if (this.send({ type: "resync" })) return;
    if (this.polling) { this.pollNow(); return; }
    if (!this.ws) this.open();
  }

  startPolling() {
    if (this.polling || this.stopped) return;
    this.polling = true;
    setIndicator("polling");
    this.pollNow();
  }

  stopPolling() {
    this.polling = false;
    clearTimeout(this.pollTimer);
    this.pollTimer = null;
  }

  pollNow() {
    clearTimeout(this.pollTimer);
    this.pollTimer = null;
    if (!this.polling || this.stopped) return;
    // A hidden tab asks nothing; it resyncs when shown again.
    if (document.hidden) { this.pollTimer = setTimeout(() => this.pollNow(), POLL_MS); return; }
    fetch(this.liveUrl, { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } })
      .then((r) => {
        if (r.status === 403 || r.status === 404) { this.stop(); return null; }
        if (!r.ok || r.redirected) throw new Error("live.json answered " + r.status);
        return r.json();
      })
      .then((msg) => {
        // A WebSocket that came back meanwhile is fresher than this answer.
        if (msg && this.polling && !this.stopped) this.onMessage(msg);
      })
      .catch(() => { /* the next poll tries again */ })
      .then(() => {
        if (this.polling && !this.stopped && !this.pollTimer) {
          this.pollTimer = setTimeout(() => this.pollNow(), POLL_MS);
        }
      });
  }

  /** For good: nothing more will change (a final job) or may be shown (refused). */
  stop() {
    this.stopped = true;
    this.stopPolling();
    clearTimeout(this.wsTimer);
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      try { ws.close(1000); } catch (e) { /* already closing */ }
    }
    setIndicator(null);
  }
}
