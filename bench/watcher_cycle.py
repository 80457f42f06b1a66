"""One watcher cycle (`poll_profile`) with 1 and with 100 active jobs, on the same Slurm queue.

Real parts: the local Slurm cluster (slurmctld, slurmdbd), SSH, the watcher's code, SQLite.

Set-up, once: 100 held 4-task arrays (`sbatch --hold`: PENDING, they cost nothing) and 20 arrays
whose tasks are killed by SIGKILL at once (they leave the queue: FAILED 0:9, the case where the
watcher reads sacct and the tasks' logs); 120 portal jobs pointing at them, each with 20 targets
and a progress record per task on the cluster (2 targets done with their output fetched, 1
running). Timing starts only once slurmdbd has recorded every job (sacct lists all 480 tasks,
the killed ones ended) and one warm-up cycle has run.

Cases, all on that same queue (only which portal jobs are active changes):

    1_job                 1 held job active
    100_jobs              100 held jobs active: every task in the queue
    100_jobs_20_left      80 held + the 20 killed jobs, their tasks waiting for their logs
                          (re-read while slurmstepd may still write a memory-kill line)
    100_jobs_every_job    100 held jobs on the watcher's slower beat: sacct for every job

The cases alternate round after round (the order rotates), so a drift of the machine hits each
alike. Measured at the runner, not taken from the watcher's own report: SSH execs per cycle
(each `SSHRunner._exec`), and the jobs sacct was asked about per cycle (read from what the
cluster printed back). Prints per case the cycle seconds min / median / max, execs per cycle
and sacct jobs per cycle (min / max), and the ratios of the medians, all from this run.

Usage: .venv/bin/python bench/watcher_cycle.py   (the local cluster must be up)

With `--targets`: one cycle with 100 vs 100,000 vs 1,000,000 active targets instead (200 jobs of
5,000 targets, records changing as a million photos a day make them): bench/_watcher_targets.py.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
import time

from _portal_env import own_redis, release_redis, setup

TARGETS = "--targets" in sys.argv[1:]
if TARGETS:  # the cycles enqueue output fetches: into an empty Redis database of the bench's own
    own_redis()
setup()

from django.contrib.auth.models import User  # noqa: E402
from django.utils import timezone  # noqa: E402

import cluster  # noqa: E402
from cluster import slurm  # noqa: E402
from cluster.ssh import SSHRunner  # noqa: E402
from jobs.models import Job, JobStatus, Target, Task, Template  # noqa: E402
from jobs.watcher import poll  # noqa: E402
from worker.progress import TargetRecord, TaskProgress  # noqa: E402

N = 100
LEFT = 20
TASKS = 4
TARGETS_PER_TASK = 5
ROUNDS = 5
CYCLES_PER_ROUND = 3
CASES = ("1_job", f"{N}_jobs", f"{N}_jobs_{LEFT}_left", f"{N}_jobs_every_job")

COUNT = {"execs": 0, "sacct_jobs": []}
_real_exec, _real_batch = SSHRunner._exec, SSHRunner.run_batch


def _counting_exec(self, *args, **kwargs):
    COUNT["execs"] += 1
    return _real_exec(self, *args, **kwargs)


def _reading_batch(self, argvs, *args, **kwargs):
    """run_batch, noting how many jobs sacct was asked about in what came back."""
    results = _real_batch(self, argvs, *args, **kwargs)
    for argv, res in zip(argvs, results):
        if argv[:2] == ["sacct", "--json"]:  # a watcher that asks sacct every cycle
            COUNT["sacct_jobs"].append(len(argv[-1].split(",")))
        elif argv[0] == "sh" and (m := re.search(r":asked:([0-9,]*)\n", res.stdout)):
            COUNT["sacct_jobs"].append(len([j for j in m.group(1).split(",") if j]))
    return results


SSHRunner._exec = _counting_exec
SSHRunner.run_batch = _reading_batch


def submit(runner, template, work: str, wrap: str, hold: bool, count: int) -> list[str]:
    argv = ["sbatch", "--parsable", *(["--hold"] if hold else []), f"--array=0-{TASKS - 1}", "--time", "00:01:00",
            "--partition", template.partition, "--mem", "20M", "--output", "/dev/null", "--chdir", work,
            "--job-name", "ffp-bench-watcher", "--wrap", wrap]
    return [slurm.parse_sbatch_parsable(r.stdout) for r in runner.run_batch([argv] * count, timeout=300)]


def wait_for_slurmdbd(runner, held: list[str], killed: list[str], timeout: float = 600) -> float:
    """Seconds until sacct lists every task, the killed ones ended: timing before that flatters."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        res = runner.run(slurm.sacct_argv(held + killed), timeout=120)
        if res.rc == 0:
            tasks = slurm.parse_sacct(res.stdout)
            ended = {t.job_id for t in tasks if t.job_id in killed and cluster.is_terminal(t.state)}
            seen = {(t.job_id, t.task_index) for t in tasks}
            if len(seen) == (len(held) + len(killed)) * TASKS and len(ended) == len(killed) and \
                    all(t.state == "FAILED" for t in tasks if t.job_id in killed):
                return time.monotonic() - t0
        time.sleep(2)
    sys.exit("slurmdbd did not record every job in time: refusing to time an unsettled cluster")


