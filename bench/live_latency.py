"""Latency from a task's state change in Slurm to the event in a WebSocket client.

Real parts end to end: held jobs on the local Slurm cluster, the watcher loop (the same
poll_profile as `manage.py watch_cluster`, every WATCH_INTERVAL seconds), channels_redis, the real
web server (portal/server.py) and real WebSocket clients. Each job's state is changed at a known
instant (`scancel` of a pending job: CANCELLED in slurmctld when the command returns), at a random
phase of the watcher's cycle, and the arrival of that task's `CANCELLED` event is timed. The task
leaves the queue, so the watcher must ask sacct about it in that same cycle: slurmdbd's lag is
part of what is measured. `--background` more held jobs stay active the whole time, so each
cycle costs what a cycle with that many active jobs costs.

Prints p50/p95/max against the target p95 <= interval + 0.5 s, and the watcher's cycle seconds
(median/max) as timed around each poll.

Usage: .venv/bin/python bench/live_latency.py [--jobs 40] [--background 100] [--interval 2]
(the local cluster must be up)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import threading
import time

from _portal_env import setup

setup()

import websockets  # noqa: E402
from _live_env import WebServer, session_cookie  # noqa: E402
from asgiref.sync import sync_to_async  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.utils import timezone  # noqa: E402

from cluster import get_runner, slurm  # noqa: E402
from jobs.models import Job, JobStatus, Task, Template  # noqa: E402
from jobs.watcher.poll import poll_profile  # noqa: E402


def watcher_loop(profile, interval: float, stop: threading.Event, cycles: list) -> None:
    """What `manage.py watch_cluster` does, in a thread of this process."""
    while not stop.is_set():
        t0 = time.monotonic()
        poll_profile(profile)
        cycles.append(time.monotonic() - t0)
        stop.wait(max(0.0, interval - (time.monotonic() - t0)))


async def wait_cancelled(ws) -> float:
    async for raw in ws:
        msg = json.loads(raw)
        if msg.get("type") == "task" and msg["task"]["status"] == "CANCELLED":
            return time.perf_counter()
    raise RuntimeError("connection closed before the event")


async def main_async(n: int, background: int, interval: float) -> dict:
    user = await sync_to_async(User.objects.get)(username="demo")
    template = await sync_to_async(Template.objects.select_related("cluster").get)(slug="cpu-small")
    profile = template.cluster
    runner = get_runner(profile.cluster_config())
    submit = [["sbatch", "--parsable", "--hold", "--job-name", f"ffp-latency-{i}", "--time", "00:01:00",
               "--partition", template.partition, "--output", "/dev/null", "--chdir", profile.work_root,
               "--wrap", "true"] for i in range(n + background)]
    results = await sync_to_async(runner.run_batch)(submit, 300)
    all_ids = [slurm.parse_sbatch_parsable(r.stdout) for r in results]
    ids = all_ids[:n]

    def make_jobs():
        out = []
        for sid in all_ids:
            job = Job.objects.create(owner=user, template=template, template_snapshot=template.snapshot().to_json(),
                                     cluster=profile, status=JobStatus.PENDING, slurm_job_id=sid,
                                     submitted_at=timezone.now(), total=1)
            Task.objects.create(job=job, index=0, state="PENDING")
            out.append(job)
        return out

    jobs = (await sync_to_async(make_jobs)())[:n]
    cookie = await sync_to_async(session_cookie)(user)
    server = WebServer()
    stop = threading.Event()
    cycles: list[float] = []
    watcher = threading.Thread(target=watcher_loop, args=(profile, interval, stop, cycles), daemon=True)
    latencies = []
    try:
        watcher.start()
        await asyncio.sleep(interval * 2)  # the watcher has seen every job PENDING
        for job, sid in zip(jobs, ids):
            headers = {"Cookie": cookie, "Origin": f"http://127.0.0.1:{server.port}"}
            async with websockets.connect(server.url(f"/ws/jobs/{job.id}/"), additional_headers=headers) as ws:
                assert json.loads(await ws.recv())["type"] == "snapshot"
                await asyncio.sleep(random.uniform(0, interval))  # a random phase of the watcher's cycle
                waiter = asyncio.create_task(wait_cancelled(ws))
                await sync_to_async(runner.run)(slurm.scancel_argv([sid]), None, 30)
                changed_at = time.perf_counter()  # slurmctld has the new state once scancel returned
                arrived = await asyncio.wait_for(waiter, timeout=interval * 4 + 10)
                latencies.append(arrived - changed_at)
    finally:
        stop.set()
        watcher.join(timeout=30)
        server.stop()
        await sync_to_async(runner.run)(slurm.scancel_argv(all_ids), None, 60)
    latencies.sort()
    return {
        "jobs": n,
        "background_active_jobs": background,
        "watch_interval_seconds": interval,
        "watcher_cycles": len(cycles),
        "watcher_cycle_seconds_median": round(statistics.median(cycles), 3),
        "watcher_cycle_seconds_max": round(max(cycles), 3),
        "latency_seconds_p50": round(statistics.median(latencies), 3),
        "latency_seconds_p95": round(latencies[int(0.95 * (len(latencies) - 1))], 3),
        "latency_seconds_max": round(latencies[-1], 3),
        "target_p95_seconds": interval + 0.5,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=40, help="changes timed, one job each")
    ap.add_argument("--background", type=int, default=100, help="held jobs active the whole time")
    ap.add_argument("--interval", type=float, default=settings.WATCH_INTERVAL, help="seconds between cycles")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main_async(args.jobs, args.background, args.interval)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
