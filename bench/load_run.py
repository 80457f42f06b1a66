"""The load run: 200 jobs x 5,000 photos on the real local cluster, for 10 minutes, every portal
process as make up runs it, and what each of them costs.

Real parts: the local Slurm cluster over SSH (one array job per Start), PostgreSQL (a database of
the bench's own, dropped at the end), Redis (an empty database of the bench's own, emptied at the
end), the web server (portal/server.py, its processes as make up starts them), two RQ workers
(`manage.py portal_rqworker`, make up's FFP_RQ_WORKERS=2), the watcher (`watch_cluster`, through
bench/_load_watcher.py, which only also writes down each cycle's seconds), real Starts
(`start_job`: a 5,000-photo folder listed on the cluster) whose submissions the RQ workers make.

Not real, on purpose: the worker. A bench-made cluster profile's "worker Python" is a wrapper that
runs bench/standin_worker.py, a LOAD TOOL that writes outputs and progress records as the real
worker does but copies each photo instead of swapping faces, paced by --seconds-per-photo (Slurm
runs two tasks at once on this 2-core machine: 0.02 s gave 57-67 photos a second, the goal's peak
of 60; Slurm's task starts take the rest).

Measured during the window (after every job has its Slurm id), printed as min / median / max:
- the watcher's cycle seconds (every cycle);
- outputs fetched into the portal a second, and photos recorded done a second (per 30 s);
- a change on the cluster reaching a browser: each photo's "done" as the stand-in wrote it, to the
  first `job` event over a real WebSocket whose count includes it (sockets on the jobs that run);
- web p95: logged-in users opening the job list, a running job's page and both live.json;
- PostgreSQL (transactions and rows a second, pg_stat_database), Redis (commands a second, memory);
- resident memory and CPU of every process: web, RQ workers, watcher, Redis, PostgreSQL, Slurm.

Usage: .venv/bin/python bench/load_run.py [--jobs 200] [--targets 5000] [--minutes 10]
       [--seconds-per-photo 0.02] [--users 50] [--sockets 10]
       (make up's cluster and PostgreSQL up; REDIS_URL names the Redis server)

It leaves nothing behind: its Slurm jobs are cancelled, its folders on the cluster and here removed,
its Redis database emptied and its PostgreSQL database dropped.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _portal_env import ROOT, own_media, own_postgres, own_redis, release_redis, setup, storage

own_redis()
MEDIA = own_media()
setup(own_postgres())

from _live_env import WebServer, session_cookie  # noqa: E402
from _load_probe import Probe, Processes, Sockets, WebUsers, spread  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: E402

from cluster import get_runner, slurm  # noqa: E402
from jobs.background import enqueue  # noqa: E402
from jobs.background.rq_worker import command as rq_command  # noqa: E402
from jobs.job.start import start_job  # noqa: E402
from jobs.models import ClusterProfile, Job, Template  # noqa: E402

BENCH_SLUG = "bench-load"


def target_folder(n: int) -> str:
    """n JPEGs of 640x360 (about 30 KB) on the cluster's storage, readable by its service user."""
    import io

    from PIL import Image

    folder = storage() / "bench" / f"load-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    for path in (folder.parent, folder):
        os.chmod(path, 0o755)
    kinds = []
    for seed in range(20):
        grain = Image.effect_noise((160, 90), 30 + seed).resize((640, 360))
        im = Image.merge("RGB", [Image.linear_gradient("L").resize((640, 360)), grain,
                                 Image.linear_gradient("L").rotate(seed * 17).resize((640, 360))])
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=85)
        kinds.append(buf.getvalue())
    for i in range(n):
        path = folder / f"img{i:05d}.jpg"
        path.write_bytes(kinds[i % len(kinds)])
        os.chmod(path, 0o644)
    return str(folder)


def bench_profile(pause: float, targets: int, made: dict) -> tuple[ClusterProfile, Template]:
    """A copy of the local profile whose worker is the stand-in, in a work folder of its own, and a
    template of 125 photos a task on it; the seeded profiles are switched off in the bench's database
    (the watcher and the sweeps see the bench's profile only)."""
    base = ClusterProfile.objects.get(slug="local")
    cpu = Template.objects.get(slug="cpu-small")
    ClusterProfile.objects.exclude(pk=base.pk).update(is_active=False)
    runner = made["runner"] = get_runner(base.cluster_config())
    work = made["work"] = f"{base.work_root}/bench-load-{uuid.uuid4().hex[:8]}"
    wrapper = f"{work}/standin-python"
    script = ("#!/bin/sh\n# bench/load_run.py: the stand-in worker, a LOAD TOOL (bench/standin_worker.py)\n"
              '[ "$1" = "-m" ] && shift 2\n'
              f"FFP_STANDIN_SECONDS_PER_PHOTO={pause} exec {sys.executable} {ROOT}/bench/standin_worker.py \"$@\"\n")
    runner.run(["mkdir", "-m", "700", "-p", work], timeout=30, check=True)
    with tempfile.NamedTemporaryFile("w", suffix=".sh") as local:
        local.write(script)
        local.flush()
        runner.put_file(local.name, wrapper, mode=0o700)
    base.pk, base.slug, base.name, base.work_root, base.worker_python = None, BENCH_SLUG, "Load run", work, wrapper
    base.max_targets_per_job = max(base.max_targets_per_job, targets)
    base.save()
    template = Template.objects.create(
        slug="bench-load", name="Load run (stand-in worker)", name_zh="负载测试（替身程序）", cluster=base,
        partition=cpu.partition, gpu_count=0, cpus_per_task=1, mem="256M", time_limit="00:30:00", chunk_size=125,
        engine="classic", face_selector="many", is_active=True)
    return base, template


