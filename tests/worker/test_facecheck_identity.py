"""Who a face photo shows (worker.facecheck.face_descriptor): real faces from the photos installed
packages ship (tests/worker/photos.py), two different people told apart, one person's photo mirrored
or cropped still the same person, and the model files checked, never downloaded."""
import numpy as np
import pytest

from worker import facecheck
from worker.errors import ModelError
from worker.facecheck import SAME_PERSON_MAX_DISTANCE, face_descriptor, face_distance, find_faces

from .photos import astronaut, t1


def rgb(bgr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(bgr[:, :, ::-1])


def descriptor(image: np.ndarray) -> list[float]:
    faces = find_faces(image)
    assert faces, "no face found"
    return face_descriptor(image, faces[0])


def test_two_different_people_are_told_apart_and_one_person_is_not():
    eileen = rgb(astronaut())
    mine = descriptor(eileen)
    assert len(mine) == 128
    group = rgb(t1())
    others = [face_descriptor(group, f) for f in find_faces(group)]
    assert len(others) >= 5
    assert all(face_distance(mine, other) > SAME_PERSON_MAX_DISTANCE for other in others)
    mirrored = np.ascontiguousarray(eileen[:, ::-1])
    cropped = np.ascontiguousarray(eileen[10:470, 25:495])
    assert face_distance(mine, descriptor(mirrored)) < SAME_PERSON_MAX_DISTANCE
    assert face_distance(mine, descriptor(cropped)) < SAME_PERSON_MAX_DISTANCE


def test_a_missing_model_file_is_a_clear_error_not_a_download(monkeypatch, tmp_path):
    monkeypatch.setattr(facecheck, "DESCRIPTOR_MODEL_FILES", ("nowhere.dat", "dlib_face_recognition_resnet_model_v1.dat"))
    with pytest.raises(ModelError, match="nowhere.dat"):
        facecheck.descriptor_model_paths()
