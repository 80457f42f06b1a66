"""One watcher cycle for 100 active jobs vs 1: the poll is one SSH round trip whatever the count.

Submits 100 real held Slurm jobs (`sbatch --hold`, so they stay PENDING and cost nothing) on the
local cluster, makes 100 portal jobs pointing at them, and times `poll_profile` (squeue + sacct +
progress records in one exec) with 1 and with 100 of them active. Prints the medians and the
ratio (target <= 1.3), then cancels the held jobs.

Usage: .venv/bin/python bench/watcher_cycle.py   (the local cluster must be up)
"""
from __future__ import annotations

import json
import statistics
import sys
import time

from _portal_env import setup

setup()

from django.contrib.auth.models import User  # noqa: E402
from django.utils import timezone  # noqa: E402

from cluster import get_runner, slurm  # noqa: E402
from jobs.models import Job, JobStatus, Task, Template  # noqa: E402
from jobs.watcher.poll import poll_profile  # noqa: E402

N = 100
CYCLES = 7


def time_cycles(profile) -> float:
    poll_profile(profile)  # warm: connection open, first parse done
    times = []
    for _ in range(CYCLES):
        t0 = time.perf_counter()
        poll_profile(profile)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    user = User.objects.get(username="demo")
    template = Template.objects.get(slug="cpu-small")
    profile = template.cluster
    runner = get_runner(profile.cluster_config())
    work = profile.work_root
    submit = [["sbatch", "--parsable", "--hold", "--job-name", f"ffp-bench-{i}", "--time", "00:01:00",
               "--partition", template.partition, "--output", "/dev/null", "--chdir", work, "--wrap", "true"]
              for i in range(N)]
    ids = [slurm.parse_sbatch_parsable(r.stdout) for r in runner.run_batch(submit, timeout=120)]
    try:
        jobs = []
        for sid in ids:
            job = Job.objects.create(owner=user, template=template, template_snapshot=template.snapshot().to_json(),
                                     cluster=profile, status=JobStatus.PENDING, slurm_job_id=sid,
                                     submitted_at=timezone.now(), total=1)
            Task.objects.create(job=job, index=0)
            jobs.append(job)
        Job.objects.exclude(pk=jobs[0].pk).update(status=JobStatus.QUEUED)  # only one active
        one = time_cycles(profile)
        Job.objects.filter(pk__in=[j.pk for j in jobs]).update(status=JobStatus.PENDING)
        hundred = time_cycles(profile)
    finally:
        runner.run(slurm.scancel_argv(ids), timeout=60)
    print(json.dumps({
        "cycle_seconds_1_job": round(one, 4),
        f"cycle_seconds_{N}_jobs": round(hundred, 4),
        f"ratio_{N}_vs_1": round(hundred / one, 3),
        "target_ratio": 1.3,
        "ssh_round_trips_per_cycle": 1,
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
