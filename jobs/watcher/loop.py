"""The watcher's loop: what `manage.py watch_cluster` runs until it is stopped.

One cycle polls each active cluster profile in one SSH round trip (`jobs.watcher.poll`), then does
the watcher's periodic duties: every cycle the bookings' beat; every `SWEEP_EVERY` cycles the
sweeps that find work a lost Redis or a closed tab left behind (submissions and webhook calls
enqueued again, expired uploads, retention notices and deletions). Stateless: restart it any time;
it resumes from the Slurm ids stored in the database. A cluster that cannot be reached is tried again
after a backoff (doubling, up to `MAX_BACKOFF_S`), and its profile records `unreachable_since` for
the pages to show.

A duty that fails is logged and never stops the loop: following the jobs matters most.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.utils import timezone

from jobs import bookings, webhooks
from jobs.background.recovery import requeue_orphans
from jobs.clusters import node_states
from jobs.models import ClusterProfile
from jobs.ops import heartbeat
from jobs.ops import metrics as ops_metrics
from jobs.results import retention
from jobs.uploads import store as upload_store
from jobs.usage import team_usage
from jobs.watcher.poll import poll_profile

log = logging.getLogger("jobs.watcher.poll")

#: every this many cycles, the sweeps (with the default interval: every 10-20 seconds)
SWEEP_EVERY = 10
#: the longest wait before an unreachable cluster is tried again
MAX_BACKOFF_S = 60.0


def _sweep() -> None:
    """Work a lost Redis or a closed tab left behind. Each duty on its own: one failing never
    keeps the others (or the loop) from running."""
    for name, duty in (("recovery: re-queueing lost submissions", requeue_orphans),
                       ("uploads: expiring unused uploads", upload_store.expire),
                       ("webhooks: re-queueing due attempts", webhooks.send_due),
                       ("retention: beat", lambda: retention.beat(timezone.now())),
                       ("bookings: counting the clusters' GPUs", bookings.count_due),
                       ("clusters: reading the nodes' states", node_states.read_due),
                       ("usage: reading usage by team from the clusters", team_usage.refresh_due)):
        _guarded(name, duty)


def _guarded(name: str, duty: Callable[[], object]) -> None:
    try:
        duty()
    except Exception:
        log.exception("%s failed", name)


@dataclass
class Backoff:
    """When each unreachable profile may be polled again."""
    interval: float
    wait: dict[int, float] = field(default_factory=dict)
    next_try: dict[int, float] = field(default_factory=dict)

    def due(self, pk: int) -> bool:
        return time.monotonic() >= self.next_try.get(pk, 0)

    def failed(self, pk: int) -> float:
        self.wait[pk] = min(MAX_BACKOFF_S, max(self.interval, self.wait.get(pk, self.interval) * 2))
        self.next_try[pk] = time.monotonic() + self.wait[pk]
        return self.wait[pk]

    def succeeded(self, pk: int) -> None:
        self.wait.pop(pk, None)


def cycle(profiles, backoff: Backoff) -> tuple[list[str], int]:
    """Poll every profile that is due; (the slugs watched, SSH execs made)."""
    watched, execs = [], 0
    for profile in profiles:
        watched.append(profile.slug)
        if not backoff.due(profile.pk):
            continue
        result = poll_profile(profile)
        execs += result.execs
        if result.error:
            ops_metrics.ssh_error(profile.slug, "watch")
            wait = backoff.failed(profile.pk)
            log.warning("cluster %s unreachable (retry in %.0fs): %s", profile.slug, wait, result.error)
        else:
            backoff.succeeded(profile.pk)
            if result.changed:
                log.info("cluster %s: %d active job(s), %d changed", profile.slug, result.jobs, len(result.changed))
    return watched, execs


def run(interval: float, only: str | None = None, once: bool = False,
        stopped: Callable[[], bool] = lambda: False) -> None:
    """Cycle until `stopped()` says so (or after one cycle with `once`); `only`: one profile's slug."""
    backoff = Backoff(interval)
    n = 0
    while not stopped():
        if n % SWEEP_EVERY == 0:
            _sweep()
        n += 1
        started = time.monotonic()
        profiles = ClusterProfile.objects.filter(is_active=True)
        if only:
            profiles = profiles.filter(slug=only)
        watched, execs = cycle(profiles, backoff)
        # Bookings whose time moved on (jobs.bookings.beat): one query when nothing is due.
        _guarded("bookings: beat", lambda: bookings.tick(timezone.now()))
        # /metrics and /readyz (jobs.ops): how long the cycle took, and that this loop is alive.
        ops_metrics.watcher_cycle(time.monotonic() - started, execs)
        heartbeat.record_cycle(watched)
        if once:
            break
        time.sleep(max(0.0, interval - (time.monotonic() - started)))
