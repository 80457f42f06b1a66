"""The slice of a job one page shows: a page of its targets and a page of its tasks, each filtered.

A job may hold 100,000 targets and 10,000 tasks. The job page, its live snapshot (WebSocket and
live.json) and the API never carry all of them: they carry counts, and the rows "in view", which
this module picks. What it costs does not grow with the job:

- counts come from the Job row (total / done / failed, kept by `Job.recount`) and ONE aggregate
  over the job's tasks (index `task_job_state`); no count over the targets;
- a page is one indexed range query (`unique_target_index`, `target_job_status`).

The view is read from the page's query string (`?show=failed&page=3&tasks=running&tasks_page=2`),
validated here, and written back into the page's WebSocket and live.json addresses, so the page
the server rendered and the snapshots that keep it live always show the same slice.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlencode

from django.db.models import Count, Q
from django.utils.translation import gettext_lazy as _

from jobs.models import Job, TargetStatus
from jobs.models.job import NEEDS_LOOK, OK_TARGET_STATUSES

#: A task's badge colour (the CSS class `task-<colour>`) for each Slurm state that is not a failure.
#: The one definition: the server's page uses it through `task_state_class` (jobs.web.templatetags.portal), the live script gets
#: it from the page (`{% live_task_state_classes %}`), so both always colour a state alike.
TASK_STATE_CLASSES = {
    "COMPLETED": "ok",
    "RUNNING": "running", "COMPLETING": "running",
    # CONFIGURING: Slurm gave it a computer that is still waking up (power saving): nothing runs yet
    "PENDING": "waiting", "CONFIGURING": "waiting", "REQUEUED": "waiting", "SUSPENDED": "waiting", "RESIZING": "waiting",
    "CANCELLED": "muted", "PREEMPTED": "muted",
}
#: every other state (FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, ...) went wrong
TASK_STATE_CLASS_OTHER = "bad"

#: 48 photos: a grid of 4, 6 or 8 columns fills evenly, and a snapshot stays far below 64 KB
TARGETS_PER_PAGE = 48
#: 20 tasks: the table stays short enough that the photos below it are in reach
TASKS_PER_PAGE = 20

#: the target filters: (name in the URL, label, statuses); None = every target
TARGET_FILTERS: dict[str, tuple] = {
    "all": (_("All"), None),
    "failed": (_("Failed"), (TargetStatus.FAILED,)),
    # a cancelled one is not done yet either (Retry runs it): the count, total - done - failed, holds it
    "todo": (_("Not done yet"), (TargetStatus.WAITING, TargetStatus.RUNNING, TargetStatus.CANCELLED)),
    "done": (_("Done"), OK_TARGET_STATUSES),
    # done, but the worker's own look at the result flagged it (jobs.results.self_check)
    "look": (_("Needs a look"), (TargetStatus.DONE,)),
}

#: a task's group, from its badge colour (jobs.web.templatetags.portal), so a filter and a colour
#: can never disagree about a state: (group name in the URL, label)
TASK_GROUP_OF_CLASS = {"running": "running", "waiting": "waiting", "ok": "done", "bad": "failed", "muted": "cancelled"}
TASK_GROUP_LABELS = {
    "running": _("running"), "waiting": _("waiting"), "done": _("done"), "failed": _("failed"),
    "cancelled": _("cancelled"),
}
#: the same groups as filters above the table
TASK_FILTER_LABELS = {
    "running": _("Running"), "waiting": _("Waiting"), "done": _("Done"), "failed": _("Failed"),
    "cancelled": _("Cancelled"),
}
#: the order the summary lists the groups in: what is happening first, what went wrong last
TASK_GROUP_ORDER = ("done", "running", "waiting", "failed", "cancelled")
TASK_FILTERS = ("all", *TASK_GROUP_ORDER)


def task_group(state: str) -> str:
    return TASK_GROUP_OF_CLASS[TASK_STATE_CLASSES.get((state or "").upper(), TASK_STATE_CLASS_OTHER)]


def _states_of(group: str) -> list[str]:
    return [s for s, cls in TASK_STATE_CLASSES.items() if TASK_GROUP_OF_CLASS[cls] == group]


def _task_filter(group: str) -> Q:
    """The tasks of a group, as a query: the groups named in TASK_STATE_CLASSES by their states,
    `failed` as every state not named there (as its colour is)."""
    if TASK_GROUP_OF_CLASS[TASK_STATE_CLASS_OTHER] == group:
        return ~Q(state__in=list(TASK_STATE_CLASSES))
    return Q(state__in=_states_of(group))


def _whole(value, default: int = 1) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return default
    return n if 1 <= n <= 10**7 else default


@dataclass(frozen=True)
class View:
    """Which targets and tasks a page shows. Bad values fall back to the first page of everything."""

    show: str = "all"
    page: int = 1
    tasks: str = "all"
    tasks_page: int = 1

    @classmethod
    def from_query(cls, query) -> "View":
        """From a QueryDict or a parsed query string ({"show": ["failed"]} or {"show": "failed"})."""
        def one(key):
            value = query.get(key)
            return value[0] if isinstance(value, list) and value else value
        show, tasks = one("show"), one("tasks")
        return cls(show=show if show in TARGET_FILTERS else "all", page=_whole(one("page")),
                   tasks=tasks if tasks in TASK_FILTERS else "all", tasks_page=_whole(one("tasks_page")))

    def query(self, **changes) -> str:
        """This view as a query string ("" for the default view), with `changes` applied."""
        values = {"show": self.show, "page": self.page, "tasks": self.tasks, "tasks_page": self.tasks_page, **changes}
        default = View()
        kept = {k: v for k, v in values.items() if v != getattr(default, k)}
        return ("?" + urlencode(kept)) if kept else ""


@dataclass(frozen=True)
class Slice:
    """One page of rows: the rows, how many match the filter, and where this page is."""

    items: list
    matching: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.matching // self.per_page))

    def describe(self, show: str) -> dict:
        return {"show": show, "page": self.page, "pages": self.pages, "per_page": self.per_page,
                "matching": self.matching}


def target_counts(job: Job) -> dict[str, int]:
    """How many targets each filter holds, from the Job row's counters (no query)."""
    done, failed = job.done, job.failed
    return {"all": job.total, "failed": failed, "done": done, "todo": max(job.total - done - failed, 0),
            "look": job.needs_look}


