"""The watcher's last cycle, per cluster profile: a Redis hash `slug -> unix time` (plain numbers,
never pickles), written once per cycle and read by /readyz and /metrics.

Per profile, because a site may run one watcher per profile (`watch_cluster --profile`): each
records the profiles it follows, and a stopped one shows as its profiles growing old. Redis,
because every web process must see it and the database is the thing it should not load.
"""
from __future__ import annotations

import time

#: the hash's key, in the RQ queue's Redis
KEY = "ffportal:watcher:last-cycle"


def _redis():
    from jobs.background import enqueue

    return enqueue.queue().connection


def record_cycle(slugs: list[str], now: float | None = None) -> None:
    """The watcher finished a cycle over these profiles. Never raises: a Redis hiccup must not stop
    the loop that follows the jobs (it costs a stale age on /readyz until the next cycle)."""
    if not slugs:
        return
    when = time.time() if now is None else now
    try:
        _redis().hset(KEY, mapping={slug: f"{when:.3f}" for slug in slugs})
    except Exception:
        import logging

        logging.getLogger(__name__).warning("watcher heartbeat not recorded (Redis)", exc_info=True)


def last_cycles() -> dict[str, float]:
    """`{slug: unix time of its last cycle}`; raises redis errors (the caller reports Redis down).
    A value that is not a number (planted, or a format of the future) is left out."""
    found = {}
    for slug, value in _redis().hgetall(KEY).items():
        try:
            found[slug.decode() if isinstance(slug, bytes) else str(slug)] = float(value)
        except (TypeError, ValueError):
            continue
    return found
