"""Head yaw from dlib's 68 landmarks (worker.pose), on real faces and on transformed copies of them."""
import numpy as np
import pytest

from tests.worker import photos
from worker.engines.classic import ClassicEngine
from worker.pose import PROFILE_YAW, is_profile, yaw_degrees


@pytest.fixture(scope="module")
def engine():
    return ClassicEngine()


@pytest.fixture(scope="module")
def t1_faces(engine):
    """t1.jpg's six faces, left to right: Rachel, Monica, Ross, Chandler, Joey, Phoebe."""
    return sorted(engine.detect(photos.t1()), key=lambda f: f.bbox[0])


@pytest.fixture(scope="module")
def frontal(engine):
    return engine.detect(photos.astronaut())[0].landmarks


def similarity(pts, angle_deg, scale, shift):
    a = np.radians(angle_deg)
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return scale * pts @ rot.T + shift


def test_it_reads_a_frontal_face_as_facing_the_camera(frontal):
    assert abs(yaw_degrees(frontal)) < 10
    assert not is_profile(frontal)


def test_it_gives_a_mirrored_face_the_opposite_turn(t1_faces):
    turned = t1_faces[4].landmarks  # Joey, turned toward profile
    mirrored = turned * [-1, 1]
    mirrored = mirrored[MIRROR]
    assert yaw_degrees(mirrored) == pytest.approx(-yaw_degrees(turned), abs=1e-6)
    assert abs(yaw_degrees(turned)) > 30


def test_it_ignores_size_position_and_head_tilt(t1_faces):
    for face in t1_faces:
        yaw = yaw_degrees(face.landmarks)
        for angle in (-30, 15):
            moved = similarity(face.landmarks, angle, 2.5, (300, -40))
            assert yaw_degrees(moved) == pytest.approx(yaw, abs=1e-6)


def test_it_leaves_the_two_near_profile_faces_of_t1_and_no_other(t1_faces):
    profile = [is_profile(f.landmarks) for f in t1_faces]
    assert profile == [False, True, False, False, True, False]
    # not a close call either way: the nearest faces are well clear of the limit
    yaws = sorted(abs(yaw_degrees(f.landmarks)) for f in t1_faces)
    assert yaws[3] < PROFILE_YAW - 10 and yaws[4] > PROFILE_YAW + 5


def test_it_refuses_other_landmark_layouts():
    with pytest.raises(ValueError, match="68 landmarks"):
        yaw_degrees(np.zeros((5, 2)))


def test_it_calls_a_collapsed_face_a_profile():
    assert is_profile(np.zeros((68, 2)))


#: dlib's 68-point index of each point's mirror image (left <-> right)
MIRROR = np.array(
    list(range(16, -1, -1))  # jaw
    + list(range(26, 16, -1))  # brows
    + [27, 28, 29, 30]  # nose bridge
    + [35, 34, 33, 32, 31]  # nostrils
    + [45, 44, 43, 42, 47, 46]  # right eye <- left eye
    + [39, 38, 37, 36, 41, 40]  # left eye <- right eye
    + [54, 53, 52, 51, 50, 49, 48, 59, 58, 57, 56, 55]  # outer lips
    + [64, 63, 62, 61, 60, 67, 66, 65]  # inner lips
)
