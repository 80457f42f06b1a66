// The files a user sent that no Start used yet (a closed tab, an earlier visit), offered in one
// upload area of the New job page (zone.js): each one shown, added or deleted on its own.

import { el, thumb } from "./dom.js";
import { t } from "./words.js";

/** Offer the user's files that no Start used yet (a closed tab, an earlier visit), each shown
 * (its picture, name, when it was sent) with its own Add and Delete: never added in bulk, so a
 * stranger's face cannot slip into a job unseen. */
export function offerEarlier(zone) {
  const box = zone.root.querySelector("[data-earlier]");
  if (!box) return;
  const list = box.querySelector("[data-earlier-list]");
  fetch(zone.endpoint + "?kind=" + encodeURIComponent(zone.kind), { credentials: "same-origin" })
    .then((r) => (r.ok ? r.json() : { uploads: [] }))
    .then(({ uploads }) => {
      const shown = new Set(zone.hub.ids());
      const earlier = uploads.filter((u) => !shown.has(u.id) && u.status !== "refused");
      if (!earlier.length) return;
      box.querySelector("[data-earlier-text]").textContent = t("earlier");
      const done = (row) => { row.remove(); box.hidden = !list.children.length; };
      for (const u of earlier) {
        const row = el("li", "upload-item upload-earlier-item");
        row.dataset.id = u.id;
        if (u.preview) row.appendChild(thumb(zone.kind, u.preview, u.name));
        const text = el("div", "upload-text");
        text.appendChild(el("span", "upload-name", u.name));
        if (u.sent_at) text.appendChild(el("span", "upload-state", t("earlier_sent", { when: when(u.sent_at) })));
        row.appendChild(text);
        const actions = el("div", "upload-actions");
        const add = zone.button(t("earlier_add"), () => {
          if (!zone.hub.ids().includes(u.id)) zone.addFromEarlier(u);
          done(row);
          zone.changed();
        }, "earlier-add");
        add.setAttribute("aria-label", t("earlier_add_label", { name: u.name }));
        const drop = zone.button(t("earlier_delete"), () => {
          zone.remove({ url: u.url, id: u.id, name: u.name, status: u.status });
          done(row);
        }, "earlier-delete");
        drop.setAttribute("aria-label", t("earlier_delete_label", { name: u.name }));
        actions.append(add, drop);
        row.appendChild(actions);
        list.appendChild(row);
      }
      box.hidden = false;
    })
    .catch(() => {});
}

/** "12 Mar 2026, 14:05" in the page's language, in the reader's own time. */
function when(iso) {
  const at = new Date(iso);
  if (isNaN(at)) return "";
  return at.toLocaleString(document.documentElement.lang || undefined, { dateStyle: "medium", timeStyle: "short" });
}
