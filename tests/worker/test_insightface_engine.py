"""The insightface engine on tiny stand-in models (tests/worker/fake_models.py) and a real photo.

The stand-ins have the real models' signatures, so insightface's own classes and pre/post-processing
run: these tests cover the engine's wiring (hash check first, routing, providers, face conversion,
identity, chained paste-back), not the quality of a real swap. What its detector is given (the
input blob, exact downscaling, the letterbox, the detection size): test_insightface_detector_input.py.
"""
import logging
import shutil
import threading

import cv2
import numpy as np
import onnxruntime
import pytest

from tests.worker.fake_models import face_box_in
from worker import weights
from worker.engines.base import Face
from worker.engines.insightface_engine import CPU, CUDA, InsightFaceEngine
from worker.errors import ModelError, SourceError
from worker.selection import embedding_distance

CPU_ONLY = [CPU]


@pytest.fixture(scope="module")
def engine(fake_models):
    folder, registry = fake_models
    return InsightFaceEngine(models_dir=folder, registry=registry, providers=CPU_ONLY)


@pytest.fixture(scope="module")
def photo():
    from skimage import data

    return np.ascontiguousarray(data.astronaut()[:, :, ::-1])  # RGB -> BGR, 512x512, one face


@pytest.fixture(scope="module")
def cat():
    import cv2
    from skimage import data

    return np.ascontiguousarray(cv2.resize(data.chelsea(), (512, 512))[:, :, ::-1])


def flat(value=128):
    return np.full((512, 512, 3), value, np.uint8)


def test_it_routes_the_fake_models_to_insightface_classes(fake_models):
    from insightface import model_zoo

    folder, registry = fake_models
    kinds = [type(model_zoo.get_model(str(folder / registry[n].file), providers=CPU_ONLY)).__name__
             for n in weights.INSIGHTFACE_MODELS]
    assert kinds == ["SCRFD", "ArcFaceONNX", "INSwapper"]


def test_it_reports_the_provider_that_actually_runs(engine):
    assert engine.name == "insightface"
    assert engine.device == "CPUExecutionProvider"
    assert engine.default_reference_distance == 0.6


@pytest.mark.skipif(CUDA in onnxruntime.get_available_providers(), reason="CUDA really runs on this node")
@pytest.mark.filterwarnings("ignore:Specified provider 'CUDAExecutionProvider'")
def test_it_warns_when_cuda_was_requested_but_the_cpu_runs(fake_models, caplog):
    folder, registry = fake_models
    with caplog.at_level(logging.INFO, logger="worker.engines.insightface"):
        eng = InsightFaceEngine(models_dir=folder, registry=registry, providers=[CUDA, CPU])
    assert eng.device == "CPUExecutionProvider"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "CUDA was requested but ONNX Runtime runs" in warnings[0]


def test_it_finds_the_face_in_the_photo(engine, photo):
    [face] = engine.detect(photo)
    assert face.bbox == pytest.approx(face_box_in(photo.shape), abs=1.0)
    assert face.landmarks.shape == (5, 2) and face.score >= 0.5
    x1, y1, x2, y2 = face.bbox
    assert all(x1 < x < x2 and y1 < y < y2 for x, y in face.landmarks)
    assert face.native.kps.shape == (5, 2) and face.native.det_score == pytest.approx(face.score)


def test_it_finds_no_face_in_a_flat_image(engine):
    assert engine.detect(flat()) == []


def test_it_embeds_faces_as_unit_vectors_that_tell_faces_apart(engine, photo, cat):
    face = engine.detect(photo)[0]
    emb = engine.embed(photo, face)
    assert emb.shape == (512,) and emb.dtype == np.float32
    assert np.linalg.norm(emb) == pytest.approx(1.0, abs=1e-5)
    assert face.embedding is emb and np.allclose(face.native.normed_embedding, emb)
    again = engine.embed(photo, engine.detect(photo)[0])
    other = engine.embed(cat, engine.detect(cat)[0])
    assert embedding_distance(emb, again) < 1e-5
    assert embedding_distance(emb, other) > 0.3


