"""A job's life: ONE table of the moves between job states, and the one function that makes them.

    queued ─claim─> submitting ─submitted─> pending ─started─> running
      │               │  └─reject─> failed                │          │
      └────cancel─────┴─> cancelled                       └──────────┴─finish─> completed | partially_failed
                                                                       │        | failed | cancelled
                                                                       ├─lose──> lost
                                                                       └─auto_retry─> queued (a new attempt)
    failed | partially_failed | lost | cancelled ─retry─> queued (a new attempt, asked by the user)

A job that ends `cancelled` marks the targets its cancel stopped `cancelled` too (grey on the pages,
never a red "failed"): those still waiting, and those whose task Slurm cancelled. A target that
failed for a reason of its own, or whose task died otherwise (out of memory), keeps its failure.

Every move is a conditional `UPDATE ... WHERE status IN (sources)` with a row-count check
(`jobs.transitions`, shared with the bookings' and the webhook deliveries' moves), so two
processes (the RQ worker, the watcher, a user's click) can never both make the same move; only
the one that won publishes the job's new state to the live pages (after the transaction commits,
so a page that resyncs then sees the same state) and writes the audit entry (in the same
transaction as the move: it exists exactly when the move committed).

Cancel is a request before it is a move (`request_cancel`): a queued job is cancelled at once; a
job being submitted or on the cluster is flagged, Slurm is asked to stop it, and the watcher (or
the submission, which reads the flag) makes the move when Slurm confirms.
"""
from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs import audit, transitions
from jobs.background import enqueue
from jobs.live.protocol import Publisher, publish_job
from jobs.models import Job, JobStatus, Target, TargetStatus
from jobs.models.job import FINAL_STATUSES
from jobs.transitions import Transition

log = logging.getLogger(__name__)

S = JobStatus
#: the end states of an attempt that ran on the cluster
ENDED = (S.COMPLETED, S.PARTIALLY_FAILED, S.FAILED, S.CANCELLED)


#: every move a job may make: name -> (from these states, to one of these)
TRANSITIONS: dict[str, Transition] = {
    # the submission claims the job; SUBMITTING again when RQ retries a submission cut short
    "claim": Transition((S.QUEUED, S.SUBMITTING), (S.SUBMITTING,)),
    "submitted": Transition((S.SUBMITTING,), (S.PENDING,)),
    "reject": Transition((S.SUBMITTING,), (S.FAILED,)),
    # before Slurm has it (no Slurm id yet): cancelled by the portal itself
    "cancel": Transition((S.QUEUED, S.SUBMITTING), (S.CANCELLED,)),
    "started": Transition((S.PENDING,), (S.RUNNING,)),
    "finish": Transition((S.PENDING, S.RUNNING), ENDED),
    "lose": Transition((S.PENDING, S.RUNNING), (S.LOST,)),
    "auto_retry": Transition((S.PENDING, S.RUNNING), (S.QUEUED,)),
    "retry": Transition((S.FAILED, S.PARTIALLY_FAILED, S.LOST, S.CANCELLED), (S.QUEUED,)),
}


def move(job: Job, name: str, to: str | None = None, *, only_from: tuple[str, ...] | None = None,
         pub: Publisher | None = None, audit_action: str = "", actor=None, request=None,
         details: dict | None = None, **fields) -> bool:
    """Make the move `name` (to `to`, when the move has several ends). True when this call made it.

    `only_from` narrows the table's sources for this call. `fields` are written in the same UPDATE.
    The new state is published to the live pages after commit, or added to `pub` (the watcher
    sends its events once per cycle). `audit_action` ("job.retry" ...) records who made the move.
    """
    sources, to = transitions.check(TRANSITIONS, name, to, only_from)
    if not transitions.update_if(job, "status", sources, to, **fields):
        return False
    if to == S.CANCELLED:
        mark_targets_cancelled(job)
    if audit_action:
        audit.record(actor, audit_action, target=job, request=request, details=details)
    if to in FINAL_STATUSES:
        # Every end calls back, also a refused submission or a cancel before Slurm saw the job;
        # the watcher's finish records the same key again, which is a no-op.
        from jobs import webhooks  # late: jobs.webhooks imports the models this module serves

        webhooks.job_finished(job)
    if pub is not None:
        pub.job(job)
    else:
        transaction.on_commit(lambda: publish_job(job))
    log.info("job %s: %s -> %s", job.id, name, to)
    return True


def mark_targets_cancelled(job: Job) -> int:
    """The targets the cancel stopped become `cancelled` (see the module's docstring); the job's
    counts follow. Returns how many changed."""
    cancelled_tasks = job.tasks.filter(state="CANCELLED").values_list("index", flat=True)
    n = Target.objects.filter(job=job).filter(
        Q(status__in=(TargetStatus.WAITING, TargetStatus.RUNNING))
        | Q(status=TargetStatus.FAILED, failed_with_task=True, task_index__in=list(cancelled_tasks))
    ).update(status=TargetStatus.CANCELLED, message="", failed_with_task=False)
    if n:
        job.recount()
    return n


def request_cancel(job: Job, actor=None, request=None) -> bool:
    """Cancel in any state. True when this call changed something (then it is in the audit log
    as "job.cancel" by `actor`; a cancel of a finished job changes nothing and is not recorded).

    queued, or submitting without a Slurm job yet (waiting for the cluster to answer): cancelled
    at once, and a submission retry waiting its turn is dropped. A submission running right now
    sees the move (its own `submitted` move fails) and scancels what it made.
    pending/running: flagged, then `scancel` through the RQ queue; the watcher records
    the final `cancelled` state from Slurm. Outputs already made are kept.
    """
    if job.is_final:
        return False
    status_before = job.status
    with transaction.atomic():
        # changed_at: a Cancel Slurm does not confirm is reconciled from here (jobs.watcher.reconcile)
        job.cancel_requested, job.changed_at = True, timezone.now()
        Job.objects.filter(pk=job.pk).update(cancel_requested=True, changed_at=job.changed_at)
        if not job.slurm_job_id and move(job, "cancel", finished_at=timezone.now(),
                                         error=_("Cancelled before it was submitted.")):
            audit.record(actor, "job.cancel", target=job, details={"status_before": status_before}, request=request)
            transaction.on_commit(lambda: enqueue.drop_submission(job))
            return True
        audit.record(actor, "job.cancel", target=job, request=request,
                     details={"status_before": status_before, "slurm_job_id": job.slurm_job_id})
        transaction.on_commit(lambda: enqueue.enqueue_cancel(job))
    log.info("job %s: cancel requested", job.id)
    return True
