"""The watcher's beat for bookings (`tick(now)`, once per watcher cycle).

    confirmed, start passed               -> active ("started")
    active, 15 minutes or less left       -> the "ending" notice, once (ending_notice_at)
    active, end passed                    -> ended ("ended"); Slurm drops an ended reservation itself
    requested (no admin decision), end passed -> refused
    confirmed/active without reservation  -> its RQ task enqueued again (when none is pending)
    cancelled/refused with a reservation  -> its deletion enqueued again (when none is pending)
    waiting                               -> placed again, at most once a minute each
    confirmed, starts within its cluster's wake-up lead -> its asleep nodes woken, once (jobs.bookings.wake)

Cheap when nothing is due: ONE query (`due`), which the watcher runs every few seconds.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

import jobs.bookings.lifecycle as lifecycle
import jobs.bookings.place as place
import jobs.bookings.reservations as reservations
import jobs.bookings.wake as wake
from jobs.background import enqueue
from jobs.models import Booking, BookingState
from jobs.models.booking import FINAL_BOOKING_STATES

log = logging.getLogger(__name__)

#: the "ends in 15 minutes" notice
ENDING_NOTICE = timedelta(minutes=15)
#: a reservation task (make or delete) still not done after this is enqueued again
RESERVATION_RETRY_AFTER = timedelta(minutes=2)
#: a waiting booking is tried again at most this often
WAITING_RETRY_AFTER = timedelta(minutes=1)
#: bookings handled per beat (the rest next cycle)
BATCH = 200


def due(now: datetime):
    """The bookings that need something now (one query)."""
    stale = now - RESERVATION_RETRY_AFTER
    live = (BookingState.CONFIRMED, BookingState.ACTIVE)
    return Booking.objects.filter(
        Q(state=BookingState.CONFIRMED, starts_at__lte=now)
        | Q(state=BookingState.ACTIVE, ends_at__lte=now)
        | Q(state=BookingState.ACTIVE, ends_at__lte=now + ENDING_NOTICE, ending_notice_at__isnull=True)
        | Q(state=BookingState.REQUESTED, ends_at__lte=now)
        | Q(state__in=live, reservation_made=False, updated_at__lte=stale)
        | Q(state__in=FINAL_BOOKING_STATES, reservation_made=True, updated_at__lte=stale)
        | Q(state=BookingState.WAITING, updated_at__lte=now - WAITING_RETRY_AFTER)
        | Q(state=BookingState.CONFIRMED, reservation_made=True, wake_asked_at__isnull=True,
            starts_at__lte=now + wake.WAKE_HORIZON)
    ).select_related("user", "cluster", "gpu_type").order_by("starts_at", "created_at")[:BATCH]


def tick(now: datetime | None = None) -> int:
    """Do what is due; returns how many bookings were looked at. One booking's failure is logged and
    never stops the others (nor the watcher)."""
    now = now or timezone.now()
    found = list(due(now))
    for booking in found:
        try:
            _step(booking, now)
        except Exception:
            log.exception("booking %s: beat failed", booking.pk)
    return len(found)


def _step(booking: Booking, now: datetime) -> None:
    state = booking.state
    if state == BookingState.WAITING:
        place.place_waiting(booking, now)
        return
    if state == BookingState.REQUESTED:
        lifecycle.refuse(booking, _("No admin approved this booking before its time was over."))
        return
    if state in FINAL_BOOKING_STATES:
        _retry_task(booking, now, "delete", enqueue.enqueue_reservation_delete)
        return
    if wake.wake_due(booking, now):
        wake.ask_wake(booking, now)
    if state == BookingState.CONFIRMED and booking.starts_at <= now:
        lifecycle.move(booking, "start", event="started")
    if booking.state == BookingState.ACTIVE and booking.ends_at <= now:
        lifecycle.move(booking, "end", event="ended", reservation_made=False)
        return
    if (booking.state == BookingState.ACTIVE and booking.ending_notice_at is None
            and booking.ends_at - ENDING_NOTICE <= now):
        if Booking.objects.filter(pk=booking.pk, ending_notice_at__isnull=True).update(ending_notice_at=now):
            booking.ending_notice_at = now
            lifecycle.notify(booking, "ending")
    if not booking.reservation_made and booking.updated_at <= now - RESERVATION_RETRY_AFTER:
        _retry_task(booking, now, "make", enqueue.enqueue_reservation)


def _retry_task(booking: Booking, now: datetime, verb: str, send) -> None:
    if booking.updated_at > now - RESERVATION_RETRY_AFTER:
        return
    # Touch it first: the beat comes back to it only after RESERVATION_RETRY_AFTER.
    Booking.objects.filter(pk=booking.pk, state=booking.state).update(updated_at=now)
    if not reservations.task_pending(enqueue.reservation_rq_id(booking, verb)):
        send(booking)
