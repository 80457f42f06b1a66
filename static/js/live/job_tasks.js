// A job's tasks: the summary ("1,000 tasks: 998 done, 2 running"), the filters with their counts,
// and the table (#task-rows) of the tasks in view, one row per Slurm array task in index order,
// drawn as the server draws them in templates/jobs/job_detail.html. A job may have thousands of
// tasks: the table only ever holds the page in view (jobs/live/view.py); counts come from the
// `task_summary` every snapshot and job event carries.

import { el } from "./dom.js";
import { duration, num, thousands } from "./format.js";
import { fill, rawWord, word } from "./strings.js";

const DASH = "—";

export class TaskTable {
  /**
   * `taskStateClass(state)`: a state's badge colour; `taskGroup(state)`: its filter (server_data.js);
   * `view`: the filter and page in view {show, page, perPage}; `askResync()`: fetch the view anew.
   */
  constructor({ taskStateClass, taskGroup, view, askResync }) {
    this.taskStateClass = taskStateClass;
    this.taskGroup = taskGroup;
    this.view = view;
    this.askResync = askResync;
    this.total = 0;
  }

  body() {
    return document.getElementById("task-rows");
  }

  // The column names (the table's own, in the reader's language): each cell carries its own as
  // data-label, which a phone shows beside the value when the table is stacked into cards.
  labels() {
    if (!this.columnNames) {
      const heads = document.querySelectorAll("table.tasks thead th");
      this.columnNames = Array.prototype.map.call(heads, (th) => th.textContent.trim());
    }
    return this.columnNames;
  }

  row(task) {
    const label = this.labels();
    return el("tr", { "data-task-index": task.index }, [
      el("td", { "data-label": label[0], text: String(task.index) }),
      // plain words in the badge, the cluster's own word after it (as the server draws the row)
      el("td", { "data-label": label[1] }, [el("span", { className: "badge task-" + this.taskStateClass(task.status),
                                                          text: word("group:" + this.taskGroup(task.status), task.status || "") }),
                                            " ",
                                            el("span", { className: "mono task-code", title: word("cluster_word"),
                                                         text: task.status || "" })]),
      el("td", { className: "mono", "data-label": label[2], text: task.node || DASH }),
      el("td", { className: "mono", "data-label": label[3], text: duration(task.elapsed_seconds) || DASH }),
      el("td", { className: "mono", "data-label": label[4],
                 text: task.exit_code === null || task.exit_code === undefined ? DASH : String(task.exit_code) }),
      el("td", { "data-label": label[5], text: task.reason || "" }),
    ]);
  }

  draw(task, old) {
    const row = this.row(task);
    if (old.innerHTML !== row.innerHTML) old.parentNode.replaceChild(row, old);
  }

  /**
   * One task changed (a `task` event). A row in view is redrawn (and stays, even when its new state
   * is outside the filter: rows do not jump away under the reader's eyes). A task not in view that
   * belongs there (its filter, within this page's range) makes the page ask for its view again.
   */
  render(task) {
    const body = this.body();
    if (!body) return;
    const old = body.querySelector('tr[data-task-index="' + task.index + '"]');
    if (old) { this.draw(task, old); return; }
    if (this.view.show !== "all" && this.taskGroup(task.status) !== this.view.show) return;
    const indexes = Array.prototype.map.call(body.children, (tr) => num(tr.getAttribute("data-task-index")));
    const full = indexes.length >= this.view.perPage;
    const afterFirst = this.view.page === 1 || (indexes.length && task.index > Math.min(...indexes));
    const beforeLast = !full || task.index < Math.max(...indexes);
    if (afterFirst && beforeLast) this.askResync();
  }

  /** Exactly these tasks (a snapshot's page): rows of tasks it does not hold go. */
  renderAll(tasks) {
    const body = this.body();
    if (!body) return;
    const rows = tasks.map((t) => {
      const old = body.querySelector('tr[data-task-index="' + t.index + '"]');
      if (!old) return this.row(t);
      this.draw(t, old);
      return body.querySelector('tr[data-task-index="' + t.index + '"]');
    });
    for (const tr of Array.from(body.children)) {
      if (!rows.includes(tr)) body.removeChild(tr);
    }
    rows.forEach((tr, i) => {
      if (body.children[i] !== tr) body.insertBefore(tr, body.children[i] || null);
    });
    this.show();
  }

  /** The summary line and the filters' counts, from `{"total", "groups": {name: n}}`. */
  renderSummary(summary) {
    if (!summary || !summary.groups) return;
    this.total = num(summary.total);
    const line = document.getElementById("task-summary");
    if (line) {
      line.textContent = fill(word(this.total === 1 ? "tasks_one" : "tasks_other", "{total}"),
                              { total: thousands(this.total) }) + rawWord("list_start", ": ");
      let first = true;
      for (const [group, n] of Object.entries(summary.groups)) {
        if (!num(n)) continue;
        if (!first) line.appendChild(document.createTextNode(rawWord("list_sep", ", ")));
        line.appendChild(el("span", { className: "group group-" + group, "data-group": group,
                                      text: fill(word("group_n", "{n} {label}"),
                                                 { n: thousands(num(n)), label: word("group:" + group, group) }) }));
        first = false;
      }
      line.hidden = !this.total;
    }
    const filters = document.getElementById("task-filters");
    if (filters) {
      filters.hidden = !this.total;
      setCounts(filters, { all: this.total, ...summary.groups });
    }
    this.show();
  }

  // The table once there is a task in view; otherwise the sentence that says why there is none.
  show() {
    const body = this.body(), any = !!(body && body.children.length);
    const wrap = document.getElementById("tasks-wrap"), empty = document.getElementById("tasks-empty");
    const noneHere = document.getElementById("tasks-none-here");
    const total = this.total || (body ? body.children.length : 0);
    if (wrap) wrap.hidden = !any;
    if (empty) empty.hidden = total > 0;
    if (noneHere) noneHere.hidden = any || !total;
  }
}

/**
 * A filter bar's counts (`data-count-of`), from {name: n}. A filter with nothing in it hides,
 * unless it is the one in view or "all" (templates/jobs/_filters.html hides the same ones).
 */
export function setCounts(nav, counts) {
  for (const link of nav.querySelectorAll("[data-filter]")) {
    const name = link.getAttribute("data-filter");
    if (!(name in counts)) continue;
    const n = num(counts[name]);
    const count = link.querySelector("[data-count-of]");
    if (count) count.textContent = thousands(n);
    link.hidden = !n && name !== "all" && !link.classList.contains("is-current");
  }
}