def make_jobs(user, template, profile, slurm_ids: list[str]) -> list[Job]:
    jobs = []
    for sid in slurm_ids:
        job = Job.objects.create(owner=user, template=template, template_snapshot=template.snapshot().to_json(),
                                 cluster=profile, status=JobStatus.QUEUED, slurm_job_id=sid,
                                 submitted_at=timezone.now(), total=TASKS * TARGETS_PER_TASK)
        Task.objects.bulk_create([Task(job=job, index=i, state="PENDING") for i in range(TASKS)])
        Target.objects.bulk_create([
            Target(job=job, index=i, name=f"{i}.jpg", output_name=f"{i}.jpg", task_index=i // TARGETS_PER_TASK,
                   output_file=f"/dev/null/{i}.jpg" if i % TARGETS_PER_TASK < 2 else "")
            for i in range(TASKS * TARGETS_PER_TASK)])
        jobs.append(job)
    return jobs


def write_progress_records(runner, profile, jobs: list[Job]) -> None:
    """A record per task: 2 targets done (outputs already fetched: no fetch is asked), 1 running."""
    for job in jobs:
        folder = job.folder
        runner.makedirs(folder.progress)
        for task in range(TASKS):
            first = task * TARGETS_PER_TASK
            targets = [TargetRecord(i, f"/in/{i}.jpg", f"{i}.jpg", status="done" if i - first < 2 else "running",
                                    faces_found=1, faces_swapped=1 if i - first < 2 else 0, seconds=0.4)
                       for i in range(first, first + 3)]
            doc = TaskProgress(job=str(job.id), task_index=task, engine="classic", targets=targets)
            runner.put_bytes(json.dumps(doc.to_dict()).encode(), folder.progress_record(task))


def activate(jobs: list[Job], log_wait: list[Job] = ()) -> None:
    """Make exactly `jobs` active; tasks of `log_wait` RUNNING and waiting for their log since now
    (a SIGKILLed task's log is re-read for KILL_LINE_WAIT: a steady state, nothing changes)."""
    Job.objects.exclude(pk__in=[j.pk for j in jobs]).update(status=JobStatus.QUEUED)
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(status=JobStatus.PENDING)
    Job.objects.filter(pk__in=[j.pk for j in log_wait]).update(status=JobStatus.RUNNING)
    Task.objects.filter(job__in=log_wait).update(state="RUNNING", log_wait_since=timezone.now())


