"""The metrics processes record as things happen, and the calls that record them.

Every process that records (the ASGI processes, the RQ workers, the watcher) writes to
PROMETHEUS_MULTIPROC_DIR when it is set: prometheus_client then keeps each value in a small
memory-mapped file per process, and /metrics adds them up (jobs.ops.views). The variable must be
in the environment before prometheus_client is imported, which is why it is read from the
environment and not from a Django setting; the directory is emptied at start (docs/operations.md).

Recording never fails the work it measures: these are counters in memory (or a memory-mapped
file), and the helpers below take plain values.
"""
from __future__ import annotations

import glob
import os
import re

from prometheus_client import Counter, Gauge, Histogram, multiprocess

#: Start -> Slurm job id: from a few seconds (small upload) to many minutes (big folder, an outage)
SUBMIT_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600)
#: one watcher cycle over every active profile
CYCLE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)
#: SSH execs in one cycle: one per profile polled, whatever happens (jobs.watcher.poll)
EXEC_BUCKETS = (0, 1, 2, 3, 5, 10, 20)

SUBMIT_LATENCY = Histogram(
    "ffportal_submit_latency_seconds", "Seconds from Start (the job row made) to its Slurm job id.",
    buckets=SUBMIT_BUCKETS)
WATCHER_CYCLE = Histogram(
    "ffportal_watcher_cycle_seconds", "Seconds one watcher cycle took (every active cluster profile polled).",
    buckets=CYCLE_BUCKETS)
WATCHER_EXECS = Histogram(
    "ffportal_watcher_ssh_execs", "SSH execs one watcher cycle made.", buckets=EXEC_BUCKETS)
SSH_ERRORS = Counter(
    "ffportal_ssh_errors", "Cluster commands that failed over SSH (unreachable, timed out, refused), by profile.",
    ["profile", "during"])
# livesum: the open connections of the processes alive now (a killed process's count is dropped
# at the next scrape: forget_dead_processes).
WEBSOCKETS = Gauge(
    "ffportal_websocket_connections", "Open WebSocket connections (live pages).", multiprocess_mode="livesum")

_PID = re.compile(r"_(\d+)\.db$")


def submitted(job) -> None:
    """A job got its Slurm id: how long it took from Start. A retry's later attempts are left out:
    their Start was long ago, and the time is the first run's, not the submission's."""
    from django.utils import timezone

    if getattr(job, "attempt", 1) > 1:
        return
    SUBMIT_LATENCY.observe(max(0.0, (timezone.now() - job.created_at).total_seconds()))


def watcher_cycle(seconds: float, execs: int) -> None:
    WATCHER_CYCLE.observe(max(0.0, seconds))
    WATCHER_EXECS.observe(execs)


def ssh_error(profile_slug: str, during: str) -> None:
    """`during`: what the portal was doing ("watch", "submit")."""
    SSH_ERRORS.labels(profile=profile_slug, during=during).inc()


def websocket_opened() -> None:
    WEBSOCKETS.inc()


def websocket_closed() -> None:
    WEBSOCKETS.dec()


def multiproc_dir() -> str | None:
    """The multi-process directory prometheus_client uses in this process, or None (one process)."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir") or None


def forget_dead_processes(path: str) -> list[int]:
    """Drop the live gauges (open WebSockets) of processes that are gone, e.g. an ASGI process that
    was killed: their last count would otherwise stay in the sum. Counters and histograms of dead
    processes are kept (they are totals). All processes writing here run on this machine as one user
    (the service user), so `kill(pid, 0)` tells whether one is alive. Returns the pids forgotten."""
    gone = set()
    for name in glob.glob(os.path.join(path, "gauge_live*_*.db")):
        match = _PID.search(name)
        if match and not _alive(int(match.group(1))):
            gone.add(int(match.group(1)))
    for pid in gone:
        multiprocess.mark_process_dead(pid, path)
    return sorted(gone)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
