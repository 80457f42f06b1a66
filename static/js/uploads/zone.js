// One upload area of the New job page: files are sent as soon as they are chosen or dropped, over
// tus (tus-js-client, vendored under static/vendor/), in 8 MiB pieces: a closed tab or a lost
// connection loses at most the piece in flight, and choosing the same file again goes on from what
// the server has (tus remembers each file's upload address in this browser). Each file shows its
// progress, then what the server's check found (the face, a video's frames) or why it was refused,
// with Remove / Replace. The form carries only the ids of files that are ready (hidden inputs).

import { el, thumb } from "./dom.js";
import { offerEarlier } from "./earlier.js";
import { duration, size, t } from "./words.js";

const CHUNK_BYTES = 8 * 1024 * 1024;
// waits between tries after a lost connection; then it stops and offers "Try again"
const RETRY_DELAYS = [0, 1000, 3000, 5000, 10000, 20000, 30000, 60000, 60000];
const ACTIVE = new Set(["queued", "sending", "checking"]);

function csrfToken() {
  const field = document.querySelector("input[name=csrfmiddlewaretoken]");
  return field ? field.value : "";
}

function idOf(url) {
  return url ? url.replace(/\/+$/, "").split("/").pop() : null;
}

function extensionOf(name) {
  const dot = name.lastIndexOf(".");
  return dot < 0 ? "" : name.slice(dot).toLowerCase();
}

/** Why the server refused a request, in its words (plain text, or the API's JSON error). */
function reasonOf(err) {
  const response = err && err.originalResponse;
  const body = response && response.getBody && response.getBody();
  if (!body || body.length > 2000) return t("offline");
  try {
    return JSON.parse(body).error || t("offline"); // the API's shape: {"error": "..."}
  } catch (e) {
    return body; // plain words (the tus views' own refusals)
  }
}

export class Zone {
  constructor(root, hub) {
    this.root = root;
    this.hub = hub;
    this.kind = root.dataset.kind;
    this.idsName = root.dataset.idsName;
    this.endpoint = root.dataset.endpoint;
    this.maxBytes = parseInt(root.dataset.maxBytes, 10) || Infinity;
    this.images = (root.dataset.imageExt || "").split(" ");
    this.videos = (root.dataset.videoExt || "").split(" ");
    this.input = root.querySelector("input[type=file]:not([data-folder-input])");
    this.list = root.querySelector("[data-list]");
    this.total = root.querySelector("[data-total]");
    this.items = [];
    this.samples = [];
    this.batch = 0; // files chosen while none was being sent start a new batch: the total counts its files
    this.refusedNote = root.querySelector("[data-refused-note]");
  }

