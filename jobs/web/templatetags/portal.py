"""Small display helpers for the portal's templates."""
from __future__ import annotations

from django import template

from worker.manifest import VIDEO_EXTENSIONS

register = template.Library()


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
    state = (state or "").upper()
    if state == "COMPLETED":
        return "ok"
    if state in ("RUNNING", "COMPLETING", "CONFIGURING"):
        return "running"
    if state in ("PENDING", "REQUEUED", "SUSPENDED", "RESIZING"):
        return "waiting"
    if state in ("CANCELLED", "PREEMPTED"):
        return "muted"
    return "bad"


@register.filter
def is_video(name: str) -> bool:
    return (name or "").lower().endswith(VIDEO_EXTENSIONS)
