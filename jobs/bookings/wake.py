"""A booking wakes its asleep nodes before it starts, so its GPUs are up at its start.

With Slurm's power saving, a node idle for SuspendTime is powered off, and Slurm powers it on again
when a job is given it; a reservation alone wakes nothing. So the beat (jobs.bookings.beat) asks,
once per booking and `lead(cluster)` before its start (the cluster's wake-up time plus
`WAKE_MARGIN`), for `wake_nodes`: it reads the booking's reservation and the nodes' states (two
SSH round trips) and, for the nodes that are asleep, submits the warm-up job (cluster.wake_job_argv):
Slurm wakes them for it, and it holds them until just before the start. Nodes already awake need
nothing. If the wake-up fails, nothing is lost: Slurm still wakes the nodes when the booking's work
comes, a boot later.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.utils import timezone

import cluster
from jobs.background import enqueue
from jobs.models import Booking, BookingState

log = logging.getLogger(__name__)

#: woken this much earlier than the cluster's wake-up time: the node registers, the warm-up job
#: gets its minute
WAKE_MARGIN = timedelta(seconds=60)
#: the beat looks this far ahead for bookings to wake (a cluster's wake-up time plus the margin is
#: under it: ClusterProfile.node_boot_seconds is at most 14 minutes)
WAKE_HORIZON = timedelta(minutes=15)
#: seconds scontrol, sinfo or sbatch may take
SSH_TIMEOUT = 30


def lead(profile) -> timedelta:
    """How long before a booking's start its nodes are woken on `profile`'s cluster."""
    return timedelta(seconds=profile.node_boot_seconds) + WAKE_MARGIN


def wake_due(booking: Booking, now: datetime) -> bool:
    """Whether the beat should ask for `booking`'s nodes to be woken now (once: wake_asked_at)."""
    return (booking.state == BookingState.CONFIRMED and booking.wake_asked_at is None and booking.reservation_made
            and booking.cluster is not None and booking.starts_at is not None
            and now < booking.starts_at <= now + lead(booking.cluster))


def ask_wake(booking: Booking, now: datetime) -> None:
    """Mark the booking (a conditional update: one ask, whatever runs beside it) and queue the wake-up."""
    if Booking.objects.filter(pk=booking.pk, wake_asked_at__isnull=True).update(wake_asked_at=now):
        booking.wake_asked_at = now
        enqueue.enqueue_booking_wake(booking)


def wake_nodes(booking_id: str, now: datetime | None = None) -> list[str]:
    """RQ task: wake the booking's asleep nodes with the warm-up job. Returns the nodes it woke."""
    booking = Booking.objects.select_related("cluster").filter(pk=booking_id).first()
    if booking is None or booking.state != BookingState.CONFIRMED or not booking.reservation_name:
        return []
    now = now or timezone.now()
    runner = cluster.runner_for(booking.cluster)
    shown = runner.run(cluster.reservations_show_argv(booking.reservation_name), timeout=SSH_TIMEOUT)
    found = [r for r in cluster.parse_reservations(shown.stdout) if r.name == booking.reservation_name]
    if not found:
        log.warning("booking %s: reservation %s not found; its nodes are not woken", booking.pk,
                    booking.reservation_name)
        return []
    reservation = found[0]
    answer = runner.run(cluster.sinfo_argv(), timeout=SSH_TIMEOUT, check=True)
    asleep = [n.name for n in cluster.parse_sinfo(answer.stdout)
              if n.name in reservation.nodes and cluster.node_condition(n) == "asleep"]
    if not asleep:
        return []
    minutes = cluster.wake_minutes((reservation.start - now).total_seconds())
    if minutes < 1:  # too late for a job to fit before the start: Slurm wakes them for the booking's work
        log.info("booking %s: too close to its start to wake %s ahead", booking.pk, ",".join(asleep))
        return []
    argv = cluster.wake_job_argv(asleep, int(reservation.start.timestamp()), minutes, reservation.partition)
    submitted = runner.run(argv, timeout=SSH_TIMEOUT, check=True)
    log.info("booking %s: waking %s for its start at %s (warm-up job %s)", booking.pk, ",".join(asleep),
             reservation.start.isoformat(), submitted.stdout.strip())
    return asleep


#: how far ahead the admin's Clusters page lists the bookings that will wake nodes
UPCOMING_WITHIN = timedelta(days=1)


def upcoming(profile, nodes: list[dict], now: datetime, limit: int = 5) -> list[dict]:
    """What wakes next on `profile`'s cluster, soonest first (the admin's Clusters page): each node
    being powered on now, ready about its `waking_since` plus the wake-up time ({"node", "when"});
    and while a node is asleep, the next bookings of the day, woken `lead` before they start
    ({"booking", "when"}). `nodes`: the stored reading's node records (jobs.clusters.node_states)."""
    boot = timedelta(seconds=profile.node_boot_seconds)
    items = [{"node": n["name"], "when": datetime.fromisoformat(n.get("waking_since") or now.isoformat()) + boot}
             for n in nodes if n["condition"] == "waking"]
    if any(n["condition"] == "asleep" for n in nodes):
        soon = Booking.objects.filter(cluster=profile, state=BookingState.CONFIRMED, starts_at__gt=now,
                                      starts_at__lte=now + UPCOMING_WITHIN).order_by("starts_at")[:limit]
        items += [{"booking": b, "when": max(now, b.starts_at - lead(profile))} for b in soon]
    return sorted(items, key=lambda item: item["when"])[:limit]
