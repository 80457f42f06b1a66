"""The insightface engine leaves faces turned toward profile as they are, with its optional head-turn
model (buffalo_l's 1k3d68, `worker/engines/head_turn.py`), as the classic engine does.

The real 1k3d68 weights cannot be downloaded here. A stand-in with its signature (input `data`
1x3x192x192, output 1x3309) answers every face with ONE fixed set of 68 points: those dlib finds on one
person of insightface's t1.jpg, put into that person's crop as the real model would give them. The
detector (the real SCRFD-2.5G), the crop, the decoding and the rule are the engine's own; only the
shape that comes back is fixed. So: Joey's shape (turned ~49 degrees) makes every face a profile, and
Rachel's (facing the camera) none.
"""
from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.worker import photos
from tests.worker.fake_models import IR_VERSION, OPSET, spec_of
from worker.engines.classic import ClassicEngine
from worker.engines.insightface_engine import CPU, InsightFaceEngine
from worker.errors import ModelError
from worker.manifest import EngineOptions
from worker.modelset import engine_models
from worker.pose import yaw_degrees
from worker.process import PROFILE_LEFT, Swapper, process_target
from worker.weights import POSE_MODEL

#: t1.jpg's people, left to right (as tests/worker/test_pose.py names them)
PEOPLE = ("Rachel", "Monica", "Ross", "Chandler", "Joey", "Phoebe")


@pytest.fixture(scope="module")
def base(scrfd_models):
    """The stand-in recogniser and swapper with the real SCRFD: (folder, registry), no head-turn model."""
    return scrfd_models


@pytest.fixture(scope="module")
def plain(base):
    return InsightFaceEngine(models_dir=base[0], registry=base[1], providers=[CPU])


@pytest.fixture(scope="module")
def t1():
    return photos.t1()


@pytest.fixture(scope="module")
def people(plain, t1):
    """name -> (SCRFD's box, dlib's 68 points) for the six people of t1.jpg."""
    dlib_faces = sorted(ClassicEngine().detect(t1), key=lambda f: f.bbox[0])
    out = {}
    for name, face in zip(PEOPLE, dlib_faces, strict=True):
        cx, cy = face.landmarks.mean(0)
        [box] = [f.bbox for f in plain.detect(t1) if f.bbox[0] < cx < f.bbox[2] and f.bbox[1] < cy < f.bbox[3]]
        out[name] = (box, face.landmarks)
    return out


def in_crop(points: np.ndarray, box) -> np.ndarray:
    """`points` as 1k3d68 gives them for the face in `box`: x, y in [-1, 1] of insightface's crop
    (the box's centre, 1.5 times its longer side scaled to 192 pixels)."""
    x1, y1, x2, y2 = box
    scale = 192 / (max(x2 - x1, y2 - y1) * 1.5)
    crop = (points - [(x1 + x2) / 2, (y1 + y2) / 2]) * scale + 96
    return crop / 96 - 1


