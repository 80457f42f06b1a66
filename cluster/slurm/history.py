"""GPU use of the whole cluster over a past window, from Slurm's accounting (sacct).

The off-peak suggestion reads how busy each hour of the week was. That must count EVERY user's
jobs, not only the portal's, so the query runs with `--allusers` (the portal's Slurm user needs to
see others' jobs: PrivateData without `jobs`/`usage`, or AdminLevel=Operator; docs/slurm-bookings.md).
"""
from __future__ import annotations

import dataclasses
from datetime import datetime

from ..errors import SlurmError
from .commands import IN_UTC
from .output import tres_gpus
from .reservations import parse_slurm_time, slurm_time


@dataclasses.dataclass(frozen=True)
class GpuUse:
    """One job allocation's GPUs over the time it held them (aware UTC; end None while running)."""

    start: datetime
    end: datetime | None
    gpus: int


def gpu_history_argv(since: datetime, until: datetime) -> list[str]:
    """One sacct call: every user's job allocations that RAN at some moment of [since, until].

    `--state=RUNNING` with a window selects allocations that were running in it, whatever they
    ended as (completed, failed, preempted, cancelled while running); jobs that never started are
    left out. `--truncate` clips each to the window (a job still running ends "now"), so the
    hours counted are the window's own. `--duplicates` keeps each run of a requeued job (its
    preempted runs held GPUs too). Times are UTC (TZ=UTC).

    The answer is one line per allocation: a busy site's weeks of history are tens of thousands
    of lines, so the portal asks at most every 10 minutes and keeps the result.
    """
    if not since < until:
        raise ValueError(f"the history window must end after it starts: {since!r} .. {until!r}")
    return [*IN_UTC, "sacct", "--allusers", "--allocations", "--duplicates", "--truncate", "--state=RUNNING",
            "--starttime=" + slurm_time(since), "--endtime=" + slurm_time(until),
            "--parsable2", "--noheader", "--format=Start,End,AllocTRES"]


def parse_gpu_history(stdout: str) -> list[GpuUse]:
    """GPU allocations from `gpu_history_argv` output ("Start|End|AllocTRES" lines).

    Allocations without GPUs and ones that never started (Start "None"/"Unknown") are left out;
    End "Unknown" (a running job, when sacct ran without --truncate) gives end None.
    """
    uses = []
    for number, line in enumerate((stdout or "").splitlines(), 1):
        if not line.strip():
            continue
        fields = line.strip().split("|")
        if len(fields) != 3:
            raise SlurmError(f"sacct line {number} is not Start|End|AllocTRES: {line[:200]!r}")
        start, end = parse_slurm_time(fields[0]), parse_slurm_time(fields[1])
        gpus = tres_gpus(fields[2])
        if start is None or gpus <= 0:
            continue
        uses.append(GpuUse(start=start, end=end, gpus=gpus))
    return uses
