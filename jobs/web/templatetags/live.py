"""What the live pages' script needs from the server, in the reader's language.

`{% load live %}{% live_status_labels as labels %}`: every job and target status with its label
(the models' own choices, translated for this request), so static/js/live.js never shows a label
in the watcher's language (it sends events without a request, so without the reader's language).
"""
from __future__ import annotations

from django import template

from worker.manifest import VIDEO_EXTENSIONS

from jobs.models.job import FINAL_STATUSES, JobStatus, TargetStatus

register = template.Library()


@register.simple_tag
def live_status_labels() -> dict:
    return {"job": [(str(v), str(label)) for v, label in JobStatus.choices],
            "target": [(str(v), str(label)) for v, label in TargetStatus.choices]}


@register.simple_tag
def live_final_statuses() -> str:
    """The job statuses after which nothing changes any more, space-separated (a data attribute)."""
    return " ".join(str(s) for s in FINAL_STATUSES)


@register.simple_tag
def live_video_extensions() -> str:
    return " ".join(VIDEO_EXTENSIONS)
