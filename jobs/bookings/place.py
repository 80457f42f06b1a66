"""Placing a booking: which GPU type, on which cluster, when; never beyond the inventory; within quota.

Matching: every bookable GpuType of every active cluster profile with at least the memory and the
compute capability asked for; the smallest card that fits wins (least memory, then earliest start).

Race-safety: all of it runs in ONE transaction that first locks the candidate GpuType rows
(`select_for_update`, in pk order) and then the user's and their groups' rows (the job quota's
`lock_quota_subjects`), BEFORE counting what is held. On PostgreSQL a second booking of the same GPU
type waits there until the first commits, then counts it. On SQLite `select_for_update` is a no-op,
but the settings' IMMEDIATE transactions take the write lock at BEGIN: bookings are serialised from
their first statement (the same reasoning as jobs.quotas).

Outcomes: placed (requested when the policy wants an admin's approval, else confirmed, and the
reservation is made after the commit); waiting ("asap"/"off-peak" with no room within the horizon:
the beat tries again); refused (an exact start with no room). Requests no GPU type could ever meet,
and quota overruns, raise BookingError and leave nothing behind.
"""
from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

import jobs.bookings.capacity as capacity
import jobs.bookings.lifecycle as lifecycle
from jobs import audit
from jobs.bookings.request import BookingError, BookingRequest, round_up
from jobs.models import Approval, Booking, BookingPolicy, BookingState, GpuType, StartChoice
from jobs.models.booking import HOLDING_STATES
from jobs.quotas import applicable_quotas, format_hours, lock_quota_subjects, members_of, source_of
from jobs.usage.accounting import month_of


def matching_types(*, min_memory_gb: int, compute_capability: str, count: int = 1) -> list[GpuType]:
    """Bookable GPU types of active clusters that meet the requirement, smallest card first."""
    found = [t for t in GpuType.objects.filter(is_active=True, cluster__is_active=True).select_related("cluster")
             if t.satisfies(min_memory_gb=min_memory_gb, compute_capability=compute_capability)]
    return sorted(found, key=lambda t: (t.memory_gb, t.compute_capability, t.cluster.name, t.pk))


def _lock(types: list[GpuType]) -> None:
    list(GpuType.objects.select_for_update().filter(pk__in=[t.pk for t in types]).order_by("pk")
         .values_list("pk", flat=True))


def _no_match_problem(req) -> dict[str, str]:
    values = {"count": req.gpu_count, "memory": req.min_memory_gb, "cc": req.compute_capability}
    if req.compute_capability:
        message = ngettext(
            "No cluster has %(count)d GPU with at least %(memory)s GB and compute capability %(cc)s to book. "
            "Ask for less, or ask an admin which GPUs can be booked.",
            "No cluster has %(count)d GPUs with at least %(memory)s GB and compute capability %(cc)s to book. "
            "Ask for less, or ask an admin which GPUs can be booked.", req.gpu_count)
    else:
        message = ngettext(
            "No cluster has %(count)d GPU with at least %(memory)s GB to book. Ask for less, or ask an admin "
            "which GPUs can be booked.",
            "No cluster has %(count)d GPUs with at least %(memory)s GB to book. Ask for less, or ask an admin "
            "which GPUs can be booked.", req.gpu_count)
    return {"gpu_requirement": message % values}


def booked_hours(users, month_start) -> Decimal:
    """GPU-hours booked by `users` (holding bookings) that start in the calendar month `month_start`."""
    total = Decimal(0)
    rows = (Booking.objects.filter(user__in=users.values("pk"), state__in=HOLDING_STATES)
            .values_list("starts_at", "gpu_count", "duration_minutes"))
    for starts_at, gpus, minutes in rows:
        if starts_at is not None and month_of(starts_at) == month_start:
            total += Decimal(gpus) * Decimal(minutes) / Decimal(60)
    return total


