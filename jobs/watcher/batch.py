"""Applying a whole cycle's decisions: the jobs whose changes are only rows moving (tasks, targets,
counts, outputs asked for) in ONE transaction and a few statements; the rest one by one
(`jobs.watcher.apply.apply`: a job that starts, ends, is lost or held back a photo).

Why: under the load run (200 jobs x 5,000 photos, bench/load_run.py) a cycle wrote ~280 single-row
UPDATEs and one transaction per changed job, and most of its time was those round trips waiting on
a busy database, not work. Here a cycle's target changes go in one round trip per set of fields
changed (`transitions.write_many`), the jobs' counts, changed_at and expected start one UPDATE, the outputs asked for
one UPDATE and one Redis round trip (`enqueue_output_fetches`), whatever the number of jobs.

The same rules as one job at a time: each row gets exactly the fields its change names (never a
value read earlier written back over another writer's), counts move by what the targets changed
(`apply.Counts`), and output fetches are enqueued after the commit. If the batch fails, nothing of
it is kept and each job is applied on its own: one job's bad change never holds up the others.
"""
from __future__ import annotations

import logging
from collections import Counter, defaultdict
from typing import NamedTuple

from django.db import transaction
from django.db.models import Case, DateTimeField, F, IntegerField, Q, Value, When
from django.utils import timezone

from jobs import transitions
from jobs.background import enqueue
from jobs.live.protocol import Publisher
from jobs.live.view import summary_of
from jobs.log_context import log_context
from jobs.models import Job, Target, Task
from jobs.watcher.apply import SHOWN_TASK_FIELDS, Counts, apply
from jobs.watcher.decide import Decision, ExpectedStart, FetchOutputs, FetchPosters, JobRow, TargetChange, TaskChange
from jobs.words import in_language_of

log = logging.getLogger(__name__)

#: the changes the batch writes; a decision with any other (a job's move, the end of an attempt, a
#: cleared error, a photo held back) is applied on its own
BATCHED = (TaskChange, TargetChange, FetchOutputs, FetchPosters, ExpectedStart)


#: the job's fields the batch writes (and sets in memory)
JOB_FIELDS = ("done", "failed", "needs_look", "expected_start", "changed_at")


class Item(NamedTuple):
    job: Job
    row: JobRow  # what the rules read: its tasks' states make the page's task counts
    decision: Decision


def apply_all(items: list[Item], pub: Publisher) -> list[str]:
    """Write every job's changes; the ids of the jobs whose page changed."""
    batched: list[Item] = []
    alone: list[Item] = []
    for item in items:
        if item.decision.changes:
            simple = all(isinstance(c, BATCHED) for c in item.decision.changes)
            (batched if simple else alone).append(item)
    shown: list[str] = []
    if batched:
        own = Publisher()
        try:
            with transaction.atomic():
                shown, fetches = _write(batched, own)
        except Exception:
            log.exception("the cycle's batch of %d jobs failed: each is applied on its own", len(batched))
            for item in batched:  # what the batch set in memory before it failed, as the database has it
                item.job.refresh_from_db(fields=JOB_FIELDS)
            alone, shown = batched + alone, []
        else:
            pub.messages += own.messages
            enqueue.enqueue_output_fetches(fetches)
    for job, _row, decision in alone:
        with in_language_of(job), log_context(job_id=str(job.id), slurm_job_id=job.slurm_job_id):
            if apply(job, decision, pub):
                shown.append(str(job.id))
    return shown


