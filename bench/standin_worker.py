"""A LOAD TOOL, never a product path: the stand-in worker of `bench/load_run.py`.

It does what the real worker (`worker.runner.run_task`) does around the face swap, with the same
manifest, chunk and progress records (`worker.manifest`, `worker.progress.ProgressWriter`: "task
started", then each target started and finished, written through atomically, "finished" at the
end), but its "swap" is a copy of the target to the output in microseconds. No engine, no model:
the portal's side of a job (watcher, output fetch, pages) is what a load run measures, at a rate no
GPU on this machine could give. Only a bench-made cluster profile whose "worker Python" is the
bench's wrapper script reaches it; no template a user can pick runs it.

The bench reads two more things the real worker does not write:
- `FFP_STANDIN_SECONDS_PER_PHOTO` (default 0): the pause after each target, to pace a load run;
- `<job folder>/standin-times/task-<N>.txt`: the wall-clock moment each target was recorded done
  (and the task's start), so the bench can time a change on the cluster to its arrival in a browser.

Usage (what the wrapper runs): python bench/standin_worker.py run --manifest <job>/manifest.json
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from worker.manifest import Manifest
from worker.progress import ProgressWriter, TargetRecord, TaskProgress

ENGINE = "stand-in (load tool)"


def run(manifest_path: str, task_index: int, pause: float) -> int:
    m = Manifest.load(manifest_path)
    progress = TaskProgress(job=m.job, task_index=task_index, engine=ENGINE, device="none")
    writer = ProgressWriter(m.progress_dir, progress)
    m.outputs_dir.mkdir(parents=True, exist_ok=True)
    times_dir = Path(manifest_path).resolve().parent / "standin-times"
    times_dir.mkdir(exist_ok=True)
    # one line a change, written at once: a task stopped at the window's end still says what it did
    times = open(times_dir / f"task-{task_index}.txt", "a", buffering=1)
    writer.flush()  # "task started", as the real worker writes it before loading its models
    times.write(f"start {progress.updated_at:.6f}\n")
    progress.model_load_seconds = 0.0
    for i in m.chunk(task_index):
        target = m.targets[i]
        rec = writer.start_target(TargetRecord(index=i, target=target.path, output=target.output))
        t0 = time.perf_counter()
        out = m.output_path(i)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(target.path, out)
        rec.status, rec.faces_found, rec.faces_swapped = "done", 1, 1
        rec.seconds = round(time.perf_counter() - t0, 6)
        writer.flush()
        times.write(f"done {i} {progress.updated_at:.6f}\n")
        if pause:
            time.sleep(pause)
    writer.finish()
    times.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["run"])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--task-index", type=int, default=None)
    args = ap.parse_args(argv)
    index = args.task_index if args.task_index is not None else int(os.environ["SLURM_ARRAY_TASK_ID"])
    return run(args.manifest, index, float(os.environ.get("FFP_STANDIN_SECONDS_PER_PHOTO", "0") or 0))


if __name__ == "__main__":
    sys.exit(main())