def _clamp(page: int, matching: int, per_page: int) -> int:
    return min(page, max(1, -(-matching // per_page)))


def target_slice(job: Job, view: View, per_page: int = TARGETS_PER_PAGE) -> Slice:
    matching = target_counts(job)[view.show]
    page = _clamp(view.page, matching, per_page)
    rows = job.targets.order_by("index")
    statuses = TARGET_FILTERS[view.show][1]
    if view.show == "look":
        rows = rows.filter(NEEDS_LOOK)
    elif statuses is not None:
        rows = rows.filter(status__in=list(statuses))
    start = (page - 1) * per_page
    return Slice(list(rows[start:start + per_page]), matching, page, per_page)


def task_summary(job: Job) -> dict:
    """`{"total": n, "groups": {"done": n, "running": n, ...}}`: ONE aggregate over the job's tasks."""
    return summary_of((row["state"], row["n"]) for row in job.tasks.order_by().values("state").annotate(n=Count("pk")))


def summary_of(counts: Iterable[tuple[str, int]]) -> dict:
    """`task_summary` from (Slurm state, how many tasks) pairs: the watcher has every task's state
    in hand and asks the database for none (an aggregate a changed job a cycle was 90 queries a cycle
    under the load run)."""
    groups = dict.fromkeys(TASK_GROUP_ORDER, 0)
    for state, n in counts:
        groups[task_group(state)] += n
    return {"total": sum(groups.values()), "groups": groups}


def task_slice(job: Job, view: View, summary: dict, per_page: int = TASKS_PER_PAGE) -> Slice:
    matching = summary["total"] if view.tasks == "all" else summary["groups"][view.tasks]
    page = _clamp(view.tasks_page, matching, per_page)
    rows = job.tasks.order_by("index")
    if view.tasks != "all":
        rows = rows.filter(_task_filter(view.tasks))
    start = (page - 1) * per_page
    return Slice(list(rows[start:start + per_page]), matching, page, per_page)


def page_links(view: View, part: Slice, page_key: str) -> dict:
    """The page's "Previous / Page n of m / Next" for one slice, as query strings that keep the
    rest of the view (the other list's filter and page)."""
    def link(n):
        return view.query(**{page_key: n}) or "?"
    return {"number": part.page, "pages": part.pages,
            "previous": link(part.page - 1) if part.page > 1 else None,
            "next": link(part.page + 1) if part.page < part.pages else None}


def filter_links(view: View, choices, key: str, page_key: str, current: str) -> list[dict]:
    """One link per filter choice (`(name, label, count)`), each on its first page."""
    return [{"name": name, "label": label, "count": count, "current": name == current,
             "query": view.query(**{key: name, page_key: 1}) or "?"} for name, label, count in choices]


def page_of_job(job: Job, view: View) -> dict:
    """What the job page's template shows of the job's tasks and targets for `view`."""
    summary = task_summary(job)
    tasks, targets = task_slice(job, view, summary), target_slice(job, view)
    counts = target_counts(job)
    task_choices = [("all", _("All"), summary["total"])] + [
        (g, TASK_FILTER_LABELS[g], summary["groups"][g]) for g in TASK_GROUP_ORDER]
    return {
        "view": view,
        "view_query": view.query(),
        "task_summary": summary,
        "task_groups": [(g, TASK_GROUP_LABELS[g], n) for g in TASK_GROUP_ORDER if (n := summary["groups"][g])],
        "tasks": tasks,
        "tasks_nav": page_links(view, tasks, "tasks_page"),
        "task_filters": filter_links(view, task_choices, "tasks", "tasks_page", view.tasks),
        "targets": targets,
        "targets_nav": page_links(view, targets, "page"),
        "target_filters": filter_links(view, [(name, label, counts[name]) for name, (label, _s) in TARGET_FILTERS.items()],
                                       "show", "page", view.show),
    }
