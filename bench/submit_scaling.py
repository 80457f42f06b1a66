"""Start of a big folder is ONE sbatch call, and its portal time grows slowly with the folder.

Measures the portal's time from Start to a Slurm id (start_job + submit_job: folder listing over
SFTP, target rows, manifest, script, sbatch over the persistent SSH connection) for a folder of
10 and of 1,000 targets on the real local cluster, counts the Slurm jobs each Start created, then
cancels them. Prints the ratio (target <= 1.5).

Usage: .venv/bin/python bench/submit_scaling.py   (the local cluster must be up)
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
import uuid

from _portal_env import setup, storage

setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: E402

from cluster import SSHRunner, get_runner, slurm  # noqa: E402
from jobs.job.start import start_job  # noqa: E402
from jobs.job.submit import submit_job  # noqa: E402
from jobs.models import Template  # noqa: E402


def make_folder(n: int) -> str:
    folder = storage() / "bench" / f"{n}-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    os.chmod(folder.parent, 0o755)
    src = storage() / "samples" / "faces" / "astronaut.png"
    for i in range(n):
        os.link(src, folder / f"img{i:05d}.png") if src.stat().st_dev == folder.stat().st_dev else shutil.copy(src, folder / f"img{i:05d}.png")
    return str(folder)


SBATCH_CALLS = []
_run = SSHRunner.run


def counting_run(self, argv, *a, **kw):
    if argv and argv[0] == "sbatch":
        SBATCH_CALLS.append(argv)
    return _run(self, argv, *a, **kw)


SSHRunner.run = counting_run


def one_start(user, template, folder: str) -> tuple[float, str]:
    face = (storage() / "samples" / "faces" / "Tom_Hanks_54745.png").read_bytes()
    t0 = time.perf_counter()
    job = start_job(user=user, template=template, sources=[SimpleUploadedFile("face.png", face)],
                    target_folder=folder, consent=True)
    slurm_id = submit_job(str(job.id))
    return time.perf_counter() - t0, slurm_id


def main() -> int:
    user = User.objects.get(username="demo")
    template = Template.objects.get(slug="gpu-batch")
    runner = get_runner(template.cluster.cluster_config())
    runner.run(["true"])  # connect once: both sizes use the warm, persistent connection
    results = {}
    calls: dict[int, int] = {}
    ids = []
    folders = []
    try:
        for n in (10, 1000):
            folder = make_folder(n)
            folders.append(folder)
            times = []
            for _ in range(3):
                before = len(SBATCH_CALLS)
                secs, sid = one_start(user, template, folder)
                calls[n] = max(calls.get(n, 0), len(SBATCH_CALLS) - before)
                ids.append(sid)
                runner.run(slurm.scancel_argv([sid]))
                times.append(secs)
            results[n] = statistics.median(times)
    finally:
        for f in folders:
            shutil.rmtree(f, ignore_errors=True)
    print(json.dumps({
        "start_to_slurm_id_seconds_10_targets": round(results[10], 3),
        "start_to_slurm_id_seconds_1000_targets": round(results[1000], 3),
        "ratio_1000_vs_10": round(results[1000] / results[10], 3),
        "target_ratio": 1.5,
        "sbatch_calls_per_start_10_targets": calls[10],
        "sbatch_calls_per_start_1000_targets": calls[1000],
        "distinct_slurm_ids": len(set(ids)) == len(ids),
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
