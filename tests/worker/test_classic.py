"""The classic engine (dlib + landmark warp) on real photos: detection, identity vectors, and a swap
that an independent judge, dlib's own face recogniser, sees as the source person."""
import numpy as np
import pytest

from tests.worker import photos
from worker.engines.classic import ClassicEngine
from worker.errors import SourceError
from worker.selection import embedding_distance


@pytest.fixture(scope="module")
def engine():
    return ClassicEngine()  # loads ~130 MB of dlib models: once per module


@pytest.fixture(scope="module")
def t1():
    return photos.t1()


@pytest.fixture(scope="module")
def tom():
    return photos.tom_hanks()


@pytest.fixture(scope="module")
def astronaut():
    return photos.astronaut()


def grown(bbox, image_shape, fraction):
    """Integer (x1, y1, x2, y2) of a box grown by `fraction` of its size on each side, clipped."""
    x1, y1, x2, y2 = bbox
    dx, dy = (x2 - x1) * fraction, (y2 - y1) * fraction
    h, w = image_shape[:2]
    return max(0, int(x1 - dx)), max(0, int(y1 - dy)), min(w, int(np.ceil(x2 + dx))), min(h, int(np.ceil(y2 + dy)))


def crop_face(image, face):
    """A source photo made of one face of a group photo, with some room around it."""
    x1, y1, x2, y2 = grown(face.bbox, image.shape, 0.6)
    return np.ascontiguousarray(image[y1:y2, x1:x2])


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def identity_moves(engine, source, target, skip=None):
    """For each target face (but `skip`, and those turned toward profile, which the engine leaves as
    they are), whether the swap brought it closer to the source identity.

    The judge re-detects the face in the output and compares its descriptor distance to the
    source identity with the original face's. A face the detector no longer finds counts as a
    failure.
    """
    identity = engine.identity([source])
    faces = [f for f in engine.detect(target)
             if (skip is None or iou(f.bbox, skip) < 0.3) and not engine.too_turned(f)]
    before = [embedding_distance(engine.embed(target, f), identity.embedding) for f in faces]
    output = engine.swap(target, faces, identity)
    found = engine.detect(output)
    moved = []
    for face, distance in zip(faces, before):
        match = [g for g in found if iou(g.bbox, face.bbox) > 0.3]
        moved.append(bool(match) and embedding_distance(engine.embed(output, match[0]), identity.embedding) < distance)
    return moved


def test_it_finds_the_faces_of_a_group_photo(engine, t1):
    faces = engine.detect(t1)
    assert len(faces) >= 5
    assert [f.area for f in faces] == sorted((f.area for f in faces), reverse=True)
    assert all(f.landmarks.shape == (68, 2) for f in faces)


def test_it_finds_one_face_on_the_astronaut_and_on_a_small_crop(engine, astronaut, tom):
    # one: the suit below the face once passed as a weak face
    assert len(engine.detect(astronaut)) == 1
    assert len(engine.detect(tom)) == 1  # 112x112: found thanks to upsampling small images


def test_it_returns_normalised_embeddings(engine, tom):
    face = engine.detect(tom)[0]
    vec = engine.embed(tom, face)
    assert vec.shape == (128,)
    assert np.linalg.norm(vec) == pytest.approx(1.0)
    assert face.embedding is vec


def test_it_tells_the_same_person_from_another(engine, tom, astronaut):
    flipped = np.ascontiguousarray(tom[:, ::-1])
    a = engine.embed(tom, engine.detect(tom)[0])
    b = engine.embed(flipped, engine.detect(flipped)[0])
    c = engine.embed(astronaut, engine.detect(astronaut)[0])
    assert embedding_distance(a, b) < engine.default_reference_distance < embedding_distance(a, c)


def test_it_raises_source_error_when_no_source_has_a_face(engine):
    with pytest.raises(SourceError, match="no face found"):
        engine.identity([np.zeros((200, 200, 3), np.uint8), np.full((64, 64, 3), 200, np.uint8)])


def test_it_averages_several_sources_and_skips_faceless_ones(engine, tom):
    flipped = np.ascontiguousarray(tom[:, ::-1])
    blank = np.zeros((100, 100, 3), np.uint8)
    one = engine.identity([tom])
    two = engine.identity([tom, blank, flipped])
    assert (one.sources_used, two.sources_used) == (1, 2)
    assert np.linalg.norm(two.embedding) == pytest.approx(1.0)
    each = [engine.embed(img, engine.detect(img)[0]) for img in (tom, flipped)]
    mean = np.mean(each, axis=0)
    np.testing.assert_allclose(two.embedding, mean / np.linalg.norm(mean))


