"""`bench/watcher_cycle.py --targets`: one watcher cycle with 100, 100,000 and 1,000,000 active
targets, on the same Slurm queue, while records change at the pace of a million photos a day.

Real parts: the local Slurm cluster (slurmctld), SSH, find/awk/date on the cluster, the watcher's
code, SQLite (a throw-away database), Redis (a database of the bench's own: the cycle enqueues the
fetches of the outputs it sees made, nobody runs them).

Set-up, once: JOBS held arrays of TASKS tasks (`sbatch --hold`: PENDING, they cost nothing) and as
many portal jobs of TASKS x PER_TASK (5,000) targets, a task per PER_TASK targets (a template's chunk
size); on the cluster a progress record per task (every target done, the last one running), in the
database the same (outputs fetched). Cases, only which jobs are active changes:

    100        one job of 125 targets (1 task)
    100000     20 jobs of 5,000
    1000000    200 jobs of 5,000

Before each timed cycle, CHANGES records of active jobs are rewritten (their running target done:
12 photos a second over a 2 s cycle, the goal's average; peaks are 5x), so each cycle has real work:
apply the changes, ask for the outputs. The cases alternate round after round (the order rotates).
Prints per case the cycle seconds min / median / max, the progress bytes read per cycle, the
targets the cycle loaded, and the ratio of the medians to the 100-target case.
"""
from __future__ import annotations

import cProfile
import gzip
import io
import json
import pstats
import statistics
import sys
import tarfile
import time

from django.contrib.auth.models import User
from django.utils import timezone

import cluster
from cluster import slurm
from cluster.ssh import SSHRunner
from jobs.models import Job, JobStatus, Target, TargetStatus, Task, Template
from jobs.watcher import apply as watcher_apply
from jobs.watcher import poll

# 125 targets a task: 200 arrays of 40 tasks stay under Slurm's default MaxJobCount (10,000 counts
# every task of an array); a task per 50 targets would need MaxJobCount >= 20,000 (docs/scale.md)
JOBS, TASKS, PER_TASK = 200, 40, 125
SMALL_TASKS = 1
CHANGES = 24
#: what the made-up records and rows say a photo took (input the watcher copies, not a measurement:
#: the same on both sides, so a record read again changes nothing)
PHOTO_SECONDS = 0.4
ROUNDS = 1 if "--profile" in sys.argv[1:] else 3
CASES = {"100": 0, "100000": 20, "1000000": 200}  # how many of the big jobs are active (0: the small one)

READ = {"bytes": 0, "targets": 0}
#: `--profile`: the 1,000,000-target cycles under cProfile (their times then count the profiler too)
PROFILE = cProfile.Profile() if "--profile" in sys.argv[1:] else None
_real_batch, _real_target_rows = SSHRunner.run_batch, watcher_apply.target_rows


def _counting_batch(self, argvs, *args, **kwargs):
    results = _real_batch(self, argvs, *args, **kwargs)
    READ["bytes"] += sum(len(r.stdout) for a, r in zip(argvs, results) if a[:1] == ["find"])
    return results


def _counting_rows(*args, **kwargs):
    rows = _real_target_rows(*args, **kwargs)
    READ["targets"] += sum(len(v) for v in rows.values())
    return rows


def record(job: Job, task: int, done_upto: int) -> dict:
    """Task `task`'s record: its targets done up to `done_upto` (exclusive, task-relative), the next running."""
    first = task * PER_TASK
    targets = [{"index": i, "target": f"/in/shoot/{i:07d}.jpg", "output": f"{i:07d}.jpg",
                "status": "done" if i - first < done_upto else "running", "faces_found": 1,
                "faces_swapped": 1 if i - first < done_upto else 0, "seconds": PHOTO_SECONDS, "message": ""}
               for i in range(first, first + min(done_upto + 1, PER_TASK))]
    return {"version": 1, "job": str(job.id), "task_index": task, "state": "running", "engine": "classic",
            "started_at": time.time(), "updated_at": time.time(), "targets": targets}


def make_job(user, template, profile, sid: str, tasks: int) -> Job:
    """A running job whose every task has done all but its last target, which runs."""
    job = Job.objects.create(owner=user, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=profile, status=JobStatus.QUEUED, slurm_job_id=sid,
                             submitted_at=timezone.now(), total=tasks * PER_TASK)
    Task.objects.bulk_create([Task(job=job, index=i, state="PENDING") for i in range(tasks)])
    rows = []
    for i in range(tasks * PER_TASK):
        running = i % PER_TASK == PER_TASK - 1
        rows.append(Target(job=job, index=i, name=f"shoot/{i:07d}.jpg", output_name=f"{i:07d}.jpg",
                           task_index=i // PER_TASK, status=TargetStatus.RUNNING if running else TargetStatus.DONE,
                           faces_found=1, faces_swapped=0 if running else 1, seconds=PHOTO_SECONDS,
                           output_file="" if running else f"/srv/out/{i:07d}.jpg"))
    Target.objects.bulk_create(rows, batch_size=5000)
    job.recount()
    return job


