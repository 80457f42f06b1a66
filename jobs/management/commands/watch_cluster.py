"""`manage.py watch_cluster`: the long-running loop that follows every active job on the clusters.

One cycle polls each active cluster profile in one SSH round trip (see jobs/watcher/). Stateless:
restart it any time; it resumes from the Slurm ids stored in the database. When a cluster cannot
be reached it backs off (up to a minute) and records `unreachable_since` for the pages to show.
"""
import logging
import signal
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from jobs import bookings, webhooks

from jobs.uploads import store as upload_store
from jobs.checks import refuse_insecure_start
from jobs.models import ClusterProfile
from jobs.ops import heartbeat
from jobs.ops import metrics as ops_metrics
from jobs.background.recovery import requeue_orphans
from jobs.watcher.poll import poll_profile

log = logging.getLogger("jobs.watcher.poll")


class Command(BaseCommand):
    help = "Follow active jobs on every cluster profile (or one), applying Slurm state and progress."

    def add_arguments(self, parser):
        parser.add_argument("--profile", help="slug of one cluster profile (default: all active)")
        parser.add_argument("--once", action="store_true", help="one cycle, then exit")
        parser.add_argument("--interval", type=float, default=None, help="seconds between cycles")

    def handle(self, *args, **opts):
        refuse_insecure_start()  # also when started with --skip-checks
        interval = opts["interval"] or settings.WATCH_INTERVAL
        stop = {"now": False}

        def _stop(*_):
            stop["now"] = True

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        backoff: dict[int, float] = {}
        next_try: dict[int, float] = {}
        cycle = 0
        while not stop["now"]:
            # Every 10th cycle: submissions and webhook calls Redis lost are enqueued again (jobs/background/recovery.py,
            # jobs.webhooks), unused uploads expire.
            if cycle % 10 == 0:
                requeue_orphans()
                upload_store.expire()  # files sent ahead that no Start used in time
                _lost_webhooks()
                _retention_beat()  # face data: notices before, deletion after the retention days
            cycle += 1
            qs = ClusterProfile.objects.filter(is_active=True)
            if opts["profile"]:
                qs = qs.filter(slug=opts["profile"])
            started = time.monotonic()
            watched, execs = [], 0
            for profile in qs:
                watched.append(profile.slug)
                if time.monotonic() < next_try.get(profile.pk, 0):
                    continue
                result = poll_profile(profile)
                execs += result.execs
                if result.error:
                    ops_metrics.ssh_error(profile.slug, "watch")
                    backoff[profile.pk] = min(60.0, max(interval, backoff.get(profile.pk, interval) * 2))
                    next_try[profile.pk] = time.monotonic() + backoff[profile.pk]
                    log.warning("cluster %s unreachable (retry in %.0fs): %s", profile.slug, backoff[profile.pk], result.error)
                else:
                    backoff.pop(profile.pk, None)
                    if result.changed:
                        log.info("cluster %s: %d active job(s), %d changed", profile.slug, result.jobs, len(result.changed))
            _booking_beat()
            # /metrics and /readyz (jobs.ops): how long the cycle took, and that this loop is alive.
            ops_metrics.watcher_cycle(time.monotonic() - started, execs)
            heartbeat.record_cycle(watched)
            if opts["once"]:
                break
            time.sleep(max(0.0, interval - (time.monotonic() - started)))


def _booking_beat() -> None:
    """Bookings whose time moved on (jobs.bookings.beat): one query when nothing is due. A failure
    is logged and never stops the loop that follows the jobs."""
    try:
        bookings.tick(timezone.now())
    except Exception:  # noqa: BLE001 - see the docstring
        log.exception("bookings: beat failed")


def _lost_webhooks() -> None:
    """Webhook attempts whose RQ job was lost (Redis restarted) are queued again; a failure is logged."""
    try:
        webhooks.send_due()
    except Exception:  # noqa: BLE001 - the loop that follows the jobs never stops for this
        log.exception("webhooks: re-queueing due attempts failed")


def _retention_beat() -> None:
    """Retention notices and deletions due (jobs.results.retention.beat); a failure is logged, never stops the loop."""
    try:
        from jobs.results import retention

        retention.beat(timezone.now())
    except Exception:  # noqa: BLE001 - the loop that follows the jobs never stops for this
        log.exception("retention: beat failed")
