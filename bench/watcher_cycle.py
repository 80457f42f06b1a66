"""One watcher cycle for 100 active jobs vs 1, and how many SSH execs a cycle makes.

Submits 100 real held Slurm jobs (`sbatch --hold`, so they stay PENDING and cost nothing) on the
local cluster, makes 100 portal jobs pointing at them, and times `poll_profile` (squeue + sacct +
progress records + log tails in one exec) with 1 and with 100 of them active, the two sizes
alternating round after round. A third case has 100 jobs of which 20 have a task waiting for its
log (the tails ride in the same exec). Every SSH exec is counted at the runner itself
(`SSHRunner.run`, `run_batch`), not taken from the watcher's own report.

Prints, per case, the cycle seconds (min / median / max) and the execs per cycle (min / max),
and the ratio of the medians 100 vs 1; then cancels the held jobs.

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

import cluster  # noqa: E402
from cluster import slurm  # noqa: E402
from cluster.ssh import SSHRunner  # noqa: E402
from jobs.models import Job, JobStatus, Task, Template  # noqa: E402
from jobs.watcher.poll import poll_profile  # noqa: E402

N = 100
WAITING_FOR_LOG = 20
ROUNDS = 5
CYCLES_PER_ROUND = 3

EXECS = {"n": 0}


def counting(method):
    def wrapper(self, *args, **kwargs):
        EXECS["n"] += 1
        return method(self, *args, **kwargs)
    return wrapper


SSHRunner.run = counting(SSHRunner.run)
SSHRunner.run_batch = counting(SSHRunner.run_batch)


def cycles(profile, seconds: list, execs: list) -> None:
    for _ in range(CYCLES_PER_ROUND):
        EXECS["n"] = 0
        t0 = time.perf_counter()
        poll_profile(profile)
        seconds.append(time.perf_counter() - t0)
        execs.append(EXECS["n"])


def spread(values: list) -> dict:
    return {"min": round(min(values), 4), "median": round(statistics.median(values), 4), "max": round(max(values), 4)}


def main() -> int:
    user = User.objects.get(username="demo")
    template = Template.objects.get(slug="cpu-small")
    profile = template.cluster
    runner = cluster.runner_for(profile)
    work = profile.work_root
    submit = [["sbatch", "--parsable", "--hold", "--job-name", f"ffp-bench-{i}", "--time", "00:01:00",
               "--partition", template.partition, "--output", "/dev/null", "--chdir", work, "--wrap", "true"]
              for i in range(N)]
    ids = [slurm.parse_sbatch_parsable(r.stdout) for r in runner.run_batch(submit, timeout=120)]
    cases = {"1_job": ([], []), f"{N}_jobs": ([], []), f"{N}_jobs_{WAITING_FOR_LOG}_logs": ([], [])}
    try:
        jobs = []
        for sid in ids:
            job = Job.objects.create(owner=user, template=template, template_snapshot=template.snapshot().to_json(),
                                     cluster=profile, status=JobStatus.PENDING, slurm_job_id=sid,
                                     submitted_at=timezone.now(), total=1)
            Task.objects.create(job=job, index=0)
            jobs.append(job)
        pks = [j.pk for j in jobs]
        poll_profile(profile)  # warm: connection open, first parse done
        for _ in range(ROUNDS):  # the sizes alternate, so a drift of the machine hits both alike
            Job.objects.filter(pk__in=pks).update(status=JobStatus.PENDING)
            Job.objects.filter(pk__in=pks[1:]).update(status=JobStatus.QUEUED)  # only one active
            cycles(profile, *cases["1_job"])
            Job.objects.filter(pk__in=pks).update(status=JobStatus.PENDING)
            cycles(profile, *cases[f"{N}_jobs"])
            Task.objects.filter(job_id__in=pks[:WAITING_FOR_LOG]).update(log_wait_since=timezone.now())
            cycles(profile, *cases[f"{N}_jobs_{WAITING_FOR_LOG}_logs"])
            Task.objects.filter(job_id__in=pks).update(log_wait_since=None)
    finally:
        runner.run(slurm.scancel_argv(ids), timeout=60)
        Job.objects.filter(slurm_job_id__in=ids).delete()
    report = {name: {"cycle_seconds": spread(seconds), "ssh_execs_per_cycle": {"min": min(execs), "max": max(execs)},
                     "cycles": len(seconds)}
              for name, (seconds, execs) in cases.items()}
    report[f"ratio_median_{N}_vs_1"] = round(statistics.median(cases[f"{N}_jobs"][0])
                                              / statistics.median(cases["1_job"][0]), 3)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
