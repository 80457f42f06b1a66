"""What the container costs a task at its start, on the Slurm 26.05 cluster (run by
bench/container_startup.sh, as the service user, inside that cluster's Debian root).

A task's start: from the command a task runs until the worker's Python has imported what it needs
(cv2, onnxruntime, insightface, the worker's command line, runner and pipeline), then exits. Two ways, alternated:
- venv: the profile's venv Python with the portal's code on PYTHONPATH (what a template without an
  image runs);
- container: `apptainer exec --nv --bind ...` of the worker's image (scripts/cluster/worker-image.sh),
  what a template with `container_image` runs, the same binds as a job's.
Each cold and warm: cold, the files (the image; or the venv, its Python and the code) are first
dropped from the page cache (posix_fadvise DONTNEED: as after a node's reboot, or an image a node
has never read); warm, they were read by the run before. Prints min / median / max seconds.

    python bench/container_startup.py IMAGE REPO VENV_PYTHON [ROUNDS]
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

IMPORTS = "import cv2, onnxruntime, insightface, worker.cli, worker.runner, worker.pipeline"


def drop(paths: list[Path]) -> int:
    """Drop these files (folders: every file under them) from the page cache; the bytes dropped."""
    dropped = 0
    for top in paths:
        files = [top] if top.is_file() else [Path(d) / f for d, _s, fs in os.walk(top) for f in fs]
        for f in files:
            try:
                fd = os.open(f, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                dropped += os.fstat(fd).st_size
            finally:
                os.close(fd)
    return dropped


def timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    image, repo, venv_python = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    work = Path(os.environ.get("TMPDIR", "/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APPTAINER", "SINGULARITY"))}
    python_home = Path(os.path.realpath(venv_python)).parents[1]
    ways = {
        "venv": ([str(venv_python), "-c", IMPORTS], {**env, "PYTHONPATH": str(repo)},
                 [venv_python.parents[1], python_home, repo / "worker"]),
        "container": (["apptainer", "--quiet", "exec", "--nv", "--bind", f"{work}:{work}", str(image),
                       "python", "-c", IMPORTS], env, [image]),
    }
    for argv, way_env, _files in ways.values():  # both work before anything is measured
        timed(argv, way_env)
    times: dict[tuple[str, str], list[float]] = {}
    for _round in range(rounds):
        for name, (argv, way_env, files) in ways.items():
            drop(files)
            times.setdefault((name, "cold"), []).append(timed(argv, way_env))
            times.setdefault((name, "warm"), []).append(timed(argv, way_env))
    print(f"task start-up to the worker's imports done ({IMPORTS!r}), {rounds} rounds, ways alternated")
    print(f"image {image} ({image.stat().st_size / 1e6:.0f} MB)")
    print(f"{'way':<10} {'cache':<5} {'min s':>7} {'median s':>9} {'max s':>7}")
    for (name, cache), values in times.items():
        print(f"{name:<10} {cache:<5} {min(values):>7.2f} {statistics.median(values):>9.2f} {max(values):>7.2f}")


if __name__ == "__main__":
    main()
