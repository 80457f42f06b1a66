"""The task runner's own decisions, in-process, with the engine (and for some tests the per-target
work) swapped out."""
import logging
import os
import signal
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

import worker.runner as runner
import worker.testhooks as testhooks
from worker.manifest import EngineOptions, Manifest, Target
from worker.process import Outcome
from worker.progress import read_progress_dir
from worker.runner import EXIT_TARGETS_FAILED, EXIT_TASK_FAILED, TaskConfig, run_task
from worker.signals import Terminated
from worker.targetfile import LINK_OUTSIDE, LINK_UNCHECKED


@pytest.fixture
def config(tmp_path, monkeypatch):
    """Task 0 of a two-target manifest; loading the engine and building the identity cost nothing."""
    for name in ("a.jpg", "v.mp4"):
        (tmp_path / name).write_bytes(b"x")
    m = Manifest(job="j", sources=(str(tmp_path / "face.jpg"),),
                 targets=(Target(str(tmp_path / "a.jpg"), "a.jpg"), Target(str(tmp_path / "v.mp4"), "v.mp4")),
                 chunks=((0, 1),), output_dir=str(tmp_path / "out"), engine=EngineOptions(name="classic"))
    monkeypatch.setattr(runner, "load_engine", lambda *a, **k: SimpleNamespace(name="fake", device="none"))
    monkeypatch.setattr(runner, "build_swapper", lambda *a, **k: object())
    return TaskConfig(manifest=m, task_index=0, models_dir=None, registry_path=None, tmp_root=None)


def test_it_flags_the_target_running_when_the_task_is_stopped(config, monkeypatch):
    def process_target(swapper, path, out, **kw):
        if kw["name"] == "v.mp4":
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


# --- targets read on the node: links, odd names ---------------------------------------------------

class Recolour:
    """A swapper that "swaps" one face per picture by inverting it: no model, real image files."""

    options = EngineOptions(name="classic")

    def swap_frame(self, image):
        return 255 - image, 1, 1


def photo(path, value):
    Image.fromarray(np.full((40, 60, 3), value, np.uint8)).save(path)
    return path


def storage_with_an_escape(tmp_path):
    """Cluster storage with photos, a link out of it to a file that is not the user's (another
    job's face in the work root), and a link that stays inside."""
    storage, work = tmp_path / "storage" / "shoot", tmp_path / "work" / "jobs" / "other" / "sources"
    storage.mkdir(parents=True)
    work.mkdir(parents=True)
    secret = photo(work / "0-their-face.png", 77)
    photo(storage / "a.png", 10)
    photo(storage / "c.png", 30)
    (storage / "b.png").symlink_to(secret)
    (storage / "inside.png").symlink_to(storage / "a.png")
    return storage, secret


def run_chunk(tmp_path, monkeypatch, targets, target_roots):
    monkeypatch.setattr(runner, "load_engine", lambda *a, **k: SimpleNamespace(name="fake", device="none"))
    monkeypatch.setattr(runner, "build_swapper", lambda *a, **k: Recolour())
    job = tmp_path / "work" / "jobs" / "mine"
    m = Manifest(job="j", sources=(str(job / "sources" / "0-face.png"),),
                 targets=tuple(Target(str(path), out) for path, out in targets),
                 chunks=(tuple(range(len(targets))),), output_dir=str(job / "out"), engine=EngineOptions(name="classic"),
                 target_roots=target_roots)
    job.mkdir(parents=True, exist_ok=True)
    m.write(job / "manifest.json")
    cfg = TaskConfig.from_env(str(job / "manifest.json"), 0, None, None, env={})
    code = run_task(cfg)
    [task] = read_progress_dir(m.progress_dir)
    return code, {r.output: r for r in task.targets}, m.outputs_dir


@pytest.mark.parametrize("roots", ["storage", None])
def test_a_link_leading_out_of_the_roots_is_refused_and_never_read(tmp_path, monkeypatch, roots):
    storage, secret = storage_with_an_escape(tmp_path)
    target_roots = (str(tmp_path / "storage"),) if roots else None
    code, recs, outputs = run_chunk(tmp_path, monkeypatch, [(storage / n, n) for n in ("a.png", "b.png", "c.png")],
                                    target_roots)
    assert code == EXIT_TARGETS_FAILED
    assert recs["b.png"].status == "failed"
    assert recs["b.png"].message == (LINK_OUTSIDE if roots else LINK_UNCHECKED)
    assert recs["a.png"].status == recs["c.png"].status == "done"  # its neighbours ran as usual
    assert sorted(p.name for p in outputs.iterdir()) == ["a.png", "c.png"]
    assert not any(np.array_equal(np.asarray(Image.open(p)), 255 - np.asarray(Image.open(secret)))
                   for p in outputs.iterdir())


