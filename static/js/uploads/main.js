// The New job page's uploads and checks before Start (without this script the form still works:
// plain file inputs, every check at Start). Files are sent as soon as they are chosen (zone.js),
// three at a time; Start waits until every file is sent and checked; leaving the page while files
// are being sent asks first; the target folder is checked as it is typed or picked (folder.js).
// Before Start the page says what Start would refuse or leave out: more photos and videos than one
// job may have (limits.js), files refused. A language switch keeps the form (draft.js).

import { Zone } from "./zone.js";
import { keepOnLanguageSwitch, restoreFields, takeDraft } from "./draft.js";
import { watchFolder } from "./folder.js";
import { overLimit } from "./limits.js";
import { watchPreview } from "./preview.js";
import { t } from "./words.js";

const PARALLEL = 3;

class Hub {
  constructor() {
    this.zones = [];
    this.waiting = [];
    this.running = 0;
    this.start = document.getElementById("start-button");
    this.preview = document.getElementById("preview-button"); // "Try it on a few photos" (preview.js)
    this.startWait = document.getElementById("start-wait");
    this.limitLine = document.getElementById("targets-limit");
    this.summary = document.getElementById("start-summary");
    this.folderLine = document.getElementById("folder-check");
  }

  enqueue(zone, item) {
    this.waiting.push([zone, item]);
    this.pump();
  }

  pump() {
    while (this.running < PARALLEL && this.waiting.length) {
      const [zone, item] = this.waiting.shift();
      if (item.status !== "queued") continue; // removed while it waited
      this.running += 1;
      zone.send(item, () => { this.running -= 1; this.pump(); });
    }
  }

  forget(item) {
    this.waiting = this.waiting.filter(([, i]) => i !== item);
  }

  ids() {
    return this.zones.flatMap((z) => z.items.map((i) => i.id).filter(Boolean));
  }

  /** A resumed upload is the one an "earlier" entry stood for: keep one of the two. */
  dropDuplicates(item) {
    for (const zone of this.zones) {
      for (const other of zone.items.slice()) {
        if (other !== item && other.id === item.id && !other.file) zone.forget(other);
      }
      // the same file still offered among the files sent earlier (earlier.js): it is here now
      for (const row of zone.root.querySelectorAll(".upload-earlier-item")) {
        if (row.dataset.id !== item.id) continue;
        const list = row.parentNode;
        row.remove();
        const box = zone.root.querySelector("[data-earlier]");
        if (box && list && !list.children.length) box.hidden = true;
      }
    }
  }

  busy() {
    return this.zones.some((z) => z.busy());
  }

  changed() {
    const busy = this.busy();
    const targets = this.zones.find((z) => z.kind === "target");
    // The estimate (static/js/estimate.js) counts what will run: every file not refused.
    const counted = targets ? targets.items.filter((i) => !["refused", "failed"].includes(i.status)) : [];
    const over = overLimit(counted.length);
    if (this.limitLine) { this.limitLine.textContent = over; this.limitLine.hidden = !over; }
    const folderOver = Boolean(this.folderLine && this.folderLine.dataset.over);
    this.summarise(over || folderOver);
    if (this.start) this.start.disabled = busy || Boolean(over) || folderOver;
    // a preview runs on three photos: the job's limits do not stop it, files still being sent do
    if (this.preview && !this.preview.dataset.busy) this.preview.disabled = busy;
    if (this.startWait) this.startWait.hidden = !busy;
    if (!targets) return;
    const isVideo = (i) => (i.info && i.info.media === "video") || targets.videos.some((ext) => i.name.toLowerCase().endsWith(ext));
    const videos = counted.filter(isVideo);
    document.dispatchEvent(new CustomEvent("uploads:changed", {
      detail: {
        images: counted.length - videos.length,
        videos: videos.length,
        frames: videos.reduce((n, i) => n + ((i.info && i.info.frames) || 0), 0),
      },
    }));
  }

  /** The lines under Start: why it is not possible yet, and what it leaves out. */
  summarise(over) {
    if (!this.summary) return;
    const refused = this.zones.reduce((n, z) => n + z.refusedCount(), 0);
    const overLine = document.getElementById("start-over");
    const refusedLine = document.getElementById("start-refused");
    overLine.textContent = over ? t("start_over") : "";
    overLine.hidden = !over;
    refusedLine.textContent = refused === 1 ? t("start_refused_one") : t("start_refused_many", { n: refused });
    refusedLine.hidden = !refused;
    this.summary.hidden = !over && !refused;
  }
}

function main() {
  if (!window.tus || !window.tus.isSupported) return; // an old browser: the plain form stays
  const data = document.getElementById("sent-uploads");
  const sent = data ? JSON.parse(data.textContent) : {};
  const hub = new Hub();
  const draft = takeDraft();
  for (const root of document.querySelectorAll(".upload-zone")) {
    const zone = new Zone(root, hub);
    hub.zones.push(zone);
    zone.start(sent[zone.kind === "target" ? "targets" : zone.kind] || [], (draft && (draft.uploads || {})[zone.kind]) || []);
  }
  hub.changed();
  keepOnLanguageSwitch(hub.zones);
  // the chosen template's cluster may take fewer files; a folder's count arrives (folder.js)
  document.addEventListener("change", (e) => { if (e.target && e.target.name === "template") hub.changed(); });
  document.addEventListener("folder:checked", () => hub.changed());
  window.addEventListener("beforeunload", (e) => {
    if (!hub.busy()) return undefined;
    e.preventDefault();
    e.returnValue = t("leave");
    return e.returnValue;
  });
  watchFolder();
  watchFaceChoice();
  watchPreview(hub.preview && hub.preview.form, hub.preview);
  restoreFields(draft);
}

/** The reference photo is asked for only when "one person" is chosen; a template's default choice
 * follows the template picked, until the user picks a choice of their own. */
function watchFaceChoice() {
  const box = document.getElementById("reference-box");
  const radios = Array.from(document.querySelectorAll("input[name=face_selector]"));
  if (!box || !radios.length) return;
  let chosenByUser = false;
  const show = () => {
    const checked = radios.find((r) => r.checked);
    box.hidden = !(checked && checked.value === "reference");
  };
  for (const r of radios) r.addEventListener("change", () => { chosenByUser = true; show(); });
  document.addEventListener("change", (e) => {
    if (chosenByUser || !e.target || e.target.name !== "template") return;
    const card = e.target.closest("[data-face-selector]");
    const radio = card && radios.find((r) => r.value === card.dataset.faceSelector);
    if (radio) { radio.checked = true; show(); }
  });
  show();
}

main();
