"""Applying the watcher's decisions (jobs.watcher.decide) to the database, and ending an attempt.

Each change is a conditional or keyed UPDATE; job state moves go through `jobs.job.lifecycle`. Live
events are collected on the cycle's `Publisher` and sent by the caller once everything committed.
"""
from __future__ import annotations

import logging
import uuid

from django.db import transaction
from django.db.models import CharField, F, Q
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.translation import gettext as _

from cluster import time_limit_seconds
from jobs import content_safety, transitions
from jobs.background import enqueue
from jobs.job import lifecycle
from jobs.job.attempts import retry_note
from jobs.job.retry import auto_retry
from jobs.live.protocol import Publisher
from jobs.models import Job, JobStatus, Target, TargetStatus, Task
from jobs.models.job import OK_TARGET_STATUSES, counted
from jobs.usage.accounting import charge_job
from jobs.watcher.decide import (
    ClearError,
    Decision,
    EndAttempt,
    ExpectedStart,
    FetchOutputs,
    FetchPosters,
    HeldBack,
    JobMove,
    JobRow,
    TargetChange,
    TargetRow,
    TaskChange,
    TaskRow,
)

log = logging.getLogger(__name__)

#: task fields a page shows: a change of only the others (log_wait_since) is not published
SHOWN_TASK_FIELDS = {"state", "node", "exit_code", "reason", "elapsed_seconds"}


def task_rows(job_pks: list) -> dict[object, tuple[TaskRow, ...]]:
    """Every task of these jobs as the plain values `decide` reads, by job pk: one query, no model
    objects (model objects are loaded in `apply`, for changes only)."""
    out: dict[object, list[TaskRow]] = {}
    by_key = {uuid_key(pk): pk for pk in job_pks}
    values = (Task.objects.filter(job__in=job_pks).order_by("job_id", "index")
              .annotate(job_key=Cast("job_id", CharField()))
              .values_list("job_key", "index", "state", "node", "exit_code", "reason", "elapsed_seconds", "gpus",
                           "attempt", "log_wait_since"))
    for key, index, state, node, exit_code, reason, elapsed, gpus, attempt, log_wait_since in values:
        out.setdefault(by_key[uuid_key(key)], []).append(TaskRow(
            index=index, state=state, node=node, exit_code=exit_code, reason=reason, elapsed_seconds=elapsed,
            gpus=gpus, attempt=attempt, log_wait_since=log_wait_since))
    return {pk: tuple(rows) for pk, rows in out.items()}


def target_rows(job_pks: list, read: dict[object, set[int]]) -> dict[object, tuple[TargetRow, ...]]:
    """The targets `decide` must see this cycle, as plain values by job pk (three queries): those of
    the tasks whose progress records were read (`read`: job pk -> task indexes), those whose output
    is still to be fetched, and those that failed with their task (a task paused for urgent work
    makes them wait again). Never every target of a job: the rest did not change, and a cycle that
    loaded them grew with every active target (3.2 s at 100,000)."""
    if not job_pks:
        return {}
    out: dict[object, list[TargetRow]] = {}
    # The job's id as the database's text, not as a UUID object per target (that conversion alone
    # cost more than the rest of the query): SQLite stores 32 hex digits, PostgreSQL prints dashes.
    by_key = {uuid_key(pk): pk for pk in job_pks}
    # One query per kind, each matching its own index exactly (the two partial ones' conditions, and
    # (job, task_index)): OR-ed into one, the database scanned every target of the jobs instead.
    wanted = [Q(job__in=job_pks, status__in=OK_TARGET_STATUSES, output_file=""),
              Q(job__in=job_pks, status=TargetStatus.FAILED, failed_with_task=True)]
    if read:
        tasks_read = Q()
        for pk, indexes in read.items():
            tasks_read |= Q(job=pk, task_index__in=sorted(indexes))
        wanted.append(tasks_read)
    seen = set()
    for where in wanted:
        values = (Target.objects.filter(where).order_by()
                  .annotate(job_key=Cast("job_id", CharField()))
                  .values_list("job_key", "index", "task_index", "status", "message", "faces_found", "faces_swapped",
                               "seconds", "frames_done", "frames_total", "failed_with_task", "output_file",
                               "fetch_asked_at", "thumbnail_file", "self_check", "self_check_faces"))
        for (key, index, task_index, status, message, found, swapped, seconds, frames_done, frames_total, with_task,
             output, asked, thumbnail, self_check, self_check_faces) in values:
            if (key, index) in seen:  # a target of a record read whose output is also still due
                continue
            seen.add((key, index))
            out.setdefault(by_key[uuid_key(key)], []).append(TargetRow(
                index=index, task_index=task_index, status=status, message=message, faces_found=found,
                faces_swapped=swapped, seconds=seconds, frames_done=frames_done, frames_total=frames_total,
                failed_with_task=with_task, has_output=bool(output), fetch_asked_at=asked,
                has_thumbnail=bool(thumbnail), self_check=self_check, self_check_faces=self_check_faces))
    return {pk: tuple(sorted(rows, key=lambda r: r.index)) for pk, rows in out.items()}


