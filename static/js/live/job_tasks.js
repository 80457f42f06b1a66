// A job page's task table (#task-rows): one row per Slurm array task, ordered by index, drawn as
// the server draws it in templates/jobs/job_detail.html.

import { el } from "./dom.js";
import { duration, num } from "./format.js";

const DASH = "—";

export class TaskTable {
  /** `taskStateClass(state)`: a state's badge colour, as the server colours it (server_data.js). */
  constructor(taskStateClass) {
    this.taskStateClass = taskStateClass;
  }

  body() {
    return document.getElementById("task-rows");
  }

  row(task) {
    return el("tr", { "data-task-index": task.index }, [
      el("td", { text: String(task.index) }),
      el("td", {}, [el("span", { className: "badge task-" + this.taskStateClass(task.status), text: task.status || "" })]),
      el("td", { className: "mono", text: task.node || DASH }),
      el("td", { className: "mono", text: duration(task.elapsed_seconds) || DASH }),
      el("td", { className: "mono", text: task.exit_code === null || task.exit_code === undefined ? DASH : String(task.exit_code) }),
      el("td", { text: task.reason || "" }),
    ]);
  }

  /** One task's row, new or changed (a row that looks the same is left alone). */
  render(task) {
    const body = this.body();
    if (!body) return;
    const row = this.row(task);
    const old = body.querySelector('tr[data-task-index="' + task.index + '"]');
    if (old) {
      if (old.innerHTML !== row.innerHTML) body.replaceChild(row, old);
    } else {
      const before = Array.prototype.find.call(body.children, (tr) => num(tr.getAttribute("data-task-index")) > task.index);
      body.insertBefore(row, before || null);
    }
    this.show();
  }

  /** Exactly these tasks (a snapshot): rows of tasks it does not hold go. */
  renderAll(tasks) {
    const body = this.body();
    if (!body) return;
    const keep = new Set();
    for (const t of tasks) {
      keep.add(String(t.index));
      this.render(t);
    }
    for (const tr of Array.from(body.children)) {
      if (!keep.has(tr.getAttribute("data-task-index"))) body.removeChild(tr);
    }
    this.show();
  }

  // The table once there is a task; until then the sentence that says why there is none.
  show() {
    const body = this.body(), any = !!(body && body.children.length);
    const wrap = document.getElementById("tasks-wrap"), empty = document.getElementById("tasks-empty");
    if (wrap) wrap.hidden = !any;
    if (empty) empty.hidden = any;
  }
}
