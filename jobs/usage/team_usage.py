"""Usage by team from Slurm's own accounting: GPU-hours per team, cluster and month (docs/teams.md).

The portal's own figures (jobs.usage.accounting) charge each job it ran when it ends. These read
what Slurm counted for each team's account (`sacct`, cluster.slurm.account_usage): work the portal
did not start is in them, and a running job counts so far. They are stored (TeamUsage), so pages
never wait on SSH:

- the watcher's sweep reads each reachable cluster again after REFRESH_EVERY (`refresh_due`);
- "Read again from the clusters" in the admin usage report, and `manage.py read_team_usage`,
  read every cluster at once (`refresh_all`).

Each read asks for this month and last month (months in settings.TIME_ZONE, as the quotas count
them), both in one SSH round trip. A cluster that does not answer keeps its last figures; pages
show when they were read, never a zero that nobody measured.
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

import cluster
from cluster.slurm.account_usage import account_usage_argv, parse_account_usage
from jobs.models import ClusterProfile, Team, TeamUsage
from jobs.usage.accounting import last_months

log = logging.getLogger(__name__)

__all__ = ["REFRESH_EVERY", "month_window", "refresh_all", "refresh_due", "refresh_profile", "report_rows",
           "team_usage_rows"]

#: how often the watcher's sweep reads a cluster again
REFRESH_EVERY = timedelta(minutes=10)
#: months each read asks for: last month (jobs that ended late, or were accounted late) and this one
MONTHS_READ = 2
#: seconds the two sacct calls may take on a busy slurmdbd
SACCT_TIMEOUT = 120

# a failed read is not tried again before REFRESH_EVERY (per process; the watcher's sweep)
_last_try: dict[int, float] = {}


def month_window(month: date, now: datetime) -> tuple[datetime, datetime]:
    """The aware moments [start, end) of `month` (its first day) in settings.TIME_ZONE, the end
    cut at `now`: sacct counts a running job up to the window's end, and the future has no use."""
    zone = ZoneInfo(settings.TIME_ZONE)
    following = date(month.year + month.month // 12, month.month % 12 + 1, 1)
    start = datetime(month.year, month.month, 1, tzinfo=zone)
    return start, min(datetime(following.year, following.month, 1, tzinfo=zone), now)


def refresh_profile(profile: ClusterProfile, now: datetime | None = None) -> int:
    """Read this month's and last month's GPU-seconds of every team on `profile` from sacct and
    store them; returns the rows written. Raises cluster.ClusterError when the cluster does not
    answer, or answers what cannot be read: then nothing is written, and the last figures stay."""
    now = now or timezone.now()
    teams = list(Team.objects.order_by("pk"))
    if not teams:
        return 0
    accounts = [t.slurm_account for t in teams]
    windows = [(month, *month_window(month, now)) for month in last_months(MONTHS_READ, now)]
    windows = [w for w in windows if w[1] < w[2]]  # this month at its very first second: nothing yet
    argvs = [account_usage_argv(accounts, since, until) for _, since, until in windows]
    results = cluster.runner_for(profile).run_batch(argvs, timeout=SACCT_TIMEOUT)
    for result in results:
        if result.rc != 0:
            last = result.stderr.strip().splitlines()[-1:] or ["(no error output)"]
            raise cluster.CommandFailed(f"sacct failed on {profile.slug} (exit status {result.rc}): {last[0]}",
                                        result.rc, result.stderr)
    sums = [parse_account_usage(result.stdout) for result in results]  # all read before any is written
    written = 0
    with transaction.atomic():
        for (month, _since, _until), used in zip(windows, sums):
            for team in teams:
                TeamUsage.objects.update_or_create(
                    team=team, cluster=profile, month=month,
                    defaults={"gpu_seconds": float(used.get(team.slurm_account, 0)), "read_at": now})
                written += 1
    return written


def refresh_all(now: datetime | None = None) -> dict[str, str]:
    """Read every active cluster now. Returns {slug: "" when read, else why not}; one cluster
    failing never stops the others."""
    outcome = {}
    for profile in ClusterProfile.objects.filter(is_active=True).order_by("name"):
        try:
            refresh_profile(profile, now)
            outcome[profile.slug] = ""
        except cluster.ClusterError as exc:
            log.warning("cluster %s: team usage not read: %s", profile.slug, exc)
            outcome[profile.slug] = str(exc) or exc.__class__.__name__
    return outcome


def refresh_due(now: datetime | None = None) -> list[str]:
    """The watcher sweep's duty: read each active, reachable cluster whose figures are older than
    REFRESH_EVERY (or that has none). Returns the slugs read; a failure is logged, never raised."""
    now = now or timezone.now()
    if not Team.objects.exists():
        return []
    last = dict(TeamUsage.objects.values("cluster").annotate(at=Max("read_at")).values_list("cluster", "at"))
    read = []
    for profile in ClusterProfile.objects.filter(is_active=True, unreachable_since__isnull=True):
        at = last.get(profile.pk)
        if at is not None and now - at < REFRESH_EVERY:
            continue
        if time.monotonic() - _last_try.get(profile.pk, -1e12) < REFRESH_EVERY.total_seconds():
            continue
        _last_try[profile.pk] = time.monotonic()
        try:
            refresh_profile(profile, now)
        except Exception:  # one cluster's answer never stops the sweep
            log.warning("cluster %s: team usage not read", profile.slug, exc_info=True)
            continue
        read.append(profile.slug)
    return read


def read_again() -> dict[str, str]:
    """The RQ task behind "Read again from the clusters" (jobs.background.enqueue)."""
    return refresh_all()


# ---- what pages show --------------------------------------------------------------------------------

def _rows(teams, periods: list[date]):
    return (TeamUsage.objects.filter(team__in=teams, month__gte=periods[0], month__lte=periods[-1])
            .select_related("cluster").order_by("cluster__name"))


def report_rows(periods: list[date], group=None) -> list[dict]:
    """For the admin usage report: per team and cluster, GPU-hours in each of `periods` (None where
    never read) and when read; with more than one cluster, a team's total row after its clusters.
    `group`: only the team that group is (none when it is a plain group).

    [{"team", "account", "cluster" (None: all clusters), "hours": [float | None], "total", "read_at"}]
    """
    column = {p: i for i, p in enumerate(periods)}
    teams = Team.objects.select_related("group").order_by("group__name")
    teams = list(teams.filter(group=group) if group is not None else teams)
    by_team: dict[int, dict] = defaultdict(dict)
    for row in _rows(teams, periods):
        entry = by_team[row.team_id].setdefault(row.cluster_id, {"cluster": row.cluster, "hours": [None] * len(periods),
                                                                 "read_at": row.read_at})
        entry["hours"][column[row.month]] = row.gpu_hours
        entry["read_at"] = max(entry["read_at"], row.read_at)  # the cluster's last reading
    table = []
    for team in teams:
        clusters = list(by_team.get(team.pk, {}).values())
        for entry in clusters:
            table.append({"team": team, "account": team.slurm_account, **entry,
                          "total": sum(h for h in entry["hours"] if h)})
        if len(clusters) > 1:
            hours = [None if all(e["hours"][i] is None for e in clusters) else
                     sum(e["hours"][i] or 0 for e in clusters) for i in range(len(periods))]
            table.append({"team": team, "account": team.slurm_account, "cluster": None, "hours": hours,
                          "total": sum(h for h in hours if h), "read_at": min(e["read_at"] for e in clusters)})
    return table


def team_usage_rows(team: Team, months: int = 3, now: datetime | None = None) -> dict:
    """The `team_usage` context of templates/jobs/_team_usage.html, for a page about one team.

    {"months": [{"month", "gpu_hours", "clusters": [{"name", "gpu_hours", "read_at"}]}] newest first,
     "read_at": the oldest of the clusters' last readings (None: never read), "now"}
    (Each member's own figures are the team page's: jobs.teams.lead.members.)

    The caller checks that the user may see `team`; nothing here looks at who asks.
    """
    now = now or timezone.now()
    periods = last_months(months, now)
    per_month: dict[date, list[TeamUsage]] = defaultdict(list)
    for row in _rows([team], periods):
        per_month[row.month].append(row)
    shown = [{"month": p, "gpu_hours": sum(r.gpu_hours for r in per_month[p]) if per_month[p] else None,
              "clusters": [{"name": r.cluster.shown_name, "gpu_hours": r.gpu_hours, "read_at": r.read_at}
                           for r in per_month[p]]} for p in reversed(periods)]
    last_read: dict[int, datetime] = {}
    for row in (r for rows in per_month.values() for r in rows):
        last_read[row.cluster_id] = max(last_read.get(row.cluster_id, row.read_at), row.read_at)
    return {"months": shown, "read_at": min(last_read.values(), default=None), "now": now}