def test_it_changes_the_faces_and_nothing_far_from_them(engine, t1, tom):
    faces = engine.detect(t1)
    original = t1.copy()
    out = engine.swap(t1, faces, engine.identity([tom]))
    assert np.array_equal(t1, original)  # the input is not modified
    assert out.shape == t1.shape and out.dtype == np.uint8
    diff = np.abs(out.astype(int) - t1.astype(int)).max(axis=2)
    near = np.zeros(diff.shape, bool)
    for face in faces:
        if engine.too_turned(face):
            continue  # near profile: left as is (test_it_leaves_faces_in_profile_as_they_are)
        x1, y1, x2, y2 = grown(face.bbox, t1.shape, 0.0)
        assert diff[y1:y2, x1:x2].mean() > 5, f"face at {face.bbox} barely changed"
        x1, y1, x2, y2 = grown(face.bbox, t1.shape, 0.25)
        near[y1:y2, x1:x2] = True
    assert diff[~near].max() <= 1
    assert engine.last_left_as_is == 2


def test_it_leaves_faces_in_profile_as_they_are(engine, t1, tom):
    by_x = sorted(engine.detect(t1), key=lambda f: f.bbox[0])
    monica, joey = by_x[1], by_x[4]  # turned toward profile: a 2-D warp smeared them
    out = engine.swap(t1, [monica, joey], engine.identity([tom]))
    assert np.array_equal(out, t1) and engine.last_left_as_is == 2


def test_a_photo_with_a_face_in_profile_says_so(engine, tmp_path):
    from worker.manifest import EngineOptions
    from worker.process import build_swapper, process_target

    swapper = build_swapper(engine, [str(photos.tom_hanks_path())], EngineOptions())
    outcome = process_target(swapper, photos.t1_path(), tmp_path / "t1.jpg")
    assert (outcome.status, outcome.faces_found, outcome.faces_swapped) == ("done", 6, 4)
    assert (outcome.code, outcome.params) == ("profile_left", {"left": 2})
    assert outcome.message == "a face in profile was left as is"
    assert (tmp_path / "t1.jpg").stat().st_size > 0


def test_it_swaps_nothing_when_given_no_faces(engine, astronaut, tom):
    out = engine.swap(astronaut, [], engine.identity([tom]))
    assert np.array_equal(out, astronaut) and out is not astronaut


@pytest.mark.slow
def test_it_moves_identity_toward_the_source_on_most_faces(engine, t1, tom, astronaut):
    by_x = sorted(engine.detect(t1), key=lambda f: f.bbox[0])  # Rachel, Monica, Ross, Chandler, Joey, Phoebe
    ross, rachel = by_x[2], by_x[0]
    pairings = {
        "tom -> t1": identity_moves(engine, tom, t1),
        "tom -> astronaut": identity_moves(engine, tom, astronaut),
        "astronaut -> t1": identity_moves(engine, astronaut, t1),
        "astronaut -> tom": identity_moves(engine, astronaut, tom),
        "ross -> rest of t1": identity_moves(engine, crop_face(t1, ross), t1, skip=ross.bbox),
        "rachel -> rest of t1": identity_moves(engine, crop_face(t1, rachel), t1, skip=rachel.bbox),
        "ross -> astronaut": identity_moves(engine, crop_face(t1, ross), astronaut),
    }
    every = [m for moved in pairings.values() for m in moved]
    assert len(every) == 17  # 25 faces, less t1's two near-profile ones in the four pairings onto t1
    report = {name: f"{sum(m)}/{len(m)}" for name, m in pairings.items()}
    assert sum(every) / len(every) >= 0.8, report
    assert all(sum(m) / len(m) >= 0.5 for m in pairings.values()), report


def test_the_blend_covers_the_brows_and_jawline_but_not_the_hair(engine, astronaut):
    from worker.engines import classic_blend as cb

    pts = engine.detect(astronaut)[0].landmarks
    alpha = cb.blend_mask(pts, np.ones(astronaut.shape[:2], bool), cb.BlendParams())
    at = lambda p: alpha[int(round(p[1])), int(round(p[0]))]  # noqa: E731
    assert min(at(p) for p in pts[19:25]) > 0.9  # the brows are the source's (were 0.44-0.89)
    assert all(0.05 < at(p) < 0.2 for p in pts[0:17])  # the mask fades out on the jawline itself
    top = cb.forehead_points(pts, 0.5)  # halfway up the forehead, toward the hair
    assert max(at(p) for p in top) < 0.05


def test_a_mouth_weight_of_zero_keeps_the_targets_smile_and_moves_the_rest(engine, t1, tom):
    """`mouth_shape`: how far the lips take the source's shape. At 0 the target's mouth (its
    expression) stays where it was, to the pixel, while eyes, nose and brows still move."""
    from dataclasses import replace

    from worker.engines import classic_blend as cb

    target = engine.detect(t1)[0].landmarks
    source = engine.identity([tom]).native.shape
    kept = cb.blend_shape(target, source, replace(cb.BlendParams(), mouth_shape=0.0))
    moved = cb.blend_shape(target, source, cb.BlendParams())
    assert np.array_equal(kept[cb.MOUTH], target[cb.MOUTH])
    assert np.abs(moved[cb.MOUTH] - target[cb.MOUTH]).max() > 1  # pixels: by default the lips move
    assert np.array_equal(kept[:48], moved[:48])  # the rest of the face as by default
