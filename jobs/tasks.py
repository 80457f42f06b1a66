"""Every RQ enqueue of the portal, with its timeouts named once.

Functions are named by their dotted path (RQ imports them in the worker), so this module imports
no domain module: anything may enqueue through it without an import cycle. Arguments are ids and
plain values only, never model instances: the worker reads the database's current state.

`queue()` is the one seam to RQ: tests replace it to see what would be enqueued.

    from jobs import tasks
    transaction.on_commit(lambda: tasks.enqueue_submission(job))
"""
from __future__ import annotations

import logging

from rq import Retry

log = logging.getLogger(__name__)

QUEUE_NAME = "default"

#: a submission stages files over SFTP and runs sbatch: large uploads take minutes
SUBMIT_TIMEOUT = 900
#: scancel is one SSH command
CANCEL_TIMEOUT = 120
#: one email (SMTP may be slow to answer)
NOTIFY_TIMEOUT = 120
#: fetching a batch of outputs over SFTP and making their thumbnails
FETCH_OUTPUTS_TIMEOUT = 900
#: how long RQ keeps a finished task's record, and a failed one's (for the dashboard)
RESULT_TTL = 3600
FAILURE_TTL = 7 * 86400

#: retry policy of a submission that met a cluster outage (seconds between tries)
SUBMIT_RETRY = Retry(max=8, interval=[10, 30, 60, 120, 300, 600, 900, 1800])
#: a fetch of outputs that met an outage: the watcher enqueues again later anyway
FETCH_RETRY = Retry(max=3, interval=[10, 30, 60])


def queue():
    """The portal's RQ queue."""
    import django_rq

    return django_rq.get_queue(QUEUE_NAME)


def submission_rq_id(job) -> str:
    """The RQ job id of the job's submission: `submit-<uuid>`, and `submit-<uuid>-a<N>` for attempt N > 1.

    Fixed per attempt, so a double enqueue of the same Start (or retry) collapses into one RQ job.
    """
    return f"submit-{job.id}" if job.attempt <= 1 else f"submit-{job.id}-a{job.attempt}"


def enqueue_submission(job) -> None:
    queue().enqueue("jobs.submit.submit_job", str(job.id), job_id=submission_rq_id(job), retry=SUBMIT_RETRY,
                    job_timeout=SUBMIT_TIMEOUT, result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)


def drop_submission(job) -> None:
    """Forget the job's submission waiting for its next try (a cancelled job is never submitted).

    Never raises: a submission that still runs finds the job cancelled and does nothing.
    """
    try:
        q = queue()
        rq_id = submission_rq_id(job)
        for registry in (q.scheduled_job_registry, q.deferred_job_registry):
            if rq_id in registry:
                registry.remove(rq_id, delete_job=True)
        q.remove(rq_id)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("job %s: waiting submission not dropped: %s", job.id, exc)


def enqueue_cancel(job) -> None:
    queue().enqueue("jobs.submit.cancel_on_cluster", str(job.id), job_timeout=CANCEL_TIMEOUT,
                    result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)


def enqueue_output_fetch(job, indexes: list[int]) -> None:
    """Fetch these targets' outputs (and make thumbnails) outside the watcher's poll.

    One RQ job per job and batch; its id names the batch's first and last index so the same batch
    seen again in the next cycle, while still queued, collapses into the queued one.
    """
    if not indexes:
        return
    rq_id = f"fetch-{job.id}-{min(indexes)}-{max(indexes)}-{len(indexes)}"
    queue().enqueue("jobs.watcher.outputs.fetch_outputs", str(job.id), sorted(indexes), job_id=rq_id,
                    retry=FETCH_RETRY, job_timeout=FETCH_OUTPUTS_TIMEOUT, result_ttl=60, failure_ttl=FAILURE_TTL)


def enqueue_after_finish(job) -> None:
    """Queue the job's email and the owner's quota check. Called on commit of the job's end.

    Never raises: with Redis down the email is lost (logged), the job is not.
    """
    try:
        q = queue()
        q.enqueue("jobs.usage.notifications.notify_job_finished", str(job.id), job_timeout=NOTIFY_TIMEOUT,
                  result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)
        q.enqueue("jobs.usage.notifications.notify_quota", job.owner_id, job_timeout=NOTIFY_TIMEOUT,
                  result_ttl=RESULT_TTL, failure_ttl=FAILURE_TTL)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("job %s: notification not queued: %s", job.id, exc)
