"""GPU bookings: a user books GPU time ahead; the portal places it on a GPU type of one of its
clusters without ever booking beyond the inventory, and Slurm holds the time with a reservation.

    from jobs import bookings
    req = bookings.parse_request(json_body)          # BookingError(problems) on bad input
    booking = bookings.book(user, req)                # placed: requested/confirmed, waiting or refused
    bookings.cancel(booking, by_user=user)
    bookings.tick(timezone.now())                     # the watcher's beat

Modules, by word: request (the seed's JSON), capacity (free GPUs per window), place (matching,
capacity, quota, race-safe), lifecycle (state changes), reservations (Slurm, over SSH, in RQ),
inventory (GPUs counted on the cluster, new types made bookable), beat (what time moves on), offpeak (quiet hours).
"""
from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from jobs.bookings.beat import tick
from jobs.bookings.capacity import bookable, earliest_fit, free_gpus
from jobs.bookings.inventory import count_due, count_gpus, refresh_inventory
from jobs.bookings.lifecycle import cancel, confirm, refuse, reservation_name
from jobs.bookings.place import book, matching_types, place_waiting
from jobs.bookings.request import BookingError, BookingRequest, parse_request, round_up
from jobs.models import Booking, BookingState

__all__ = [
    "BookingError", "BookingRequest", "parse_request", "round_up", "book", "matching_types", "place_waiting",
    "cancel", "confirm", "refuse", "reservation_name", "usable_bookings", "free_gpus", "bookable", "earliest_fit",
    "tick", "refresh_inventory", "count_gpus", "count_due",
]


def usable_bookings(user, cluster=None, now: datetime | None = None):
    """The user's bookings jobs can be submitted into now or later: confirmed or active, reservation
    made, not over. Soonest first."""
    now = now or timezone.now()
    qs = (Booking.objects.visible_to(user)
          .filter(state__in=(BookingState.CONFIRMED, BookingState.ACTIVE), reservation_made=True, ends_at__gt=now)
          .select_related("gpu_type", "cluster"))
    if cluster is not None:
        qs = qs.filter(cluster=cluster)
    return qs.order_by("starts_at")