  /** `sent`: the uploads the page lists; `keep`: ids of the user's uploads to show as attached
   * again (the draft kept over a language switch: draft.js), before the others are offered. */
  start(sent, keep = []) {
    // The script sends the files itself: the form must not send them a second time.
    this.input.removeAttribute("name");
    // the page's own "Choose" button, in the page's language, stands for the browser's input
    this.input.classList.add("visually-hidden");
    for (const node of this.root.querySelectorAll("[data-js-only]")) node.hidden = false;
    this.list.textContent = "";
    for (const upload of sent) this.addSent(upload);
    this.input.addEventListener("change", () => { this.addFiles(Array.from(this.input.files)); this.input.value = ""; });
    const folderInput = this.root.querySelector("[data-folder-input]");
    if (folderInput) folderInput.addEventListener("change", () => { this.addFiles(Array.from(folderInput.files)); folderInput.value = ""; });
    const drop = this.root.querySelector("[data-drop]");
    drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("drag-over"); });
    drop.addEventListener("dragleave", () => drop.classList.remove("drag-over"));
    drop.addEventListener("drop", (e) => {
      e.preventDefault();
      drop.classList.remove("drag-over");
      filesOfDrop(e.dataTransfer).then((files) => this.addFiles(files));
    });
    this.restoreKept(keep).finally(() => this.offerEarlier());
  }

  /** The uploads `keep` (still the user's, unused) shown attached again, as they were. */
  restoreKept(keep) {
    if (!keep.length) return Promise.resolve();
    return fetch(this.endpoint + "?kind=" + encodeURIComponent(this.kind), { credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : { uploads: [] }))
      .then(({ uploads }) => {
        const kept = uploads.filter((u) => keep.includes(u.id) && !this.hub.ids().includes(u.id));
        for (const u of this.root.dataset.single ? kept.slice(0, 1) : kept) this.addSent(u);
        if (kept.length) this.changed();
      })
      .catch(() => {});
  }

  // ---- adding ------------------------------------------------------------------------------

  accepts(file) {
    const ext = extensionOf(file.name);
    if (this.images.includes(ext)) return "";
    if (this.kind === "target" && this.videos.includes(ext)) return "";
    return this.kind === "target" ? t("not_media") : t("not_image");
  }

  addFiles(files, before) {
    if (!this.busy()) this.batch += 1;
    if (this.root.dataset.single && files.length) {
      // one file only (the reference photo): a new one takes the place of the old
      for (const old of this.items.slice()) if (old !== before) this.remove(old);
      files = files.slice(0, 1);
    }
    for (const file of files) {
      if (file.name.startsWith(".")) continue; // hidden files of a dropped folder (.DS_Store ...)
      const item = { name: file.name, size: file.size, file, sent: 0, status: "queued", problem: "", info: {}, batch: this.batch };
      const refusal = this.accepts(file) || (file.size > this.maxBytes ? t("too_big", { size: size(file.size), limit: size(this.maxBytes) }) : "");
      if (refusal) { item.status = "refused"; item.problem = refusal; item.local = true; }
      this.insert(item, before);
      if (!refusal) this.hub.enqueue(this, item);
    }
    this.changed();
  }

  /** An upload the server already has (kept after a refusal, Run again, or sent earlier). */
  addSent(upload) {
    const item = { name: upload.name, size: upload.size, sent: upload.offset, file: null };
    this.apply(item, upload);
    this.insert(item);
    return item;
  }

  insert(item, before) {
    item.zone = this;
    item.node = el("li", "upload-item");
    if (before && before.node && before.node.parentNode === this.list) {
      this.list.insertBefore(item.node, before.node);
      this.items.splice(this.items.indexOf(before), 0, item);
    } else {
      this.list.appendChild(item.node);
      this.items.push(item);
    }
    this.render(item);
  }

  // ---- sending -----------------------------------------------------------------------------

  send(item, done) {
    item.status = "sending";
    item.began = performance.now();
    const upload = new window.tus.Upload(item.file, {
      endpoint: this.endpoint,
      chunkSize: CHUNK_BYTES,
      retryDelays: RETRY_DELAYS,
      metadata: { filename: item.name, filetype: item.file.type || "", kind: this.kind },
      headers: { "X-CSRFToken": csrfToken() },
      removeFingerprintOnSuccess: true,
      onUploadUrlAvailable: () => { item.url = upload.url; item.id = idOf(upload.url); this.hub.dropDuplicates(item); },
      onProgress: (sent) => { item.sent = sent; item.offline = false; this.render(item); this.progress(); },
      onShouldRetry: (err) => {
        const status = err.originalResponse ? err.originalResponse.getStatus() : 0;
        // The server said no (too big, not allowed...): trying again changes nothing.
        if (status >= 400 && status < 500 && ![408, 409, 423, 429].includes(status)) return false;
        item.offline = true;
        this.render(item);
        return true;
      },
      onSuccess: () => {
        item.sent = item.size;
        item.status = "checking";
        this.render(item);
        this.fetchState(item).finally(done);
      },
      onError: (err) => {
        item.status = "failed";
        item.problem = reasonOf(err);
        this.render(item);
        this.changed();
        done();
      },
    });
    item.upload = upload;
    this.render(item);
    // A file sent before (this browser remembers where) goes on from what the server has.
    upload.findPreviousUploads().then((previous) => {
      if (previous.length) upload.resumeFromPreviousUpload(previous[0]);
      upload.start();
    });
  }

  fetchState(item) {
    return fetch(item.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : Promise.reject(r)))
      .then((state) => { this.apply(item, state); })
      .catch(() => { item.status = "failed"; item.problem = t("offline"); })
      .finally(() => { this.render(item); this.changed(); });
  }

  apply(item, state) {
    item.id = state.id;
    item.url = state.url;
    item.info = state.info || {};
    item.preview = state.preview;
    item.problem = state.problem || "";
    item.sent = state.offset;
    item.status = state.status === "receiving" ? "partial" : state.status;
  }

  // ---- removing, replacing -----------------------------------------------------------------

  remove(item) {
    if (item.upload && ACTIVE.has(item.status)) {
      item.upload.abort(true).catch(() => {});
    } else if (item.url) {
      fetch(item.url, { method: "DELETE", credentials: "same-origin",
                        headers: { "X-CSRFToken": csrfToken(), "Tus-Resumable": "1.0.0" } }).catch(() => {});
    }
    this.hub.forget(item);
    this.forget(item);
  }

  forget(item) {
    const at = this.items.indexOf(item);
    if (at >= 0) this.items.splice(at, 1);
    if (item.node) item.node.remove();
    this.changed();
  }

  replace(item) {
    const chooser = el("input");
    chooser.type = "file";
    chooser.accept = this.input.accept;
    chooser.addEventListener("change", () => {
      if (!chooser.files.length) return;
      this.addFiles([chooser.files[0]], item);
      this.remove(item);
    });
    chooser.click();
  }

  // ---- what is shown -----------------------------------------------------------------------

  render(item) {
    const node = item.node;
    if (!node) return;
    node.textContent = "";
    node.className = "upload-item upload-" + item.status;
    if (item.id) node.dataset.id = item.id;
    if (item.status === "ready") {
      const hidden = el("input");
      hidden.type = "hidden";
      hidden.name = this.idsName;
      hidden.value = item.id;
      node.appendChild(hidden);
    }
    if (item.preview) node.appendChild(thumb(this.kind, item.preview, item.name));
    const text = el("div", "upload-text");
    text.appendChild(el("span", "upload-name", item.name));
    text.appendChild(el("span", "upload-state", this.stateText(item)));
    if (item.status === "sending" || item.status === "queued" || item.status === "partial") {
      const bar = el("div", "progress small");
      const fill = el("div", "progress-done");
      fill.style.width = (item.size ? Math.floor((100 * item.sent) / item.size) : 0) + "%";
      bar.appendChild(fill);
      text.appendChild(bar);
    }
    node.appendChild(text);
    const actions = el("div", "upload-actions");
    if (item.status === "refused" || item.status === "failed") {
      actions.appendChild(this.button(t("replace"), () => this.replace(item), "replace"));
    }
    if (item.status === "failed" && item.file) {
      actions.appendChild(this.button(t("retry"), () => { item.status = "queued"; item.problem = ""; this.hub.enqueue(this, item); this.render(item); }, "retry"));
    }
    const remove = this.button(t("remove"), () => this.remove(item), "remove");
    remove.setAttribute("aria-label", t("remove_label", { name: item.name }));
    actions.appendChild(remove);
    node.appendChild(actions);
  }

  button(label, onClick, action) {
    const b = el("button", "button small", label);
    b.type = "button";
    b.dataset.action = action;
    b.addEventListener("click", onClick);
    return b;
  }

  stateText(item) {
    const pct = item.size ? Math.floor((100 * item.sent) / item.size) : 0;
    switch (item.status) {
      case "queued": return t("queued");
      case "sending": return item.offline ? t("offline") : t("sending", { pct });
      case "checking": return t("checking");
      case "partial": return t("partial", { pct });
      case "refused": return item.problem;
      case "failed": return t("failed", { why: item.problem });
      case "ready": {
        const info = item.info || {};
        if (this.kind !== "target") return info.faces > 1 ? t("faces_found", { n: info.faces }) : t("face_found");
        if (info.media === "video") {
          return t("ready_video", { duration: duration(info.duration || 0), frames: (info.frames || 0).toLocaleString() });
        }
        return info.width ? t("ready_image", { w: info.width, h: info.height }) : t("kept");
      }
      default: return "";
    }
  }

  /** Bytes sent of this batch's files (every file chosen since sending last began, but one refused
   * on this side: never sent), speed over the last seconds, and time left. */
  progress() {
    const moving = this.items.filter((i) => i.file && !i.local && i.batch === this.batch);
    const total = moving.reduce((n, i) => n + i.size, 0);
    const sent = moving.reduce((n, i) => n + Math.min(i.sent, i.size), 0);
    const busy = this.items.some((i) => ACTIVE.has(i.status));
    if (!total) { this.total.hidden = true; return; }
    const now = performance.now();
    this.samples.push([now, sent]);
    while (this.samples.length > 2 && now - this.samples[0][0] > 5000) this.samples.shift();
    const [t0, s0] = this.samples[0];
    const speed = now > t0 ? ((sent - s0) * 1000) / (now - t0) : 0;
    this.total.hidden = false;
    const fill = this.total.querySelector(".progress-done");
    const pct = Math.floor((100 * sent) / total);
    fill.style.width = pct + "%";
    this.total.querySelector("[role=progressbar]").setAttribute("aria-valuenow", String(pct));
    const line = this.total.querySelector(".upload-total-text");
    line.textContent = busy
      ? t("total", { sent: size(sent), total: size(total), speed: size(speed), left: speed > 0 ? duration((total - sent) / speed) : "…" })
      : t("total_done", { total: size(total) });
    if (!busy) this.samples = [];
  }

  changed() {
    this.progress();
    this.noteRefused();
    this.checkMixed();
    this.hub.changed();
  }

  /** Face photos of different people would be blended into nobody's face: say so and ask, as Start
   * does (jobs/uploads/identity.py; the same measure, dlib's descriptors, the same threshold). */
  checkMixed() {
    const box = this.root.querySelector("[data-mixed]");
    if (!box) return;
    const max = parseFloat(box.dataset.samePersonMax);
    const faces = this.items.filter((i) => i.status === "ready" && i.info && i.info.descriptor).map((i) => i.info.descriptor);
    const apart = (a, b) => Math.sqrt(a.reduce((sum, v, k) => sum + (v - b[k]) ** 2, 0));
    const mixed = faces.some((a, k) => faces.slice(k + 1).some((b) => apart(a, b) > max));
    box.hidden = !mixed;
    if (!mixed) box.querySelector("[data-mixed-ok]").checked = false;
  }

  busy() {
    return this.items.some((i) => ACTIVE.has(i.status));
  }

  /** Files refused or not sent: Start leaves them out, and the user reads so before Start. */
  refusedCount() {
    return this.items.filter((i) => i.status === "refused" || i.status === "failed").length;
  }

  noteRefused() {
    if (!this.refusedNote) return;
    const n = this.refusedCount();
    this.refusedNote.textContent = n === 1 ? t("refused_one") : t("refused_many", { n });
    this.refusedNote.hidden = !n;
  }

  /** What draft.js keeps over a language switch: the ids of the files ready. */
  readyIds() {
    return this.items.filter((i) => i.status === "ready" && i.id).map((i) => i.id);
  }

  // ---- files sent earlier (earlier.js) --------------------------------------------------------

  offerEarlier() {
    offerEarlier(this);
  }

  addFromEarlier(upload) {
    if (this.root.dataset.single) for (const old of this.items.slice()) this.remove(old);
    this.addSent(upload);
  }
}

/** The files of a drop, folders walked (where the browser lets a page read them). */
function filesOfDrop(data) {
  const entries = Array.from(data.items || []).map((i) => (i.webkitGetAsEntry ? i.webkitGetAsEntry() : null));
  if (!entries.length || entries.some((e) => !e)) return Promise.resolve(Array.from(data.files || []));
  return Promise.all(entries.map(walk)).then((lists) => lists.flat());
}

function walk(entry) {
  if (entry.isFile) return new Promise((resolve) => entry.file((f) => resolve([f]), () => resolve([])));
  if (!entry.isDirectory) return Promise.resolve([]);
  const reader = entry.createReader();
  const all = [];
  return new Promise((resolve) => {
    const next = () => reader.readEntries((batch) => {
      if (!batch.length) { Promise.all(all.map(walk)).then((lists) => resolve(lists.flat())); return; }
      all.push(...batch);
      next();
    }, () => resolve([]));
    next();
  });
}
