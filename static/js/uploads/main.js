// The New job page's uploads and checks before Start (without this script the form still works:
// plain file inputs, every check at Start). Files are sent as soon as they are chosen (zone.js),
// three at a time; Start waits until every file is sent and checked; leaving the page while files
// are being sent asks first; the target folder is checked as it is typed or picked (folder.js).

import { Zone } from "./zone.js";
import { watchFolder } from "./folder.js";
import { t } from "./words.js";

const PARALLEL = 3;

class Hub {
  constructor() {
    this.zones = [];
    this.waiting = [];
    this.running = 0;
    this.start = document.getElementById("start-button");
    this.startWait = document.getElementById("start-wait");
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
    }
  }

  busy() {
    return this.zones.some((z) => z.busy());
  }

  changed() {
    const busy = this.busy();
    if (this.start) this.start.disabled = busy;
    if (this.startWait) this.startWait.hidden = !busy;
    const targets = this.zones.find((z) => z.kind === "target");
    if (!targets) return;
    // The estimate (static/js/estimate.js) counts what will run: every file not refused.
    const counted = targets.items.filter((i) => !["refused", "failed"].includes(i.status));
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
}

function main() {
  if (!window.tus || !window.tus.isSupported) return; // an old browser: the plain form stays
  const data = document.getElementById("sent-uploads");
  const sent = data ? JSON.parse(data.textContent) : {};
  const hub = new Hub();
  for (const root of document.querySelectorAll(".upload-zone")) {
    const zone = new Zone(root, hub);
    hub.zones.push(zone);
    zone.start(sent[zone.kind === "target" ? "targets" : zone.kind] || []);
  }
  hub.changed();
  window.addEventListener("beforeunload", (e) => {
    if (!hub.busy()) return undefined;
    e.preventDefault();
    e.returnValue = t("leave");
    return e.returnValue;
  });
  watchFolder();
  watchFaceChoice();
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
