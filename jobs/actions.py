"""What a user can do to a job after Start. Shared by the pages and the API."""
from __future__ import annotations

import logging

from django.utils import timezone
from django.utils.translation import gettext as _

from .models import Job, JobStatus

log = logging.getLogger(__name__)


def cancel_job(job: Job) -> bool:
    """Cancel in any state. True when this call changed something.

    queued: cancelled at once (the submission sees the flag and does nothing).
    submitting/pending/running: flagged, then `scancel` through the RQ queue; the watcher records
    the final `cancelled` state from Slurm. Outputs already made are kept.
    """
    if job.is_final:
        return False
    Job.objects.filter(pk=job.pk).update(cancel_requested=True)
    job.cancel_requested = True
    if job.move(JobStatus.QUEUED, JobStatus.CANCELLED, finished_at=timezone.now(), error=_("Cancelled before it was submitted.")):
        from .live import publish_job

        publish_job(job)
        return True
    import django_rq

    from .submit import cancel_on_cluster

    django_rq.get_queue("default").enqueue(cancel_on_cluster, str(job.id), job_timeout=120)
    log.info("job %s: cancel requested", job.id)
    return True
