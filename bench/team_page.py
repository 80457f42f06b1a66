"""The team page (/teams/<account>/) costs the same however big the team: 5 vs 200 members (100
team jobs), and 100 vs 20,000 team jobs (200 members).

Renders the page as its lead through Django's test client (the whole view and template, no
network), in a throw-away SQLite database (bench/_portal_env.py); the two sizes alternate, REPS
times each. Prints per size the min/median/max wall time and the number of database queries, and
the ratios of the medians. Targets: the same number of queries at every size; the jobs' ratio close
to 1 (the page shows one page of jobs); the members' grows with the rows shown (every member is
listed, with their limits).

Usage: .venv/bin/python bench/team_page.py [REPS]   (needs the local cluster's env: scripts/cluster/env.sh)
"""
from __future__ import annotations

import statistics
import sys
import time

from _portal_env import setup

setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from jobs.models import Job, JobStatus, Team, Template, UsageRecord  # noqa: E402
from jobs.usage.accounting import month_of  # noqa: E402

SIZES = ((5, 100), (200, 100), (200, 20_000))  # (members, team jobs): members and jobs apart
BATCH = 5_000


def make_team(n: int, members: int, jobs: int, template: Template) -> tuple[Team, User]:
    group = Group.objects.create(name=f"bench-team-{n}")
    team = Team.objects.create(group=group, slurm_account=f"bench{n}")
    people = User.objects.bulk_create([User(username=f"bench{n}-m{i}") for i in range(members)])
    group.user_set.add(*people)
    lead = people[0]
    team.leads.add(lead)
    snapshot, now = template.snapshot().to_json(), timezone.now()
    for first in range(0, jobs, BATCH):
        made = Job.objects.bulk_create([
            Job(owner=people[i % members], template=template, template_snapshot=snapshot, name=f"shoot {i}",
                cluster=template.cluster, team=team, slurm_account=team.slurm_account,
                status=JobStatus.COMPLETED if i % 10 else JobStatus.RUNNING, total=10, done=10, finished_at=now)
            for i in range(first, min(first + BATCH, jobs))])
        UsageRecord.objects.bulk_create([UsageRecord(job=j, user_id=j.owner_id, period=month_of(), gpu_seconds=600)
                                         for j in made if j.status == JobStatus.COMPLETED])
    return team, lead


def main(reps: int) -> None:
    template = Template.objects.first()
    teams = [make_team(n, members, jobs, template) for n, (members, jobs) in enumerate(SIZES)]
    times: dict[int, list[float]] = {n: [] for n in range(len(SIZES))}
    queries: dict[int, int] = {}
    for _ in range(reps):
        for n, (team, lead) in enumerate(teams):
            client = Client()
            client.force_login(lead)
            with CaptureQueriesContext(connection) as captured:
                began = time.perf_counter()
                r = client.get(f"/teams/{team.slurm_account}/")
                times[n].append(time.perf_counter() - began)
            assert r.status_code == 200, r.status_code
            queries[n] = len(captured.captured_queries)
    for n, (members, jobs) in enumerate(SIZES):
        t = sorted(times[n])
        print(f"{members:>4} members, {jobs:>6} team jobs: min {t[0] * 1000:.0f} ms, median "
              f"{statistics.median(t) * 1000:.0f} ms, max {t[-1] * 1000:.0f} ms; {queries[n]} queries")
    med = [statistics.median(times[n]) for n in range(len(SIZES))]
    print(f"ratio of medians, 200 vs 5 members: {med[1] / med[0]:.2f}; 20,000 vs 100 jobs (200 members): "
          f"{med[2] / med[1]:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