def test_it_averages_the_sources_with_a_face_into_one_identity(engine, photo, cat):
    ident = engine.identity([photo, flat(), cat])
    assert ident.sources_used == 2
    assert ident.embedding.dtype == np.float32 and np.linalg.norm(ident.embedding) == pytest.approx(1.0, abs=1e-5)
    a = engine.embed(photo, engine.detect(photo)[0])
    b = engine.embed(cat, engine.detect(cat)[0])
    expected = (a + b) / np.linalg.norm(a + b)
    assert np.allclose(ident.embedding, expected, atol=1e-5)


def test_it_refuses_sources_without_a_face(engine):
    with pytest.raises(SourceError, match="no face found in the source images"):
        engine.identity([flat(0), flat(200)])


def test_it_swaps_inside_the_face_box_and_nowhere_far_outside(engine, photo, cat):
    before = photo.copy()
    faces = engine.detect(photo)
    out = engine.swap(photo, faces, engine.identity([cat]))
    assert np.array_equal(photo, before)  # the input is not modified
    assert out.shape == photo.shape and out.dtype == np.uint8 and out.flags.c_contiguous
    diff = np.abs(out.astype(np.int16) - photo).sum(axis=2)
    x1, y1, x2, y2 = (int(v) for v in faces[0].bbox)
    assert diff[y1:y2, x1:x2].mean() > 30  # the face changed visibly
    w, h = x2 - x1, y2 - y1
    far = np.ones_like(diff, bool)
    far[max(0, y1 - h // 2):y2 + h // 2, max(0, x1 - w // 2):x2 + w // 2] = False
    assert diff[far].max() == 0  # nothing changed half a face away from the box


def test_it_swaps_toward_the_identity_it_was_given(engine, photo, cat):
    faces = engine.detect(photo)
    as_cat = engine.swap(photo, faces, engine.identity([cat]))
    as_self = engine.swap(photo, faces, engine.identity([photo]))
    assert not np.array_equal(as_cat, as_self)


def test_it_swaps_a_face_found_by_another_engine_from_its_5_landmarks(engine, photo, cat):
    found = engine.detect(photo)[0]
    bare = Face(bbox=found.bbox, landmarks=found.landmarks.copy(), score=found.score)
    ident = engine.identity([cat])
    assert np.array_equal(engine.swap(photo, [bare], ident), engine.swap(photo, [found], ident))
    with pytest.raises(ValueError, match="5 landmarks"):
        engine.swap(photo, [Face(bbox=found.bbox, landmarks=np.zeros((68, 2)))], ident)


def test_it_loads_each_model_once_however_many_targets(fake_models, photo, cat, monkeypatch):
    from insightface import model_zoo

    folder, registry = fake_models
    calls = {"get_model": 0, "sessions": 0}
    real_get_model, real_init = model_zoo.get_model, onnxruntime.InferenceSession.__init__

    def counting_get_model(*args, **kwargs):
        calls["get_model"] += 1
        return real_get_model(*args, **kwargs)

    def counting_init(self, *args, **kwargs):
        calls["sessions"] += 1
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(model_zoo, "get_model", counting_get_model)
    monkeypatch.setattr(onnxruntime.InferenceSession, "__init__", counting_init)
    eng = InsightFaceEngine(models_dir=folder, registry=registry, providers=CPU_ONLY)
    assert calls["get_model"] == 3
    built = calls["sessions"]
    assert built >= 3
    ident = eng.identity([cat])
    for _ in range(5):
        eng.swap(photo, eng.detect(photo), ident)
    assert calls == {"get_model": 3, "sessions": built}


def test_it_refuses_a_corrupt_model_before_loading_anything(fake_models, tmp_path, monkeypatch):
    from insightface import model_zoo

    folder, registry = fake_models
    for spec in registry.values():
        shutil.copy(folder / spec.file, tmp_path / spec.file)
    data = bytearray((tmp_path / "w600k_r50.onnx").read_bytes())
    data[len(data) // 2] ^= 0x01
    (tmp_path / "w600k_r50.onnx").write_bytes(bytes(data))
    monkeypatch.setattr(model_zoo, "get_model", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(ModelError, match=r"model file w600k_r50\.onnx is corrupt at .*w600k_r50\.onnx"):
        InsightFaceEngine(models_dir=tmp_path, registry=registry, providers=CPU_ONLY)


def test_it_refuses_a_missing_model_with_the_fix(tmp_path, fake_models):
    _, registry = fake_models
    with pytest.raises(ModelError, match=rf"det_10g\.onnx is missing .* or copy the file into {tmp_path}"):
        InsightFaceEngine(models_dir=tmp_path, registry=registry, providers=CPU_ONLY)


def test_each_gpu_of_a_task_gets_its_own_device_and_the_cpu_is_said_as_such(fake_models, photo, cat):
    from worker.engines.insightface_engine import default_providers, provider_names

    assert default_providers([CUDA, CPU], gpu=1) == [(CUDA, {"device_id": 1}), CPU]
    assert default_providers([CUDA, CPU]) == [CUDA, CPU] and default_providers([CPU], gpu=1) == [CPU]
    assert provider_names([(CUDA, {"device_id": 1}), CPU]) == [CUDA, CPU]
    folder, registry = fake_models
    eng = InsightFaceEngine(models_dir=folder, registry=registry, gpu=1)
    assert eng.gpu is None and eng.device == CPU  # this onnxruntime has no CUDA: no GPU to decode videos on


def test_it_adds_up_the_models_own_run_time(fake_models, photo, cat):
    folder, registry = fake_models
    eng = InsightFaceEngine(models_dir=folder, registry=registry, providers=CPU_ONLY)
    ident = eng.identity([cat])
    before = eng.inference_seconds()
    faces = eng.detect(photo)
    after_detect = eng.inference_seconds()
    eng.swap(photo, faces, ident)
    assert before < after_detect < eng.inference_seconds()  # the detector's and the swapper's sessions
    # per thread: another GPU's pipeline has its own total
    seen = []
    t = threading.Thread(target=lambda: seen.append(eng.inference_seconds()))
    t.start()
    t.join()
    assert seen == [0.0]


def test_providers_given_with_options_reach_every_session(fake_models, photo, cat):
    # how a task's second GPU asks for its device: ("CUDAExecutionProvider", {"device_id": 1});
    # the same shape on the CPU, through insightface's per-size detector sessions too
    folder, registry = fake_models
    eng = InsightFaceEngine(models_dir=folder, registry=registry, providers=[(CPU, {})])
    assert eng.device == CPU
    out = eng.swap(photo, eng.detect(photo), eng.identity([cat]))
    assert out.shape == photo.shape and not np.array_equal(out, photo)


def test_a_video_frame_is_swapped_in_place_and_a_photo_never(engine, photo, cat):
    """Video frames are the video's own: swapped without a 6 MB copy each. A photo given to
    `swap` is left as it was."""
    identity = engine.identity([cat])
    faces = engine.detect(photo)
    before = photo.copy()
    copied = engine.swap(photo, faces, identity)
    assert np.array_equal(photo, before) and copied is not photo
    frame = photo.copy()
    same = engine.swap(frame, faces, identity, inplace=True)
    assert same is frame
    assert np.array_equal(same, copied)


def test_a_wide_video_frame_runs_the_free_size_detector_at_640x384(engine, photo):
    """The stand-in det_10g, like the real one, takes any input size: a 1080p frame runs at
    640x384 (40 % less to fill and run than 640x640), and a square photo still at 640x640."""
    frame = cv2.copyMakeBorder(cv2.resize(photo, (1080, 1080)), 0, 0, 420, 420, cv2.BORDER_REPLICATE)
    det = engine._det
    assert det.static_input_size is None
    pick, sizes = det._session_for_input_size, []
    det._session_for_input_size = lambda size: sizes.append(tuple(size)) or pick(size)
    try:
        wide = engine.detect(frame)
        square = engine.detect(photo)
    finally:
        det._session_for_input_size = pick
    assert sizes == [(640, 384), (640, 640)]
    assert len(wide) == 1 and len(square) == 1


@pytest.mark.filterwarnings("ignore:.*estimate.* is deprecated:FutureWarning")
def test_its_swap_step_is_insightfaces_own_without_its_thread_unsafe_warning(engine, photo, cat):
    """The engine aligns and runs the swapper itself (so a video's writer thread can swap while
    the task's thread detects): the same crop, matrix and model output as insightface's INSwapper.get."""
    from insightface.app.common import Face as NativeFace

    identity = engine.identity([cat])
    source = NativeFace(embedding=identity.embedding)
    for image in (photo, cv2.resize(photo, (777, 555))):
        [face] = engine.detect(image)
        want_fake, want_matrix = engine._swapper.get(image, face.native, source, paste_back=False)
        fake, matrix = engine._swapped_crop(image, face.native.kps, engine._latent(identity))
        assert np.allclose(matrix, want_matrix, atol=1e-6)
        # the matrices differ in the 7th decimal, which moves a bilinear sample now and then
        diff = np.abs(fake.astype(int) - want_fake)
        assert (diff > 0).mean() < 0.001 and diff.max() <= 2


@pytest.fixture(scope="module")
def moving_clip(tmp_path_factory, photo):
    """2 s of the astronaut drifting across a 480x270 frame, 25 frames/s."""
    import subprocess

    folder = tmp_path_factory.mktemp("clip")
    still = folder / "a.png"
    cv2.imwrite(str(still), cv2.resize(photo, (240, 240)))
    out = folder / "drift.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=gray:s=480x270:d=2:r=25",
                    "-loop", "1", "-i", str(still), "-filter_complex", "[0][1]overlay=x='t*60':y=15:shortest=1",
                    "-c:v", "libx264", "-pix_fmt", "yuv420p", str(out)], check=True)
    return out


@pytest.mark.parametrize("watermark", ["", "AI 生成"])
def test_a_video_swapped_in_the_writer_thread_is_the_video_swapped_frame_by_frame(engine, cat, moving_clip,
                                                                                  tmp_path, watermark):
    """Videos are swapped in two steps on two threads (faces found and decided, then swapped while
    the next frame's faces are found): the very frames, and the poster, of doing both in one."""
    import subprocess

    from worker.manifest import EngineOptions
    from worker.process import Swapper, process_target

    identity = engine.identity([cat])

    class OneThread(Swapper):
        def plan_frame(self, image, steady):
            return self.swap_frame(image, steady)

    outputs = []
    for kind in (Swapper, OneThread):
        swapper = kind(engine=engine, identity=identity, options=EngineOptions(name="insightface"),
                       watermark=watermark)
        out = tmp_path / f"{kind.__name__}.mp4"
        outcome = process_target(swapper, moving_clip, out, poster=tmp_path / f"{kind.__name__}.jpg")
        assert outcome.status == "done" and outcome.frames == 50 and outcome.faces_swapped == 1
        frames = subprocess.run(["ffmpeg", "-v", "error", "-i", str(out), "-f", "rawvideo", "-pix_fmt", "bgr24", "-"],
                                capture_output=True, check=True).stdout
        outputs.append((frames, (tmp_path / f"{kind.__name__}.jpg").read_bytes(), outcome.stages))
    (two, two_poster, stages), (one, one_poster, one_stages) = outputs
    assert two == one and two_poster == one_poster
    assert stages.swap_s > 0 and one_stages.swap_s == 0  # the writer did swap in one, not in the other


def test_its_embedding_is_insightfaces_own_and_no_step_of_a_frame_touches_process_wide_state(
        engine, photo, cat, monkeypatch):
    """Every step a video frame takes (detect, embed for the reference face, swap) runs in the
    task's threads side by side (one per GPU, and the writer): none of them may redirect stdout or
    change the warning filters, which are process-wide. The embedding is still ArcFaceONNX.get's."""
    import warnings

    from insightface.app.common import Face as NativeFace

    from worker.engines import insightface_engine

    identity = engine.identity([cat])
    quieted = []
    monkeypatch.setattr(insightface_engine, "_quiet_insightface", lambda: quieted.append(1))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        [face] = engine.detect(photo)
        ours = engine.embed(photo, face)
        engine.swap(photo, [face], identity)
    assert quieted == []  # no stdout redirect, no warning filter
    assert not [w for w in seen if "deprecated" in str(w.message)]  # scikit-image's estimate is not called
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = engine._rec.get(photo, NativeFace(bbox=face.native.bbox, kps=face.native.kps))
    assert float(np.dot(ours, theirs / np.linalg.norm(theirs))) > 0.9999
