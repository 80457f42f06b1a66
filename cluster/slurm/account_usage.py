"""GPU-seconds per Slurm account over a time window, from Slurm's own accounting (sacct).

The portal charges its own jobs (jobs.usage.accounting); this reads what SLURM counted for each
team's account, which includes work the portal never started (a team member's own sbatch under the
same account) and is what fair share weighs.

    account_usage_argv(["vfx", "post"], since, until)  ->  ["env", "TZ=UTC", "sacct", ...]
    parse_account_usage(stdout)                          ->  {"vfx": 7200, "post": 0}

Choices, and why:

- `--allocations`: one line per job allocation (per array task), not per step: the allocation
  holds the GPUs, steps only use them. `--allusers`: every user's jobs under the account, not only
  the service user's (the portal's user may need PrivateData without `jobs`, docs/teams.md).
- `--state=RUNNING` with a window selects allocations that RAN at some moment of it, whatever they
  ended as; jobs that never started are left out.
- `--truncate` clips each allocation to the window, and `ElapsedRaw` with it (22.05, 24.11 and
  26.05 alike, checked on the local clusters): a job that straddles a month's start counts in each
  month only for its time inside it. Without it sacct reports the whole elapsed time of any job
  that touched the window, and a long job would count twice.
- `--duplicates`: every run of a requeued job (a preempted run held its GPUs too).
- Times are sent and read in UTC (`TZ=UTC` on the command): `--starttime`/`--endtime` are read in
  the cluster's local time zone otherwise, which the portal neither knows nor controls. The window's
  end should not lie in the future: a running job counts up to the window's end, so pass "now".
"""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from ..errors import SlurmError
from .accounts import checked_account
from .commands import IN_UTC
from .output import tres_gpus
from .reservations import slurm_time

#: sacct's columns, in this order
USAGE_FORMAT = "Account,ElapsedRaw,AllocTRES"


def account_usage_argv(accounts: Iterable[str], since: datetime, until: datetime) -> list[str]:
    """One sacct call: every allocation charged to one of `accounts` that ran in [since, until],
    clipped to it (aware datetimes; see the module's docstring)."""
    names = sorted({checked_account(a) for a in accounts})
    if not names:
        raise ValueError("account_usage_argv needs at least one account")
    if not since < until:
        raise ValueError(f"the usage window must end after it starts: {since!r} .. {until!r}")
    return [*IN_UTC, "sacct", "--allusers", "--allocations", "--duplicates", "--truncate", "--state=RUNNING",
            "--accounts=" + ",".join(names), "--starttime=" + slurm_time(since), "--endtime=" + slurm_time(until),
            "--parsable2", "--noheader", "--format=" + USAGE_FORMAT]


def parse_account_usage(stdout: str) -> dict[str, int]:
    """GPU-seconds per account from `account_usage_argv` output ("Account|ElapsedRaw|AllocTRES"
    lines): the sum of ElapsedRaw x the `gres/gpu` count of each allocation. An account with only
    CPU work, or whose allocations never got a GPU (empty AllocTRES), sums to 0; an account with no
    line at all is absent (the caller knows which it asked for)."""
    totals: dict[str, int] = {}
    for number, line in enumerate((stdout or "").splitlines(), 1):
        if not line.strip():
            continue
        fields = line.strip().split("|")
        if len(fields) != 3 or not fields[1].strip().isdigit():
            raise SlurmError(f"sacct line {number} is not Account|ElapsedRaw|AllocTRES: {line[:200]!r}")
        account = fields[0].strip()
        totals[account] = totals.get(account, 0) + int(fields[1]) * tres_gpus(fields[2])
    return totals
