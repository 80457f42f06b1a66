"""Readiness: is this portal able to do its work now? Database, Redis, each active cluster
profile, the watcher's last cycle. Each check answers in plain words, never with an exception's
text (it may carry a host, a user name or a password from a URL), and never over SSH: the
clusters' reachability is what the watcher last recorded on their profiles.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.utils.translation import gettext as _

log = logging.getLogger(__name__)

OK = "ok"


@dataclass
class Readiness:
    database: str = OK
    redis: str = OK
    clusters: dict[str, str] = field(default_factory=dict)
    #: seconds since the stalest active profile's last watcher cycle; None when it never ran
    watcher_age: float | None = None
    watcher: str = OK

    @property
    def ready(self) -> bool:
        return (self.database == OK and self.redis == OK and self.watcher == OK
                and all(v == OK for v in self.clusters.values()))

    def as_json(self) -> dict:
        return {"ready": self.ready, "database": self.database, "redis": self.redis, "clusters": self.clusters,
                "watcher": {"status": self.watcher, "last_cycle_age_seconds":
                            None if self.watcher_age is None else round(self.watcher_age, 1)}}


def readiness() -> Readiness:
    state = Readiness()
    state.database = _database()
    state.redis, cycles = _redis()
    if state.database != OK:
        # Without the database the active profiles are unknown: say so rather than guess.
        state.watcher = _("unknown: the database cannot be read")
        return state
    profiles = _active_profiles()
    state.clusters = {slug: cluster_words(down) for slug, down in profiles}
    if cycles is None:
        state.watcher = _("unknown: Redis cannot be read")
        return state
    state.watcher, state.watcher_age = watcher_words([slug for slug, _down in profiles], cycles, time.time())
    return state


def cluster_words(unreachable_since) -> str:
    """"ok", or since when the watcher could not reach it (the time only, never the error's text)."""
    if unreachable_since is None:
        return OK
    return _("unreachable since %(time)s") % {"time": unreachable_since.strftime("%Y-%m-%d %H:%M:%S UTC")}


def watcher_words(slugs: list[str], cycles: dict[str, float], now: float) -> tuple[str, float | None]:
    """The watcher's state over the active profiles `slugs`, and the age of the stalest one's last
    cycle. No active profile: nothing to watch, "ok"."""
    if not slugs:
        return OK, None
    missing = [s for s in slugs if s not in cycles]
    if missing:
        return _("not running: no cycle recorded for %(profiles)s") % {"profiles": ", ".join(sorted(missing))}, None
    age = max(0.0, max(now - cycles[s] for s in slugs))
    if age > settings.READY_WATCHER_MAX_AGE:
        return _("stalled: its last cycle was %(seconds)d seconds ago") % {"seconds": age}, age
    return OK, age


def _database() -> str:
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:
        log.warning("readyz: database check failed", exc_info=True)
        return _("cannot be reached")
    return OK


def _redis() -> tuple[str, dict[str, float] | None]:
    from jobs.ops import heartbeat

    try:
        return OK, heartbeat.last_cycles()
    except Exception:
        log.warning("readyz: Redis check failed", exc_info=True)
        return _("cannot be reached"), None


def _active_profiles() -> list[tuple[str, object]]:
    from jobs.models import ClusterProfile

    return list(ClusterProfile.objects.filter(is_active=True).order_by("slug").values_list("slug", "unreachable_since"))
