"""The GPU-hours a job is expected to use, from its template or its template snapshot.

See the package docstring (jobs.quotas) for the rule.
"""
from __future__ import annotations

import math

from cluster import time_limit_seconds

from jobs.models import Template

#: seconds each task spends loading models before its first image (part of every estimate)
MODEL_LOAD_SECONDS = 30
#: a template snapshot taken before seconds_per_image existed
DEFAULT_SECONDS_PER_IMAGE = 3.0


# --- estimate --------------------------------------------------------------------------------

def _get(template_or_snapshot, key: str, default=None):
    if isinstance(template_or_snapshot, dict):
        value = template_or_snapshot.get(key, default)
    else:
        value = getattr(template_or_snapshot, key, default)
    return default if value is None else value


def _chunk_size(template_or_snapshot) -> int:
    return max(1, int(_get(template_or_snapshot, "chunk_size", 1)))


def estimate_gpu_hours(template_or_snapshot: Template | dict, n_targets: int) -> float:
    """GPU-hours a job of `n_targets` is expected to use (see the module docstring for the rule).

    Works on a Template or on a job's `template_snapshot`: the estimate of a job already started
    follows what it runs with, not later edits of its template.
    """
    n = max(0, int(n_targets))
    gpus = int(_get(template_or_snapshot, "gpu_count", 0))
    if not n or not gpus:
        return 0.0
    chunk = _chunk_size(template_or_snapshot)
    per_image = float(_get(template_or_snapshot, "seconds_per_image", DEFAULT_SECONDS_PER_IMAGE))
    try:
        cap = time_limit_seconds(_get(template_or_snapshot, "time_limit", "")) or math.inf
    except ValueError:
        cap = math.inf  # a broken limit fails at sbatch; the estimate just goes uncapped
    full, rest = divmod(n, chunk)
    seconds = full * min(cap, chunk * per_image + MODEL_LOAD_SECONDS)
    if rest:
        seconds += min(cap, rest * per_image + MODEL_LOAD_SECONDS)
    return seconds * gpus / 3600.0