def landmark_model(path, points68: np.ndarray, length: int = 3309) -> None:
    """A 1k3d68-shaped graph whose output is always `points68` (x, y in [-1, 1], z 0) as its last 68
    of 1103 points. The input is read (times 0), so the graph is not a bare constant."""
    out = np.zeros((length // 3, 3), np.float32) if length % 3 == 0 else np.zeros((length // 2, 2), np.float32)
    out[-68:, :2] = points68
    nodes = [
        helper.make_node("ReduceMean", ["data"], ["m"], keepdims=0, name="pool"),
        helper.make_node("Reshape", ["m", "one"], ["m1"], name="flat"),
        helper.make_node("Expand", ["m1", "outshape"], ["me"], name="expand"),
        helper.make_node("Where", ["never", "me", "value"], ["fc1"], name="pick"),
    ]
    inits = [
        numpy_helper.from_array(np.array([1, 1], np.int64), "one"),
        numpy_helper.from_array(np.array([1, length], np.int64), "outshape"),
        numpy_helper.from_array(np.zeros((1, length), bool), "never"),
        numpy_helper.from_array(out.reshape(1, length), "value"),
    ]
    graph = helper.make_graph(nodes, "fake_1k3d68", [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 192, 192])],
                              [helper.make_tensor_value_info("fc1", TensorProto.FLOAT, [1, length])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


def folder_with(base, tmp_path, points68=None, length=3309):
    """A models folder: the base models, plus (when given) the head-turn stand-in answering `points68`."""
    folder, registry = tmp_path / "models", dict(base[1])
    shutil.copytree(base[0], folder)
    if points68 is not None:
        landmark_model(folder / "1k3d68.onnx", points68, length)
        registry[POSE_MODEL] = spec_of(POSE_MODEL, folder / "1k3d68.onnx")
    return folder, registry


def engine_shaped_as(name, people, base, tmp_path):
    box, points = people[name]
    folder, registry = folder_with(base, tmp_path, in_crop(points, box))
    return InsightFaceEngine(models_dir=folder, registry=registry, providers=[CPU])


def test_its_points_land_where_dlib_finds_them(people, base, tmp_path, t1):
    engine = engine_shaped_as("Joey", people, base, tmp_path)
    box, points = people["Joey"]
    [joey] = [f for f in engine.detect(t1) if f.bbox == box]
    assert np.abs(joey.pose_landmarks - points).max() < 0.05  # pixels
    assert abs(yaw_degrees(joey.pose_landmarks)) > 45 and engine.too_turned(joey)


def test_a_photo_whose_faces_are_all_in_profile_is_left_as_it_was_with_a_note(people, base, tmp_path, t1):
    engine = engine_shaped_as("Joey", people, base, tmp_path)  # every face reads Joey's turn
    swapper = Swapper(engine=engine, identity=engine.identity([photos.astronaut()]),
                      options=EngineOptions(name="insightface"))
    target = photos.t1_path()
    outcome = process_target(swapper, target, tmp_path / "out.jpg")
    assert outcome.status == "no_face" and outcome.faces_found == 6 and outcome.faces_swapped == 0
    assert outcome.message == PROFILE_LEFT
    assert outcome.code == "profile_left" and outcome.params == {"left": 6}
    assert (tmp_path / "out.jpg").read_bytes() == target.read_bytes()


def test_faces_that_face_the_camera_are_swapped(people, base, tmp_path, plain, t1):
    engine = engine_shaped_as("Rachel", people, base, tmp_path)
    assert abs(yaw_degrees(people["Rachel"][1])) < 10
    identity = engine.identity([photos.astronaut()])
    out = engine.swap(t1, engine.detect(t1), identity)
    assert engine.last_left_as_is == 0
    # the same pixels as the engine without the model: the rule only ever leaves faces out
    assert np.array_equal(out, plain.swap(t1, plain.detect(t1), identity))
    assert not np.array_equal(out, t1)


def test_a_video_of_faces_in_profile_keeps_them_and_one_facing_the_camera_swaps_them(people, base, tmp_path):
    clip = tmp_path / "t1.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-loop", "1", "-i", str(photos.t1_path()), "-t", "0.4", "-r", "10",
                    "-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2", "-c:v", "libx264", "-pix_fmt", "yuv420p", str(clip)],
                   check=True)
    outcomes = {}
    for name in ("Joey", "Rachel"):
        engine = engine_shaped_as(name, people, base, tmp_path / name)
        swapper = Swapper(engine=engine, identity=engine.identity([photos.astronaut()]),
                          options=EngineOptions(name="insightface"))
        outcomes[name] = process_target(swapper, clip, tmp_path / f"{name}.mp4")
        assert outcomes[name].frames == 4
    joey, rachel = outcomes["Joey"], outcomes["Rachel"]
    assert (joey.status, joey.faces_swapped, rachel.status, rachel.faces_swapped) == ("no_face", 0, "done", 6)
    # the video says why, as a photo does: six people left as they are, in all four frames
    assert (joey.message, joey.code, joey.params) == (PROFILE_LEFT, "profile_left", {"left": 6, "frames": 4})
    assert not rachel.code and not rachel.message


def test_without_the_model_every_face_is_swapped_and_the_log_says_how_to_change_that(base, caplog, t1):
    with caplog.at_level(logging.INFO, logger="worker.engines.insightface"):
        engine = InsightFaceEngine(models_dir=base[0], registry=base[1], providers=[CPU])
    assert engine.head_turn is None
    assert "no head-turn model (1k3d68.onnx) installed: faces in profile are swapped too" in caplog.text
    faces = engine.detect(t1)
    assert all(f.pose_landmarks is None for f in faces) and not any(engine.too_turned(f) for f in faces)
    assert "1k3d68.onnx" not in {m["name"] for m in engine_models(engine, base[1])}


def test_the_job_records_the_model_it_used(people, base, tmp_path):
    engine = engine_shaped_as("Rachel", people, base, tmp_path)
    folder = tmp_path / "models"
    used = {m["name"]: m["sha256"] for m in engine_models(engine, {**base[1], POSE_MODEL: spec_of(POSE_MODEL, folder / "1k3d68.onnx")})}
    assert used["1k3d68.onnx"] == hashlib.sha256((folder / "1k3d68.onnx").read_bytes()).hexdigest()


def test_a_changed_head_turn_model_stops_the_engine(people, base, tmp_path):
    box, points = people["Joey"]
    folder, registry = folder_with(base, tmp_path, in_crop(points, box))
    data = bytearray((folder / "1k3d68.onnx").read_bytes())
    data[-1] ^= 1
    (folder / "1k3d68.onnx").write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"1k3d68\.onnx is corrupt .*replace it or remove it"):
        InsightFaceEngine(models_dir=folder, registry=registry, providers=[CPU])


def test_a_landmark_model_of_another_kind_is_refused(base, tmp_path):
    """insightface routes any 192-pixel model to its landmark class: a 2-D 106-point one (2d106det's
    shape) measured with the 68-point rule would read nonsense, so it is refused by name."""
    folder, registry = folder_with(base, tmp_path, np.zeros((68, 2), np.float32), length=212)
    with pytest.raises(ModelError, match=r"not insightface's 3-D 68-point landmark model \(1k3d68\)"):
        InsightFaceEngine(models_dir=folder, registry=registry, providers=[CPU])
