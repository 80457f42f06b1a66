"""Worker throughput: is the model load paid once per task, and is per-image time flat?

Runs ONE real task (`python -m worker run`, a separate process as on a node) over N images made
from photos that packages ship, then reads the task's progress record and prints:

  model-load seconds, steady-state seconds per image (mean of the targets after the first 5),
  per-image time in the task (task wall time / N) and the ratio of the two (target <= 1.1).

Usage: .venv/bin/python bench/worker_throughput.py [--images 50] [--engine classic|insightface|auto]
       [--models-dir DIR] [--registry JSON]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.manifest import EngineOptions, Manifest, Target, make_chunks  # noqa: E402
from worker.progress import read_progress_dir  # noqa: E402


def shipped_photos() -> list[Path]:
    """Real face photos shipped by insightface and scikit-image (no download)."""
    import importlib.util

    import numpy as np
    from PIL import Image
    from skimage import data

    ins = Path(importlib.util.find_spec("insightface").submodule_search_locations[0]) / "data" / "images"
    photos = [ins / "t1.jpg", ins / "Tom_Hanks_54745.png"]
    tmp = Path(tempfile.mkdtemp(prefix="ffp-bench-src-"))
    astro = tmp / "astronaut.png"
    Image.fromarray(np.asarray(data.astronaut())).save(astro)
    return [p for p in photos if p.exists()] + [astro]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=50)
    ap.add_argument("--engine", default="classic")
    ap.add_argument("--models-dir", default=None)
    ap.add_argument("--registry", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work folder and print its path")
    args = ap.parse_args()

    photos = shipped_photos()
    work = Path(tempfile.mkdtemp(prefix="ffp-bench-"))
    (work / "in").mkdir()
    source = work / "source.png"
    shutil.copyfile(photos[1] if len(photos) > 1 else photos[0], source)  # Tom Hanks as the source face
    targets = []
    for i in range(args.images):
        src = photos[i % len(photos)]
        dst = work / "in" / f"{i:04d}{src.suffix}"
        shutil.copyfile(src, dst)
        targets.append(Target(path=str(dst), output=dst.name))
    manifest = Manifest(job="bench", sources=(str(source),), targets=tuple(targets),
                        chunks=tuple(tuple(c) for c in make_chunks(len(targets), len(targets))),
                        output_dir=str(work / "out"), engine=EngineOptions(name=args.engine))
    manifest.write(work / "manifest.json")

    cmd = [sys.executable, "-m", "worker", "run", "--manifest", str(work / "manifest.json"), "--task-index", "0"]
    if args.models_dir:
        cmd += ["--models-dir", args.models_dir]
    if args.registry:
        cmd += ["--registry", args.registry]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        print(proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode
    [task] = read_progress_dir(work / "out" / "progress")
    secs = [t.seconds for t in task.targets]
    steady = statistics.fmean(secs[5:] if len(secs) > 10 else secs)
    per_image_in_task = wall / len(secs)
    swapped = sum(t.faces_swapped for t in task.targets)
    found = sum(t.faces_found for t in task.targets)
    result = {
        "engine": task.engine,
        "device": task.device,
        "images": len(secs),
        "faces_found": found,
        "faces_swapped": swapped,
        "task_wall_seconds": round(wall, 3),
        "model_load_seconds": task.model_load_seconds,
        "steady_state_seconds_per_image": round(steady, 4),
        "per_image_seconds_in_task": round(per_image_in_task, 4),
        "ratio_per_image_in_task_vs_steady_state": round(per_image_in_task / steady, 3),
        "target_ratio": 1.1,
    }
    print(json.dumps(result, indent=2))
    if args.keep:
        print(f"work folder: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
