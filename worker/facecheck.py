"""Is there a face in this photo? The portal asks when a face photo arrives, before any job runs.

dlib's HOG detector, the classic engine's own (the same threshold and the same up-sampling rule),
built into dlib: no model file, so the portal can ask on any host where the worker's packages are
installed. Photos are looked at no bigger than CHECK_MAX_SIDE pixels: a face the worker would use
is still well over HOG's ~80 px at that size, and the check stays around a tenth of a second.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from .engines.classic import DETECT_THRESHOLD, UPSAMPLE_MAX_PIXELS

#: the longest side a photo is scaled down to before it is searched
CHECK_MAX_SIDE = 1280


@dataclass(frozen=True)
class FoundFace:
    box: tuple[int, int, int, int]  # x1, y1, x2, y2 in the pixels of the image searched
    score: float

    @property
    def area(self) -> int:
        x1, y1, x2, y2 = self.box
        return max(0, x2 - x1) * max(0, y2 - y1)


def find_faces(rgb: np.ndarray) -> list[FoundFace]:
    """The faces in an RGB uint8 image, largest first."""
    import dlib  # the worker's dependency; imported here so importing this module stays cheap

    detector = _detector(dlib)
    h, w = rgb.shape[:2]
    upsample = 1 if h * w <= UPSAMPLE_MAX_PIXELS else 0
    rects, scores, _ = detector.run(np.ascontiguousarray(rgb), upsample, DETECT_THRESHOLD)
    faces = [FoundFace((max(0, r.left()), max(0, r.top()), min(w, r.right()), min(h, r.bottom())), float(s))
             for r, s in zip(rects, scores)]
    return sorted(faces, key=lambda f: f.area, reverse=True)


def face_crop_box(face: FoundFace, width: int, height: int, margin: float = 0.35) -> tuple[int, int, int, int]:
    """A square around `face`, `margin` of its size on every side, kept inside the image."""
    x1, y1, x2, y2 = face.box
    side = max(x2 - x1, y2 - y1) * (1 + 2 * margin)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    side = min(side, width, height)
    left = int(min(max(0, cx - side / 2), width - side))
    top = int(min(max(0, cy - side / 2), height - side))
    return left, top, int(left + side), int(top + side)


# One detector per THREAD: dlib's detector keeps scratch state while it runs, and two threads in one
# detector crash the process (a segfault, seen when two Starts checked face photos at once). Django
# serves requests on several threads, so the portal's check needs this; building one costs ~20 ms.
_local = threading.local()


def _detector(dlib):
    detector = getattr(_local, "detector", None)
    if detector is None:
        detector = _local.detector = dlib.get_frontal_face_detector()
    return detector
