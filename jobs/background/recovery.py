"""Recovery of submissions whose RQ job is gone (Redis restarted and lost its queue, an RQ worker
killed mid-job whose job RQ then dropped).

`requeue_orphans` is called by the watcher loop (`manage.py watch_cluster`). A job still `queued` or
`submitting` after a grace period, with no Slurm id and no cancel request, whose RQ job
`submit-<uuid>` is no longer queued, started, scheduled or deferred, is enqueued again. This is
idempotent: the RQ job id is fixed (a double enqueue collapses into one RQ job) and `submit_job`
looks the job up by its Slurm name before any sbatch, so a job that did reach Slurm is never
submitted twice.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from redis.exceptions import RedisError
from rq.exceptions import NoSuchJobError
from rq.job import Job as RQJob

from jobs.background import enqueue
from jobs.models import Job, JobStatus

log = logging.getLogger(__name__)

#: a job younger than this is left alone: its RQ job may still be on its way (on_commit enqueue)
GRACE = timedelta(seconds=60)
#: RQ statuses meaning "RQ still holds it and will run it"
ALIVE = {"queued", "started", "scheduled", "deferred"}


def rq_job_id(job) -> str:
    return enqueue.submission_rq_id(job)  # `-a<N>` for a retry's attempt N


def rq_status(connection, job_id: str) -> str | None:
    """The RQ status of `job_id`, or None when Redis no longer has the job."""
    try:
        status = RQJob.fetch(job_id, connection=connection, serializer=settings.RQ_SERIALIZER).get_status(refresh=True)
    except NoSuchJobError:
        return None
    if status is None:
        return None
    return getattr(status, "value", str(status))


def requeue_orphans(now=None, grace: timedelta = GRACE) -> list[str]:
    """Re-enqueue the submissions Redis lost; returns the ids (str) of the jobs re-enqueued."""
    now = now or timezone.now()
    candidates = list(Job.objects.filter(status__in=(JobStatus.QUEUED, JobStatus.SUBMITTING), slurm_job_id="",
                                         cancel_requested=False, created_at__lt=now - grace)
                      .order_by("created_at"))
    if not candidates:
        return []
    requeued: list[str] = []
    try:
        connection = enqueue.queue().connection
        for job in candidates:
            status = rq_status(connection, rq_job_id(job))
            if status in ALIVE:
                continue
            if status is not None:  # failed / stopped / canceled: drop the stale RQ job and its registry entry
                RQJob.fetch(rq_job_id(job), connection=connection, serializer=settings.RQ_SERIALIZER).delete()
            enqueue.enqueue_submission(job)
            requeued.append(str(job.id))
            log.warning("job %s was %s with no live submission in RQ (%s): re-enqueued", job.id, job.status,
                        status or "missing from Redis")
    except RedisError as exc:
        log.warning("cannot check the submission queue (Redis): %s", exc)
    return requeued
