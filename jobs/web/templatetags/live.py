"""What the live pages' script needs from the server, in the reader's language.

`{% load live %}{% live_status_labels as labels %}`: every job and target status with its label
(the models' own choices, translated for this request), so static/js/live/ never shows a label
in the watcher's language (it sends events without a request, so without the reader's language).

The other tags hand the script the server's own lists and mappings (final and failed statuses,
video extensions, task badge colours, the WebSocket's refusal codes) as data-* attributes or a
json_script block, so the script never keeps a second copy that could drift from the server's.
"""
from __future__ import annotations

from django import template

from jobs.job.retry import RETRYABLE_JOB_STATUSES
from jobs.live.consumers import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from jobs.live.view import TARGET_FILTERS, TASK_GROUP_LABELS, TASK_GROUP_OF_CLASS, TASK_GROUP_ORDER
from jobs.models.job import FINAL_STATUSES, JobStatus, TargetStatus
from jobs.web.templatetags.portal import FAILED_JOB_STATUSES, TASK_STATE_CLASS_OTHER, TASK_STATE_CLASSES
from worker.manifest import VIDEO_EXTENSIONS

register = template.Library()


@register.simple_tag
def live_status_labels() -> dict:
    return {"job": [(str(v), str(label)) for v, label in JobStatus.choices],
            "target": [(str(v), str(label)) for v, label in TargetStatus.choices]}


@register.simple_tag
def live_task_group_labels() -> list:
    """The task groups of the summary and the filters (jobs/live/view.py), in order, with their labels."""
    return [(g, str(TASK_GROUP_LABELS[g])) for g in TASK_GROUP_ORDER]


@register.simple_tag
def live_final_statuses() -> str:
    """The job statuses after which nothing changes any more, space-separated (a data attribute)."""
    return " ".join(str(s) for s in FINAL_STATUSES)


@register.simple_tag
def live_failed_statuses() -> str:
    """The job statuses whose error is shown as bad news, space-separated (a data attribute)."""
    return " ".join(str(s) for s in FAILED_JOB_STATUSES)


@register.simple_tag
def live_retry_statuses() -> str:
    """The job statuses a user may retry from (jobs.job.retry), space-separated: the script offers Retry
    when a job ends in one of them with something not done."""
    return " ".join(str(s) for s in RETRYABLE_JOB_STATUSES)


@register.simple_tag
def live_video_extensions() -> str:
    return " ".join(VIDEO_EXTENSIONS)


@register.simple_tag
def live_task_state_classes() -> dict:
    """The `task_state_class` filter as data, for `|json_script`: `states` maps a Slurm state to its
    badge colour, `other` is the colour of every state not listed, `groups` maps a colour to the
    task filter (jobs/live/view.py) that shows it."""
    return {"states": dict(TASK_STATE_CLASSES), "other": TASK_STATE_CLASS_OTHER, "groups": dict(TASK_GROUP_OF_CLASS)}


@register.simple_tag
def live_target_filter_statuses(show: str) -> str:
    """The target statuses a target filter shows, space-separated ("" for all): the script draws a
    target an event brings only when it belongs to the filter in view."""
    statuses = TARGET_FILTERS.get(show, (None, None))[1]
    return " ".join(str(s) for s in statuses) if statuses else ""


@register.simple_tag
def live_close_codes() -> dict:
    """The codes the live consumers close a WebSocket with when they refuse it (for data-* attributes)."""
    return {"unauthenticated": CLOSE_UNAUTHENTICATED, "not_found": CLOSE_NOT_FOUND}