def uuid_key(value) -> str:
    """A job id as 32 lowercase hex digits, from a UUID or from the database's text of one."""
    return value.hex if isinstance(value, uuid.UUID) else str(value).replace("-", "").lower()


def job_row(job: Job, tasks: tuple[TaskRow, ...], targets: tuple[TargetRow, ...]) -> JobRow:
    """The job with its tasks' and targets' rows (`task_rows`, `target_rows`), as `decide` reads it."""
    return JobRow(
        id=str(job.id), status=job.status, slurm_job_id=job.slurm_job_id, submitted_at=job.submitted_at,
        error=job.error, expected_start=job.expected_start, tasks=tasks, targets=targets, attempt=job.attempt,
        changed_at=job.changed_at, cancel_requested=job.cancel_requested,
        time_limit_seconds=_time_limit_seconds(job), target_folder=job.target_folder,
    )


def _time_limit_seconds(job: Job) -> int:
    """How long one of the job's tasks may run (its template's time limit at Start); 0 when unknown."""
    try:
        return time_limit_seconds(job.snapshot.time_limit)
    except ValueError:
        return 0


def apply(job: Job, decision: Decision, pub: Publisher) -> bool:
    """Write one job's changes, in one transaction; True when anything a page shows changed.

    One transaction a job, not one a row: each commit waits for PostgreSQL's log to reach the
    disk, and at 45 photos a second there were 170 of them a second, one per row (a target's
    state, its task, the job's counts: bench/load_run.py, docs/scale.md). It also means a
    cycle that fails part-way leaves the job as it was, to be read again next cycle. Outputs are
    asked of the RQ workers once the block is done, so they never read a change not there yet."""
    if not decision.changes:
        return False
    fetches: list[tuple[list[int], str]] = []
    with transaction.atomic():
        shown = _apply(job, decision, pub, fetches)
    for indexes, what in fetches:
        enqueue.enqueue_output_fetch(job, indexes, what)
    return shown


def _apply(job: Job, decision: Decision, pub: Publisher, fetches: list[tuple[list[int], str]]) -> bool:
    shown = False
    task_changes = [c.index for c in decision.of(TaskChange)]
    tasks_by_index = {t.index: t for t in job.tasks.filter(index__in=task_changes)} if task_changes else {}
    changed = [c.index for c in decision.of(TargetChange)]
    targets_by_index = {t.index: t for t in job.targets.filter(index__in=changed)} if changed else {}
    counts = Counts()
    for change in decision.changes:
        if isinstance(change, TaskChange):
            task = tasks_by_index[change.index]
            transitions.write(task, **change.fields)
            if SHOWN_TASK_FIELDS & set(change.fields):
                pub.task(job, task)
                shown = True
        elif isinstance(change, TargetChange):
            target = targets_by_index[change.index]
            counts.leave(target)
            transitions.write(target, **change.fields)
            counts.enter(target)
            pub.output(job, target)
            shown = True
        elif isinstance(change, HeldBack):
            content_safety.audit_held_back(job, change.index, change.labels)
        elif isinstance(change, (FetchOutputs, FetchPosters)):
            Target.objects.filter(job=job, index__in=change.indexes).update(fetch_asked_at=timezone.now())
            what = "posters" if isinstance(change, FetchPosters) else "outputs"
            fetches.append((list(change.indexes), what))
        elif isinstance(change, JobMove):
            fields = dict(change.fields)
            if change.name == "lose":
                fields["error"] = _("Slurm no longer knows this job (neither the queue nor the accounting has it). "
                                    "It may have been removed by an administrator; outputs already made are kept.")
            shown |= lifecycle.move(job, change.name, pub=pub, **fields)
        elif isinstance(change, ClearError):
            Job.objects.filter(pk=job.pk).update(error="")
            job.error = ""
            shown = True
        elif isinstance(change, ExpectedStart):
            Job.objects.filter(pk=job.pk).update(expected_start=change.when)
            job.expected_start = change.when
            shown = True
        elif isinstance(change, EndAttempt):
            shown |= counts.add_to(job)  # first: the attempt's end counts its targets again
            shown |= end_attempt(job, list(job.tasks.all()), pub)
    if counts.add_to(job) or shown:
        pub.job(job)
    if shown:  # what `jobs.watcher.reconcile.stale` measures from
        Job.objects.filter(pk=job.pk).update(changed_at=timezone.now())
    return shown


