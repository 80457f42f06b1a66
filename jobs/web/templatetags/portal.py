"""Small display helpers for the portal's templates."""
from __future__ import annotations

from django import template

from jobs.live.view import TASK_GROUP_LABELS, TASK_STATE_CLASS_OTHER, TASK_STATE_CLASSES, task_group
from jobs.models.job import JobStatus
from jobs.moments import moment_with_zone
from worker.manifest import is_video_name

register = template.Library()


#: the job statuses whose `error` is bad news (a red notice); any other status's is information
FAILED_JOB_STATUSES = (JobStatus.PARTIALLY_FAILED, JobStatus.FAILED, JobStatus.LOST)


@register.filter
def duration(seconds) -> str:
    """Seconds as H:MM:SS (a task's run time); empty when unknown."""
    if seconds is None or seconds == "":
        return ""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


@register.filter
def moment_in_zone(when) -> str:
    """`jobs.moments.moment_with_zone`: "2026-12-02 18:05 UTC+8"; empty when unknown."""
    return moment_with_zone(when) if when else ""


@register.filter
def thousands(value) -> str:
    """1000 -> "1,000" (how the pages write counts, in both languages); anything else as it is."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return value


@register.filter
def task_state_class(state: str) -> str:
    """A badge colour for a Slurm task state."""
    return TASK_STATE_CLASSES.get((state or "").upper(), TASK_STATE_CLASS_OTHER)


@register.filter
def task_state_words(state: str) -> str:
    """A Slurm task state in the reader's words: the group it is counted in (done, running, waiting,
    failed, cancelled), as the summary above the table and the live script say it."""
    return str(TASK_GROUP_LABELS[task_group(state)])


@register.filter
def job_notice_class(status: str) -> str:
    """The notice style of a job's error text: bad news once the job failed, information otherwise."""
    return "notice-bad" if status in FAILED_JOB_STATUSES else "notice-info"


@register.filter
def is_video(name: str) -> bool:
    return is_video_name(name)
