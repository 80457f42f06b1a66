"""A task with several GPUs: which GPUs it sees, and one pipeline per GPU sharing the chunk
(`worker.gpus`, `worker.runner`), with real image files and stand-in engines (no GPU here)."""
from __future__ import annotations

import threading
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
    seen, started, lock = [], set(), threading.Lock()
    both_started = threading.Barrier(2, timeout=30)  # broken (and raised here) if one never gets an item

    def work(item, worker):
        with lock:
            first = worker not in started
            started.add(worker)
        if first:  # neither worker can take every item before the other one starts
            both_started.wait()
        with lock:
            seen.append((item, worker))

    run_on_each(range(20), ["gpu0", "gpu1"], work, threading.Event())
    assert sorted(i for i, _ in seen) == list(range(20))
    assert {w for _, w in seen} == {"gpu0", "gpu1"}


def test_an_error_stops_handing_out_items_and_is_raised():
    done, stop = [], threading.Event()

    def work(item, worker):
        if item == 3:
            raise RuntimeError("engine crashed")
        if item == 4:  # the item handed out after the failing one ends once the error set `stop`
            stop.wait(30)
        done.append(item)

    with pytest.raises(RuntimeError, match="engine crashed"):
        run_on_each(range(100), ["a", "b"], work, stop)
    assert len(done) < 20


class Swapper:
    """Inverts the picture; says which GPU did it. Its first swap waits for the other GPU's first
    (`both_started`): each pipeline surely gets photos, however fast the other one is."""

    options = EngineOptions(name="insightface")

    def __init__(self, gpu, both_started: threading.Barrier):
        self.gpu = gpu
        self.threads = set()
        self._both_started = both_started

    def swap_frame(self, image):
        if not self.threads:
            self._both_started.wait()
        self.threads.add(threading.current_thread().name)
        return 255 - image, 1, 1


def two_gpu_task(tmp_path, monkeypatch, n=8):
    swappers, both_started = {}, threading.Barrier(2, timeout=30)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,7")
    monkeypatch.setattr(runner, "load_engine",
                        lambda *a, gpu=None, **k: SimpleNamespace(name="insightface", device="CUDA", gpu=gpu or 0))
    monkeypatch.setattr(runner, "build_swapper",
                        lambda engine, *a, **k: swappers.setdefault(engine.gpu, Swapper(engine.gpu, both_started)))
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
        if kw["name"] == "6.png":  # handed out while 5.png ran: it ends once the stop is set
            kw["cancel"].wait(30)
        return real(swapper, path, out, **kw)

    monkeypatch.setattr(runner, "process_target", process_target)
    with pytest.raises(Terminated):
        run_task(cfg)
    [task] = read_progress_dir(m.progress_dir)
    stopped = [t for t in task.targets if t.stopped_by_task_end]
    assert [t.output for t in stopped] == ["5.png"] and task.state == "finished"
    assert not [t for t in task.targets if t.status == "running"]
    assert len(task.targets) < 8  # nothing new started after the stop
