"""A booking's state changes: each one a conditional update (`.filter(state__in=old).update(...)`,
row count checked), audited, and told to the user (`jobs.webhooks.booking_event`: webhook + email,
sent after the transaction commits).

    requested -> confirmed -> active -> ended
    waiting -> requested / confirmed         (placed by jobs.bookings.place, retried by the beat)
    requested / waiting / confirmed -> refused   (an admin, or the cluster would not hold the time)
    anything not final -> cancelled           (the owner or an admin)

A confirmed booking's Slurm reservation is made by an RQ task (jobs.bookings.reservations) once the
confirmation commits; a cancelled or refused one that had a reservation has it deleted the same way.
"""
from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs import audit, webhooks

from jobs.background import enqueue
from jobs.models import Booking, BookingState

log = logging.getLogger(__name__)

#: what the owner may still cancel
CANCELLABLE = (BookingState.REQUESTED, BookingState.WAITING, BookingState.CONFIRMED, BookingState.ACTIVE)
#: what an admin may refuse (an active booking is cancelled instead: its time has begun)
REFUSABLE = (BookingState.REQUESTED, BookingState.WAITING, BookingState.CONFIRMED)


def reservation_name(booking: Booking) -> str:
    """`ffp-<first 12 hex digits of the booking's id>`: unique enough, and says whose it is."""
    return f"ffp-{booking.id.hex[:12]}"


def notify(booking: Booking, event: str) -> None:
    """The user's webhook and email for `event`, sent after the commit (jobs.webhooks; never raises)."""
    try:
        webhooks.booking_event(booking, event)
    except Exception:  # noqa: BLE001 - a notice must never undo a state change
        log.exception("booking %s: %s notice failed", booking.pk, event)


def move(booking: Booking, old_states, new_state: str, *, event: str | None, action: str, actor=None,
         request=None, details: dict | None = None, **fields) -> bool:
    """Change the state if it is still one of `old_states`; audit it and send `event`. False when
    someone else changed it first (nothing is written then)."""
    fields.setdefault("updated_at", timezone.now())
    changed = Booking.objects.filter(pk=booking.pk, state__in=list(old_states)).update(state=new_state, **fields)
    if not changed:
        return False
    for name, value in fields.items():
        setattr(booking, name, value)
    booking.state = new_state
    audit.record(actor, action, target=booking, details={"state": new_state, **(details or {})}, request=request)
    if event:
        notify(booking, event)
    return True


def after_commit_make_reservation(booking: Booking) -> None:
    transaction.on_commit(lambda: enqueue.enqueue_reservation(booking))


def after_commit_delete_reservation(booking: Booking) -> None:
    transaction.on_commit(lambda: enqueue.enqueue_reservation_delete(booking))


def confirm(booking: Booking, *, actor=None, request=None, from_states=(BookingState.REQUESTED,)) -> bool:
    """requested -> confirmed: the Slurm reservation is made right after the commit."""
    with transaction.atomic():
        fields = {"reservation_name": booking.reservation_name or reservation_name(booking), "reason": ""}
        if actor is not None:
            fields["decided_by"] = actor
        if not move(booking, from_states, BookingState.CONFIRMED, event="confirmed", action="booking.confirm",
                    actor=actor, request=request, **fields):
            return False
        after_commit_make_reservation(booking)
    return True


def refuse(booking: Booking, reason: str, *, actor=None, request=None) -> bool:
    """Refused with a plain reason; a reservation already made is deleted."""
    with transaction.atomic():
        fields = {"reason": reason}
        if actor is not None:
            fields["decided_by"] = actor
        if not move(booking, REFUSABLE, BookingState.REFUSED, event="refused", action="booking.refuse",
                    actor=actor, request=request, details={"reason": reason}, **fields):
            return False
        booking.refresh_from_db(fields=["reservation_made"])
        if booking.reservation_made:
            after_commit_delete_reservation(booking)
    return True


def cancel(booking: Booking, by_user, request=None) -> bool:
    """Cancelled by its owner or an admin; False when it was already final. Its reservation goes."""
    with transaction.atomic():
        if not move(booking, CANCELLABLE, BookingState.CANCELLED, event="cancelled", action="booking.cancel",
                    actor=by_user, request=request,
                    reason=_("Cancelled by %(who)s.") % {"who": by_user.get_username()} if by_user else ""):
            return False
        booking.refresh_from_db(fields=["reservation_made"])
        if booking.reservation_made:
            after_commit_delete_reservation(booking)
    return True
