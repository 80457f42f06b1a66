// A job page's photos and videos (#target-grid): the page of targets in view (a filter and a page
// number, jobs/live/view.py), exactly as the snapshot lists them, and the filters' counts. A job
// may hold 100,000 targets; the grid never holds more than one page of them.

import { el } from "./dom.js";
import { num, roughTime, secondsLeft, thousands, truncate } from "./format.js";
import { setCounts } from "./job_tasks.js";
import { faces, fill, people, rawWord, targetLabel, word } from "./strings.js";

const MESSAGE_CHARS = 160; // as the server cuts a target's message (truncatechars:160)

/**
 * A running video's "frame 1,200 of 1,800 · about 40 s left" and a bar, from its live `frames`
 * ({done, total, seconds}: Target.frames_in_progress); "frame 1,200" alone when its length is
 * unknown. The time left is the pace so far (jobs.models.job.seconds_left).
 */
export function framesDone(f) {
  const done = num(f.done), total = num(f.total);
  const parts = [total ? fill(word("frame_of", "{done} / {total}"), { done: thousands(done), total: thousands(total) })
                       : fill(word("frame_n", "{done}"), { done: thousands(done) })];
  const left = secondsLeft(f.seconds, done, total);
  if (left !== null) {
    const rough = roughTime(left);
    parts.push(fill(word("left_" + rough.unit, "{n}"), { n: thousands(rough.n) }));
  }
  const width = total ? Math.min(100, (100 * done) / total) : 0;
  // A thin bar under the badge, then the words in the small print of the badge's line (.target-meta).
  return el("div", { className: "target-frames" }, [
    total ? el("div", { className: "progress", role: "presentation", style: { height: "6px", margin: ".45rem 0 .3rem" } },
               [el("span", { className: "progress-done", style: { width: width + "%" } })]) : null,
    el("div", { className: "target-meta" },
       [el("span", { className: "target-frames-text", text: parts.join(rawWord("frames_sep", " · ")) })]),
  ]);
}

export class TargetGrid {
  /**
   * `view`: the filter and page in view ({show, page, perPage, statuses}: server_data.js);
   * `isVideo(name)` from the server's list of video extensions; `askResync()`: fetch the view
   * anew soon; `jobUrl()`: the job's page once known (its results zip is <url>/results.zip).
   */
  constructor({ view, isVideo, askResync, jobUrl }) {
    this.view = view;
    this.page = view.page;
    this.perPage = view.perPage;
    this.isVideo = isVideo;
    this.askResync = askResync;
    this.jobUrl = jobUrl;
    this.total = 0; // targets in the job (its progress), known from the first message
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
          t.faces_swapped ? el("span", { text: (this.isVideo(t.name) ? people : faces)(num(t.faces_swapped)) }) : null,
        ]),
        t.frames ? framesDone(t.frames) : null,
        t.message ? el("div", { className: "target-message", text: truncate(t.message, MESSAGE_CHARS) }) : null,
        t.self_check_words ? el("div", { className: "target-look", text: t.self_check_words }) : null,
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

  /** A snapshot's page of targets, exactly, in its order; `view`: the snapshot's view.targets. */
  renderAll(targets, view) {
    const grid = this.grid();
    if (!grid) return;
    const wanted = targets.map((t) => this.draw(t));
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
    const matching = view ? num(view.matching) : targets.length;
    const noneHere = document.getElementById("targets-none-here");
    if (noneHere) noneHere.hidden = grid.children.length > 0 || !this.total;
    // A page drawn before the list existed has no page links: offer the next page.
    const more = document.getElementById("targets-more");
    if (more) {
      more.hidden = !!document.getElementById("targets-pages") || this.page !== 1 || matching <= this.perPage;
      const params = new URLSearchParams(location.search);
      params.set("page", "2");
      more.querySelector("a").setAttribute("href", "?" + params.toString() + "#targets");
    }
  }

  /** The filters' counts and the "appears once sent" line, from the job's progress. */
  renderCounts(progress) {
    const total = num(progress.total), done = num(progress.done), failed = num(progress.failed);
    this.total = total;
    const filters = document.getElementById("target-filters");
    if (filters) {
      filters.hidden = !total;
      setCounts(filters, { all: total, done: done, failed: failed, todo: Math.max(total - done - failed, 0),
                           look: num(progress.needs_look) });
    }
    const empty = document.getElementById("targets-empty");
    if (empty) empty.hidden = total > 0;
  }

  /** Whether a target in this status belongs to the filter in view. */
  inFilter(t) {
    if (this.view.show === "look" && !t.self_check) return false; // "needs a look": done AND flagged
    return !this.view.statuses.length || this.view.statuses.includes(t.status);
  }

  /**
   * One target changed (an `output` event). One in view is redrawn (and stays, even when it left
   * the filter). One not in view that belongs there (its filter, within this page's range) makes
   * the page ask for its view again; any other only moved the counts, which the job event brings.
   */
  render(t) {
    const grid = this.grid();
    if (!grid) return;
    if (grid.querySelector('li[data-target-index="' + t.index + '"]')) { this.draw(t); return; }
    if (!this.inFilter(t)) return;
    const indexes = Array.prototype.map.call(grid.children, (li) => num(li.getAttribute("data-target-index")));
    const full = indexes.length >= this.perPage;
    const afterFirst = this.page === 1 || (indexes.length && t.index > Math.min(...indexes));
    const beforeLast = !full || t.index < Math.max(...indexes);
    if (afterFirst && beforeLast) this.askResync();
  }
}
