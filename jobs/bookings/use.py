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

import dataclasses
import uuid
from datetime import datetime

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from jobs.bookings.reservations import WAITING_STATUSES
from jobs.models import Booking, BookingState, Job, JobStatus
from jobs.moments import moment_words
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


def waiting_words(job, now: datetime | None = None) -> str:
    """Why a job inside a booking waits, in plain words ("" when it does not wait, or the booking
    cannot say more than the job's own reason): its booking has not begun, or the booking's GPUs
    are all taken by the user's other jobs in it. Slurm only says "Reservation" or "Resources"."""
    from django.utils import timezone

    booking = job.booking
    if booking is None or job.status not in WAITING_STATUSES or booking.is_final or booking.starts_at is None:
        return ""
    now = now or timezone.now()
    if booking.starts_at > now:
        return _("Waiting for your GPU booking “%(name)s” to start at %(when)s.") % {
            "name": booking.task_name, "when": moment_words(booking.starts_at, now)}
    others = (Job.objects.filter(booking=booking, status=JobStatus.RUNNING).exclude(pk=job.pk)
              .values_list("name", flat=True))
    names = [n or _("Untitled job") for n in others[:3]]
    if names:
        return ngettext(
            "Waiting for a GPU in your booking “%(name)s”: its %(count)d GPU is in use by your other job "
            "%(jobs)s. This job starts when it is free.",
            "Waiting for a GPU in your booking “%(name)s”: its %(count)d GPUs are in use by your other jobs "
            "%(jobs)s. This job starts when one is free.", booking.gpu_count) % {
            "name": booking.task_name, "count": booking.gpu_count, "jobs": ", ".join(f"“{n}”" for n in names)}
    return _("Waiting for a GPU in your booking “%(name)s”; the booking has begun, so it starts in a moment.") % {
        "name": booking.task_name}


@dataclasses.dataclass
class JobsInside:
    """The active jobs inside one booking, as its cancel dialog lists them."""

    waiting: list = dataclasses.field(default_factory=list)
    running: list = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.waiting or self.running)

    def words(self) -> list[str]:
        """What cancelling does to them, one sentence each (none when the booking has no job)."""
        said = []
        if self.waiting:
            said.append(ngettext("%(count)d job waiting inside it will join the normal queue.",
                                 "%(count)d jobs waiting inside it will join the normal queue.",
                                 len(self.waiting)) % {"count": len(self.waiting)})
        if self.running:
            said.append(ngettext("%(count)d job running inside it keeps running; the GPUs are released when it ends.",
                                 "%(count)d jobs running inside it keep running; the GPUs are released when they end.",
                                 len(self.running)) % {"count": len(self.running)})
        return said


def jobs_inside(bookings) -> dict:
    """{booking id: JobsInside} for every booking of `bookings` (one query)."""
    found = {b.pk: JobsInside() for b in bookings}
    rows = (Job.objects.filter(booking__in=list(found), status__in=(*WAITING_STATUSES, JobStatus.RUNNING))
            .only("id", "name", "status", "booking_id").order_by("created_at"))
    for job in rows:
        inside = found[job.booking_id]
        (inside.running if job.status == JobStatus.RUNNING else inside.waiting).append(job)
    return found
