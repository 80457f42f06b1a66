"""The GPU-hours a job is expected to use, from its template or its template snapshot, and how long
a template really takes per photo (its measured history).

See the package docstring (jobs.quotas) for the rule.
"""
from __future__ import annotations

import math
import statistics

from cluster import time_limit_seconds
from jobs.models import Job, Target, TargetStatus, Template, TemplateSnapshot
from jobs.models.job import FINAL_STATUSES
from jobs.models.snapshot import DEFAULT_SECONDS_PER_IMAGE
from worker.manifest import is_video_name

#: seconds each task spends loading models before its first image (part of every estimate)
MODEL_LOAD_SECONDS = 30
#: a template's history: the finished photos of its last jobs, at most this many of each
HISTORY_JOBS, HISTORY_PHOTOS = 20, 500
#: fewer measured photos than this: the admin's seconds-per-image figure is used instead
HISTORY_MIN_PHOTOS = 20

__all__ = ["DEFAULT_SECONDS_PER_IMAGE", "MODEL_LOAD_SECONDS", "chunk_size_of", "estimate_gpu_hours",
           "measured_seconds_per_photo"]


def chunk_size_of(template_or_snapshot: Template | TemplateSnapshot) -> int:
    return max(1, int(template_or_snapshot.chunk_size or 1))


def estimate_gpu_hours(template_or_snapshot: Template | TemplateSnapshot, n_targets: int, frames: int = 0) -> float:
    """GPU-hours a job of `n_targets` is expected to use (see the module docstring for the rule).

    `frames`: the frames of the videos among the targets (each video's duration x frame rate,
    summed; 0 for photos only). A frame costs what a photo costs (one detection and swap), and a
    video besides costs one photo's time (reading, encoding): 60 s of 30 fps video weighs as
    1,801 photos, not 1. The work is spread evenly over the tasks (which task gets a video is
    not known before the folder is listed).

    Works on a Template or on a job's snapshot of it: the estimate of a job already started follows
    what it runs with, not later edits of its template.
    """
    n = max(0, int(n_targets))
    frames = max(0, int(frames or 0))
    gpus = int(template_or_snapshot.gpu_count or 0)
    if not n or not gpus:
        return 0.0
    chunk = chunk_size_of(template_or_snapshot)
    per_image = float(template_or_snapshot.seconds_per_image or DEFAULT_SECONDS_PER_IMAGE)
    per_target = per_image * (n + frames) / n
    try:
        cap = time_limit_seconds(template_or_snapshot.time_limit or "") or math.inf
    except ValueError:
        cap = math.inf  # a broken limit fails at sbatch; the estimate just goes uncapped
    full, rest = divmod(n, chunk)
    seconds = full * min(cap, chunk * per_target + MODEL_LOAD_SECONDS)
    if rest:
        seconds += min(cap, rest * per_target + MODEL_LOAD_SECONDS)
    return seconds * gpus / 3600.0


def measured_seconds_per_photo(template: Template) -> tuple[float | None, int]:
    """(median seconds one photo took, photos measured) on `template`'s last HISTORY_JOBS ended
    jobs; (None, n) when fewer than HISTORY_MIN_PHOTOS were measured. Two indexed queries, each
    bounded, whatever the history's size. Videos are left out (their time follows their length)."""
    jobs = list(Job.objects.filter(template=template, status__in=FINAL_STATUSES)
                .order_by("-created_at").values_list("pk", flat=True)[:HISTORY_JOBS])
    if not jobs:
        return None, 0
    seconds = [s for name, s in Target.objects.filter(job__in=jobs, status=TargetStatus.DONE, frames_total=None,
                                                      seconds__gt=0)
               .values_list("name", "seconds")[:HISTORY_PHOTOS]
               if not is_video_name(name)]
    if len(seconds) < HISTORY_MIN_PHOTOS:
        return None, len(seconds)
    return statistics.median(seconds), len(seconds)
