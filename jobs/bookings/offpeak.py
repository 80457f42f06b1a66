"""Off-peak suggestions: when a cluster is usually quiet, and the earliest quiet windows that still
have GPUs free for a booking.

    load_by_hour(profile)       7 x 24 matrix (Monday 0 .. Sunday 6, hours of the SITE's time zone,
                                settings.TIME_ZONE): the GPUs busy on average in that hour of the week
                                over the last weeks, from sacct (every user's jobs), one SSH round trip,
                                cached 10 minutes per profile
    hourly_load(uses, ...)      the same matrix from a list of GPU uses (pure: the tests feed it)
    suggest(gpu_types, ...)     the earliest unit-aligned windows with `count` GPUs free
                                (jobs.bookings.free_gpus) and a low expected load, quietest first

The load is the past; the bookings already made are the future: a window is offered only where
`free_gpus` (which subtracts the bookings holding GPUs and the share kept for unbooked work) leaves
enough, so a suggestion never proposes what a booking would be refused for.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

import cluster
import jobs.bookings.capacity as capacity
from jobs.bookings.request import round_up

#: how long a profile's hour-of-week load is reused before sacct is asked again
CACHE_SECONDS = 10 * 60
#: sacct's jobs of the last weeks: enough for a weekly pattern, few enough for one quick call
DEFAULT_WEEKS = 4
#: loads are compared in steps of this share: 0.31 and 0.33 are equally quiet, the earlier one wins
LOAD_STEP = 0.1
#: free-capacity checks one suggestion may cost at most (each is a few database queries)
MAX_CAPACITY_CHECKS = 400

HOUR = timedelta(hours=1)

Matrix = list[list[float]]


@dataclasses.dataclass(frozen=True)
class Window:
    """A suggested booking window: `expected_load` is the share (0..1) of the cluster's GPUs busy in
    those hours of the week in the past weeks."""

    start: datetime
    end: datetime
    gpu_type: object  # jobs.models.GpuType
    expected_load: float

    @property
    def load_percent(self) -> int:
        return round(self.expected_load * 100)


def site_zone() -> ZoneInfo:
    """The time zone the hours of the week are counted in: the site's, so a heat map means the same
    to every user of the portal (the pages say which zone)."""
    return ZoneInfo(settings.TIME_ZONE)


def empty_matrix() -> Matrix:
    return [[0.0] * 24 for _ in range(7)]


def hourly_load(uses, start: datetime, end: datetime, tz) -> Matrix:
    """Average GPUs in use per (weekday, hour) of `tz` between `start` and `end`.

    `uses`: objects with aware `start`, `end` (None: still running) and `gpus` (cluster's GpuUse). A use is cut to the
    period and spread over the hours it overlaps, to the second; each hour of the week is the mean
    over its occurrences in the period (an hour of the week the period does not reach is 0).
    """
    tz = tz or site_zone()
    local = start.astimezone(tz).replace(minute=0, second=0, microsecond=0)
    # Hour slots stepped in UTC from a local whole hour: a daylight-saving change then only makes one
    # local hour occur once more or less, and zones with half-hour offsets still get whole local hours.
    origin = local.astimezone(dt_timezone.utc)
    slots = max(0, math.ceil((end - origin) / HOUR))
    buckets = []
    for i in range(slots):
        at = (origin + i * HOUR).astimezone(tz)
        buckets.append((at.weekday(), at.hour))
    # Occurrences count only the part of each slot inside the period (the first and last are partial).
    weight = [[0.0] * 24 for _ in range(7)]
    for i, (day, hour) in enumerate(buckets):
        slot_start, slot_end = origin + i * HOUR, origin + (i + 1) * HOUR
        part = (min(slot_end, end) - max(slot_start, start)) / HOUR
        if part > 0:
            weight[day][hour] += part
    busy = empty_matrix()
    for use in uses:
        s, e = max(use.start, start), min(use.end or end, end)  # no end: still running
        if e <= s or use.gpus <= 0:
            continue
        first = int((s - origin) // HOUR)
        last = math.ceil((e - origin) / HOUR)
        for i in range(max(first, 0), min(last, slots)):
            slot_start = origin + i * HOUR
            overlap = (min(e, slot_start + HOUR) - max(s, slot_start)) / HOUR
            if overlap > 0:
                day, hour = buckets[i]
                busy[day][hour] += use.gpus * overlap
    return [[busy[d][h] / weight[d][h] if weight[d][h] else 0.0 for h in range(24)] for d in range(7)]


def _cache_key(profile, weeks: int) -> str:
    return f"bookings:offpeak:{profile.pk}:{weeks}:{settings.TIME_ZONE}"


def load_by_hour(profile, weeks: int = DEFAULT_WEEKS, now: datetime | None = None) -> Matrix:
    """The 7 x 24 busy-GPU matrix of `profile` (see module doc). One sacct call over SSH, cached for
    CACHE_SECONDS per profile. Raises cluster.ClusterError when the cluster cannot be asked."""
    key = _cache_key(profile, weeks)
    cached = cache.get(key)
    if cached is not None:
        return cached
    now = now or timezone.now()
    since = now - timedelta(weeks=weeks)
    result = cluster.runner_for(profile).run(cluster.gpu_history_argv(since, now), check=True)
    matrix = hourly_load(cluster.parse_gpu_history(result.stdout), since, now, site_zone())
    cache.set(key, matrix, CACHE_SECONDS)
    return matrix


def inventory_of(profile) -> int:
    """GPUs of the profile the portal knows of (all bookable types): the 100 % of a load share."""
    from jobs.models import GpuType

    return sum(GpuType.objects.filter(cluster=profile).values_list("inventory", flat=True))


def load_share(matrix: Matrix, gpus: int) -> Matrix:
    """Busy GPUs as a share of `gpus` (0..1); with no GPUs known, a busy hour counts as full."""
    if gpus <= 0:
        return [[1.0 if v > 0 else 0.0 for v in row] for row in matrix]
    return [[min(1.0, v / gpus) for v in row] for row in matrix]


def share_by_hour(profile, *, now: datetime | None = None) -> Matrix | None:
    """`load_by_hour` as shares of the profile's GPUs, or None when the cluster could not be asked
    (suggestions then go by free capacity alone; the page says the history is missing)."""
    try:
        matrix = load_by_hour(profile, now=now)
    except cluster.ClusterError:
        return None
    return load_share(matrix, inventory_of(profile))


def window_load(share: Matrix, start: datetime, end: datetime, tz) -> float:
    """Mean expected load of the local hours a window touches."""
    values = []
    at = start.astimezone(tz).replace(minute=0, second=0, microsecond=0).astimezone(dt_timezone.utc)
    while at < end:
        local = at.astimezone(tz)
        values.append(share[local.weekday()][local.hour])
        at += HOUR
    return sum(values) / len(values) if values else 0.0


def quiet_threshold(share: Matrix) -> float:
    """Loads below this are "quiet": the median hour of the week."""
    return statistics.median(v for row in share for v in row)


def suggest(gpu_types, count: int, minutes: int, now: datetime, *, limit: int = 5,
            shares: dict | None = None) -> list[Window]:
    """Up to `limit` windows of `minutes` (rounded up to the booking unit) for `count` GPUs of one of
    `gpu_types`, within the policy's horizon: where `jobs.bookings.free_gpus` leaves `count` and the
    expected load is below the week's median (or, on a flat week, the lowest there is). Ordered
    by (load step, start): the quietest first, the earliest among equally quiet ones. Suggestions
    of one GPU type do not overlap each other. `shares`: profile pk -> share matrix (tests, or a
    page that already has them); read with `share_by_hour` otherwise."""
    from jobs.models import BookingPolicy

    policy = BookingPolicy.current()
    unit = policy.unit_minutes
    length = timedelta(minutes=math.ceil(max(minutes, policy.min_minutes) / unit) * unit)
    first = round_up(now, unit)
    horizon = now + timedelta(days=policy.max_days_ahead)
    tz = site_zone()
    shares = dict(shares or {})
    candidates = []
    for gpu_type in gpu_types:
        if gpu_type.cluster_id not in shares:
            shares[gpu_type.cluster_id] = share_by_hour(gpu_type.cluster, now=now)
        share = shares[gpu_type.cluster_id] or empty_matrix()
        loads = []
        start = first
        while start + length <= horizon:
            loads.append((start, window_load(share, start, start + length, tz)))
            start += timedelta(minutes=unit)
        if not loads:
            continue
        threshold = quiet_threshold(share)
        quiet = [(s, load) for s, load in loads if load < threshold]
        if not quiet:
            lowest = min(load for _, load in loads)
            quiet = [(s, load) for s, load in loads if load <= lowest]
        candidates += [(round(load / LOAD_STEP), s, load, gpu_type) for s, load in quiet]
    candidates.sort(key=lambda c: (c[0], c[1]))
    chosen: list[Window] = []
    checks = 0
    for _, start, load, gpu_type in candidates:
        if len(chosen) >= limit or checks >= MAX_CAPACITY_CHECKS:
            break
        end = start + length
        if any(w.gpu_type.pk == gpu_type.pk and w.start < end and start < w.end for w in chosen):
            continue
        checks += 1
        if capacity.free_gpus(gpu_type, start, end) >= count:
            chosen.append(Window(start=start, end=end, gpu_type=gpu_type, expected_load=load))
    return chosen
