"""Start -> Slurm job id as it really runs: through the RQ worker process, vs in the bench's process.

- in-process: start_job + submit_job in this process, on its warm pooled SSH connection (what
  bench/submit_scaling.py measures);
- worker (make up): start_job here, its submission enqueued in Redis as the web server does on
  commit, then run by the RQ worker process started with make up's command (`jobs.background.rq_worker.command()`,
  which scripts/up.sh runs); the time ends when the worker's result, the Slurm id, is in Redis;
- forking worker (before): the same through rq's default worker, which forks a child per job, as
  make up ran it before (`manage.py rqworker default --with-scheduler --serializer ...`).

A 10-target folder on the real local cluster; every Slurm job is cancelled at once. Rounds
alternate the three ways (the order reversed every round); a worker is started afresh for its turn
and serves one warm-up Start first, outside the figures. Prints min/median/max per way, the SSH
connections each worker opened (from its log), and the ratio of each worker's median to the
in-process one (target for make up's worker: <= 1.2).

Usage: .venv/bin/python bench/start_under_rq.py [ROUNDS] [STARTS_PER_ROUND]
       (the local cluster up; REDIS_URL names the Redis server: the bench takes an empty database of
       its own on it, _portal_env.own_redis, and never touches make up's queue)

It leaves nothing behind: its Redis database is emptied, its media folder and target folder removed,
and the job folders its Starts made on the cluster deleted.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _portal_env import ROOT, own_media, own_redis, release_redis, setup, storage

own_redis()  # before Django reads REDIS_URL: the workers started below inherit it
MEDIA = own_media()
setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: E402
from rq.job import Job as RQJob  # noqa: E402

from cluster import get_runner, slurm  # noqa: E402
from jobs.background import enqueue  # noqa: E402
from jobs.background.rq_worker import command as worker_command  # noqa: E402
from jobs.job.start import start_job  # noqa: E402
from jobs.job.submit import submit_job  # noqa: E402
from jobs.models import Template  # noqa: E402

N_TARGETS = 10
#: rq's forking worker, as scripts/up.sh ran it before `manage.py portal_rqworker`
FORKING_WORKER = [sys.executable, "manage.py", "rqworker", "default", "--with-scheduler",
                  "--serializer", "rq.serializers.JSONSerializer"]
WAYS = ("in-process", "worker (make up)", "forking worker (before)")
RESULT_WAIT_S = 120


def make_folder(n: int) -> str:
    folder = storage() / "bench" / f"rq-{n}-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    os.chmod(folder.parent, 0o755)
    os.chmod(folder, 0o755)
    src = storage() / "samples" / "faces" / "astronaut.png"
    for i in range(n):
        shutil.copyfile(src, folder / f"img{i:05d}.png")
        os.chmod(folder / f"img{i:05d}.png", 0o644)  # the cluster's service user reads them
    return str(folder)


class Worker:
    """An RQ worker process on this bench's database and Redis; its log counts its SSH connections."""

    def __init__(self, argv: list[str]):
        self.log = Path(tempfile.mkstemp(prefix="ffp-bench-rqworker-", suffix=".log")[1])
        env = {**os.environ, "LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1"}  # INFO: its "connected to" lines
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    def connections(self) -> int:
        return len(re.findall(r"connected to \S+ \(connection #\d+\)", self.log.read_text()))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self.log.unlink()


class Starts:
    def __init__(self, user, template, folder: str):
        self.user, self.template, self.folder = user, template, folder
        self.face = (storage() / "samples" / "faces" / "Tom_Hanks_54745.png").read_bytes()
        self.runner = get_runner(template.cluster.cluster_config())
        self.queue = enqueue.queue()
        self.job_folders: list[str] = []  # on the cluster: removed at the end

    def _start(self):
        job = start_job(user=self.user, template=self.template, target_folder=self.folder, consent=True,
                        sources=[SimpleUploadedFile("face.png", self.face)])
        self.job_folders.append(job.folder.root)
        return job

    def in_process(self) -> tuple[float, str]:
        t0 = time.perf_counter()
        slurm_id = submit_job(str(self._start().id))
        return time.perf_counter() - t0, slurm_id

    def through_worker(self) -> tuple[float, str]:
        t0 = time.perf_counter()
        job = self._start()
        enqueue.enqueue_submission(job)  # what the web server does when Start's transaction commits
        rq_job = RQJob.fetch(enqueue.submission_rq_id(job), connection=self.queue.connection,
                             serializer=self.queue.serializer)
        result = rq_job.latest_result(timeout=RESULT_WAIT_S)  # blocks in Redis until the worker writes it
        elapsed = time.perf_counter() - t0
        if result is None or result.type != result.Type.SUCCESSFUL:
            raise RuntimeError(f"the worker did not submit job {job.id}: {result and result.exc_string}")
        return elapsed, result.return_value

    def cancel(self, slurm_id: str) -> None:
        self.runner.run(slurm.scancel_argv([slurm_id]), timeout=60)


def summary(seconds: list[float]) -> dict:
    return {"min": round(min(seconds) * 1000, 1), "median": round(statistics.median(seconds) * 1000, 1),
            "max": round(max(seconds) * 1000, 1), "n": len(seconds)}


def main(rounds: int = 3, per_round: int = 4) -> int:
    user = User.objects.get(username="demo")
    starts = Starts(user, Template.objects.get(slug="gpu-batch"), make_folder(N_TARGETS))
    starts.runner.run(["true"])  # connect once: in-process Starts use the warm, persistent connection
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    connections = {way: 0 for way in WAYS[1:]}
    served = {way: 0 for way in WAYS[1:]}
    try:
        for r in range(rounds):
            for way in WAYS if r % 2 == 0 else tuple(reversed(WAYS)):
                if way == "in-process":
                    for _ in range(per_round):
                        secs, sid = starts.in_process()
                        starts.cancel(sid)
                        times[way].append(secs)
                    continue
                worker = Worker(worker_command() if way == "worker (make up)" else FORKING_WORKER)
                try:
                    starts.cancel(starts.through_worker()[1])  # warm-up: the worker's start-up, its first connection
                    for _ in range(per_round):
                        secs, sid = starts.through_worker()
                        starts.cancel(sid)
                        times[way].append(secs)
                finally:
                    connections[way] += worker.connections()
                    worker.stop()
                served[way] += per_round + 1
    finally:
        shutil.rmtree(starts.folder, ignore_errors=True)
        shutil.rmtree(MEDIA, ignore_errors=True)
        for folder in starts.job_folders:  # the Starts' job folders on the cluster
            starts.runner.run(["rm", "-rf", "--", folder], timeout=60)
        release_redis()
    base = statistics.median(times["in-process"])
    print(json.dumps({
        "targets_per_start": N_TARGETS,
        "start_to_slurm_id_ms": {way: summary(times[way]) for way in WAYS},
        "ssh_connections_opened_by_the_worker": {way: f"{connections[way]} for {served[way]} Starts" for way in WAYS[1:]},
        "ratio_median_vs_in_process": {way: round(statistics.median(times[way]) / base, 3) for way in WAYS[1:]},
        "target_ratio_worker_make_up": 1.2,
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