def quota_problem(user, start: datetime, gpu_hours: Decimal) -> str:
    """Why this booking would go past a booked-GPU-hours quota of `user` ("" when it would not)."""
    month = month_of(start)
    for quota in applicable_quotas(user):
        limit = quota.booking_gpu_hours_per_month
        if limit is None:
            continue
        # A waiting booking being placed is not holding yet, so it is not counted twice.
        used = booked_hours(members_of(quota), month)
        if used + gpu_hours > limit:
            return _("This booking needs %(need)s GPU-hours; %(source)s allows %(limit)s booked GPU-hours in "
                     "%(month)s and %(used)s are booked already. Book less, or ask an admin.") % {
                "need": format_hours(float(gpu_hours)), "source": source_of(quota),
                "limit": format_hours(float(limit)), "used": format_hours(float(used)),
                "month": month.strftime("%Y-%m")}
    return ""


def off_peak_shares(req, types: list[GpuType]) -> dict | None:
    """For an off-peak request, each cluster's load by hour of week (sacct over SSH, cached): read
    BEFORE the placement's lock, so no SSH round trip ever runs while other bookings wait."""
    if req.start_choice != StartChoice.OFF_PEAK:
        return None
    import jobs.bookings.offpeak as offpeak  # helper C2's module

    return {t.cluster_id: offpeak.share_by_hour(t.cluster) for t in {t.cluster_id: t for t in types}.values()}


def _placement(req, types: list[GpuType], policy: BookingPolicy, now: datetime, exclude=None, shares=None):
    """(GpuType, start) where the booking fits, or (None, reason)."""
    length = timedelta(minutes=req.duration_minutes)
    if req.start_choice == StartChoice.AT:
        start = max(round_up(req.requested_start, policy.unit_minutes), round_up(now, policy.unit_minutes))
        for t in types:
            if capacity.free_gpus(t, start, start + length, policy=policy, exclude=exclude) >= req.gpu_count:
                return t, start
        return None, _("All bookable GPUs that meet the requirement are booked from %(start)s to %(end)s (UTC). "
                       "Choose another time, or ask for \"asap\".") % {
            "start": start.strftime("%Y-%m-%d %H:%M"), "end": (start + length).strftime("%Y-%m-%d %H:%M")}
    if req.start_choice == StartChoice.OFF_PEAK:
        import jobs.bookings.offpeak as offpeak  # helper C2's module

        for window in offpeak.suggest(types, req.gpu_count, req.duration_minutes, now, limit=5, shares=shares):
            start = max(round_up(window.start, policy.unit_minutes), round_up(now, policy.unit_minutes))
            chosen = next((t for t in types if t.pk == window.gpu_type.pk), None)
            if chosen and capacity.free_gpus(chosen, start, start + length, policy=policy,
                                             exclude=exclude) >= req.gpu_count:
                return chosen, start
        return None, _("No quiet hours with free GPUs were found in the next %(days)d days; the booking waits "
                       "and is placed as soon as GPUs free up.") % {"days": policy.max_days_ahead}
    fits = []
    for t in types:
        start = capacity.earliest_fit(t, req.gpu_count, req.duration_minutes, now, policy=policy, exclude=exclude)
        if start is not None:
            fits.append((t.memory_gb, start, t))
    if fits:
        _memory, start, t = min(fits, key=lambda f: (f[0], f[1]))
        return t, start
    return None, _("All bookable GPUs that meet the requirement are booked for the next %(days)d days; the booking "
                   "waits and is placed as soon as GPUs free up.") % {"days": policy.max_days_ahead}


#: what a BookingRequest carries, field for field the Booking's
REQUEST_FIELDS = tuple(f.name for f in dataclasses.fields(BookingRequest))


def _fields(req) -> dict:
    return {f: getattr(req, f) for f in REQUEST_FIELDS}