def still_active(jobs: list[Job]) -> None:
    """Every cycle must have seen the same steady jobs: a job that ended would flatter the rest."""
    active = Job.objects.filter(pk__in=[j.pk for j in jobs], status__in=(JobStatus.PENDING, JobStatus.RUNNING))
    if active.count() != len(jobs):
        sys.exit("a job of the bench ended during the cycles: the cases are not steady, nothing measured")


def run_case(profile, every_job: bool, seconds: list, execs: list, sacct_jobs: list) -> None:
    due = getattr(poll, "_full_accounting_due", None)
    if due is not None:  # the beat: forced on for its case, off for the others
        poll._full_accounting_due = lambda pk: every_job
    try:
        for _ in range(CYCLES_PER_ROUND):
            COUNT["execs"], COUNT["sacct_jobs"] = 0, []
            t0 = time.perf_counter()
            result = poll.poll_profile(profile)
            seconds.append(time.perf_counter() - t0)
            if result.error:
                sys.exit(f"the cycle failed: {result.error}")
            execs.append(COUNT["execs"])
            sacct_jobs.append(sum(COUNT["sacct_jobs"]))
    finally:
        if due is not None:
            poll._full_accounting_due = due


def spread(values: list) -> dict:
    return {"min": round(min(values), 4), "median": round(statistics.median(values), 4), "max": round(max(values), 4)}


def main() -> int:
    user = User.objects.get(username="demo")
    template = Template.objects.get(slug="cpu-small")
    profile = template.cluster
    runner = cluster.runner_for(profile)
    work = profile.work_root
    held = submit(runner, template, work, "true", hold=True, count=N)
    killed = []
    try:
        killed = submit(runner, template, work, "kill -9 $$", hold=False, count=LEFT)
        settle_seconds = wait_for_slurmdbd(runner, held, killed)
        held_jobs = make_jobs(user, template, profile, held)
        killed_jobs = make_jobs(user, template, profile, killed)
        write_progress_records(runner, profile, held_jobs + killed_jobs)
        setups = {
            CASES[0]: (held_jobs[:1], [], False),
            CASES[1]: (held_jobs, [], False),
            CASES[2]: (held_jobs[:N - LEFT] + killed_jobs, killed_jobs, False),
            CASES[3]: (held_jobs, [], True),
        }
        measured = {name: ([], [], []) for name in CASES}
        for active, log_wait, every_job in setups.values():  # warm-up: first-cycle changes applied
            activate(active, log_wait)
            run_case(profile, every_job, [], [], [])
            still_active(active)
        for r in range(ROUNDS):
            for name in CASES[r % len(CASES):] + CASES[:r % len(CASES)]:
                active, log_wait, every_job = setups[name]
                activate(active, log_wait)
                run_case(profile, every_job, *measured[name])
                still_active(active)
    finally:
        runner.run(slurm.scancel_argv(held + killed), timeout=60)
        roots = [j.folder.root for j in Job.objects.filter(slurm_job_id__in=held + killed)]
        for i in range(0, len(roots), 50):
            runner.run(["rm", "-rf", "--", *roots[i:i + 50]], timeout=60)
        Job.objects.filter(slurm_job_id__in=held + killed).delete()
    report: dict = {"slurmdbd_settled_after_seconds": round(settle_seconds, 1),
                    "queue": {"held_arrays": len(held), "ended_arrays": len(killed), "tasks_each": TASKS}}
    for name, (seconds, execs, sacct_jobs) in measured.items():
        report[name] = {"cycle_seconds": spread(seconds), "cycles": len(seconds),
                        "ssh_execs_per_cycle": {"min": min(execs), "max": max(execs)},
                        "sacct_jobs_per_cycle": {"min": min(sacct_jobs), "max": max(sacct_jobs)}}
    base = statistics.median(measured[CASES[0]][0])
    for name in CASES[1:]:
        report[f"ratio_median_{name}_vs_1_job"] = round(statistics.median(measured[name][0]) / base, 3)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    if TARGETS:
        from _watcher_targets import main as targets_main
        try:
            sys.exit(targets_main())
        finally:
            release_redis()
    sys.exit(main())
