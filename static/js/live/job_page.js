// A job's page (#job-live): its status, progress, facts, error and the cluster's banner, kept
// current from /ws/jobs/<id>/. The task table and the photo grid have modules of their own. The
// page only ever shows what a message says (the database's state); it never guesses ahead.

import { el, setBadge } from "./dom.js";
import { num, pageDate, progressPct, sameInstant, thousands } from "./format.js";
import { TargetGrid } from "./job_targets.js";
import { TaskTable } from "./job_tasks.js";
import { Connection } from "./socket.js";
import { fill, hasWord, markup, needLook, word } from "./strings.js";

const RESYNC_DELAY_MS = 300; // a burst of events that each want the whole picture asks once

export { pageDate }; // its home is format.js; the job page and the list write dates alike

export class JobPage {
  /** `root`: #job-live; `data`: serverData(root). */
  constructor(root, data) {
    this.root = root;
    this.data = data;
    this.jobId = data.wsPath.split("?")[0].split("/").filter(Boolean).pop();
    this.status = root.getAttribute("data-status");
    this.hasFolder = root.getAttribute("data-has-folder") === "true";
    this.jobUrl = null; // known from the first message
    this.resyncTimer = null;
    this.frames = new Map(); // a running video's index -> its live {done, total}: the bar moves with its frames
    this.progress = null; // the last job message's counts, drawn again when a video's frames move
    const askResync = () => this.askResync();
    this.tasks = new TaskTable({ taskStateClass: data.taskStateClass, taskGroup: data.taskGroup,
                                 view: data.tasksView, askResync: askResync });
    this.targets = new TargetGrid({ view: data.targetsView, isVideo: data.isVideo, askResync: askResync,
                                    jobUrl: () => this.jobUrl });
  }

  start() {
    if (this.data.isFinal(this.status)) return; // nothing changes any more; the server's page is the truth
    this.conn = new Connection({ wsPath: this.data.wsPath, liveUrl: this.data.liveUrl,
                                 closeCodes: this.data.closeCodes, onMessage: (msg) => this.handle(msg) });
    this.conn.open();
  }

  handle(msg) {
    if (!msg || typeof msg !== "object") return;
    if (msg.job_id && msg.job_id !== this.jobId) return;
    switch (msg.type) {
      case "snapshot":
        if (!msg.job || msg.job.id !== this.jobId) return;
        this.frames.clear();
        for (const t of msg.targets || []) this.noteFrames(t);
        this.renderJob(msg.job);
        this.tasks.renderSummary(msg.task_summary);
        this.tasks.renderAll(msg.tasks || []);
        this.targets.renderAll(msg.targets || [], (msg.view || {}).targets);
        this.renderCluster(msg.cluster);
        if (this.data.isFinal(msg.job.status)) this.conn.stop(); // the database says it is over: nothing more will come
        break;
      case "job": {
        if (!msg.job || msg.job.id !== this.jobId) return;
        const listWasKnown = this.targets.total > 0;
        this.renderJob(msg.job);
        this.tasks.renderSummary(msg.task_summary);
        // Finished, or the job's list of photos now exists but this page has none of it: fetch the view.
        if (this.data.isFinal(msg.job.status) || (!listWasKnown && this.targets.total > 0 && this.targets.isEmpty())) {
          this.askResync();
        }
        break;
      }
      case "task":
        if (msg.task) this.tasks.render(msg.task);
        break;
      case "output":
        if (msg.target) {
          this.targets.render(msg.target);
          if (this.noteFrames(msg.target) && this.progress) this.renderProgress(this.progress, !this.data.isFinal(this.status));
        }
        break;
      case "cluster":
        this.renderCluster(msg.cluster);
        break;
    }
  }

  // A target's frames as its card shows them (Target.frames_in_progress); true when the bar should move.
  noteFrames(t) {
    if (!t || t.index === undefined) return false;
    // `frames` is only ever set on a running video (Target.frames_in_progress)
    const f = t.frames && num(t.frames.total) ? { done: num(t.frames.done), total: num(t.frames.total) } : null;
    const had = this.frames.has(t.index);
    if (f) this.frames.set(t.index, f); else this.frames.delete(t.index);
    return had || !!f;
  }

  askResync() {
    if (this.resyncTimer) return;
    this.resyncTimer = setTimeout(() => { this.resyncTimer = null; this.conn.resync(); }, RESYNC_DELAY_MS);
  }

  renderJob(job) {
    const final = this.data.isFinal(job.status), active = !final;
    this.status = job.status;
    this.jobUrl = job.url;
    this.root.setAttribute("data-status", job.status);
    const badge = document.getElementById("job-status");
    if (badge) setBadge(badge, job);
    this.progress = job.progress || {};
    this.renderProgress(this.progress, active);
    this.targets.renderCounts(job.progress || {});

    const err = document.getElementById("job-error");
    if (err) {
      err.hidden = !job.error;
      err.textContent = job.error || "";
      err.className = "notice " + (this.data.isFailed(job.status) ? "notice-bad" : "notice-info");
    }
    const when = document.getElementById("job-when");  // "expected to start around …" (jobs/job/expected.py)
    if (when) {
      when.hidden = !job.when;
      when.textContent = job.when || "";
    }
    this.fact("fact-started", job.started_at);
    this.fact("fact-finished", job.finished_at);
    const slurm = document.getElementById("fact-slurm");
    if (slurm) {
      slurm.hidden = !job.slurm_job_id;
      slurm.querySelector("dd").textContent = job.slurm_job_id || "";
    }
    if (final) {
      const cancel = document.getElementById("job-cancel");
      if (cancel) cancel.parentNode.removeChild(cancel);
      this.offerRetry(job);
      this.offerLookAgain(job);
      const dialog = document.getElementById("cancel-dialog");
      if (dialog && dialog.open) dialog.close();
      // "Job started." was true when the page came; above an ended job it is not.
      for (const started of document.querySelectorAll(".messages .job-started")) started.parentNode.removeChild(started);
      const banner = document.getElementById("cluster-banner");
      if (banner) banner.hidden = true;
    }
  }

