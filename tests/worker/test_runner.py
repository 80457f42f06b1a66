"""The task runner's own decisions, in-process, with the engine and the per-target work swapped out."""
import logging
import signal
from types import SimpleNamespace

import pytest

import worker.runner as runner
import worker.testhooks as testhooks
from worker.manifest import EngineOptions, Manifest, Target
from worker.process import Outcome
from worker.progress import read_progress_dir
from worker.runner import EXIT_TASK_FAILED, TaskConfig, run_task
from worker.signals import Terminated


@pytest.fixture
def config(tmp_path, monkeypatch):
    """Task 0 of a two-target manifest; loading the engine and building the identity cost nothing."""
    m = Manifest(job="j", sources=(str(tmp_path / "face.jpg"),),
                 targets=(Target(str(tmp_path / "a.jpg"), "a.jpg"), Target(str(tmp_path / "v.mp4"), "v.mp4")),
                 chunks=((0, 1),), output_dir=str(tmp_path / "out"), engine=EngineOptions(name="classic"))
    monkeypatch.setattr(runner, "load_engine", lambda *a, **k: SimpleNamespace(name="fake", device="none"))
    monkeypatch.setattr(runner, "build_swapper", lambda *a, **k: object())
    return TaskConfig(manifest=m, task_index=0, models_dir=None, registry_path=None, tmp_root=None)


def test_it_flags_the_target_running_when_the_task_is_stopped(config, monkeypatch):
    def process_target(swapper, path, out, **kw):
        if path.endswith("v.mp4"):
            raise Terminated(signal.SIGTERM)  # what the SIGTERM handler raises mid-video
        return Outcome("done", 1, 1)

    monkeypatch.setattr(runner, "process_target", process_target)
    with pytest.raises(Terminated):
        run_task(config)
    [task] = read_progress_dir(config.manifest.progress_dir)
    done, stopped = task.targets
    assert task.state == "finished"
    assert (done.status, done.stopped_by_task_end) == ("done", False)
    assert (stopped.status, stopped.stopped_by_task_end) == ("failed", True)
    assert "time limit or was cancelled" in stopped.message


def test_the_memory_hook_fails_the_task_with_a_reason_when_nothing_kills_it(config, monkeypatch, caplog):
    monkeypatch.setattr(testhooks, "GIVE_UP_SECONDS", 0.5)
    started = []
    monkeypatch.setattr(runner, "load_engine", lambda *a, **k: started.append(1))
    cfg = TaskConfig(**{**config.__dict__, "test_allocate_mb": 8})
    with caplog.at_level(logging.INFO):
        assert run_task(cfg) == EXIT_TASK_FAILED
    assert started == []  # the hook ran instead of the task's work
    [task] = read_progress_dir(config.manifest.progress_dir)
    assert [t.status for t in task.targets] == ["failed", "failed"]
    assert "held 8 MB" in task.targets[0].message and "was not killed" in task.targets[0].message
    assert not task.targets[0].stopped_by_task_end
    assert "was not killed" in caplog.text
