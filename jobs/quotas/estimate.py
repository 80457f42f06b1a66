"""The GPU-hours a job is expected to use, from its template or its template snapshot.

See the package docstring (jobs.quotas) for the rule.
"""
from __future__ import annotations

import math

from cluster import time_limit_seconds

from jobs.models import Template, TemplateSnapshot
from jobs.models.snapshot import DEFAULT_SECONDS_PER_IMAGE

#: seconds each task spends loading models before its first image (part of every estimate)
MODEL_LOAD_SECONDS = 30

__all__ = ["DEFAULT_SECONDS_PER_IMAGE", "MODEL_LOAD_SECONDS", "chunk_size_of", "estimate_gpu_hours"]


def chunk_size_of(template_or_snapshot: Template | TemplateSnapshot) -> int:
    return max(1, int(template_or_snapshot.chunk_size or 1))


def estimate_gpu_hours(template_or_snapshot: Template | TemplateSnapshot, n_targets: int) -> float:
    """GPU-hours a job of `n_targets` is expected to use (see the module docstring for the rule).

    Works on a Template or on a job's snapshot of it: the estimate of a job already started follows
    what it runs with, not later edits of its template.
    """
    n = max(0, int(n_targets))
    gpus = int(template_or_snapshot.gpu_count or 0)
    if not n or not gpus:
        return 0.0
    chunk = chunk_size_of(template_or_snapshot)
    per_image = float(template_or_snapshot.seconds_per_image or DEFAULT_SECONDS_PER_IMAGE)
    try:
        cap = time_limit_seconds(template_or_snapshot.time_limit or "") or math.inf
    except ValueError:
        cap = math.inf  # a broken limit fails at sbatch; the estimate just goes uncapped
    full, rest = divmod(n, chunk)
    seconds = full * min(cap, chunk * per_image + MODEL_LOAD_SECONDS)
    if rest:
        seconds += min(cap, rest * per_image + MODEL_LOAD_SECONDS)
    return seconds * gpus / 3600.0