def put_records(runner, profile, docs: list[tuple[Job, int, dict]]) -> None:
    """Write records on the cluster in one exec: a gzipped tar unpacked under the work root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for job, task, doc in docs:
            data = (json.dumps(doc) + "\n").encode()
            info = tarfile.TarInfo(job.folder.progress_record(task)[len(profile.work_root) + 1:])
            info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    runner.run(["tar", "-xzf", "-", "--touch", "-C", profile.work_root], stdin=gzip.compress(buf.getvalue(), 1),
               timeout=600, check=True)


def main() -> int:
    SSHRunner.run_batch = _counting_batch
    watcher_apply.target_rows = _counting_rows
    poll.target_rows = _counting_rows
    user = User.objects.get(username="demo")
    template = Template.objects.get(slug="cpu-small")
    profile = template.cluster
    runner = cluster.runner_for(profile)
    argv = ["sbatch", "--parsable", "--hold", "--time", "00:01:00", "--partition", template.partition,
            "--mem", "20M", "--output", "/dev/null", "--chdir", profile.work_root,
            "--job-name", "ffp-bench-watcher", "--wrap", "true"]
    ids = [slurm.parse_sbatch_parsable(r.stdout) for r in runner.run_batch(
        [[*argv[:3], f"--array=0-{SMALL_TASKS - 1}", *argv[3:]]] + [[*argv[:3], f"--array=0-{TASKS - 1}", *argv[3:]]] * JOBS,
        timeout=600)]
    try:
        t0 = time.monotonic()
        small = make_job(user, template, profile, ids[0], SMALL_TASKS)
        big = [make_job(user, template, profile, sid, TASKS) for sid in ids[1:]]
        made_s = time.monotonic() - t0
        state = {(j.pk, t): PER_TASK - 1 for j in [small, *big] for t in range(TASKS if j in big else SMALL_TASKS)}
        jobs = {j.pk: j for j in [small, *big]}
        put_records(runner, profile, [(jobs[pk], t, record(jobs[pk], t, n)) for (pk, t), n in state.items()])
        measured = {name: ([], [], []) for name in CASES}
        names = list(CASES)
        for r in range(ROUNDS + 1):  # round 0 warms up (every job new to the watcher: read whole once)
            for name in names[r % len(names):] + names[:r % len(names)]:
                active = [small] if CASES[name] == 0 else big[:CASES[name]]
                Job.objects.exclude(pk__in=[j.pk for j in active]).update(status=JobStatus.QUEUED)
                Job.objects.filter(pk__in=[j.pk for j in active]).update(status=JobStatus.RUNNING)
                for _ in range(2):
                    # CHANGES records move on by one target (a photo done, the next running)
                    moving = [(j, t) for j in active for t in range(SMALL_TASKS if j is small else TASKS)
                              if state[(j.pk, t)] < PER_TASK][:CHANGES] if r else []
                    docs = []
                    for job, task in moving:
                        state[(job.pk, task)] += 1
                        docs.append((job, task, record(job, task, state[(job.pk, task)])))
                    if docs:
                        put_records(runner, profile, docs)
                    READ["bytes"] = READ["targets"] = 0
                    if PROFILE is not None and r and name == "1000000":
                        PROFILE.enable()
                    t0 = time.perf_counter()
                    result = poll.poll_profile(profile)
                    took = time.perf_counter() - t0
                    if PROFILE is not None:
                        PROFILE.disable()
                    if result.error:
                        sys.exit(f"the cycle failed: {result.error}")
                    if r:
                        measured[name][0].append(took)
                        measured[name][1].append(READ["bytes"])
                        measured[name][2].append(READ["targets"])
    finally:
        runner.run(slurm.scancel_argv(ids), timeout=60)
        roots = [j.folder.root for j in Job.objects.filter(slurm_job_id__in=ids)]
        for i in range(0, len(roots), 50):
            runner.run(["rm", "-rf", "--", *roots[i:i + 50]], timeout=120)
    report: dict = {"set_up": {"jobs": JOBS, "targets_per_job": TASKS * PER_TASK, "tasks_per_job": TASKS,
                               "records_changed_per_cycle": CHANGES, "rows_made_seconds": round(made_s, 1)}}
    for name, (seconds, read, loaded) in measured.items():
        report[f"{name}_targets"] = {
            "cycle_seconds": {"min": round(min(seconds), 4), "median": round(statistics.median(seconds), 4),
                              "max": round(max(seconds), 4)},
            "cycles": len(seconds), "progress_bytes_read": {"min": min(read), "max": max(read)},
            "target_rows_loaded": {"min": min(loaded), "max": max(loaded)}}
    base = statistics.median(measured["100"][0])
    for name in names[1:]:
        report[f"ratio_median_{name}_vs_100"] = round(statistics.median(measured[name][0]) / base, 3)
    print(json.dumps(report, indent=2))
    if PROFILE is not None:  # where the biggest case's cycles spend their time
        pstats.Stats(PROFILE).sort_stats("tottime").print_stats(25)
    return 0