def _write(items: list[Item], pub: Publisher) -> tuple[list[str], list[tuple[Job, list[int], str]]]:
    now = timezone.now()
    tasks = _rows(Task, {item.job.pk: [c.index for c in item.decision.of(TaskChange)] for item in items})
    targets = _rows(Target, {item.job.pk: [c.index for c in item.decision.of(TargetChange)] for item in items})
    task_groups: dict[frozenset, list[Task]] = defaultdict(list)
    target_groups: dict[frozenset, list[Target]] = defaultdict(list)
    deltas: dict[object, dict[str, int]] = {}
    expected: dict[object, object] = {}
    asked: dict[object, set[int]] = defaultdict(set)
    fetches: list[tuple[Job, list[int], str]] = []
    events: list[tuple[Item, list, list, bool]] = []
    for item in items:
        job, decision = item.job, item.decision
        counts, shown_tasks, shown_targets, shown = Counts(), [], [], False
        for change in decision.changes:
            if isinstance(change, TaskChange):
                task = tasks[(job.pk, change.index)]
                transitions.remember(task, change.fields)
                task_groups[frozenset(change.fields)].append(task)
                if SHOWN_TASK_FIELDS & set(change.fields):
                    shown_tasks.append(task)
            elif isinstance(change, TargetChange):
                target = targets[(job.pk, change.index)]
                counts.leave(target)
                transitions.remember(target, change.fields)
                counts.enter(target)
                target_groups[frozenset(change.fields)].append(target)
                shown_targets.append(target)
            elif isinstance(change, (FetchOutputs, FetchPosters)):
                asked[job.pk].update(change.indexes)
                fetches.append((job, list(change.indexes), "posters" if isinstance(change, FetchPosters) else "outputs"))
            elif isinstance(change, ExpectedStart):
                expected[job.pk] = job.expected_start = change.when
                shown = True
        shown = shown or bool(shown_tasks or shown_targets)
        delta = {k: v for k, v in counts.delta.items() if v}
        if delta:
            deltas[job.pk] = delta
            for name, value in delta.items():
                setattr(job, name, getattr(job, name) + value)
        events.append((item, shown_tasks, shown_targets, shown or bool(delta)))
    # A row changed twice in a cycle holds its last values in memory: written once per set of
    # fields, the later change wins, as it did one UPDATE at a time.
    for groups in (task_groups, target_groups):
        for fields, rows in groups.items():
            transitions.write_many(rows, sorted(fields))
    _write_jobs(deltas, expected, [item.job.pk for item, *_rest, shown in events if shown], now)
    if asked:
        Target.objects.filter(_of_jobs(asked)).update(fetch_asked_at=now)
    shown_ids = []
    for item, shown_tasks, shown_targets, shown in events:
        if not shown:
            continue
        job = item.job
        with in_language_of(job):  # the events carry words (statuses) in the owner's language
            for task in shown_tasks:
                pub.task(job, task)
            for target in shown_targets:
                pub.output(job, target)
            pub.job(job, _summary(item))
        shown_ids.append(str(job.id))
    return shown_ids, fetches


def _rows(model, wanted: dict[object, list[int]]) -> dict[tuple, object]:
    """{(job pk, index): row} of these jobs' tasks or targets: one query for the whole cycle."""
    wanted = {pk: indexes for pk, indexes in wanted.items() if indexes}
    if not wanted:
        return {}
    return {(row.job_id, row.index): row for row in model.objects.filter(_of_jobs(wanted))}


def _of_jobs(indexes_by_job: dict[object, object]) -> Q:
    """These indexes of these jobs: each term matches the (job, index) unique index exactly."""
    where = Q()
    for pk, indexes in indexes_by_job.items():
        where |= Q(job_id=pk, index__in=sorted(indexes))
    return where


def _write_jobs(deltas: dict, expected: dict, shown: list, now) -> None:
    """The jobs' counts (moved by their deltas, safe beside other writers), expected starts and
    changed_at (what `jobs.watcher.reconcile.stale` measures from): ONE UPDATE for every job.
    `shown`: the jobs whose page changed, among them every job with a delta or an expected start."""
    if not shown:
        return
    fields = {}
    for name in ("done", "failed", "needs_look"):
        whens = [When(pk=pk, then=Value(d[name])) for pk, d in deltas.items() if d.get(name)]
        if whens:
            fields[name] = F(name) + Case(*whens, default=Value(0), output_field=IntegerField())
    if expected:
        fields["expected_start"] = Case(*[When(pk=pk, then=Value(when)) for pk, when in expected.items()],
                                        default=F("expected_start"), output_field=DateTimeField())
    Job.objects.filter(pk__in=shown).update(changed_at=now, **fields)


def _summary(item: Item) -> dict:
    """The job's task counts, from the states the rules read and the changes just written."""
    states = {task.index: task.state for task in item.row.tasks}
    for change in item.decision.of(TaskChange):
        states[change.index] = change.fields.get("state", states.get(change.index))
    return summary_of(Counter(states.values()).items())
