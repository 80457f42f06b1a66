"""The New job page's estimate: `{% load quota %}{% template_estimate t as est %}`.

`est.per_100` is the GPU-hours of 100 images on template `t`, in words ("0.9"); the other keys are
the numbers static/js/estimate.js needs to redo `jobs.quotas.estimate_gpu_hours` for the number
of files chosen, as plain (never localised) strings for data attributes.
"""
from __future__ import annotations

import math

from django import template

from cluster import time_limit_seconds

from jobs.quotas import DEFAULT_SECONDS_PER_IMAGE, MODEL_LOAD_SECONDS, estimate_gpu_hours, format_hours

register = template.Library()


@register.simple_tag
def template_estimate(t) -> dict:
    try:
        cap = time_limit_seconds(t.time_limit)
    except ValueError:
        cap = 0  # 0: no cap (the JS reads it so)
    per_image = t.seconds_per_image if t.seconds_per_image is not None else DEFAULT_SECONDS_PER_IMAGE
    return {
        "per_100": format_hours(estimate_gpu_hours(t, 100)),
        "chunk": str(max(1, t.chunk_size or 1)),
        "per_image": repr(float(per_image)),
        "cap": str(cap if cap and cap != math.inf else 0),
        "gpus": str(t.gpu_count or 0),
        "load": str(MODEL_LOAD_SECONDS),
    }


@register.filter
def hours(value) -> str:
    """GPU-hours (or MB) in words: 10, 9.5, 0.25."""
    return "" if value is None or value == "" else format_hours(value)
