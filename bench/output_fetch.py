"""Outputs a second from the cluster into the portal, with 1, 2 and 4 RQ workers.

Real parts: the local Slurm cluster's login node over SSH (SFTP), the portal's RQ workers as `make up`
runs them (`manage.py portal_rqworker`, no fork per job), Redis (an empty database of the bench's
own, emptied at the end), a throw-away SQLite database and MEDIA_ROOT, Pillow making the thumbnails.

Set-up, once: a running job of N targets whose outputs are on the cluster (JPEGs of 1280x720, about
the size a face swap writes), none fetched. Each round, for each worker count (the order rotates):
the outputs are marked not fetched again, W workers are started and registered, then the outputs are
asked for as the watcher asks (`enqueue_output_fetch`: batches of FETCH_BATCH), and the time runs
until every target has its output and thumbnail recorded. Prints outputs per second, min / median /
max over the rounds, per worker count, and the ratio of the medians to one worker.

Usage: .venv/bin/python bench/output_fetch.py [--outputs 300] [--rounds 3]   (the local cluster must be up)
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from _portal_env import ROOT, own_media, own_redis, release_redis, setup

own_redis()
MEDIA = own_media()
setup()

import django_rq  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.utils import timezone  # noqa: E402
from PIL import Image  # noqa: E402

import cluster  # noqa: E402
from jobs.background import enqueue  # noqa: E402
from jobs.background.rq_worker import command as worker_command  # noqa: E402
from jobs.models import Job, JobStatus, Target, TargetStatus, Template  # noqa: E402

WORKERS = (1, 2, 4)
WAIT_S = 300


def output_jpeg(seed: int) -> bytes:
    """A 1280x720 JPEG with detail (gradients, soft noise): about 100-200 KB, like a real output."""
    base = Image.linear_gradient("L").resize((1280, 720))
    grain = Image.effect_noise((320, 180), 40).resize((1280, 720))
    im = Image.merge("RGB", [base, grain, base.rotate(seed % 360)])
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=90)
    return buf.getvalue()


def put_outputs(runner, job: Job, n: int) -> None:
    """The job's outputs on the cluster: one tar sent over SFTP, unpacked in one exec, removed."""
    work = job.cluster.work_root
    with tempfile.NamedTemporaryFile(suffix=".tar") as local:
        with tarfile.open(fileobj=local, mode="w") as tar:
            for i in range(n):
                data = output_jpeg(i)
                info = tarfile.TarInfo(job.folder.output(f"{i:05d}.jpg")[len(work) + 1:])
                info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
                tar.addfile(info, io.BytesIO(data))
        local.flush()
        remote = f"{job.folder.root}.tar"
        runner.put_file(local.name, remote)
    runner.run(["sh", "-c", 'tar -xf "$1" -C "$2" && rm -f -- "$1"', "sh", remote, work], timeout=600, check=True)


class Workers:
    """W RQ worker processes on the bench's database, Redis and media; started, then registered."""

    def __init__(self, count: int):
        self.logs = [Path(tempfile.mkstemp(prefix="ffp-bench-rqworker-", suffix=".log")[1]) for _ in range(count)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.procs = []
        for log in self.logs:
            with log.open("w") as out:
                self.procs.append(subprocess.Popen(worker_command(), cwd=ROOT, env=env, stdout=out,
                                                   stderr=subprocess.STDOUT))
        queue = enqueue.queue()
        deadline = time.monotonic() + 60
        while len(django_rq.workers.Worker.all(queue=queue)) < count:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                self.stop()
                sys.exit("the RQ workers did not start: nothing measured")
            time.sleep(0.2)

    def stop(self) -> None:
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            p.wait(timeout=60)
        for log in self.logs:
            log.unlink(missing_ok=True)


def one_run(job: Job, n: int, workers: int) -> float:
    """Outputs a second with `workers` workers, from the watcher's request to the last one recorded."""
    Target.objects.filter(job=job).update(output_file="", thumbnail_file="", fetch_asked_at=None)
    shutil.rmtree(job.media_dir, ignore_errors=True)
    running = Workers(workers)
    try:
        t0 = time.perf_counter()
        enqueue.enqueue_output_fetch(job, list(range(n)))
        while Target.objects.filter(job=job, output_file="").exists():
            if time.perf_counter() - t0 > WAIT_S:
                sys.exit(f"{workers} worker(s) did not fetch {n} outputs in {WAIT_S} s: nothing measured")
            time.sleep(0.05)
        took = time.perf_counter() - t0
    finally:
        running.stop()
    if Target.objects.filter(job=job, thumbnail_file="").exists():
        sys.exit("an output was fetched without its thumbnail: the run is not like the product's")
    return n / took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--outputs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = args.outputs
    user = User.objects.get(username="demo")
    template = Template.objects.get(slug="cpu-small")
    job = Job.objects.create(owner=user, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, name="bench: output fetch", status=JobStatus.RUNNING,
                             slurm_job_id="1", submitted_at=timezone.now(), total=n)
    Target.objects.bulk_create([Target(job=job, index=i, name=f"{i:05d}.jpg", output_name=f"{i:05d}.jpg",
                                       task_index=i // 25, status=TargetStatus.DONE) for i in range(n)])
    runner = cluster.runner_for(job.cluster)
    rates: dict[int, list[float]] = {w: [] for w in WORKERS}
    try:
        put_outputs(runner, job, n)
        sizes = runner.run(["du", "-sb", job.folder.outputs], timeout=60).stdout.split()[:1]
        for r in range(args.rounds):
            for w in WORKERS[r % len(WORKERS):] + WORKERS[:r % len(WORKERS)]:
                rates[w].append(one_run(job, n, w))
    finally:
        runner.run(["rm", "-rf", "--", job.folder.root], timeout=120)
        release_redis()
        shutil.rmtree(MEDIA, ignore_errors=True)
    report: dict = {"outputs": n, "output_bytes_total": int(sizes[0]) if sizes else None,
                    "fetch_batch": enqueue.FETCH_BATCH}
    for w, values in rates.items():
        report[f"{w}_workers_outputs_per_second"] = {"min": round(min(values), 1),
                                                      "median": round(statistics.median(values), 1),
                                                      "max": round(max(values), 1)}
    base = statistics.median(rates[1])
    for w in WORKERS[1:]:
        report[f"ratio_median_{w}_vs_1_worker"] = round(statistics.median(rates[w]) / base, 2)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
