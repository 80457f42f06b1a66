"""What a user can do to a job after Start. Shared by the pages and the API."""
from __future__ import annotations

import logging

from django.utils import timezone
from django.utils.translation import gettext as _

from jobs import audit
from jobs.models import Job, JobStatus

log = logging.getLogger(__name__)


def cancel_job(job: Job, actor=None, request=None) -> bool:
    """Cancel in any state. True when this call changed something (then it is in the audit log
    as "job.cancel" by `actor`; a cancel of a finished job changes nothing and is not recorded).

    queued: cancelled at once (the submission sees the flag and does nothing).
    submitting/pending/running: flagged, then `scancel` through the RQ queue; the watcher records
    the final `cancelled` state from Slurm. Outputs already made are kept.
    """
    if job.is_final:
        return False
    Job.objects.filter(pk=job.pk).update(cancel_requested=True)
    job.cancel_requested = True
    if job.move(JobStatus.QUEUED, JobStatus.CANCELLED, finished_at=timezone.now(), error=_("Cancelled before it was submitted.")):
        from jobs.live.protocol import publish_job

        audit.record(actor, "job.cancel", target=job, details={"status_before": JobStatus.QUEUED.value}, request=request)
        publish_job(job)
        return True
    status_before = job.status
    import django_rq

    from jobs.submit import cancel_on_cluster

    django_rq.get_queue("default").enqueue(cancel_on_cluster, str(job.id), job_timeout=120)
    audit.record(actor, "job.cancel", target=job,
                 details={"status_before": status_before, "slurm_job_id": job.slurm_job_id}, request=request)
    log.info("job %s: cancel requested", job.id)
    return True