def test_a_file_replaced_after_the_listing_is_checked_again(tmp_path, monkeypatch):
    """The portal listed real files; before the task ran, one became a link out and a folder on
    the way became a link out too. With the roots in the manifest both are refused."""
    storage, secret = storage_with_an_escape(tmp_path)
    (storage / "c.png").unlink()
    (storage / "c.png").symlink_to(secret)
    sub = storage / "day2"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    photo(outside / "d.png", 50)
    sub.symlink_to(outside)
    code, recs, outputs = run_chunk(tmp_path, monkeypatch,
                                    [(storage / "a.png", "a.png"), (storage / "c.png", "c.png"),
                                     (sub / "d.png", "d.png"), (storage / "inside.png", "inside.png")],
                                    (str(tmp_path / "storage"),))
    assert recs["c.png"].message == LINK_OUTSIDE
    assert recs["d.png"].status == "failed" and recs["d.png"].message.startswith("skipped: it lies outside")
    assert recs["a.png"].status == recs["inside.png"].status == "done"  # a link that stays inside is fine
    assert sorted(p.name for p in outputs.iterdir()) == ["a.png", "inside.png"]


def test_uploads_in_the_job_folder_are_admitted_besides_the_roots(tmp_path, monkeypatch):
    uploads = tmp_path / "work" / "jobs" / "mine" / "targets"
    uploads.mkdir(parents=True)
    photo(uploads / "up.png", 90)
    code, recs, _ = run_chunk(tmp_path, monkeypatch, [(uploads / "up.png", "up.png")], (str(tmp_path / "storage"),))
    assert code == 0 and recs["up.png"].status == "done"


def test_a_named_pipe_is_refused_instead_of_hanging_the_task(tmp_path, monkeypatch):
    storage, _ = storage_with_an_escape(tmp_path)
    os.mkfifo(storage / "pipe.png")
    code, recs, _ = run_chunk(tmp_path, monkeypatch, [(storage / "pipe.png", "pipe.png"), (storage / "a.png", "a.png")],
                              (str(tmp_path / "storage"),))
    assert recs["pipe.png"].status == "failed" and recs["pipe.png"].message.startswith("skipped: it is not an ordinary file")
    assert recs["a.png"].status == "done"


def test_a_254_byte_name_is_processed_and_an_unwritable_output_name_fails_alone(tmp_path, monkeypatch):
    """Temporary files next to an output have short names of their own, whatever the output's name;
    an output name the file system cannot hold fails that one target with a plain message."""
    storage, _ = storage_with_an_escape(tmp_path)
    long = "é" * 125 + "x.png"  # 255 bytes: the longest name a file can have
    photo(storage / long, 60)
    too_long = "n" * 252 + "-2.png"  # 258 bytes: an output name no file can have
    code, recs, outputs = run_chunk(tmp_path, monkeypatch,
                                    [(storage / "a.png", "a.png"), (storage / long, long), (storage / "c.png", too_long),
                                     (storage / "inside.png", "inside.png")], (str(tmp_path / "storage"),))
    assert code == EXIT_TARGETS_FAILED
    assert recs[long].status == "done" and (outputs / long).is_file()
    assert recs[too_long].status == "failed"
    assert recs[too_long].message == ("the output name is too long for the file system (258 bytes; most allow 255): "
                                      "rename the file to something shorter")
    assert recs["a.png"].status == recs["inside.png"].status == "done"
    assert sorted(p.name for p in outputs.iterdir()) == sorted(["a.png", long, "inside.png"])  # no temp file left


def test_a_running_video_reports_its_frames_and_ends_with_people_not_detections(config, monkeypatch):
    seen = []

    def process_target(swapper, path, out, on_frames=None, **kw):
        if kw["name"] == "v.mp4":
            on_frames(25, 100)
            seen.extend(t.frames_done for t in read_progress_dir(config.manifest.progress_dir)[0].targets)
            on_frames(100, 100)
            return Outcome("done", 1, 1, frames=100)  # process.py counts the most faces in one frame
        return Outcome("done", 1, 1)

    monkeypatch.setattr(runner, "process_target", process_target)
    run_task(config)
    [task] = read_progress_dir(config.manifest.progress_dir)
    video = task.targets[1]
    assert seen == [None, 25]  # the image has no frames; the video's first frames were on disk while it ran
    assert (video.frames_done, video.frames_total, video.faces_found) == (100, 100, 1)


def test_a_video_says_in_its_record_once_its_poster_is_written(config, monkeypatch):
    def process_target(swapper, path, out, on_frames=None, poster=None, **kw):
        if kw["name"] == "v.mp4":
            on_frames(25, 100)  # nothing yet
            poster.parent.mkdir(parents=True, exist_ok=True)
            poster.write_bytes(b"\xff\xd8 jpeg")
            on_frames(100, 100)
            return Outcome("done", 1, 1, frames=100)
        assert poster.name == "a.jpg.jpg"  # a photo gets a path too, but writes nothing there
        return Outcome("done", 1, 1)

    monkeypatch.setattr(runner, "process_target", process_target)
    run_task(config)
    [task] = read_progress_dir(config.manifest.progress_dir)
    assert [t.poster for t in task.targets] == [False, True]
    assert (config.manifest.output_folder.poster("v.mp4")).endswith("/out/posters/v.mp4.jpg")
