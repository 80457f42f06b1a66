"""A booking's life: ONE table of the moves between booking states (`TRANSITIONS`), and the one
function that makes them (`move`): each a conditional update (`jobs.transitions`: `UPDATE ... WHERE
state IN (sources)`, row count checked), audited as "booking.<move>", and told to the user
(`jobs.webhooks.booking_event`: webhook + email, sent after the transaction commits).

    requested ─confirm─> confirmed ─start─> active ─end─> ended
    waiting ─place─> requested | confirmed     (placed by jobs.bookings.place, retried by the beat)
    requested | waiting | confirmed ─refuse─> refused   (an admin, or the cluster would not hold the time)
    requested | waiting | confirmed | active ─cancel─> cancelled   (the owner or an admin)

A confirmed booking's Slurm reservation is made by an RQ task (jobs.bookings.reservations) once the
confirmation commits; a cancelled or refused one that had a reservation has it deleted the same way.
"""
from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs import audit, transitions, webhooks
from jobs.background import enqueue
from jobs.models import Booking, BookingState
from jobs.transitions import Transition

log = logging.getLogger(__name__)

S = BookingState

#: every move a booking may make: name -> (from these states, to one of these); the audit's action
#: is "booking.<name>". A booking is created requested, waiting, confirmed or refused (jobs.bookings.place).
TRANSITIONS: dict[str, Transition] = {
    # a waiting booking found its GPUs: requested, or confirmed at once where no approval is needed
    "place": Transition((S.WAITING,), (S.REQUESTED, S.CONFIRMED)),
    "confirm": Transition((S.REQUESTED,), (S.CONFIRMED,)),
    "start": Transition((S.CONFIRMED,), (S.ACTIVE,)),
    "end": Transition((S.ACTIVE,), (S.ENDED,)),
    # an active booking is cancelled instead: its time has begun
    "refuse": Transition((S.REQUESTED, S.WAITING, S.CONFIRMED), (S.REFUSED,)),
    "cancel": Transition((S.REQUESTED, S.WAITING, S.CONFIRMED, S.ACTIVE), (S.CANCELLED,)),
}

#: what the owner may still cancel
CANCELLABLE = TRANSITIONS["cancel"].sources
#: what an admin may refuse
REFUSABLE = TRANSITIONS["refuse"].sources


def reservation_name(booking: Booking) -> str:
    """`ffp-<first 12 hex digits of the booking's id>`: unique enough, and says whose it is."""
    return f"ffp-{booking.id.hex[:12]}"


def notify(booking: Booking, event: str) -> None:
    """The user's webhook and email for `event`, sent after the commit (jobs.webhooks; never raises)."""
    try:
        webhooks.booking_event(booking, event)
    except Exception:
        log.exception("booking %s: %s notice failed", booking.pk, event)


def move(booking: Booking, name: str, to: str | None = None, *, event: str | None, actor=None, request=None,
         details: dict | None = None, **fields) -> bool:
    """Make the move `name` of `TRANSITIONS` (to `to`, when the move has several ends); audit it as
    "booking.<name>" and send `event`. False when someone else changed the state first (nothing is
    written then). Raises ValueError for a move the table does not allow."""
    sources, to = transitions.check(TRANSITIONS, name, to)
    fields.setdefault("updated_at", timezone.now())
    if not transitions.update_if(booking, "state", sources, to, **fields):
        return False
    audit.record(actor, f"booking.{name}", target=booking, details={"state": to, **(details or {})}, request=request)
    if event:
        notify(booking, event)
    return True


def after_commit_make_reservation(booking: Booking) -> None:
    transaction.on_commit(lambda: enqueue.enqueue_reservation(booking))


def after_commit_delete_reservation(booking: Booking) -> None:
    transaction.on_commit(lambda: enqueue.enqueue_reservation_delete(booking))


def _delete_reservation_if_made(booking: Booking) -> None:
    """After a refusal or a cancel: the reservation goes, if scontrol made one (read again: the
    RQ task that makes it may have finished since `booking` was read)."""
    booking.refresh_from_db(fields=["reservation_made"])
    if booking.reservation_made:
        after_commit_delete_reservation(booking)


def confirm(booking: Booking, *, actor=None, request=None) -> bool:
    """requested -> confirmed: the Slurm reservation is made right after the commit."""
    with transaction.atomic():
        fields = {"reservation_name": booking.reservation_name or reservation_name(booking), "reason": ""}
        if actor is not None:
            fields["decided_by"] = actor
        if not move(booking, "confirm", event="confirmed", actor=actor, request=request, **fields):
            return False
        after_commit_make_reservation(booking)
    return True


def refuse(booking: Booking, reason: str, *, actor=None, request=None) -> bool:
    """Refused with a plain reason; a reservation already made is deleted."""
    with transaction.atomic():
        fields = {"reason": reason}
        if actor is not None:
            fields["decided_by"] = actor
        if not move(booking, "refuse", event="refused", actor=actor, request=request, details={"reason": reason},
                    **fields):
            return False
        _delete_reservation_if_made(booking)
    return True


def cancel(booking: Booking, by_user, request=None) -> bool:
    """Cancelled by its owner or an admin; False when it was already final. Its reservation goes."""
    with transaction.atomic():
        if not move(booking, "cancel", event="cancelled", actor=by_user, request=request,
                    reason=_("Cancelled by %(who)s.") % {"who": by_user.get_username()} if by_user else ""):
            return False
        _delete_reservation_if_made(booking)
    return True
