"""Running a job inside one of the user's GPU bookings: which booking a Start may use, and the
warning when the work will outlast it.

A job in a booking is submitted with `--reservation=<the booking's Slurm reservation>`
(jobs.job.submit), so its tasks run on the GPUs the booking holds. What Slurm does when the
reservation ends before the work does (seen on the local Slurm 22.05): Slurm starts a task in the
reservation even when its time limit reaches past the end, and stops it a few seconds after the
end (it ends TIMEOUT); tasks not started by then are held ("RESV_DEL_HOLD", reason "Reservation
... was deleted") and never start by themselves. The user cancels the job and runs what is left
with "Process the rest", in the open queue.
"""
from __future__ import annotations

import uuid
from datetime import datetime

from django.utils.translation import gettext as _

from jobs.models import Booking, BookingState
from jobs.quotas.messages import plain_duration


def usable_booking(user, booking_id, profile, problems: list) -> Booking | None:
    """The user's booking `booking_id` if a job on `profile` may run inside it now or later;
    otherwise None and a problem in plain words (field "booking") appended to `problems`.

    Only the user's OWN bookings (an admin's Start too: the reservation was made for its owner's
    work); another user's id reads as unknown, as for jobs."""
    try:
        key = uuid.UUID(str(booking_id))
    except ValueError:
        key = None
    booking = Booking.objects.visible_to(user).filter(pk=key).select_related("cluster").first() if key else None
    if booking is None:
        problems.append(("booking", _("Choose one of your own GPU bookings, or run the job without one.")))
        return None
    from jobs.bookings import usable_bookings  # C1's rule of "usable": one rule for the list and the check

    if not usable_bookings(user).filter(pk=booking.pk).exists():
        problems.append(("booking", _("The booking “%(name)s” cannot take jobs: it is %(state)s. Choose a confirmed "
                                      "booking, or run the job without one.")
                         % {"name": booking.task_name, "state": _state_words(booking)}))
        return None
    if profile is not None and booking.cluster_id != profile.pk:
        problems.append(("booking", _("The booking “%(name)s” holds GPUs on %(booking_cluster)s, but this template runs "
                                      "on %(cluster)s. Choose a template on %(booking_cluster)s, or another booking.")
                         % {"name": booking.task_name, "booking_cluster": booking.cluster,
                            "cluster": profile}))
        return None
    return booking


def _state_words(booking: Booking) -> str:
    if booking.state in (BookingState.CONFIRMED, BookingState.ACTIVE) and booking.reservation_made:
        return _("over")  # confirmed, but its time has passed
    if booking.state in (BookingState.CONFIRMED, BookingState.ACTIVE):
        return _("not ready on the cluster yet")
    return str(BookingState(booking.state).label)


def outlast_warning(booking: Booking, needed_seconds: float | None, now: datetime) -> str:
    """A warning (never a refusal) when the work is expected to end after the booking does; "" when
    it fits or its length is unknown. Counted from the booking's start when it has not begun yet."""
    if not needed_seconds or booking.ends_at is None:
        return ""
    begins = max(now, booking.starts_at or now)
    left = (booking.ends_at - begins).total_seconds()
    if needed_seconds <= left:
        return ""
    return _("This work needs about %(needed)s; your booking ends in %(left)s. When it ends, the cluster stops what "
             "is still running and holds what has not started: then cancel the job and use “Process the rest” to run "
             "what is left without the booking.") % {"needed": plain_duration(needed_seconds), "left": plain_duration(max(0.0, left))}


def job_outlasts_booking(job, now: datetime | None = None) -> str:
    """`outlast_warning` for a job just started in a booking, when its size is known (uploaded
    files; a folder is counted on the cluster later, and the job page warns then)."""
    from django.utils import timezone

    from jobs.job.expected import seconds_per_photo, work_seconds

    if job.booking is None or not job.total:
        return ""
    return outlast_warning(job.booking, work_seconds(job.snapshot, job.total, seconds_per_photo(job)),
                           now or timezone.now())
