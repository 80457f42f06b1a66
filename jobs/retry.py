"""Retry only what failed: a new attempt of the same job over just the chunks that hold failed targets.

Which targets are retried: those that failed because their TASK died (out of memory, node failure,
time limit, "the task ended before this image was processed"), or that never got a result (a lost
job). A target that failed for its own reasons (corrupt file, not an image, no face: the worker's
own per-target record) is never retried. The manifest of the first attempt stays valid: the new
attempt is ONE sbatch with `--array=<the chunks holding those targets>`, and the worker skips the
targets of those chunks whose output already exists.

Who retries:
- the user (Retry button, `POST /api/v1/jobs/<id>/retry`): any `failed`, `partially_failed` or
  `lost` job with a retryable target. A `cancelled` job is not retried: the user stopped it.
- the watcher, once, when an attempt ends (`auto_retry`, before `finish_job` decides the end):
  tasks that ran OUT_OF_MEMORY are resubmitted with twice the memory, capped at the template's
  `max_mem` (empty: twice its memory); tasks that ended NODE_FAIL are resubmitted as they were.
  TIMEOUT is never retried automatically: its reason tells the user to choose a longer template.

Every state change is conditional (`Job.move`), so two clicks, or a click racing the watcher,
make one attempt. The submission itself is `jobs.submit.submit_job` through RQ, which finds an
attempt already submitted by its Slurm name (`Job.slurm_name` names the attempt).
"""
from __future__ import annotations

import logging
import re

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from cluster.sbatch import compress_ranges
from cluster.states import is_terminal

from jobs import lifecycle, tasks
from jobs.models import Job, JobStatus, Target, TargetStatus, Task

log = logging.getLogger(__name__)

#: final states a user may retry from
RETRYABLE_JOB_STATUSES = (JobStatus.FAILED, JobStatus.PARTIALLY_FAILED, JobStatus.LOST)
#: task end states the watcher resubmits by itself, once each
AUTO_RETRY_STATES = ("OUT_OF_MEMORY", "NODE_FAIL")

_MEM = re.compile(r"^\s*(\d+)\s*([KMGT]?)\s*$", re.IGNORECASE)
_UNIT_MB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}


def mem_mb(value: str) -> int | None:
    """Slurm memory text ("4G", "500M", "2048") in MB; None when empty or unreadable."""
    match = _MEM.match(str(value or ""))
    if not match:
        return None
    return max(1, int(int(match.group(1)) * _UNIT_MB[match.group(2).upper()]))


def mem_text(mb: int) -> str:
    return f"{mb // 1024}G" if mb % 1024 == 0 else f"{mb}M"


def current_mem(job: Job) -> str:
    """The memory per task the current attempt asks for ("" = the partition's default)."""
    for rec in reversed(job.attempts or []):
        if rec.get("mem"):
            return rec["mem"]
    return job.template_snapshot.get("mem") or ""


def more_memory(job: Job) -> str | None:
    """Twice the current memory, capped at the template's ceiling; None when that is no more."""
    snap = job.template_snapshot
    now = mem_mb(current_mem(job))
    if now is None:
        return None
    ceiling = mem_mb(snap.get("max_mem") or "") or 2 * (mem_mb(snap.get("mem") or "") or now)
    new = min(2 * now, ceiling)
    return mem_text(new) if new > now else None


def is_retryable(target: Target) -> bool:
    """Failed because its task died, or never got a result; never one that failed for its own reasons."""
    if target.status in (TargetStatus.WAITING, TargetStatus.RUNNING):
        return True
    return target.status == TargetStatus.FAILED and target.failed_with_task


def retryable_targets(job: Job, task_indexes=None) -> list[Target]:
    targets = Target.objects.filter(job=job).order_by("index")
    if task_indexes is not None:
        targets = targets.filter(task_index__in=list(task_indexes))
    return [t for t in targets if is_retryable(t)]


def attempt_record(job: Job, attempt: int, indexes, mem: str, why: str = "", auto: bool = False, by: str = "") -> dict:
    return {"attempt": attempt, "slurm_job_id": "", "indexes": sorted(indexes), "array": compress_ranges(list(indexes)),
            "mem": mem, "why": why, "auto": auto, "by": by, "at": timezone.now().isoformat(), "ended": {}}


