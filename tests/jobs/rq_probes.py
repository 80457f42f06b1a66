"""Jobs for tests/jobs/test_rq_worker.py, run by a real RQ worker process (RQ imports them by
their dotted path). They look at the worker's SSH pool without opening a connection: a runner is
made lazily, and connects only on its first command."""
from __future__ import annotations

import time

import cluster

#: a profile the pool keys runners by; never connected to
CONFIG = cluster.ClusterConfig("cluster.invalid", 22, "ffportal", "no key", "no pin")


def mark_pool(token: str) -> None:
    """Leave a mark on this profile's pooled runner, as a job that opened its connection would."""
    cluster.get_runner(CONFIG).probe_token = token


def pool_mark() -> str | None:
    """The mark on this profile's pooled runner, or None: a later job sees it only if the pool
    (and so the connection it would hold) outlived the job that left it."""
    return getattr(cluster.get_runner(CONFIG), "probe_token", None)


def hang(token: str, seconds: float) -> None:
    """Mark the pool, then hang, like a command whose cluster stopped answering."""
    mark_pool(token)
    time.sleep(seconds)  # the hang itself is the behaviour under test: RQ's job timeout ends it