class Counts:
    """What the targets changed this cycle add to the job's done / failed / needs-a-look counts:
    each change moves one target out of one count and into another, so the job's counts follow
    without counting every target again (`Job.recount`, which the end of an attempt still runs)."""

    def __init__(self) -> None:
        self.delta = {"done": 0, "failed": 0, "needs_look": 0}

    def leave(self, target: Target) -> None:
        for name, value in counted(target).items():
            self.delta[name] -= value

    def enter(self, target: Target) -> None:
        for name, value in counted(target).items():
            self.delta[name] += value

    def add_to(self, job: Job) -> bool:
        """Add the changes to the job's stored counts (one UPDATE, safe beside other writers); True
        when any count changed."""
        delta = {k: v for k, v in self.delta.items() if v}
        if not delta:
            return False
        Job.objects.filter(pk=job.pk).update(**{k: F(k) + v for k, v in delta.items()})
        for name, value in delta.items():
            setattr(job, name, getattr(job, name) + value)
        self.delta = dict.fromkeys(self.delta, 0)
        return True


def end_attempt(job: Job, task_rows: list[Task], pub: Publisher | None = None) -> bool:
    """Every task of the attempt ended: resubmit automatically (out of memory, node failure), or
    decide the job's end. True when the job moved."""
    # OUT_OF_MEMORY / NODE_FAIL: resubmitted once as a new attempt instead of finalised.
    if auto_retry(job, task_rows):
        return True
    return finish_job(job, task_rows, pub)


def finish_job(job: Job, task_rows: list[Task], pub: Publisher | None = None) -> bool:
    """All tasks ended: decide completed / partially_failed / failed / cancelled."""
    with transaction.atomic():
        by_task = {t.index: t for t in task_rows}
        # Targets a task never reported (it died first) failed for the task's reason.
        for t in job.targets.filter(status__in=(TargetStatus.WAITING, TargetStatus.RUNNING)):
            task = by_task.get(t.task_index)
            why = (task.reason if task and task.reason else _("the task ended before this image was processed"))
            Target.objects.filter(pk=t.pk).update(status=TargetStatus.FAILED, message=why, failed_with_task=True)
            if pub is not None:
                t.status, t.message, t.failed_with_task = TargetStatus.FAILED, why, True
                pub.output(job, t)
        job.recount()
        done, failed, total = job.done, job.failed, job.targets.count()
        cancelled = job.cancel_requested or any(t.state == "CANCELLED" for t in task_rows)
        if cancelled:
            status, error = JobStatus.CANCELLED, _("Cancelled. %(done)s of %(total)s photos and videos were finished and are kept.") % {"done": done, "total": total}
        elif failed == 0:
            status, error = JobStatus.COMPLETED, ""
        elif done:
            status, error = JobStatus.PARTIALLY_FAILED, _("%(failed)s of %(total)s photos and videos failed; see each one's message.") % {"failed": failed, "total": total}
        else:
            reasons = sorted({t.reason for t in task_rows if t.reason})
            status, error = JobStatus.FAILED, (_("Every photo and video failed: %(why)s") % {"why": _("; ").join(reasons)} if reasons else _("Every photo and video failed; see each one's message."))
        note = retry_note(job)  # a retried job says what each attempt was for
        error = "\n".join(filter(None, [error, note]))
        moved = lifecycle.move(job, "finish", to=status, pub=pub, finished_at=timezone.now(), error=error)
        if moved:
            # Charged in the same transaction as the final state: a crash cannot leave an ended job
            # uncharged. `move` is conditional, so a job seen ending twice is charged once.
            _charge(job)
            transaction.on_commit(lambda: enqueue.enqueue_after_finish(job))  # email: RQ, after commit
        return moved


def _charge(job: Job) -> None:
    """Charge the job's usage; an accounting error is logged and never blocks the job's end."""
    try:
        with transaction.atomic():  # a savepoint: a failed insert leaves the job's transaction usable
            charge_job(job)
    except Exception:
        log.exception("job %s: usage not charged", job.id)