def retry_failed(job: Job, actor=None, request=None, *, task_indexes=None, mem: str | None = None, why: str = "",
                 auto: bool = False) -> bool:
    """Resubmit the job's retryable targets as a new attempt. True when an attempt was made.

    `task_indexes` limits the retry to those chunks (the automatic policy); `mem` asks for more
    memory per task; `auto` marks a retry the watcher made (from `pending`/`running`, before the
    job was finalised) rather than the user (from a final state).
    """
    from_statuses = (JobStatus.PENDING, JobStatus.RUNNING) if auto else RETRYABLE_JOB_STATUSES
    with transaction.atomic():
        job.refresh_from_db()
        if job.status not in from_statuses or (job.cancel_requested and auto):
            return False
        targets = retryable_targets(job, task_indexes)
        if not targets:
            return False
        task_rows = list(job.tasks.all())
        # A lost job's tasks never ended: rerun them too (the worker skips what is done), or the
        # new attempt could never end.
        indexes = sorted({t.task_index for t in targets} | {t.index for t in task_rows if not is_terminal(t.state)})
        history = [dict(r) for r in (job.attempts or [])]
        if not history:  # the first retry: record the first attempt too
            history.append(attempt_record(job, 1, [t.index for t in task_rows] or indexes,
                                          job.template_snapshot.get("mem") or ""))
            history[0]["slurm_job_id"], history[0]["at"] = job.slurm_job_id, (
                job.submitted_at or job.created_at).isoformat()
        history[-1]["slurm_job_id"] = history[-1].get("slurm_job_id") or job.slurm_job_id
        history[-1]["ended"] = {str(t.index): t.state for t in task_rows if t.attempt == job.attempt}
        new_attempt = job.attempt + 1
        new_mem = mem or current_mem(job)
        by = "" if auto or actor is None else actor.get_username()
        history.append(attempt_record(job, new_attempt, indexes, new_mem, why=why, auto=auto, by=by))
        done = Target.objects.filter(job=job, status__in=("done", "no_face", "skipped")).count()
        failed = Target.objects.filter(job=job, status=TargetStatus.FAILED).exclude(
            pk__in=[t.pk for t in targets]).count()
        note = why or _("Retrying %(n)s image(s) (attempt %(attempt)s).") % {"n": len(targets), "attempt": new_attempt}
        moved = lifecycle.move(
            job, "auto_retry" if auto else "retry", attempt=new_attempt, attempts=history, slurm_job_id="",
            finished_at=None, error=note, done=done, failed=failed, cancel_requested=False,
            audit_action="job.retry", actor=None if auto else actor, request=request, details={
                "attempt": new_attempt, "array": history[-1]["array"], "targets": len(targets), "mem": new_mem,
                "auto": auto, "why": why})
        if not moved:
            return False
        Target.objects.filter(pk__in=[t.pk for t in targets]).update(
            status=TargetStatus.WAITING, message="", failed_with_task=False, faces_found=0, faces_swapped=0, seconds=None)
        Task.objects.filter(job=job, index__in=indexes).update(
            state="PENDING", attempt=new_attempt, node="", exit_code=None, reason="", elapsed_seconds=None)
        transaction.on_commit(lambda: tasks.enqueue_submission(job))
    log.info("job %s: attempt %s over tasks %s (%s targets, mem %s, %s)", job.id, new_attempt,
             history[-1]["array"], len(targets), new_mem or "default", "automatic" if auto else f"by {by}")
    return True


def auto_retry(job: Job, tasks: list[Task]) -> bool:
    """The automatic policy, when all of an attempt's tasks ended and before `finish_job`.

    Once per job and kind: OUT_OF_MEMORY -> twice the memory up to the template's ceiling;
    NODE_FAIL -> the same again. Returns True when a new attempt was made (do not finalise).
    """
    if job.cancel_requested:
        return False
    current = [t for t in tasks if t.attempt == job.attempt]
    done_before = {k for r in (job.attempts or []) if r.get("auto") for k in r.get("kinds", [])}
    retry: set[int] = set()
    whys, kinds = [], []
    mem = None
    oom = [t.index for t in current if t.state == "OUT_OF_MEMORY"]
    if oom and "oom" not in done_before:
        mem = more_memory(job)
        if mem:
            retry |= set(oom)
            kinds.append("oom")
            whys.append(_("ran out of memory; retried automatically with %(mem)s") % {"mem": mem})
    node = [t.index for t in current if t.state == "NODE_FAIL"]
    if node and "node_fail" not in done_before:
        retry |= set(node)
        kinds.append("node_fail")
        whys.append(_("a compute node failed; retried automatically"))
    if not retry:
        return False
    why = "; ".join(whys)
    why = why[:1].upper() + why[1:] + "."
    made = retry_failed(job, task_indexes=retry, mem=mem, why=why, auto=True)
    if made:
        # Mark the kind on the new attempt's record, so each kind is retried automatically once.
        history = list(Job.objects.filter(pk=job.pk).values_list("attempts", flat=True).get())
        history[-1]["kinds"] = kinds
        Job.objects.filter(pk=job.pk).update(attempts=history)
        job.attempts = history
    return made


def retry_note(job: Job) -> str:
    """One line per retry, for the final message: "Attempt 2 (tasks 0): ran out of memory; ..."."""
    lines = []
    for rec in (job.attempts or [])[1:]:
        who = _("automatically") if rec.get("auto") else (_("by %(user)s") % {"user": rec["by"]} if rec.get("by") else "")
        lines.append(_("Attempt %(n)s (tasks %(array)s) %(who)s: %(why)s") % {
            "n": rec["attempt"], "array": rec.get("array", ""), "who": who, "why": rec.get("why") or _("retried")})
    return "\n".join(lines)


def retry_refusal(job: Job) -> str:
    """Why Retry did nothing, in words (the page and the API say the same)."""
    job.refresh_from_db()
    if job.status == JobStatus.CANCELLED:
        return _("This job was cancelled; start a new job to run it again.")
    if not job.is_final:
        return _("This job is still %(status)s; retry once it has ended.") % {"status": job.get_status_display()}
    if not job.failed and job.status == JobStatus.COMPLETED:
        return _("Every image of this job is done; there is nothing to retry.")
    return _("Nothing to retry: the images that failed did so for their own reasons (for example a corrupt "
             "file or no face found), and would fail again.")
