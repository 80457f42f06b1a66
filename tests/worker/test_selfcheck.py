"""Results that check themselves (worker.selfcheck): a swapped face that still looks like the person
in the photo, or that cannot be found any more, is flagged on the target's record; one that took is
not. Real photos, the classic engine's own detector and recogniser."""
from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from tests.worker import photos
from worker.engines.classic import ClassicEngine
from worker.manifest import EngineOptions
from worker.process import build_swapper, process_target
from worker.progress import TargetRecord
from worker.selfcheck import FACE_LOST, NOT_TAKEN, check_swap


@pytest.fixture(scope="module")
def engine():
    return ClassicEngine()


@pytest.fixture(scope="module")
def astronaut():
    return photos.astronaut()


@pytest.fixture(scope="module")
def tom_identity(engine):
    return engine.identity([photos.tom_hanks()])


def pasted_over(target: np.ndarray, face, source: np.ndarray, source_face) -> np.ndarray:
    """`target` with `source` scaled and moved so that its face lands on `face`: a swap that took."""
    fx1, fy1, fx2, _ = face.bbox
    sx1, sy1, sx2, _ = source_face.bbox
    s = (fx2 - fx1) / (sx2 - sx1)
    m = np.array([[s, 0, fx1 - s * sx1], [0, s, fy1 - s * sy1]])
    size = (target.shape[1], target.shape[0])
    warped = cv2.warpAffine(source, m, size)
    inside = cv2.warpAffine(np.ones(source.shape[:2], np.uint8), m, size) > 0
    out = target.copy()
    out[inside] = warped[inside]
    return out


def test_a_face_that_did_not_change_still_looks_like_the_person_in_the_photo(engine, astronaut, tom_identity):
    faces = engine.detect(astronaut)
    check = check_swap(engine, tom_identity, astronaut, astronaut.copy(), faces)
    assert (check.code, check.params) == (NOT_TAKEN, {"faces": 1, "of": 1})


def test_a_face_smeared_away_is_lost(engine, astronaut, tom_identity):
    faces = engine.detect(astronaut)
    smeared = astronaut.copy()
    x1, y1, x2, y2 = (int(v) for v in faces[0].bbox)
    smeared[y1:y2, x1:x2] = 128
    check = check_swap(engine, tom_identity, astronaut, smeared, faces)
    assert (check.code, check.params) == (FACE_LOST, {"faces": 1, "of": 1})


def test_a_face_that_became_the_face_photos_person_passes(engine, astronaut, tom_identity):
    faces = engine.detect(astronaut)
    tom = photos.tom_hanks()
    took = pasted_over(astronaut, faces[0], tom, engine.detect(tom)[0])
    check = check_swap(engine, tom_identity, astronaut, took, faces)
    assert check.ok and check.code == ""


def test_a_photos_record_carries_the_check(engine, tmp_path, monkeypatch):
    """A real swap of a photo: the check ran on the faces swapped (not on those left in profile), and
    what it found travels in the record the portal reads."""
    swapper = build_swapper(engine, [str(photos.tom_hanks_path())], EngineOptions())
    target = tmp_path / "astronaut.png"
    cv2.imwrite(str(target), photos.astronaut())
    outcome = process_target(swapper, target, tmp_path / "a.png")
    assert outcome.status == "done" and outcome.faces_swapped == 1
    assert outcome.check == ""  # the classic engine's swap of this pair takes, by its own recogniser
    # a photo left as it was is flagged: the engine's output replaced by the unchanged target
    monkeypatch.setattr(engine, "swap", lambda image, faces, identity: image.copy())
    outcome = process_target(swapper, target, tmp_path / "b.png")
    assert (outcome.status, outcome.check, outcome.check_params) == ("done", NOT_TAKEN, {"faces": 1, "of": 1})
    record = TargetRecord(index=0, target="b.png", output="b.png", check=outcome.check,
                          check_params=outcome.check_params)
    back = TargetRecord.from_dict(json.loads(json.dumps(record.__dict__)))
    assert (back.check, back.check_params) == (NOT_TAKEN, {"faces": 1, "of": 1})


def test_an_unchanged_photo_is_not_checked(engine, tmp_path):
    """No face swapped, nothing to judge: the no-face note says it already."""
    swapper = build_swapper(engine, [str(photos.tom_hanks_path())], EngineOptions())
    blank = tmp_path / "blank.png"
    cv2.imwrite(str(blank), np.full((200, 300, 3), 90, np.uint8))
    outcome = process_target(swapper, blank, tmp_path / "out.png")
    assert outcome.status == "no_face" and outcome.check == ""


def test_a_template_may_turn_the_check_off(engine, tmp_path, monkeypatch):
    """Off (the manifest says `"self_check": false`, written only then): nothing is judged."""
    from worker.manifest import Manifest

    swapper = build_swapper(engine, [str(photos.tom_hanks_path())], EngineOptions(), self_check=False)
    monkeypatch.setattr(engine, "swap", lambda image, faces, identity: image.copy())
    target = tmp_path / "astronaut.png"
    cv2.imwrite(str(target), photos.astronaut())
    outcome = process_target(swapper, target, tmp_path / "out.png")
    assert outcome.status == "done" and outcome.check == ""
    from worker.manifest import Target

    one = dict(job="j", sources=("/s.jpg",), targets=(Target("/t.jpg", "t.jpg"),), chunks=((0,),), output_dir="/out")
    on, off = Manifest(**one), Manifest(**one, self_check=False)
    assert "self_check" not in on.to_dict() and on.version == 1  # older workers read it as before
    assert off.to_dict()["self_check"] is False and off.version == 2
    assert Manifest.from_dict(off.to_dict()).self_check is False
    assert Manifest.from_dict(on.to_dict()).self_check is True
