"""Head pose from dlib's 68 landmarks: how far a face is turned, for faces the swap must leave alone.

Pure numpy, no models. A 2-D landmark warp cannot turn a (mostly frontal) source face into a
profile: the result is smeared, so faces turned past `PROFILE_YAW` are left as they are.
"""
from __future__ import annotations

import numpy as np

#: the nose tip stands ahead of the outer eye corners by about this fraction of the distance between
#: them (average adult head: ~40 mm against ~90 mm), so a yaw of t moves it sideways by 0.44 tan(t)
#: eye distances
NOSE_DEPTH = 0.44
#: faces turned further than this (degrees) are left as they are. In insightface's t1.jpg the two
#: faces turned toward profile (the ones the warp smeared) measure 48 and 49 deg, the other four
#: 2-22 deg; its Tom Hanks photo 27 deg. (Measured with `yaw_degrees` and judged by eye.)
PROFILE_YAW = 40.0
#: in a video, a person once left as is counts as facing the camera again only below this, so a
#: head held near PROFILE_YAW is not swapped on one frame and left on the next (worker.process)
PROFILE_YAW_BACK = 35.0


def yaw_degrees(pts: np.ndarray) -> float:
    """The head's left-right turn in degrees (0: facing the camera; the sign says which way).

    From the nose tip (point 30) offset along the line between the outer eye corners (36, 45),
    against the corners' distance, through a simple head model (`NOSE_DEPTH`); the jaw's balance
    around the nose (points 2 and 14) is averaged in, since in a near profile the predicted far eye
    corner is a guess while the visible jaw side still shrinks.
    """
    pts = np.asarray(pts, dtype=np.float64)
    if pts.shape != (68, 2):
        raise ValueError("yaw_degrees needs dlib's 68 landmarks")
    right, left = pts[36], pts[45]
    axis = left - right
    span = float(np.linalg.norm(axis))
    if span < 1e-6:
        return 90.0
    axis /= span
    offset = float(np.dot(pts[30] - (right + left) / 2, axis)) / span
    by_eyes = np.degrees(np.arctan2(offset, NOSE_DEPTH))
    # jaw balance: (a - b) / (a + b) of the nose-to-jaw-side distances is sin(yaw) for points on a
    # circle around the nose axis
    a = float(np.dot(pts[30] - pts[2], axis))
    b = float(np.dot(pts[14] - pts[30], axis))
    by_jaw = np.degrees(np.arcsin(np.clip((a - b) / max(a + b, 1e-6), -1.0, 1.0))) if a + b > 1e-6 else by_eyes
    return float((by_eyes + by_jaw) / 2)


def is_profile(pts: np.ndarray, limit: float = PROFILE_YAW) -> bool:
    """Whether the face is turned so far that it is left as it is (see `PROFILE_YAW`)."""
    return abs(yaw_degrees(pts)) > limit
