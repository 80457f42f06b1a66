"""The insightface engine with a REAL detector: SCRFD-2.5G (tests/worker/real_models.py) in det_10g's place.

The recogniser and swapper stay the synthetic stand-ins of fake_models.py (no real weights can be
fetched), so these tests are about what a real detector exercises in the engine: detection on real
photos, the 5 keypoints the alignment is built on, the paste-back, and the hash check of a real file.
dlib's 68 landmarks (the classic engine's model, an unrelated detector) are the yardstick.
"""
import hashlib
import shutil

import cv2
import numpy as np
import pytest

from tests.worker import photos, real_models
from worker.engines.insightface_engine import CPU, InsightFaceEngine
from worker.errors import ModelError, SourceError
from worker.weights import verify_models

# insightface's alignment calls scikit-image's deprecated `estimate` (the engine hides it the same way)
pytestmark = pytest.mark.filterwarnings("ignore:.*estimate.* is deprecated:FutureWarning")

SCRFD_SHA256 = "9c162a817c7dd32d35d1f1c6ae6445032d6e73c6c5fe61d8b5b663ba8bc86b30"


@pytest.fixture(scope="module")
def models(scrfd_models):
    return scrfd_models


@pytest.fixture(scope="module")
def engine(models):
    folder, registry = models
    return InsightFaceEngine(models_dir=folder, registry=registry, providers=[CPU])


@pytest.fixture(scope="module")
def solvay():
    return cv2.imread(str(real_models.solvay()), cv2.IMREAD_COLOR)


@pytest.fixture(scope="module")
def dlib_points():
    """dlib's HOG faces and 68 landmarks of a BGR image (the classic engine's models)."""
    import dlib

    from worker.engines.classic import DETECT_THRESHOLD, models_dir

    detector = dlib.get_frontal_face_detector()
    predictor = dlib.shape_predictor(f"{models_dir()}/shape_predictor_68_face_landmarks.dat")

    def points(image):
        rgb = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        # The classic engine's own threshold: dlib's default takes a patch of the astronaut's suit.
        rects, _, _ = detector.run(rgb, 1 if rgb.shape[0] * rgb.shape[1] <= 600_000 else 0, DETECT_THRESHOLD)
        return [np.array([(p.x, p.y) for p in predictor(rgb, r).parts()], np.float64) for r in rects]

    return points


def five_of(p68: np.ndarray) -> np.ndarray:
    """dlib's 68 points as SCRFD's 5: eye centres (image left, then right), nose tip, mouth corners."""
    return np.array([p68[36:42].mean(0), p68[42:48].mean(0), p68[30], p68[48], p68[54]])


def matched(faces, p68s):
    """(SCRFD face, dlib's 5 points) for every dlib face whose landmark centre lies in an SCRFD box."""
    pairs = []
    for p68 in p68s:
        cx, cy = p68.mean(0)
        hits = [f for f in faces if f.bbox[0] < cx < f.bbox[2] and f.bbox[1] < cy < f.bbox[3]]
        assert len(hits) == 1, f"dlib's face at {cx:.0f},{cy:.0f} is in {len(hits)} SCRFD boxes"
        pairs.append((hits[0], five_of(p68)))
    return pairs


def test_it_uses_the_pinned_real_detector(models):
    folder, registry = models
    path = folder / "scrfd.onnx"
    assert path.stat().st_size == 3_291_739
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SCRFD_SHA256 == registry["det_10g"].sha256


def test_it_loads_the_real_detector_as_insightface_scrfd_with_keypoints(engine):
    assert type(engine._det).__name__ == "SCRFD" and engine._det.use_kps
    assert engine.device == CPU


def test_it_finds_the_six_people_of_t1(engine):
    faces = engine.detect(photos.t1())
    assert len(faces) == 6
    assert all(f.score >= 0.5 and f.landmarks.shape == (5, 2) for f in faces)


def test_it_finds_the_faces_of_the_solvay_conference(engine, solvay):
    faces = engine.detect(solvay)
    assert len(faces) >= 27  # of 29 (all 29 seen on the CPU); none counted twice:
    centres = np.array([((f.bbox[0] + f.bbox[2]) / 2, (f.bbox[1] + f.bbox[3]) / 2) for f in faces])
    gaps = np.linalg.norm(centres[:, None] - centres[None], axis=2) + np.eye(len(faces)) * 1e9
    assert gaps.min() > 30


