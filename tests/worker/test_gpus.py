"""A task with several GPUs: which GPUs it sees, and one pipeline per GPU sharing the chunk
(`worker.gpus`, `worker.runner`), with real image files and stand-in engines (no GPU here)."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

import worker.runner as runner
from worker.gpus import run_on_each, visible_gpus
from worker.manifest import EngineOptions, Manifest, Target
from worker.progress import read_progress_dir
from worker.runner import EXIT_OK, TaskConfig, run_task
from worker.signals import Terminated


@pytest.mark.parametrize("value, gpus", [
    (None, []), ("", []), ("0", [0]), ("2,5", [0, 1]), ("GPU-1a2b,GPU-3c4d,GPU-5e6f", [0, 1, 2]),
    ("-1", []), ("NoDevFiles", []),
])
def test_it_counts_the_gpus_slurm_gave_the_task(value, gpus):
    env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    assert visible_gpus(env) == gpus


def test_each_item_runs_once_and_every_worker_takes_some():
    seen, lock = [], threading.Lock()

    def work(item, worker):
        time.sleep(0.02)
        with lock:
            seen.append((item, worker))

    run_on_each(range(20), ["gpu0", "gpu1"], work, threading.Event())
    assert sorted(i for i, _ in seen) == list(range(20))
    assert {w for _, w in seen} == {"gpu0", "gpu1"}


def test_an_error_stops_handing_out_items_and_is_raised():
    done = []

    def work(item, worker):
        if item == 3:
            raise RuntimeError("engine crashed")
        time.sleep(0.01)
        done.append(item)

    with pytest.raises(RuntimeError, match="engine crashed"):
        run_on_each(range(100), ["a", "b"], work, threading.Event())
    assert len(done) < 20


class Swapper:
    """Inverts the picture; says which GPU did it and keeps the photos a little busy."""

    options = EngineOptions(name="insightface")

    def __init__(self, gpu):
        self.gpu = gpu
        self.threads = set()

    def swap_frame(self, image):
        self.threads.add(threading.current_thread().name)
        time.sleep(0.05)
        return 255 - image, 1, 1


def two_gpu_task(tmp_path, monkeypatch, n=8):
    swappers = {}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,7")
    monkeypatch.setattr(runner, "load_engine",
                        lambda *a, gpu=None, **k: SimpleNamespace(name="insightface", device="CUDA", gpu=gpu or 0))
    monkeypatch.setattr(runner, "build_swapper",
                        lambda engine, *a, **k: swappers.setdefault(engine.gpu, Swapper(engine.gpu)))
    job = tmp_path / "job"
    (job / "in").mkdir(parents=True)
    targets = []
    for i in range(n):
        Image.fromarray(np.full((40, 60, 3), 10 * i, np.uint8)).save(job / "in" / f"{i}.png")
        targets.append(Target(str(job / "in" / f"{i}.png"), f"{i}.png"))
    m = Manifest(job="j", sources=(str(job / "face.png"),), targets=tuple(targets), chunks=(tuple(range(n)),),
                 output_dir=str(job / "out"), engine=EngineOptions(name="insightface"))
    m.write(job / "manifest.json")
    return TaskConfig.from_env(str(job / "manifest.json"), 0, None, None, env={}), m, swappers


def test_a_task_with_two_gpus_runs_a_pipeline_on_each(tmp_path, monkeypatch):
    cfg, m, swappers = two_gpu_task(tmp_path, monkeypatch)
    assert run_task(cfg) == EXIT_OK
    assert sorted(swappers) == [0, 1]  # device numbers as CUDA sees them, whatever Slurm's ids
    assert swappers[0].threads and swappers[1].threads and not swappers[0].threads & swappers[1].threads
    [task] = read_progress_dir(m.progress_dir)
    assert sorted(t.output for t in task.targets) == [f"{i}.png" for i in range(8)]
    assert all(t.status == "done" for t in task.targets) and task.state == "finished"
    for i in range(8):
        assert np.asarray(Image.open(m.outputs_dir / f"{i}.png"))[0, 0, 0] == 255 - 10 * i


def test_a_stopped_task_with_two_gpus_leaves_truthful_records(tmp_path, monkeypatch):
    cfg, m, swappers = two_gpu_task(tmp_path, monkeypatch)
    real = runner.process_target

    def process_target(swapper, path, out, **kw):
        if kw["name"] == "5.png":
            raise Terminated()  # what SIGTERM, or the cancel flag in a GPU's thread, raises mid-target
        return real(swapper, path, out, **kw)

    monkeypatch.setattr(runner, "process_target", process_target)
    with pytest.raises(Terminated):
        run_task(cfg)
    [task] = read_progress_dir(m.progress_dir)
    stopped = [t for t in task.targets if t.stopped_by_task_end]
    assert [t.output for t in stopped] == ["5.png"] and task.state == "finished"
    assert not [t for t in task.targets if t.status == "running"]
    assert len(task.targets) < 8  # nothing new started after the stop
