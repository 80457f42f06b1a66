"""The New job page's template cards and estimate: `{% load quota %}{% template_estimate t as est %}`.

`est.per_100` is the GPU-hours of 100 images on template `t`, in words ("0.9"); `est.speed.text` says
how long 100 photos take ("about 3 minutes for 100 photos (measured)") from the template's measured
history, or "Speed not measured yet" while there is too little of it; `est.limit` is the
time limit in plain words ("20 minutes"); `est.gpu` the GPUs ("1 GPU", "2 GPUs (NVIDIA H200)").
The other keys are the numbers static/js/estimate.js needs to redo
`jobs.quotas.estimate_gpu_hours` for the files chosen, as plain (never localised) strings.
"""
from __future__ import annotations

import math
import re

from django import template
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from cluster import time_limit_seconds
from jobs.quotas import DEFAULT_SECONDS_PER_IMAGE, MODEL_LOAD_SECONDS, estimate_gpu_hours, format_hours
from jobs.quotas.estimate import measured_seconds_per_photo
from jobs.quotas.messages import plain_duration

register = template.Library()

#: a GPU type that reads as a product name (h200, a100, nvidia_l40s, tesla-v100): shown as
#: "NVIDIA H200"; any other code (gpu, big, type1) is the cluster's own word and is not shown
_GPU_PRODUCT = re.compile(r"(?:nvidia[-_ ]?)?(?:tesla[-_ ]?)?([ahlvtpk]\d{2,3}[a-z]{0,3})", re.IGNORECASE)


@register.simple_tag
def template_estimate(t) -> dict:
    try:
        cap = time_limit_seconds(t.time_limit)
    except ValueError:
        cap = 0  # 0: no cap (the JS reads it so)
    per_image = t.seconds_per_image if t.seconds_per_image is not None else DEFAULT_SECONDS_PER_IMAGE
    return {
        "per_100": format_hours(estimate_gpu_hours(t, 100)),
        "speed": speed_words(t),
        "limit": plain_duration(cap) if cap and cap != math.inf else "",
        "gpu": gpu_words(t.gpu_count or 0, t.gpu_type),
        "chunk": str(max(1, t.chunk_size or 1)),
        "per_image": repr(float(per_image)),
        "cap": str(cap if cap and cap != math.inf else 0),
        "gpus": str(t.gpu_count or 0),
        "load": str(MODEL_LOAD_SECONDS),
    }


def speed_words(t) -> dict:
    """{"text": "about 3 minutes for 100 photos (measured)", "title": where the figure comes from},
    measured on the template's last jobs. Before that the card says so and gives no time: the
    admin's seconds-per-image figure (a default, mostly) made every card read "about 6 minutes"."""
    per_photo, measured = measured_seconds_per_photo(t)
    if per_photo is None:
        return {"text": _("Speed not measured yet"),
                "title": _("The time 100 photos take is shown once this template has finished a few jobs.")}
    return {"text": _("about %(time)s for 100 photos (measured)") % {
                "time": plain_duration(100 * per_photo + MODEL_LOAD_SECONDS)},
            "title": ngettext("Measured on %(n)s photo of this template's recent jobs.",
                              "Measured on %(n)s photos of this template's recent jobs.", measured) % {"n": measured}}


def gpu_words(count: int, gpu_type: str = "") -> str:
    """"1 GPU", "2 GPUs (NVIDIA H200)"; "" for a CPU-only template."""
    if not count:
        return ""
    text = ngettext("%(n)s GPU", "%(n)s GPUs", count) % {"n": count}
    product = _GPU_PRODUCT.fullmatch((gpu_type or "").strip())
    if not product:
        return text
    return _("%(gpus)s (%(product)s)") % {"gpus": text, "product": f"NVIDIA {product.group(1).upper()}"}


@register.filter
def hours(value) -> str:
    """GPU-hours (or MB) in words: 10, 9.5, 0.25."""
    return "" if value is None or value == "" else format_hours(value)
