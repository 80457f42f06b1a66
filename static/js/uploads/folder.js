// The target folder, checked as it is typed (after a pause) or picked with Browse: "12 photos and
// 2 videos found", or why it cannot be used (missing, empty, not allowed), next to the field, before
// Start. The server's answer (jobs/clusters/folder_check.py) is shown as it comes, with the limit
// of photos and videos per job it is over, if any (limits.js): then Start waits (main.js).

import { overLimit } from "./limits.js";
import { t } from "./words.js";

const PAUSE_MS = 600;

export function watchFolder() {
  const input = document.getElementById("id_target_folder");
  const line = document.getElementById("folder-check");
  if (!input || !line) return;
  let timer = null;
  let asked = "";
  let seq = 0;

  function cluster() {
    const checked = document.querySelector("input[name=template]:checked");
    const card = checked && checked.closest("[data-cluster]");
    return card ? card.dataset.cluster : "";
  }

  /** Whether the folder is over a limit (main.js reads it to hold Start), told to the page. */
  function over(text) {
    if (text) line.dataset.over = "1"; else delete line.dataset.over;
    document.dispatchEvent(new CustomEvent("folder:checked"));
  }

  function check() {
    const path = input.value.trim();
    const key = path + "\n" + cluster();
    if (key === asked) return;
    asked = key;
    const mine = ++seq;
    over("");
    if (!path) { line.textContent = ""; line.className = "folder-check"; return; }
    line.textContent = t("folder_checking");
    line.className = "folder-check checking";
    const url = line.dataset.url + "?path=" + encodeURIComponent(path) + (cluster() ? "&cluster=" + encodeURIComponent(cluster()) : "");
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => r.json())
      .then((answer) => {
        if (mine !== seq) return; // a later check is on its way
        const tooMany = answer.ok && answer.reachable ? overLimit((answer.images || 0) + (answer.videos || 0), true) : "";
        line.textContent = tooMany ? answer.summary + " " + tooMany : answer.summary;
        line.className = "folder-check " + (tooMany ? "bad" : answer.ok ? "ok" : answer.reachable ? "bad" : "unknown");
        over(tooMany);
      })
      .catch(() => {
        if (mine !== seq) return;
        asked = "";
        line.textContent = t("folder_offline");
        line.className = "folder-check unknown";
      });
  }

  input.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(check, PAUSE_MS); });
  input.addEventListener("change", check);
  document.addEventListener("change", (e) => { if (e.target && e.target.name === "template") check(); });
  if (input.value.trim()) check();
}
