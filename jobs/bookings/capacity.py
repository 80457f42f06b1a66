"""How many GPUs of a type are free for a window: the rule that no GPU type is ever booked beyond
its inventory.

    bookable  = inventory - ceil(inventory x free_percent / 100)    (the admin's share kept for unbooked work)
    held      = the most GPUs that HOLDING bookings of that type hold at any one moment of the window
    free      = bookable - held

Bookings that merely touch the window (one ends when the other starts) do not overlap. Counting
the peak at once, rather than the sum of every overlapping booking, lets back-to-back bookings
share a window without ever letting the GPUs in use at any instant exceed the inventory.

Callers that then place a booking must hold the GpuType row's lock (jobs.bookings.place).
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.utils import timezone

from jobs.bookings.request import round_up
from jobs.models import Booking, BookingPolicy, GpuType


def bookable(gpu_type: GpuType, policy: BookingPolicy | None = None) -> int:
    policy = policy or BookingPolicy.current()
    inventory = gpu_type.inventory
    return max(0, inventory - math.ceil(inventory * policy.free_percent / 100))


def _holding(gpu_type: GpuType, start: datetime, end: datetime, exclude=None):
    qs = Booking.objects.holding().overlapping(start, end).filter(gpu_type=gpu_type)
    if exclude is not None:
        qs = qs.exclude(pk=exclude)
    return list(qs.values_list("starts_at", "ends_at", "gpu_count"))


def peak_held(rows, start: datetime, end: datetime) -> int:
    """The most GPUs held at once within [start, end) by `rows` of (starts_at, ends_at, gpus)."""
    events = []
    for s, e, gpus in rows:
        events.append((max(s, start), gpus))
        events.append((min(e, end), -gpus))
    peak = held = 0
    for _moment, delta in sorted(events, key=lambda ev: (ev[0], ev[1])):  # ends before starts at one moment
        held += delta
        peak = max(peak, held)
    return peak


def free_gpus(gpu_type: GpuType, start: datetime, end: datetime, *, policy: BookingPolicy | None = None,
              exclude=None) -> int:
    """GPUs of `gpu_type` still bookable for the whole window [start, end)."""
    return max(0, bookable(gpu_type, policy) - peak_held(_holding(gpu_type, start, end, exclude), start, end))


#: Slurm makes a reservation that starts "now" at once (scontrol's starttime=now), so "as soon as
#: possible" needs no lead: only the step to the next whole minute, Slurm's unit of a reservation
ASAP_STEP_MINUTES = 1


def asap_start(now: datetime) -> datetime:
    """The earliest start an "as soon as possible" booking can have: the next whole minute."""
    return round_up(now, ASAP_STEP_MINUTES)


def earliest_fit(gpu_type: GpuType, count: int, minutes: int, now: datetime | None = None, *,
                 policy: BookingPolicy | None = None, exclude=None) -> datetime | None:
    """The earliest start from `now` within the policy's horizon where `count` GPUs of the type are
    free for `minutes`; None when there is none. "As soon as possible" means it: the next whole
    minute when the GPUs are free now (not the next booking unit: that once booked 29 minutes ahead),
    else the moment a holding booking ends.

    Free capacity only grows where a booking ends, so the candidates are now and every holding
    booking's end: one query, however many bookings.
    """
    policy = policy or BookingPolicy.current()
    now = now or timezone.now()
    if count > bookable(gpu_type, policy):
        return None
    length = timedelta(minutes=minutes)
    first = asap_start(now)
    last = now + timedelta(days=policy.max_days_ahead)
    rows = _holding(gpu_type, first, last + length, exclude)
    candidates = sorted({first, *(round_up(e, ASAP_STEP_MINUTES) for _s, e, _g in rows if e > first)})
    limit = bookable(gpu_type, policy)
    for start in candidates:
        if start > last:
            break
        end = start + length
        if peak_held([r for r in rows if r[0] < end and r[1] > start], start, end) + count <= limit:
            return start
    return None