  // Retry, once the job ended with something not done (the server's `can_retry`, from the counts):
  // the form is on the page, hidden, for its owner only.
  offerRetry(job) {
    const form = document.getElementById("job-retry");
    if (!form) return;
    const p = job.progress || {};
    form.hidden = !(this.data.canRetry(job.status) && num(p.done) < num(p.total));
    // the label for this status (data-when="<status>"), else the one for any other (data-when="")
    const labels = Array.from(form.querySelectorAll("[data-when]"));
    const when = labels.some((l) => l.getAttribute("data-when") === job.status) ? job.status : "";
    for (const label of labels) label.hidden = label.getAttribute("data-when") !== when;
  }

  // "Try again with another face photo", once the job ended with results the worker flagged (the
  // server's `can_try_again`): the notice is on a running job's page, hidden.
  offerLookAgain(job) {
    const notice = document.getElementById("job-look-again");
    const n = num((job.progress || {}).needs_look);
    if (!notice || !n) return;
    document.getElementById("job-look-count").textContent = needLook(n);
    notice.hidden = false;
  }

  // The bar and the sentence under it, as the server writes them.
  renderProgress(p, active) {
    const total = num(p.total), done = num(p.done), failed = num(p.failed);
    const left = Math.max(total - done - failed, 0);
    const shares = progressPct(done, failed, total, active ? Array.from(this.frames.values()) : []);
    const bar = document.getElementById("job-progress");
    if (bar) {
      bar.setAttribute("aria-valuemax", total);
      bar.setAttribute("aria-valuenow", done + failed);
      bar.querySelector(".progress-done").style.width = shares.done_pct + "%";
      bar.querySelector(".progress-failed").style.width = shares.failed_pct + "%";
    }
    const text = document.getElementById("progress-text");
    if (!text) return;
    text.textContent = "";
    if (!total) {
      text.textContent = this.hasFolder && active ? word("counting") : word("no_targets");
      return;
    }
    const head = document.createElement("span");
    // only numbers (and the server's own "8 photos and 2 videos") go into this markup
    head.innerHTML = fill(markup("done_of_html", "{done} / {total}"), { done: thousands(done), total: this.totalWords(text, total) });
    while (head.firstChild) text.appendChild(head.firstChild);
    if (failed) {
      text.appendChild(document.createTextNode(" · "));
      text.appendChild(el("span", { className: "text-bad", text: fill(word("n_failed", "{n}"), { n: thousands(failed) }) }));
    }
    if (left && active) text.appendChild(document.createTextNode(" · " + fill(word("n_to_go", "{n}"), { n: thousands(left) })));
    // An ended job's targets neither done nor failed were stopped: said, so the sentence agrees with the percentage.
    if (left && !active) {
      const key = hasWord("stopped:" + this.status) ? "stopped:" + this.status : "n_not_done";
      text.appendChild(document.createTextNode(" · " + fill(word(key, "{n}"), { n: thousands(left) })));
    }
    text.appendChild(el("span", { className: "pct", text: shares.pct + "%" }));
  }

  // "8 photos and 2 videos" as the server counted them (escaped markup), while the total is the one it counted.
  totalWords(text, total) {
    const words = text.getAttribute("data-total-words");
    if (words && num(text.getAttribute("data-total")) === total) {
      const scratch = document.createElement("span");
      scratch.textContent = words;
      return scratch.innerHTML;
    }
    return thousands(total);
  }

  // A date in the facts (started, finished): shown once known, redrawn only when it changed.
  fact(id, iso) {
    const box = document.getElementById(id);
    if (!box) return;
    box.hidden = !iso;
    const time = box.querySelector("time");
    if (!sameInstant(time && time.getAttribute("datetime"), iso)) {
      const dd = box.querySelector("dd");
      dd.textContent = "";
      if (iso) dd.appendChild(el("time", { datetime: iso, text: pageDate(iso, this.data.timeZone) }));
    }
  }

  renderCluster(cluster) {
    const banner = document.getElementById("cluster-banner");
    if (!banner || !cluster) return;
    if (!cluster.unreachable_since || this.data.isFinal(this.status)) {
      banner.hidden = true;
      banner.setAttribute("data-since", "");
      return;
    }
    if (banner.hidden || !sameInstant(banner.getAttribute("data-since"), cluster.unreachable_since)) {
      // The server's sentence, in the reader's language (the same words as cluster.message).
      banner.textContent = hasWord("cluster_since")
        ? fill(word("cluster_since"), { since: pageDate(cluster.unreachable_since, this.data.timeZone) })
        : (cluster.message || "");
      banner.setAttribute("data-since", cluster.unreachable_since);
    }
    banner.hidden = false;
  }
}