def start_jobs(n: int, n_users: int, template, folder: str) -> tuple[list[Job], list[float]]:
    face = (storage() / "samples" / "faces" / "Tom_Hanks_54745.png").read_bytes()
    users = [User.objects.create_user(f"load{i:02d}", f"load{i:02d}@localhost", "load-pass-123456")
             for i in range(n_users)]
    jobs, seconds = [], []
    for i in range(n):
        t0 = time.perf_counter()
        job = start_job(user=users[i % n_users], template=template, target_folder=folder, consent=True,
                        sources=[SimpleUploadedFile("face.png", face)], name=f"load {i}")
        enqueue.enqueue_submission(job)  # what the web server does when Start's transaction commits
        seconds.append(time.perf_counter() - t0)
        jobs.append(job)
    return jobs, seconds


def wait_submitted(jobs: list[Job], limit_s: float) -> float:
    t0 = time.monotonic()
    ids = [j.pk for j in jobs]
    while Job.objects.filter(pk__in=ids, slurm_job_id="").exists():
        if time.monotonic() - t0 > limit_s:
            left = Job.objects.filter(pk__in=ids, slurm_job_id="").count()
            raise SystemExit(f"{left} job(s) not submitted after {limit_s:.0f} s")
        time.sleep(1)
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--targets", type=int, default=5000, help="photos a job")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--seconds-per-photo", type=float, default=0.02)
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--web-users", type=int, default=3, help="users opening pages, one after another")
    ap.add_argument("--sockets", type=int, default=10, help="WebSockets, on the jobs Slurm runs first")
    ap.add_argument("--pool", type=int, default=4,
                    help="DATABASE_POOL_MAX of the portal's processes (deploy/env.example: 4; 0: a connection per thread)")
    ap.add_argument("--profile", help="write the watcher's cProfile top functions to this file")
    args = ap.parse_args()

    procs, server, made = None, None, {}  # made: what the run made, to remove
    try:
        profile, template = bench_profile(args.seconds_per_photo, args.targets, made)
        runner = made["runner"]
        made["folder"] = target_folder(args.targets)
        t0 = time.monotonic()
        os.environ["DATABASE_POOL_MAX"] = str(args.pool)  # the processes below start with production's pool
        procs = Processes()
        server = WebServer(processes=None)  # as make up starts it
        procs.add_tree("web", server)
        for n in range(2):  # make up's FFP_RQ_WORKERS=2
            procs.start(f"rq-{n + 1}", rq_command())
        cycles = made["cycles"] = tempfile.NamedTemporaryFile(prefix="ffp-load-cycles-", suffix=".txt", delete=False).name
        procs.start("watcher", [sys.executable, str(ROOT / "bench" / "_load_watcher.py"), profile.slug],
                    env={"FFP_LOAD_CYCLES": cycles, **({"FFP_LOAD_PROFILE": args.profile} if args.profile else {})})
        jobs, start_s = start_jobs(args.jobs, args.users, template, made["folder"])
        submitted_s = wait_submitted(jobs, 900)
        setup_s = time.monotonic() - t0
        print(f"set-up: {args.jobs} Starts of {args.targets} photos in {sum(start_s):.0f} s "
              f"(each {spread(start_s, 's')}), all submitted {submitted_s:.0f} s after the last; {setup_s:.0f} s in all",
              file=sys.stderr)

        first = jobs[:args.sockets]  # Slurm runs the oldest first (age): these run in the window
        watchers = jobs[args.sockets:args.sockets + args.web_users]
        sockets = Sockets(server, {str(j.id): session_cookie(j.owner) for j in first})
        web = WebUsers(server, [(session_cookie(j.owner), str(j.id)) for j in (first[:1] + watchers)])
        probe = Probe(procs, profile, cycles)
        sockets.start()
        web.start()
        probe.run(args.minutes * 60)
        web.stop()
        sockets.stop()
        if web.errors:  # what the server said about them
            errors = [line for line in server.log_tail(200_000).splitlines() if "Error" in line or "ERROR" in line]
            print("web server errors:\n" + "\n".join(errors[-30:]), file=sys.stderr)
        done_times = sockets.done_times(runner, first)
        result = probe.report()
        result.update({
            "set_up": {"jobs": args.jobs, "photos_per_job": args.targets, "start_seconds": spread(start_s),
                       "all_submitted_after_last_start_seconds": round(submitted_s, 1)},
            "web_seconds": web.report(),
            "cluster_change_to_browser_seconds": sockets.latency(done_times),
        })
        print(json.dumps(result, indent=2))
    finally:
        if procs is not None:  # first: no RQ worker submits another job after the cancel below
            procs.stop_all()
        if server is not None:
            server.stop()
        # every Slurm job the run submitted, also when it stopped before all were submitted
        slurm_ids = list(Job.objects.filter(cluster__slug=BENCH_SLUG).exclude(slurm_job_id="")
                         .values_list("slurm_job_id", flat=True))
        if slurm_ids:
            made["runner"].run(slurm.scancel_argv(slurm_ids), timeout=120)
        if "work" in made:
            made["runner"].run(["rm", "-rf", "--", made["work"]], timeout=600)
        if "cycles" in made:
            Path(made["cycles"]).unlink(missing_ok=True)
        if "folder" in made:
            shutil.rmtree(made["folder"], ignore_errors=True)
        shutil.rmtree(MEDIA, ignore_errors=True)
        release_redis()
    return 0


if __name__ == "__main__":
    sys.exit(main())
