"""A task Slurm requeued (preempted by urgent work, PreemptMode=REQUEUE) runs its chunk again from
the start: the worker skips every target an earlier run finished and processes the rest, so each
target is processed exactly once across the runs. Outputs are written under a temporary name and
renamed (worker.imageio.part_path), so a target stopped half-way is never taken for finished."""
import os
import signal
from collections import Counter
from types import SimpleNamespace

import pytest

import worker.runner as runner
from worker.imageio import part_path
from worker.manifest import EngineOptions, Manifest, Target
from worker.process import Outcome
from worker.progress import read_progress_dir
from worker.runner import EXIT_OK, TaskConfig, run_task
from worker.signals import Terminated

NAMES = ["a.jpg", "b.jpg", "c.jpg", "d.jpg", "e.jpg"]


@pytest.fixture
def chunk(tmp_path, monkeypatch):
    """Task 1 of a job of two chunks: targets 0-4 in chunk 1 (chunk 0 holds another target)."""
    for name in ["other.jpg", *NAMES]:
        (tmp_path / name).write_bytes(b"photo " + name.encode())
    m = Manifest(job="j", sources=(str(tmp_path / "face.jpg"),),
                 targets=tuple(Target(str(tmp_path / n), n) for n in ["other.jpg", *NAMES]),
                 chunks=((0,), (1, 2, 3, 4, 5)), output_dir=str(tmp_path / "out"), engine=EngineOptions(name="classic"))
    monkeypatch.setattr(runner, "load_engine", lambda *a, **k: SimpleNamespace(name="fake", device="none"))
    monkeypatch.setattr(runner, "build_swapper", lambda *a, **k: object())
    return TaskConfig(manifest=m, task_index=1, models_dir=None, registry_path=None, tmp_root=None)


class Engine:
    """Processes a target as the real one writes its output (a temporary name, then a rename), and
    counts every target it processes. `stop_at`: the target during which Slurm's SIGTERM arrives,
    after half its output is written under the temporary name."""

    def __init__(self, stop_at: str | None = None):
        self.processed: list[str] = []
        self.stop_at = stop_at

    def __call__(self, swapper, path, out, **kw):
        name = kw["name"]  # `path` is the opened file (worker.targetfile), its name is passed along
        self.processed.append(name)
        tmp = part_path(out)
        tmp.write_bytes(b"half")
        if name == self.stop_at:
            raise Terminated(signal.SIGTERM)  # preempted: the task is requeued, the worker stopped
        tmp.write_bytes(b"swapped " + name.encode())
        os.replace(tmp, out)
        return Outcome("done", 1, 1)


def run(cfg, monkeypatch, engine: Engine) -> dict:
    monkeypatch.setattr(runner, "process_target", engine)
    try:
        code = run_task(cfg)
    except Terminated:
        code = None
    [task] = read_progress_dir(cfg.manifest.progress_dir)
    return {"code": code, "records": {r.output: r for r in task.targets}}


def test_a_requeued_chunk_processes_only_the_remaining_targets_each_exactly_once(chunk, monkeypatch):
    first, second = Engine(stop_at="c.jpg"), Engine()
    before = run(chunk, monkeypatch, first)
    assert before["code"] is None and first.processed == ["a.jpg", "b.jpg", "c.jpg"]
    assert before["records"]["c.jpg"].stopped_by_task_end  # the portal shows it waiting again (decide)
    outputs = chunk.manifest.outputs_dir
    kept = {n: (outputs / n).stat().st_mtime_ns for n in ("a.jpg", "b.jpg")}

    after = run(chunk, monkeypatch, second)  # Slurm starts the same array index again

    assert after["code"] == EXIT_OK
    assert second.processed == ["c.jpg", "d.jpg", "e.jpg"]  # the half-written c.jpg was not taken as done
    assert Counter(first.processed[:2] + second.processed) == Counter(NAMES)  # every target exactly once
    records = after["records"]
    assert {n: records[n].status for n in NAMES} == {
        "a.jpg": "skipped", "b.jpg": "skipped", "c.jpg": "done", "d.jpg": "done", "e.jpg": "done"}
    assert records["a.jpg"].code == "done_earlier"  # the portal says it in the reader's words (target_words)
    assert {n: (outputs / n).stat().st_mtime_ns for n in kept} == kept  # finished outputs untouched
    assert sorted(p.name for p in outputs.iterdir() if not p.name.startswith(".")) == NAMES
    assert all((outputs / n).read_bytes() == b"swapped " + n.encode() for n in NAMES)


def test_a_chunk_requeued_after_it_finished_everything_processes_nothing(chunk, monkeypatch):
    run(chunk, monkeypatch, Engine())
    again = Engine()
    assert run(chunk, monkeypatch, again)["code"] == EXIT_OK
    assert again.processed == []
