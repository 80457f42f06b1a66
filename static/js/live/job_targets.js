// A job page's photos and videos (#target-grid). The server paginates targets by position, so the
// grid shows the slice of the snapshot's list that belongs to this page, in order.

import { el } from "./dom.js";
import { num, truncate } from "./format.js";
import { faces, targetLabel, word } from "./strings.js";

const MESSAGE_CHARS = 160; // as the server cuts a target's message (truncatechars:160)

export class TargetGrid {
  /**
   * `root`: #job-live (its data-targets-page and data-targets-per-page); `isVideo(name)` from the
   * server's list of video extensions; `askResync()`: fetch the whole picture soon; `jobUrl()`:
   * the job's page once known (its results zip is <url>/results.zip, jobs/web/urls.py).
   */
  constructor(root, { isVideo, askResync, jobUrl }) {
    this.page = Math.max(1, parseInt(root.getAttribute("data-targets-page"), 10) || 1);
    this.perPage = Math.max(1, parseInt(root.getAttribute("data-targets-per-page"), 10) || 60);
    this.isVideo = isVideo;
    this.askResync = askResync;
    this.jobUrl = jobUrl;
    this.rendered = {}; // target index -> the JSON last drawn (skip redrawing what did not change)
  }

  grid() {
    return document.getElementById("target-grid");
  }

  /** No target drawn yet (the page was drawn before the job's list of targets existed). */
  isEmpty() {
    return this.grid().children.length === 0;
  }

  item(t, old) {
    let thumb;
    if (t.thumb_url) {
      const img = old && old.querySelector(".thumb img");
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
    const hadCompare = !!(old && old.querySelector(".link-compare")); // an uploaded original stays comparable
    return el("li", { className: "target target-" + t.status + (old ? "" : " is-new"), "data-target-index": t.index }, [
      el("a", { className: "thumb", href: t.page_url }, [thumb]),
      el("div", { className: "target-body" }, [
        el("div", { className: "target-name", title: t.name, text: t.name }),
        el("div", { className: "target-meta" }, [
          el("span", { className: "badge target-status-" + t.status, text: targetLabel(t) }),
          t.faces_swapped ? el("span", { text: faces(num(t.faces_swapped)) }) : null,
        ]),
        t.message ? el("div", { className: "target-message", text: truncate(t.message, MESSAGE_CHARS) }) : null,
        el("div", { className: "target-links" }, [
          t.output_url || hadCompare ? el("a", { className: "link-compare", href: t.page_url, text: word("before_after") }) : null,
          t.output_url ? el("a", { className: "link-download", href: t.output_url + "?download=1", text: word("download") }) : null,
        ]),
      ]),
    ]);
  }

  draw(t) {
    const grid = this.grid(), key = JSON.stringify(t);
    const old = grid.querySelector('li[data-target-index="' + t.index + '"]');
    if (old && this.rendered[t.index] === key) return old;
    const li = this.item(t, old);
    if (old) grid.replaceChild(li, old);
    else grid.appendChild(li);
    this.rendered[t.index] = key;
    if (t.output_url) this.offerZip();
    return li;
  }

  // "Download all (zip)" once a first output exists (the server's page has it when it had one).
  offerZip() {
    const jobUrl = this.jobUrl();
    if (document.getElementById("job-download") || !jobUrl) return;
    const actions = document.querySelector("#job-live .pagehead .actions");
    if (!actions) return;
    const a = el("a", { className: "button", id: "job-download", href: jobUrl + "/results.zip", download: true,
                        text: word("download_zip") });
    actions.insertBefore(a, document.getElementById("job-cancel"));
  }

  /** The snapshot's whole list: this page's slice of it, exactly. */
  renderAll(targets) {
    const grid = this.grid();
    if (!grid) return;
    const start = (this.page - 1) * this.perPage;
    const wanted = targets.slice(start, start + this.perPage).map((t) => this.draw(t));
    for (const li of Array.from(grid.children)) {
      if (!wanted.includes(li)) {
        grid.removeChild(li);
        delete this.rendered[li.getAttribute("data-target-index")];
      }
    }
    wanted.forEach((li, i) => { // move only what is out of place (a move restarts its fade-in)
      if (grid.children[i] !== li) grid.insertBefore(li, grid.children[i] || null);
    });
    if (targets.some((t) => t.output_url)) this.offerZip();
    grid.hidden = grid.children.length === 0;
    const empty = document.getElementById("targets-empty");
    if (empty) empty.hidden = grid.children.length > 0 || this.page > 1;
    // A page drawn before the list existed has no page links: offer the next page.
    const more = document.getElementById("targets-more");
    const serverNav = document.querySelector("#targets nav.pagination:not(#targets-more)");
    if (more) more.hidden = !!serverNav || this.page !== 1 || targets.length <= this.perPage;
  }

  /** One target changed (an `output` event). */
  render(t) {
    const grid = this.grid();
    if (!grid) return;
    if (grid.querySelector('li[data-target-index="' + t.index + '"]')) { this.draw(t); return; }
    // Not drawn: either on another page, or the page does not know the list yet.
    const indexes = Array.prototype.map.call(grid.children, (li) => num(li.getAttribute("data-target-index")));
    const lo = Math.min(...indexes), hi = Math.max(...indexes);
    if (!indexes.length || (t.index > lo && t.index < hi) || (t.index === hi + 1 && indexes.length < this.perPage)) {
      this.askResync();
    }
  }
}
