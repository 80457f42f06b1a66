// Live job pages. The server renders the whole page; this script keeps it current from the
// WebSocket /ws/jobs/<id>/ (a job's page) or /ws/jobs/ (the job list), whose protocol is written
// down in jobs/live/protocol.py: a `snapshot` first, then `job`, `task`, `output` and `cluster` events, each
// carrying whole current values. The script only ever shows what a message says (the database's
// state); it never guesses ahead. When the WebSocket cannot connect three times in a row it polls
// live.json (the same snapshot over HTTP) and keeps trying the WebSocket now and then.
// Every word it writes comes from the page (<template id="live-strings">), in the reader's language.
(function () {
  "use strict";

  var RETRY_FIRST_MS = 1000, RETRY_MAX_MS = 15000; // reconnect backoff: 1 s doubling to 15 s
  var FAILS_BEFORE_POLLING = 3;
  var POLL_MS = 4000, WS_RETRY_WHILE_POLLING_MS = 30000, CONNECT_TIMEOUT_MS = 10000;
  // the consumers' refusals (jobs/live/consumers.py): logged out, or no such job for this user
  var CLOSE_UNAUTHENTICATED = 4401, CLOSE_NOT_FOUND = 4404;

  var jobRoot = document.getElementById("job-live");
  var listRoot = document.getElementById("jobs-live");
  var root = jobRoot || listRoot;
  if (!root || !("WebSocket" in window) || !("fetch" in window)) return;

  // ---- words and small helpers ------------------------------------------------------------

  var words = {};
  var tpl = document.getElementById("live-strings");
  if (tpl && tpl.content) {
    Array.prototype.forEach.call(tpl.content.querySelectorAll("[data-key]"), function (el) {
      words[el.getAttribute("data-key")] = el.innerHTML.trim();
    });
  }
  var scratch = document.createElement("div");
  function word(key, fallback) { // plain text of a word
    if (!(key in words)) return fallback === undefined ? "" : fallback;
    scratch.innerHTML = words[key];
    return scratch.textContent;
  }
  function fill(text, values) { // "{n} failed" + {n: 3}
    return text.replace(/\{(\w+)\}/g, function (m, k) { return k in values ? String(values[k]) : m; });
  }
  function faces(n) {
    if (n === 1) return word("faces_one", "1");
    return word("faces_other", String(n)).replace(/\d+/, String(n));
  }
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (attrs[k] === null || attrs[k] === undefined || attrs[k] === false) return;
      if (k === "text") node.textContent = attrs[k];
      else if (k === "className") node.className = attrs[k];
      else node.setAttribute(k, attrs[k] === true ? "" : attrs[k]);
    });
    (children || []).forEach(function (c) {
      if (c === null || c === undefined || c === false) return;
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }
  function num(v) { var n = Number(v); return isFinite(n) ? n : 0; }
  function pct(part, total) { return total ? Math.round(100 * part / total) : 0; }
  function lang() { return document.documentElement.lang || undefined; }
  // Dates in the server's time zone, one style for the whole page (see formatDates).
  var timeZone = root.getAttribute("data-time-zone") || undefined;
  function shortDate(iso) {
    var d = new Date(iso);
    if (isNaN(d)) return "";
    try {
      return d.toLocaleString(lang(), { dateStyle: "short", timeStyle: "short", timeZone: timeZone });
    } catch (e) {
      return d.toLocaleString();
    }
  }
  // The dates the server wrote get the same style as the ones this script writes later.
  function formatDates() {
    Array.prototype.forEach.call(root.querySelectorAll("time[datetime]"), function (t) {
      var text = shortDate(t.getAttribute("datetime"));
      if (text) t.textContent = text;
    });
  }
  function sameInstant(a, b) { return (!a && !b) || (!!a && !!b && Date.parse(a) === Date.parse(b)); }
  function utcClock(iso) { // as the server writes it: 14:05:09 UTC
    var d = new Date(iso);
    function two(n) { return (n < 10 ? "0" : "") + n; }
    return two(d.getUTCHours()) + ":" + two(d.getUTCMinutes()) + ":" + two(d.getUTCSeconds()) + " UTC";
  }
  function duration(seconds) { // H:MM:SS, like the `duration` template filter
    if (seconds === null || seconds === undefined || seconds === "") return "";
    var s = Math.floor(num(seconds)), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return h + ":" + (m < 10 ? "0" : "") + m + ":" + (r < 10 ? "0" : "") + r;
  }
  function truncate(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }
  var finalStatuses = (root.getAttribute("data-final-statuses") || "").split(/\s+/).filter(Boolean);
  function isFinal(status) { return finalStatuses.indexOf(status) >= 0; }
  function jobLabel(job) { return word("job:" + job.status, job.status_label || job.status); }

  function setBadge(badge, job) {
    badge.className = "badge status-" + job.status;
    badge.textContent = jobLabel(job);
  }
  function setIndicator(mode) {
    var ind = document.getElementById("live-indicator");
    if (!ind) return;
    ind.hidden = !mode;
    ind.className = "live-indicator" + (mode ? " is-" + mode : "");
    ind.textContent = mode ? word(mode) : "";
    ind.setAttribute("data-mode", mode || "");
  }

  // ---- the connection: WebSocket first, live.json polling as the fallback ------------------

  function Connection(wsPath, liveUrl, onMessage) {
    this.wsUrl = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + wsPath;
    this.liveUrl = liveUrl;
    this.onMessage = onMessage;
    this.ws = null;
    this.delay = RETRY_FIRST_MS;
    this.fails = 0;          // connections in a row that never brought a message
    this.connectedOnce = false;
    this.wsTimer = null;
    this.pollTimer = null;
    this.polling = false;
    this.stopped = false;
    var self = this;
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible") self.resync();
    });
    window.addEventListener("online", function () { self.resync(); });
  }

  Connection.prototype.open = function () {
    var self = this;
    if (this.stopped || this.ws) return;
    clearTimeout(this.wsTimer);
    this.wsTimer = null;
    var ws, heard = false, reconnect = this.connectedOnce;
    try {
      ws = new WebSocket(this.wsUrl);
    } catch (e) {
      this.closed(false);
      return;
    }
    this.ws = ws;
    var timeout = setTimeout(function () { if (ws.readyState === WebSocket.CONNECTING) ws.close(); }, CONNECT_TIMEOUT_MS);
    ws.onopen = function () {
      clearTimeout(timeout);
      // The server sends a snapshot on every connect; after a gap, ask for one explicitly too.
      if (reconnect) self.send({ type: "resync" });
    };
    ws.onmessage = function (ev) {
      var msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (!heard) {
        heard = true;
        self.fails = 0;
        self.delay = RETRY_FIRST_MS;
        self.connectedOnce = true;
        self.stopPolling();
        if (!self.stopped) setIndicator("live");
      }
      if (self.ws === ws) self.onMessage(msg);
    };
    ws.onclose = function (ev) {
      clearTimeout(timeout);
      if (self.ws !== ws) return;
      self.ws = null;
      if (ev.code === CLOSE_UNAUTHENTICATED) { self.stop(); toLogin(); return; }
      if (ev.code === CLOSE_NOT_FOUND) { self.stop(); return; }
      self.closed(heard);
    };
  };

  Connection.prototype.closed = function (heard) {
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
  };

  Connection.prototype.scheduleOpen = function (ms) {
    var self = this;
    clearTimeout(this.wsTimer);
    this.wsTimer = setTimeout(function () { self.wsTimer = null; self.open(); }, ms);
  };

  Connection.prototype.send = function (msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify(msg));
      return true;
    }
    return false;
  };

  // A fresh snapshot now: over the open WebSocket, by a poll, or by reconnecting at once.
  Connection.prototype.resync = function () {
    if (this.stopped) return;
    if (this.send({ type: "resync" })) return;
    if (this.polling) { this.pollNow(); return; }
    if (!this.ws) this.open();
  };

  Connection.prototype.startPolling = function () {
    if (this.polling || this.stopped) return;
    this.polling = true;
    setIndicator("polling");
    this.pollNow();
  };

  Connection.prototype.stopPolling = function () {
    this.polling = false;
    clearTimeout(this.pollTimer);
    this.pollTimer = null;
  };

  Connection.prototype.pollNow = function () {
    var self = this;
    clearTimeout(this.pollTimer);
    this.pollTimer = null;
    if (!this.polling || this.stopped) return;
    if (document.hidden) { this.pollTimer = setTimeout(function () { self.pollNow(); }, POLL_MS); return; }
    fetch(this.liveUrl, { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (r.status === 403 || r.status === 404) { self.stop(); return null; }
        if (!r.ok || r.redirected) throw new Error("live.json answered " + r.status);
        return r.json();
      })
      .then(function (msg) {
        // A WebSocket that came back meanwhile is fresher than this answer.
        if (msg && self.polling && !self.stopped) self.onMessage(msg);
      })
      .catch(function () { /* the next poll tries again */ })
      .then(function () {
        if (self.polling && !self.stopped && !self.pollTimer) {
          self.pollTimer = setTimeout(function () { self.pollNow(); }, POLL_MS);
        }
      });
  };

  Connection.prototype.stop = function () {
    this.stopped = true;
    this.stopPolling();
    clearTimeout(this.wsTimer);
    if (this.ws) {
      var ws = this.ws;
      this.ws = null;
      try { ws.close(1000); } catch (e) { /* already closing */ }
    }
    setIndicator(null);
  };

  // Logged out meanwhile: reload, and the server sends the reader to the login page (at most once
  // a minute, so a session the socket cannot see never turns into a reload loop).
  function toLogin() {
    var key = "ffp-live-reloaded", now = Date.now(), last = 0;
    try { last = Number(sessionStorage.getItem(key)) || 0; sessionStorage.setItem(key, String(now)); } catch (e) { return; }
    if (now - last > 60000) location.reload();
  }

  // ---- a job's page -----------------------------------------------------------------------

  function JobPage(root) {
    this.root = root;
    this.jobId = root.getAttribute("data-ws-path").split("/").filter(Boolean).pop();
    this.status = root.getAttribute("data-status");
    this.hasFolder = root.getAttribute("data-has-folder") === "true";
    this.videoExt = (root.getAttribute("data-video-extensions") || "").split(/\s+/).filter(Boolean);
    this.targetsPage = Math.max(1, parseInt(root.getAttribute("data-targets-page"), 10) || 1);
    this.perPage = Math.max(1, parseInt(root.getAttribute("data-targets-per-page"), 10) || 60);
    this.rendered = {};       // target index -> the JSON last drawn (skip redrawing what did not change)
    this.resyncTimer = null;
    this.finalSeen = false;
  }

  JobPage.prototype.start = function () {
    if (isFinal(this.status)) return; // nothing changes any more; the server's page is the truth
    var self = this;
    this.conn = new Connection(this.root.getAttribute("data-ws-path"), this.root.getAttribute("data-live-url"),
                               function (msg) { self.handle(msg); });
    this.conn.open();
  };

  JobPage.prototype.handle = function (msg) {
    if (!msg || typeof msg !== "object") return;
    if (msg.job_id && msg.job_id !== this.jobId) return;
    switch (msg.type) {
      case "snapshot":
        if (!msg.job || msg.job.id !== this.jobId) return;
        this.renderJob(msg.job);
        this.renderTasks(msg.tasks || []);
        this.renderTargets(msg.targets || []);
        this.renderCluster(msg.cluster);
        if (isFinal(msg.job.status)) this.conn.stop(); // the database says it is over: nothing more will come
        break;
      case "job":
        if (!msg.job || msg.job.id !== this.jobId) return;
        this.renderJob(msg.job);
        // Finished, or the photo list now exists but is not drawn: fetch the whole picture.
        if (isFinal(msg.job.status) || (msg.job.progress && msg.job.progress.total && this.grid().children.length === 0)) {
          this.askResync();
        }
        break;
      case "task":
        if (msg.task) this.renderTask(msg.task);
        break;
      case "output":
        if (msg.target) this.renderTargetEvent(msg.target);
        break;
      case "cluster":
        this.renderCluster(msg.cluster);
        break;
    }
  };

  JobPage.prototype.askResync = function () {
    var self = this;
    if (this.resyncTimer) return;
    this.resyncTimer = setTimeout(function () { self.resyncTimer = null; self.conn.resync(); }, 300);
  };

  JobPage.prototype.renderJob = function (job) {
    var final = isFinal(job.status), active = !final;
    this.status = job.status;
    this.jobUrl = job.url; // the job's page; its results zip is <url>/results.zip (jobs/web/urls.py)
    this.root.setAttribute("data-status", job.status);
    var badge = document.getElementById("job-status");
    if (badge) setBadge(badge, job);

    var p = job.progress || {}, total = num(p.total), done = num(p.done), failed = num(p.failed);
    var left = Math.max(total - done - failed, 0);
    var bar = document.getElementById("job-progress");
    if (bar) {
      bar.setAttribute("aria-valuemax", total);
      bar.setAttribute("aria-valuenow", done + failed);
      bar.querySelector(".progress-done").style.width = pct(done, total) + "%";
      bar.querySelector(".progress-failed").style.width = pct(failed, total) + "%";
    }
    var text = document.getElementById("progress-text");
    if (text) {
      text.textContent = "";
      if (total) {
        var head = document.createElement("span");
        // only numbers go into this markup (<strong>{done}</strong> of {total} done)
        head.innerHTML = fill(words.done_of_html || "{done} / {total}", { done: done, total: total });
        while (head.firstChild) text.appendChild(head.firstChild);
        if (failed) {
          text.appendChild(document.createTextNode(" · "));
          text.appendChild(el("span", { className: "text-bad", text: fill(word("n_failed", "{n}"), { n: failed }) }));
        }
        if (left && active) text.appendChild(document.createTextNode(" · " + fill(word("n_to_go", "{n}"), { n: left })));
        text.appendChild(el("span", { className: "pct", text: pct(done + failed, total) + "%" }));
      } else {
        text.textContent = this.hasFolder && active ? word("counting") : word("no_targets");
      }
    }

    var err = document.getElementById("job-error");
    if (err) {
      err.hidden = !job.error;
      err.textContent = job.error || "";
      var bad = ["failed", "lost", "partially_failed"].indexOf(job.status) >= 0;
      err.className = "notice " + (bad ? "notice-bad" : "notice-info");
    }
    this.fact("fact-started", job.started_at);
    this.fact("fact-finished", job.finished_at);
    var slurm = document.getElementById("fact-slurm");
    if (slurm) {
      slurm.hidden = !job.slurm_job_id;
      slurm.querySelector("dd").textContent = job.slurm_job_id || "";
    }
    if (final) {
      var cancel = document.getElementById("job-cancel");
      if (cancel) cancel.parentNode.removeChild(cancel);
      var banner = document.getElementById("cluster-banner");
      if (banner) banner.hidden = true;
    }
  };

  JobPage.prototype.fact = function (id, iso) {
    var box = document.getElementById(id);
    if (!box) return;
    box.hidden = !iso;
    var time = box.querySelector("time");
    if (!sameInstant(time && time.getAttribute("datetime"), iso)) {
      var dd = box.querySelector("dd");
      dd.textContent = "";
      if (iso) dd.appendChild(el("time", { datetime: iso, text: shortDate(iso) }));
    }
  };

  JobPage.prototype.renderCluster = function (cluster) {
    var banner = document.getElementById("cluster-banner");
    if (!banner || !cluster) return;
    if (!cluster.unreachable_since || isFinal(this.status)) {
      banner.hidden = true;
      banner.setAttribute("data-since", "");
      return;
    }
    if (banner.hidden || !sameInstant(banner.getAttribute("data-since"), cluster.unreachable_since)) {
      // The server's sentence, in the reader's language (the same words as cluster.message).
      banner.textContent = words.cluster_since
        ? fill(word("cluster_since"), { since: utcClock(cluster.unreachable_since) }) : (cluster.message || "");
      banner.setAttribute("data-since", cluster.unreachable_since);
    }
    banner.hidden = false;
  };

  // tasks: every task has a row, ordered by index
  JobPage.prototype.taskRow = function (task) {
    var dash = "—";
    return el("tr", { "data-task-index": task.index }, [
      el("td", { text: String(task.index) }),
      el("td", {}, [el("span", { className: "badge task-" + taskStateClass(task.status), text: task.status || "" })]),
      el("td", { className: "mono", text: task.node || dash }),
      el("td", { className: "mono", text: duration(task.elapsed_seconds) || dash }),
      el("td", { className: "mono", text: task.exit_code === null || task.exit_code === undefined ? dash : String(task.exit_code) }),
      el("td", { text: task.reason || "" }),
    ]);
  };

  JobPage.prototype.renderTask = function (task) {
    var body = document.getElementById("task-rows");
    if (!body) return;
    var row = this.taskRow(task);
    var old = body.querySelector('tr[data-task-index="' + task.index + '"]');
    if (old) {
      if (old.innerHTML !== row.innerHTML) body.replaceChild(row, old);
    } else {
      var before = null;
      Array.prototype.some.call(body.children, function (tr) {
        if (num(tr.getAttribute("data-task-index")) > task.index) { before = tr; return true; }
        return false;
      });
      body.insertBefore(row, before);
    }
    this.showTasks();
  };

  JobPage.prototype.renderTasks = function (tasks) {
    var body = document.getElementById("task-rows");
    if (!body) return;
    var self = this, keep = {};
    tasks.forEach(function (t) { keep[t.index] = true; self.renderTask(t); });
    Array.prototype.slice.call(body.children).forEach(function (tr) {
      if (!keep[tr.getAttribute("data-task-index")]) body.removeChild(tr);
    });
    this.showTasks();
  };

  JobPage.prototype.showTasks = function () {
    var body = document.getElementById("task-rows"), any = !!(body && body.children.length);
    var wrap = document.getElementById("tasks-wrap"), empty = document.getElementById("tasks-empty");
    if (wrap) wrap.hidden = !any;
    if (empty) empty.hidden = any;
  };

  // targets: the grid shows this page's slice (the server paginates by position)
  JobPage.prototype.grid = function () { return document.getElementById("target-grid"); };

  JobPage.prototype.isVideo = function (name) {
    var lower = (name || "").toLowerCase();
    return this.videoExt.some(function (ext) { return lower.slice(-ext.length) === ext; });
  };

  JobPage.prototype.targetItem = function (t, old) {
    var thumb;
    if (t.thumb_url) {
      var img = old && old.querySelector(".thumb img");
      if (img && img.getAttribute("src") === t.thumb_url) {
        thumb = img; // the same picture: keep the loaded one (and do not fade it in again)
        img.classList.remove("is-new");
      } else {
        thumb = el("img", { src: t.thumb_url, alt: t.name, loading: "lazy", className: "is-new" });
      }
    } else if (t.output_url) {
      thumb = el("span", { className: "placeholder", text: this.isVideo(t.name) ? "▶ " + word("video") : word("no_preview") });
    } else {
      thumb = el("span", { className: "placeholder placeholder-" + t.status, "aria-hidden": "true" });
    }
    var hadCompare = !!(old && old.querySelector(".link-compare")); // an uploaded original stays comparable
    return el("li", { className: "target target-" + t.status + (old ? "" : " is-new"), "data-target-index": t.index }, [
      el("a", { className: "thumb", href: t.page_url }, [thumb]),
      el("div", { className: "target-body" }, [
        el("div", { className: "target-name", title: t.name, text: t.name }),
        el("div", { className: "target-meta" }, [
          el("span", { className: "badge target-status-" + t.status, text: word("target:" + t.status, t.status_label || t.status) }),
          t.faces_swapped ? el("span", { text: faces(num(t.faces_swapped)) }) : null,
        ]),
        t.message ? el("div", { className: "target-message", text: truncate(t.message, 160) }) : null,
        el("div", { className: "target-links" }, [
          t.output_url || hadCompare ? el("a", { className: "link-compare", href: t.page_url, text: word("before_after") }) : null,
          t.output_url ? el("a", { className: "link-download", href: t.output_url + "?download=1", text: word("download") }) : null,
        ]),
      ]),
    ]);
  };

  JobPage.prototype.drawTarget = function (t) {
    var grid = this.grid(), key = JSON.stringify(t);
    var old = grid.querySelector('li[data-target-index="' + t.index + '"]');
    if (old && this.rendered[t.index] === key) return old;
    var li = this.targetItem(t, old);
    if (old) grid.replaceChild(li, old);
    else grid.appendChild(li);
    this.rendered[t.index] = key;
    if (t.output_url) this.offerZip();
    return li;
  };

  // "Download all (zip)" once a first output exists (the server's page has it when it had one).
  JobPage.prototype.offerZip = function () {
    if (document.getElementById("job-download") || !this.jobUrl) return;
    var actions = document.querySelector("#job-live .pagehead .actions");
    if (!actions) return;
    var a = el("a", { className: "button", id: "job-download", href: this.jobUrl + "/results.zip", download: true,
                      text: word("download_zip") });
    actions.insertBefore(a, document.getElementById("job-cancel"));
  };

  JobPage.prototype.renderTargets = function (targets) {
    var grid = this.grid();
    if (!grid) return;
    var start = (this.targetsPage - 1) * this.perPage, slice = targets.slice(start, start + this.perPage);
    var self = this, wanted = [];
    slice.forEach(function (t) { wanted.push(self.drawTarget(t)); });
    // exactly this slice, in order
    Array.prototype.slice.call(grid.children).forEach(function (li) {
      if (wanted.indexOf(li) < 0) { grid.removeChild(li); delete self.rendered[li.getAttribute("data-target-index")]; }
    });
    wanted.forEach(function (li, i) { // move only what is out of place (a move restarts its fade-in)
      if (grid.children[i] !== li) grid.insertBefore(li, grid.children[i] || null);
    });
    if (targets.some(function (t) { return t.output_url; })) this.offerZip();
    grid.hidden = grid.children.length === 0;
    var empty = document.getElementById("targets-empty");
    if (empty) empty.hidden = grid.children.length > 0 || this.targetsPage > 1;
    // A page drawn before the list existed has no page links: offer the next page.
    var more = document.getElementById("targets-more");
    var serverNav = document.querySelector("#targets nav.pagination:not(#targets-more)");
    if (more) more.hidden = !!serverNav || this.targetsPage !== 1 || targets.length <= this.perPage;
  };

  JobPage.prototype.renderTargetEvent = function (t) {
    var grid = this.grid();
    if (!grid) return;
    if (grid.querySelector('li[data-target-index="' + t.index + '"]')) { this.drawTarget(t); return; }
    // Not drawn: either on another page, or the page does not know the list yet.
    var indexes = Array.prototype.map.call(grid.children, function (li) { return num(li.getAttribute("data-target-index")); });
    var lo = Math.min.apply(null, indexes), hi = Math.max.apply(null, indexes);
    if (!indexes.length || (t.index > lo && t.index < hi) || (t.index === hi + 1 && indexes.length < this.perPage)) {
      this.askResync();
    }
  };

  function taskStateClass(state) { // like the `task_state_class` template filter
    state = (state || "").toUpperCase();
    if (state === "COMPLETED") return "ok";
    if (["RUNNING", "COMPLETING", "CONFIGURING"].indexOf(state) >= 0) return "running";
    if (["PENDING", "REQUEUED", "SUSPENDED", "RESIZING"].indexOf(state) >= 0) return "waiting";
    if (["CANCELLED", "PREEMPTED"].indexOf(state) >= 0) return "muted";
    return "bad";
  }

  // ---- the job list -----------------------------------------------------------------------

  function ListPage(root) {
    this.root = root;
    this.page = Math.max(1, parseInt(root.getAttribute("data-page"), 10) || 1);
    this.perPage = Math.max(1, parseInt(root.getAttribute("data-per-page"), 10) || 50);
    this.showOwner = root.getAttribute("data-show-owner") === "true";
    this.fetching = false;
    this.fetchAgain = false;
  }

  ListPage.prototype.start = function () {
    var self = this;
    this.conn = new Connection(this.root.getAttribute("data-ws-path"), this.root.getAttribute("data-live-url"),
                               function (msg) { self.handle(msg); });
    this.conn.open();
  };

  ListPage.prototype.rows = function () { return document.getElementById("job-rows"); };
  ListPage.prototype.row = function (id) { return this.rows().querySelector('tr[data-job-id="' + id + '"]'); };

  ListPage.prototype.handle = function (msg) {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "snapshot" && msg.jobs) this.renderAll(msg.jobs);
    else if (msg.type === "job" && msg.job) {
      if (this.row(msg.job.id)) this.renderRow(msg.job);
      else this.refresh(); // a job this page has never seen (just started elsewhere): the whole list
    }
  };

  // Fetch jobs/live.json and draw it (one request at a time; a burst of new jobs costs one more).
  ListPage.prototype.refresh = function () {
    var self = this;
    if (this.fetching) { this.fetchAgain = true; return; }
    this.fetching = true;
    fetch(this.root.getAttribute("data-live-url"), { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok || r.redirected) throw new Error("jobs/live.json answered " + r.status); return r.json(); })
      .then(function (msg) { if (msg && msg.jobs) self.renderAll(msg.jobs); })
      .catch(function () { /* the next event or snapshot tries again */ })
      .then(function () {
        self.fetching = false;
        if (self.fetchAgain) { self.fetchAgain = false; self.refresh(); }
      });
  };

  ListPage.prototype.renderAll = function (jobs) {
    var self = this, body = this.rows();
    if (!body) return;
    var newest = null;
    Array.prototype.forEach.call(body.children, function (tr) {
      var c = Date.parse(tr.getAttribute("data-created"));
      if (!isNaN(c) && (newest === null || c > newest)) newest = c;
    });
    jobs.forEach(function (job) {
      if (self.row(job.id)) { self.renderRow(job); return; }
      // New jobs appear at the top of the first page; older ones belong to other pages.
      var created = Date.parse(job.created_at);
      if (self.page === 1 && (newest === null || created > newest)) self.insertRow(job);
    });
    var rows = Array.prototype.slice.call(body.children);
    rows.slice(this.perPage).forEach(function (tr) { body.removeChild(tr); });
    this.showTable();
  };

  ListPage.prototype.progressCell = function (cell, job) {
    var p = job.progress || {}, total = num(p.total), done = num(p.done), failed = num(p.failed);
    var key = [total, done, failed].join("/");
    if (cell.getAttribute("data-drawn") === key) return;
    cell.setAttribute("data-drawn", key);
    cell.textContent = "";
    if (!total) { cell.appendChild(el("span", { className: "muted", text: "—" })); return; }
    cell.appendChild(el("span", { className: "minibar", "aria-hidden": "true" }, [
      el("span", { className: "progress-done", style: "width: " + pct(done, total) + "%" }),
      el("span", { className: "progress-failed", style: "width: " + pct(failed, total) + "%" }),
    ]));
    cell.appendChild(document.createTextNode(" " + fill(word("done_slash", "{done} / {total}"), { done: done, total: total }) + " "));
    if (failed) cell.appendChild(el("span", { className: "text-bad", text: "· " + fill(word("n_failed", "{n}"), { n: failed }) }));
  };

  ListPage.prototype.renderRow = function (job) {
    var tr = this.row(job.id);
    if (!tr) return;
    var badge = tr.querySelector(".job-status .badge");
    if (badge) setBadge(badge, job);
    var cell = tr.querySelector(".job-progress");
    if (cell) this.progressCell(cell, job);
  };

  ListPage.prototype.insertRow = function (job) {
    var body = this.rows();
    var name = job.name
      ? [truncate(job.name, 60)]
      : [el("span", { className: "untitled", text: word("untitled") }), " ", el("span", { className: "mono muted", text: String(job.id).slice(0, 8) })];
    var progress = el("td", { className: "nowrap job-progress" });
    this.progressCell(progress, job);
    var tr = el("tr", { "data-job-id": job.id, "data-created": job.created_at || "", className: "is-new" }, [
      el("td", {}, [el("a", { href: job.url }, name)]),
      this.showOwner ? el("td", { text: job.owner || "" }) : null,
      el("td", { text: job.template || "" }),
      el("td", { className: "job-status" }, [el("span", { "data-live": "status" })]),
      progress,
      el("td", { className: "nowrap" }, [el("time", { datetime: job.created_at, title: job.created_at, text: shortDate(job.created_at) })]),
    ]);
    setBadge(tr.querySelector("[data-live=status]"), job);
    var created = Date.parse(job.created_at), before = null;
    Array.prototype.some.call(body.children, function (other) {
      if (Date.parse(other.getAttribute("data-created")) < created) { before = other; return true; }
      return false;
    });
    body.insertBefore(tr, before);
  };

  ListPage.prototype.showTable = function () {
    var any = this.rows().children.length > 0;
    var table = document.getElementById("jobs-table"), empty = document.getElementById("jobs-empty");
    if (table) table.hidden = !any;
    if (empty) empty.hidden = any;
  };

  // A fade-in plays once: an element moved later must not play it again.
  root.addEventListener("animationend", function (ev) { ev.target.classList.remove("is-new"); });

  formatDates();
  var page = jobRoot ? new JobPage(jobRoot) : new ListPage(listRoot);
  page.start();
  window.ffpLive = page; // for debugging in the browser's console
})();
