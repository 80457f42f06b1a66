"""The job page's "expected to start around 14:05; finish around 14:40" and its booking line."""
from __future__ import annotations

from django import template
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs.bookings.use import outlast_warning, waiting_words
from jobs.job.expected import seconds_per_photo, when_words, work_seconds

register = template.Library()


@register.simple_tag
def job_when(job) -> str:
    return when_words(job)


@register.simple_tag
def booking_note(job) -> dict | None:
    """{"text", "warn"} for a job that runs in a GPU booking: which one, and a warning when its work
    is expected to outlast the booking; None for a job in the open queue."""
    booking = job.booking
    if booking is None:
        return None
    if job.is_active and job.total:
        left = job.total - job.done - job.failed
        warning = outlast_warning(booking, work_seconds(job.snapshot, left, seconds_per_photo(job)), timezone.now())
        if warning:
            return {"text": warning, "warn": True}
    if waiting := waiting_words(job):  # why it waits, in the booking's words (Slurm says only "Reservation")
        return {"text": waiting, "warn": False}
    return {"text": _("Runs inside your GPU booking “%(name)s”.") % {"name": booking.task_name}, "warn": False}