def test_it_finds_the_one_astronaut_and_nothing_in_a_flat_image(engine):
    assert len(engine.detect(photos.astronaut())) == 1
    assert engine.detect(np.full((480, 640, 3), 128, np.uint8)) == []


@pytest.mark.parametrize("name, bbox, kps", [
    # The scrfd package's own expected results (its tests/truth_faces.py): the engine's letterbox,
    # scaling and anchor decoding give the same boxes and points. (These two portraits are nearly
    # grey: swapping red and blue moved nothing by more than a pixel, so colour order is not tested here.)
    ("newton.png", (334, 89, 438, 232), ((371, 143), (419, 145), (399, 177), (371, 197), (409, 199))),
    ("gauss.png", (376, 203, 654, 568), ((469, 353), (594, 346), (549, 436), (487, 489), (589, 482))),
])
def test_it_agrees_with_the_detectors_own_package_on_its_photos(engine, name, bbox, kps):
    image = cv2.imread(str(real_models.scrfd_file(f"images/{name}")), cv2.IMREAD_COLOR)
    [face] = engine.detect(image)
    assert face.bbox == pytest.approx(bbox, abs=2.0)
    assert face.landmarks == pytest.approx(np.array(kps, np.float32), abs=2.0)


def test_its_keypoints_land_on_the_eyes_nose_and_mouth_dlib_finds(engine, solvay, dlib_points):
    errors = []
    for image in (photos.t1(), photos.astronaut(), solvay):
        for face, five in matched(engine.detect(image), dlib_points(image)):
            iod = np.linalg.norm(five[1] - five[0])
            dist = np.linalg.norm(face.landmarks[:, None] - five[None], axis=2) / iod  # [scrfd point, dlib point]
            assert (dist.argmin(axis=1) == np.arange(5)).all(), "a keypoint is nearer another feature than its own"
            errors.append(np.diag(dist))
    errors = np.array(errors)
    assert len(errors) >= 32  # t1 6, astronaut 1, Solvay 25 or more found by dlib too
    # Measured (fraction of the inter-ocular distance): eyes 0.06-0.08 mean, 0.16 worst; nose 0.08 /
    # 0.16; mouth corners 0.13 / 0.35 (dlib's outer lip corners sit a little off SCRFD's).
    assert errors[:, :3].mean(axis=0) == pytest.approx([0.07, 0.07, 0.08], abs=0.05)
    assert errors[:, :3].max() < 0.25 and errors[:, 3:].max() < 0.45


def test_alignment_brings_dlibs_eyes_to_the_swappers_template(engine, dlib_points):
    from insightface.utils import face_align

    image = photos.t1()
    template = face_align.arcface_dst + (8.0, 0.0)  # the 128-pixel crop of inswapper_128
    iod = template[1, 0] - template[0, 0]
    misses = []
    for face, five in matched(engine.detect(image), dlib_points(image)):
        _, matrix = face_align.norm_crop2(image, face.landmarks, 128)
        eyes = np.c_[five[:2], np.ones(2)] @ matrix.T
        misses.append(np.linalg.norm(eyes - template[:2], axis=1) / iod)
    # Measured: 0.07-0.12 of the template's eye distance on average; worst 0.27, the far eye of the
    # near-profile face, where dlib's own points are a guess.
    assert len(misses) == 6 and np.mean(misses) < 0.15 and np.max(misses) < 0.35


def footprints(shape, faces, grow=1):
    """Where each face's 128-pixel swap crop lands in the image, grown by `grow` pixels."""
    from insightface.utils import face_align

    area = np.zeros(shape[:2], np.uint8)
    corners = np.array([[0, 0, 1], [128, 0, 1], [128, 128, 1], [0, 128, 1]], np.float64)
    for face in faces:
        _, matrix = face_align.norm_crop2(np.zeros((1, 1, 3), np.uint8), face.landmarks, 128)
        quad = corners @ cv2.invertAffineTransform(matrix).T
        cv2.fillConvexPoly(area, np.round(quad).astype(np.int32), 1)
    return cv2.dilate(area, np.ones((2 * grow + 1, 2 * grow + 1), np.uint8)).astype(bool)


