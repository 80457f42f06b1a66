"""Small display helpers for the portal's templates."""
from __future__ import annotations

from django import template

from worker.manifest import VIDEO_EXTENSIONS

from jobs.models.job import JobStatus

register = template.Library()

#: A task's badge colour (the CSS class `task-<colour>`) for each Slurm state that is not a failure.
#: The one definition: the server's page uses it through `task_state_class`, the live script gets
#: it from the page (`{% live_task_state_classes %}`), so both always colour a state alike.
TASK_STATE_CLASSES = {
    "COMPLETED": "ok",
    "RUNNING": "running", "COMPLETING": "running", "CONFIGURING": "running",
    "PENDING": "waiting", "REQUEUED": "waiting", "SUSPENDED": "waiting", "RESIZING": "waiting",
    "CANCELLED": "muted", "PREEMPTED": "muted",
}
#: every other state (FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, ...) went wrong
TASK_STATE_CLASS_OTHER = "bad"

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
def task_state_class(state: str) -> str:
    """A badge colour for a Slurm task state."""
    return TASK_STATE_CLASSES.get((state or "").upper(), TASK_STATE_CLASS_OTHER)


@register.filter
def job_notice_class(status: str) -> str:
    """The notice style of a job's error text: bad news once the job failed, information otherwise."""
    return "notice-bad" if status in FAILED_JOB_STATUSES else "notice-info"


@register.filter
def is_video(name: str) -> bool:
    return (name or "").lower().endswith(VIDEO_EXTENSIONS)
