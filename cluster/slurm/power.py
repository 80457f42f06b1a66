"""Waking powered-down nodes ahead of a booking, with what the portal's own user may do.

Slurm's power saving wakes a node when a job is given it, but a reservation wakes nothing: a booking
whose nodes are asleep would start with a boot's delay. `scontrol power up` needs an Admin, more than
the portal's Operator grant, so the portal wakes them the way a user can: a small job on those very
nodes just before the booking ("warm-up job"). Slurm gives it the asleep nodes, runs the site's
ResumeProgram, and the job sleeps on them until shortly before the booking starts, so the nodes are
up and not idle long enough to be suspended again. It asks for no GPU and ends by itself before the
reservation's window (its time limit fits before the start, or Slurm would not place it there):

    wake_job_argv(["n2"], until=1767000000, minutes=2, partition="gpu")
    -> ["sbatch", "--parsable", "--job-name=ffportal-wake", "--nodelist=n2", "--nodes=1", ...]
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence

from .commands import sbatch_argv

#: the warm-up job's name: squeue and sacct show it for what it is
WAKE_JOB_NAME = "ffportal-wake"
#: the warm-up job stops this long before the booking starts, so its cores are free by then
WAKE_STOPS_BEFORE = 10
_NODE = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_PARTITION = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def wake_minutes(seconds_to_start: float) -> int:
    """The warm-up job's time limit in whole minutes: as long as fits before the start (Slurm places
    a job on a reservation's nodes only if its limit ends before the window); 0 = too late to fit."""
    return max(0, math.floor(seconds_to_start / 60))


def wake_job_argv(nodes: Sequence[str], until: int, minutes: int, partition: str = "") -> list[str]:
    """`sbatch` of the warm-up job on exactly `nodes`: one task per node, sleeping until `until`
    (Unix seconds) less WAKE_STOPS_BEFORE, within `minutes` (wake_minutes)."""
    if not nodes or any(not _NODE.fullmatch(n) for n in nodes):
        raise ValueError(f"not node names: {list(nodes)!r}")
    if minutes < 1:
        raise ValueError("the warm-up job needs a time limit of at least a minute")
    extra = [f"--job-name={WAKE_JOB_NAME}", "--nodelist=" + ",".join(nodes), f"--nodes={len(nodes)}",
             "--ntasks-per-node=1", "--cpus-per-task=1", "--mem=16M", f"--time={int(minutes)}",
             "--output=/dev/null", "--no-requeue"]
    if partition:
        if not _PARTITION.fullmatch(partition):
            raise ValueError(f"not a partition name: {partition!r}")
        extra.append(f"--partition={partition}")
    stop_at = int(until) - WAKE_STOPS_BEFORE
    # Sleeps what is left until stop_at (nothing if the wake took longer); only integers go in.
    extra.append(f"--wrap=left=$(( {stop_at} - $(date +%s) )); [ $left -gt 0 ] && sleep $left; true")
    return sbatch_argv(extra=extra)