@pytest.mark.parametrize("which", ["t1", "solvay"])
def test_paste_back_changes_the_faces_and_leaves_the_rest_of_the_photo_as_it_was(engine, solvay, which):
    image = photos.t1() if which == "t1" else solvay
    faces = engine.detect(image)
    out = engine.swap(image, faces, engine.identity([photos.tom_hanks()]))
    changed = (out != image).any(axis=2)
    assert not changed[~footprints(image.shape, faces)].any()  # byte-identical outside the crops (measured: 0 px)
    boxes = np.zeros_like(changed)
    for face in faces:
        x1, y1, x2, y2 = (max(0, int(v)) for v in face.bbox)
        assert changed[y1:y2, x1:x2].mean() > 0.9  # every face swapped (the stand-in recolours it)
        boxes[y1:y2, x1:x2] = True
    # What changes beyond the boxes is the crop's margin (forehead, jaw): measured 3.0 % of the
    # Solvay photo and 5.2 % of t1, under what changes inside the boxes.
    assert changed[~boxes].sum() < changed[boxes].sum()


def test_it_finds_the_tight_source_crop_a_bare_detection_misses(engine):
    source = photos.tom_hanks()  # 112x112, cropped to the face
    assert engine.detect(source) == []
    identity = engine.identity([source])
    assert identity.sources_used == 1
    with pytest.raises(SourceError, match="no face found"):  # a flat image still has none, padded or not
        engine.identity([np.full((112, 112, 3), 128, np.uint8)])


def test_the_registry_accepts_the_real_file_by_hash_and_refuses_a_changed_byte(models, tmp_path):
    folder, registry = models
    assert verify_models(folder, ["det_10g"], registry=registry) == {"det_10g": folder / "scrfd.onnx"}
    for name in ("w600k_r50", "inswapper_128"):
        shutil.copy(folder / registry[name].file, tmp_path / registry[name].file)
    data = bytearray((folder / "scrfd.onnx").read_bytes())
    data[len(data) // 3] ^= 0x01
    (tmp_path / "scrfd.onnx").write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"scrfd\.onnx is corrupt .*SHA-256 .* does not match"):
        InsightFaceEngine(models_dir=tmp_path, registry=registry, providers=[CPU])


def test_the_fetch_helper_deletes_a_file_that_does_not_hash_and_fails(tmp_path):
    bad = tmp_path / "scrfd.onnx"
    bad.write_bytes(b"\0" * 3_291_739)  # the right size, the wrong bytes
    with pytest.raises(pytest.fail.Exception, match="deleted, the next run fetches it again"):
        real_models._check(bad, *real_models.SCRFD_FILES["models/scrfd.onnx"])
    assert not bad.exists()


@pytest.mark.parametrize("image", ["solvay", "t1", "astronaut", "t1 in a 1080p frame"])
def test_its_faster_detector_code_finds_exactly_what_insightfaces_own_finds(engine, solvay, image):
    """The engine runs SCRFD with its own input blob, decoding and (for a 1080p frame) scaling
    (worker.engines.scrfd_speed): on real photos, every box, score and keypoint is the very one
    insightface's own code gives."""
    from worker.engines.scrfd_speed import DetectorBlob

    if image == "t1 in a 1080p frame":  # 3x the 640x360 letterbox: scaled by picking pixels
        image = cv2.copyMakeBorder(cv2.resize(photos.t1(), (1280, 1080)), 0, 0, 320, 320, cv2.BORDER_REPLICATE)
    else:
        image = solvay if image == "solvay" else getattr(photos, image)()
    det = engine._det
    assert isinstance(det._prepare_input_blob, DetectorBlob) and {"forward", "_detect_candidates"} <= set(vars(det))
    ours = engine.detect(image)
    fast = det._prepare_input_blob, det.forward, det._detect_candidates
    del det._prepare_input_blob, det.forward, det._detect_candidates  # back to insightface's own methods
    try:
        theirs = engine.detect(image)
    finally:
        det._prepare_input_blob, det.forward, det._detect_candidates = fast
    assert len(ours) == len(theirs) >= 1
    for a, b in zip(ours, theirs):
        assert a.bbox == b.bbox and a.score == b.score
        assert np.array_equal(a.landmarks, b.landmarks)
