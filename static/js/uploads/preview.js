// "Try it on a few photos" (jobs/job/preview.py): the form as it stands is posted with preview=1
// (fetch, so the page and every choice on it stay for the whole job's Start); the preview is then
// followed in place from its live JSON (the job page's polling fallback) until it ends, its results
// shown as small pictures that open the before/after page. Without this script the button posts the
// form and the preview's own page opens.

import { el } from "./dom.js";
import { t } from "./words.js";

const EVERY_MS = 2000;
const FINAL = new Set(["completed", "partially_failed", "failed", "cancelled", "lost"]);

function csrfToken() {
  const field = document.querySelector("input[name=csrfmiddlewaretoken]");
  return field ? field.value : "";
}

export function watchPreview(form, button) {
  const panel = document.getElementById("preview-panel");
  if (!form || !button || !panel) return;
  form.addEventListener("submit", (event) => {
    if (event.submitter !== button) return; // Start posts the form as always
    event.preventDefault();
    const body = new FormData(form);
    body.append("preview", "1");
    button.disabled = true;
    button.dataset.busy = "1"; // main.js leaves the button alone meanwhile
    say(panel, [el("p", "", t("preview_starting"))]);
    fetch(form.getAttribute("action") || location.href, {
      method: "POST", body, credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
    })
      .then((r) => r.json().then((data) => ({ ok: r.ok, data })))
      .then(({ ok, data }) => {
        if (!ok) {
          const list = el("ul", "error");
          for (const why of data.errors || [t("offline")]) list.appendChild(el("li", "", why));
          say(panel, [el("p", "", t("preview_refused")), list]);
          release(button);
          return;
        }
        follow(panel, data, () => release(button));
      })
      .catch(() => { say(panel, [el("p", "error", t("offline"))]); release(button); });
  });
}

function say(panel, nodes) {
  panel.replaceChildren(el("h3", "", t("preview_title")), ...nodes);
  panel.hidden = false;
}

/** Ask for the preview's state every few seconds and show it; `done()` once it ended. */
function follow(panel, started, done) {
  const link = el("a", "", t("preview_open"));
  link.href = started.url;
  const tick = () => {
    fetch(started.live, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
      .then((snap) => {
        const job = snap.job || {}, p = job.progress || {};
        const status = el("p", "", t("preview_status", { status: job.status_label || job.status || "", done: p.done || 0,
                                                        total: p.total || 0 }));
        const grid = el("ul", "preview-results");
        for (const target of snap.targets || []) {
          if (!target.thumb_url) continue;
          const a = el("a");
          a.href = target.page_url;
          const img = el("img");
          img.src = target.thumb_url;
          img.alt = t("preview_result", { name: target.name });
          a.appendChild(img);
          const item = el("li");
          item.appendChild(a);
          if (target.self_check_words) item.appendChild(el("span", "target-look", target.self_check_words));
          grid.appendChild(item);
        }
        const ended = FINAL.has(job.status);
        const nodes = [status, grid, el("p", "help", ended ? t("preview_ended") : t("preview_waiting")), link];
        if (ended && job.error) nodes.splice(1, 0, el("p", "error", job.error));
        say(panel, nodes);
        if (ended) done();
        else setTimeout(tick, EVERY_MS);
      })
      .catch(() => setTimeout(tick, EVERY_MS * 2)); // a lost connection: ask again, a little later
  };
  tick();
}

function release(button) {
  delete button.dataset.busy;
  button.disabled = false;
}