def book(user, req: BookingRequest, *, now: datetime | None = None, request=None, language: str = "") -> Booking:
    """Place a booking for `user` (see the module docstring). Returns the saved Booking in its state."""
    now = now or timezone.now()
    types = matching_types(min_memory_gb=req.min_memory_gb, compute_capability=req.compute_capability)
    if not types:
        raise BookingError(_no_match_problem(req))
    shares = off_peak_shares(req, types)
    with transaction.atomic():
        _lock(types)
        lock_quota_subjects(user)
        policy = BookingPolicy.current()
        fitting = [t for t in types if capacity.bookable(t, policy) >= req.gpu_count]
        if not fitting:
            raise BookingError(_no_match_problem(req))
        booking = Booking(user=user, language=language, **_fields(req))
        gpu_type, start = _placement(req, fitting, policy, now, shares=shares)
        if gpu_type is not None:
            problem = quota_problem(user, start, booking.gpu_hours)
            if problem:
                raise BookingError({"__all__": problem})
            _land(booking, gpu_type, start, policy)
        elif req.start_choice == StartChoice.AT:
            booking.state, booking.reason = BookingState.REFUSED, start
        else:
            booking.state, booking.reason = BookingState.WAITING, start
        booking.save()
        audit.record(user, "booking.create", target=booking, request=request,
                     details={"state": booking.state, "gpu_type": gpu_type.gres_type if gpu_type else None,
                              "start": booking.starts_at.isoformat() if booking.starts_at else None})
        _announce(booking, policy)
    return booking


def _land(booking: Booking, gpu_type: GpuType, start: datetime, policy: BookingPolicy) -> None:
    booking.gpu_type, booking.cluster = gpu_type, gpu_type.cluster
    booking.starts_at, booking.ends_at = start, start + timedelta(minutes=booking.duration_minutes)
    booking.reason = ""
    booking.state = BookingState.REQUESTED
    if policy.approval == Approval.AUTOMATIC:
        booking.state = BookingState.CONFIRMED
        booking.reservation_name = lifecycle.reservation_name(booking)


def _announce(booking: Booking, policy: BookingPolicy) -> None:
    """The event of a booking just placed (or not), and its reservation when confirmed."""
    if booking.state == BookingState.CONFIRMED:
        lifecycle.notify(booking, "confirmed")
        lifecycle.after_commit_make_reservation(booking)
    elif booking.state == BookingState.WAITING:
        lifecycle.notify(booking, "waiting")
    elif booking.state == BookingState.REFUSED:
        lifecycle.notify(booking, "refused")


def place_waiting(booking: Booking, now: datetime | None = None) -> bool:
    """Try again to place a waiting booking (the beat). True when it was placed (or refused by quota)."""
    now = now or timezone.now()
    req = BookingRequest(**_fields(booking))
    types = matching_types(min_memory_gb=req.min_memory_gb, compute_capability=req.compute_capability)
    shares = off_peak_shares(req, types)
    with transaction.atomic():
        _lock(types)
        lock_quota_subjects(booking.user)
        policy = BookingPolicy.current()
        fitting = [t for t in types if capacity.bookable(t, policy) >= req.gpu_count]
        gpu_type, start = _placement(req, fitting, policy, now, exclude=booking.pk, shares=shares) if fitting else (None, "")
        if gpu_type is None:
            # Touch it, so the beat leaves it alone for a while (its query skips recently tried ones).
            Booking.objects.filter(pk=booking.pk, state=BookingState.WAITING).update(updated_at=now)
            return False
        problem = quota_problem(booking.user, start, booking.gpu_hours)
        if problem:
            return lifecycle.refuse(booking, problem)
        _land(booking, gpu_type, start, policy)
        placed = lifecycle.move(
            booking, "place", booking.state, event=None,
            gpu_type=gpu_type, cluster=gpu_type.cluster, starts_at=booking.starts_at, ends_at=booking.ends_at,
            reason="", reservation_name=booking.reservation_name, details={"gpu_type": gpu_type.gres_type})
        if placed:
            _announce(booking, policy)
        return placed
