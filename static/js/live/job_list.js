// The job list (#jobs-live): each row's status and progress kept current from /ws/jobs/ (the
// user's own jobs: jobs/access.py), and the user's new jobs added at the top of the first page.

import { el, setBadge } from "./dom.js";
import { num, pageDate, pct, truncate } from "./format.js";
import { Connection } from "./socket.js";
import { fill, word } from "./strings.js";

const NAME_CHARS = 60; // as the server cuts a job's name (truncatechars:60)

export class JobList {
  /** `root`: #jobs-live; `data`: serverData(root). */
  constructor(root, data) {
    this.root = root;
    this.data = data;
    this.page = Math.max(1, parseInt(root.getAttribute("data-page"), 10) || 1);
    this.perPage = Math.max(1, parseInt(root.getAttribute("data-per-page"), 10) || 50);
    this.fetching = false;
    this.fetchAgain = false;
  }

  start() {
    this.conn = new Connection({ wsPath: this.data.wsPath, liveUrl: this.data.liveUrl,
                                 closeCodes: this.data.closeCodes, onMessage: (msg) => this.handle(msg) });
    this.conn.open();
  }

  rows() {
    return document.getElementById("job-rows");
  }

  row(id) {
    return this.rows().querySelector('tr[data-job-id="' + id + '"]');
  }

  handle(msg) {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "snapshot" && msg.jobs) this.renderAll(msg.jobs);
    else if (msg.type === "job" && msg.job) {
      if (this.row(msg.job.id)) this.renderRow(msg.job);
      else this.refresh(); // a job this page has never seen (just started elsewhere): the whole list
    }
  }

  // Fetch jobs/live.json and draw it (one request at a time; a burst of new jobs costs one more).
  refresh() {
    if (this.fetching) { this.fetchAgain = true; return; }
    this.fetching = true;
    fetch(this.data.liveUrl, { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } })
      .then((r) => {
        if (!r.ok || r.redirected) throw new Error("jobs/live.json answered " + r.status);
        return r.json();
      })
      .then((msg) => { if (msg && msg.jobs) this.renderAll(msg.jobs); })
      .catch(() => { /* the next event or snapshot tries again */ })
      .then(() => {
        this.fetching = false;
        if (this.fetchAgain) { this.fetchAgain = false; this.refresh(); }
      });
  }

  renderAll(jobs) {
    const body = this.rows();
    if (!body) return;
    let newest = null;
    for (const tr of body.children) {
      const c = Date.parse(tr.getAttribute("data-created"));
      if (!isNaN(c) && (newest === null || c > newest)) newest = c;
    }
    for (const job of jobs) {
      if (this.row(job.id)) { this.renderRow(job); continue; }
      // New jobs appear at the top of the first page; older ones belong to other pages.
      const created = Date.parse(job.created_at);
      if (this.page === 1 && (newest === null || created > newest)) this.insertRow(job);
    }
    for (const tr of Array.from(body.children).slice(this.perPage)) body.removeChild(tr);
    this.showTable();
  }

  progressCell(cell, job) {
    const p = job.progress || {}, total = num(p.total), done = num(p.done), failed = num(p.failed);
    const key = [total, done, failed].join("/");
    if (cell.getAttribute("data-drawn") === key) return;
    cell.setAttribute("data-drawn", key);
    cell.textContent = "";
    if (!total) { cell.appendChild(el("span", { className: "muted", text: "—" })); return; }
    cell.appendChild(el("span", { className: "minibar", "aria-hidden": "true" }, [
      el("span", { className: "progress-done", style: { width: pct(done, total) + "%" } }),
      el("span", { className: "progress-failed", style: { width: pct(failed, total) + "%" } }),
    ]));
    cell.appendChild(document.createTextNode(" " + fill(word("done_slash", "{done} / {total}"), { done: done, total: total }) + " "));
    if (failed) cell.appendChild(el("span", { className: "text-bad", text: "· " + fill(word("n_failed", "{n}"), { n: failed }) }));
  }

  renderRow(job) {
    const tr = this.row(job.id);
    if (!tr) return;
    const badge = tr.querySelector(".job-status .badge");
    if (badge) setBadge(badge, job);
    const cell = tr.querySelector(".job-progress");
    if (cell) this.progressCell(cell, job);
  }

  // A row like the server's (templates/jobs/job_list.html), placed by creation time, newest first.
  insertRow(job) {
    const body = this.rows();
    const name = job.name
      ? [truncate(job.name, NAME_CHARS)]
      : [el("span", { className: "untitled", text: word("untitled") }), " ", el("span", { className: "mono muted", text: String(job.id).slice(0, 8) })];
    const progress = el("td", { className: "nowrap job-progress" });
    this.progressCell(progress, job);
    const tr = el("tr", { "data-job-id": job.id, "data-created": job.created_at || "", className: "is-new" }, [
      // a new job has no result yet: the neutral square the server draws for such rows
      el("td", { className: "thumb-cell" }, [el("span", { className: "job-thumb job-thumb-none", "aria-hidden": "true" })]),
      el("td", {}, [el("a", { href: job.url }, name)]),
      el("td", { text: job.template_name || "" }),
      el("td", { className: "job-status" }, [el("span", { "data-live": "status" })]),
      progress,
      el("td", { className: "nowrap" }, [el("time", { datetime: job.created_at, title: job.created_at, text: pageDate(job.created_at, this.data.timeZone) })]),
    ]);
    this.labelCells(tr);
    setBadge(tr.querySelector("[data-live=status]"), job);
    const created = Date.parse(job.created_at);
    const before = Array.prototype.find.call(body.children, (other) => Date.parse(other.getAttribute("data-created")) < created);
    body.insertBefore(tr, before || null);
  }

  // Each cell names its column (data-label, copied from the header), as the server's rows do:
  // under 600 px, table.stack shows a row as a card of "label: value" lines.
  labelCells(tr) {
    const heads = document.querySelectorAll("#jobs-table thead th");
    Array.prototype.forEach.call(tr.children, (td, i) => {
      const label = heads[i] && heads[i].getAttribute("data-label");
      if (label) td.setAttribute("data-label", label);
    });
  }

  showTable() {
    const any = this.rows().children.length > 0;
    const table = document.getElementById("jobs-table"), empty = document.getElementById("jobs-empty");
    if (table) table.hidden = !any;
    if (empty) empty.hidden = any;
  }
}
