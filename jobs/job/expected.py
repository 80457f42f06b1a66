"""When a job is expected to start and finish, in the words the job page and the API use.

- Start: Slurm's own estimate (the backfill scheduler's StartTime of the job's waiting tasks, kept
  on `Job.expected_start` by the watcher); the portal never guesses a start itself.
- Finish: the start (or now, for a running job) plus the time its remaining photos take at the
  template's measured pace (`jobs.quotas.estimate.measured_seconds_per_photo`, the figure the
  template cards show as "about 4 minutes for 100 photos (measured)"), else the admin's
  seconds-per-image, with the job's tasks running side by side up to the template's "tasks at once".
"""
from __future__ import annotations

import dataclasses
import math
import time
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.translation import gettext as _

from jobs.models import Job, JobStatus, TemplateSnapshot
from jobs.moments import moment_words
from jobs.quotas.estimate import chunk_size_of, estimate_gpu_hours, measured_seconds_per_photo


def work_seconds(snapshot: TemplateSnapshot, n_targets: int, seconds_per_photo: float | None = None) -> float:
    """Wall-clock seconds `n_targets` photos take on the template: the tasks' time (the same rule as
    the GPU-hours estimate, per task), spread over the tasks that run at once."""
    n = max(0, int(n_targets))
    if not n:
        return 0.0
    one_gpu = dataclasses.replace(snapshot, gpu_count=1, **(
        {"seconds_per_image": seconds_per_photo} if seconds_per_photo else {}))
    task_seconds = estimate_gpu_hours(one_gpu, n) * 3600
    tasks = math.ceil(n / chunk_size_of(snapshot))
    side_by_side = min(tasks, snapshot.array_limit or tasks)
    return task_seconds / max(1, side_by_side)


#: how long a template's measured pace is reused (the live pages publish a job on every change)
PACE_SECONDS = 60
_pace: dict[int, tuple[float, float | None]] = {}


def seconds_per_photo(job: Job) -> float | None:
    """The template's measured pace, when it has one (None: the snapshot's own figure is used)."""
    if job.template_id is None:
        return None
    now = time.monotonic()
    kept = _pace.get(job.template_id)
    if kept is None or now - kept[0] > PACE_SECONDS:
        kept = _pace[job.template_id] = (now, measured_seconds_per_photo(job.template)[0])
    return kept[1]


def expected_finish(job: Job, now: datetime | None = None) -> datetime | None:
    """When the job should be done; None when it ended, its size is not known yet, or a waiting job
    has no start estimate from Slurm."""
    now = now or timezone.now()
    if job.is_final or not job.total:
        return None
    if job.status == JobStatus.RUNNING:
        start, left = now, job.total - job.done - job.failed
    elif job.expected_start is not None:
        start, left = max(now, job.expected_start), job.total
    else:
        return None
    return start + timedelta(seconds=work_seconds(job.snapshot, left, seconds_per_photo(job)))


def when_words(job: Job, now: datetime | None = None) -> str:
    """"Expected to start around 14:05; finish around tomorrow 00:40." for the job page (moments as
    jobs.moments says them); "" when unknown."""
    now = now or timezone.now()
    finish = expected_finish(job, now)
    start = job.expected_start if job.status == JobStatus.PENDING else None
    if start and finish:
        return _("Expected to start around %(start)s; finish around %(finish)s.") % {
            "start": moment_words(start, now), "finish": moment_words(finish, now)}
    if start:
        return _("Expected to start around %(start)s.") % {"start": moment_words(start, now)}
    if finish:
        return _("Expected to finish around %(finish)s.") % {"finish": moment_words(finish, now)}
    return ""


def iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None
