"""Is there a face in this photo? The portal asks when a face photo arrives, before any job runs.

dlib's HOG detector, the classic engine's own (the same threshold and the same up-sampling rule),
built into dlib: no model file, so the portal can ask on any host where the worker's packages are
installed. Photos are looked at no bigger than CHECK_MAX_SIDE pixels: a face the worker would use
is still well over HOG's ~80 px at that size, and the check stays around a tenth of a second.

Who a face photo shows (`face_descriptor`): dlib's ResNet descriptor (128 numbers) of the face found,
from the model files the `face_recognition_models` package ships (no download). Two descriptors
further apart than SAME_PERSON_MAX_DISTANCE are, by dlib's own measure, two different people: the
portal warns before a job blends their faces.
"""
from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass

import numpy as np

from .engines.classic import DETECT_THRESHOLD, UPSAMPLE_MAX_PIXELS
from .errors import ModelError

#: the longest side a photo is scaled down to before it is searched
CHECK_MAX_SIDE = 1280
#: dlib's documented threshold: descriptors further apart (Euclidean) show different people
#: (99.38% right on the LFW benchmark)
SAME_PERSON_MAX_DISTANCE = 0.6
#: the files of `face_recognition_models` the descriptor needs (five landmarks align the face)
DESCRIPTOR_MODEL_FILES = ("shape_predictor_5_face_landmarks.dat", "dlib_face_recognition_resnet_model_v1.dat")


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


def face_descriptor(rgb: np.ndarray, face: FoundFace) -> list[float]:
    """dlib's 128-number descriptor of `face` in the RGB uint8 image `rgb` (as `find_faces` found
    it). Raises ModelError when the model files are not installed: they are never downloaded."""
    import dlib

    predictor, recogniser = _descriptor_models(dlib)
    x1, y1, x2, y2 = face.box
    image = np.ascontiguousarray(rgb)
    shape = predictor(image, dlib.rectangle(int(x1), int(y1), int(x2), int(y2)))
    return [round(float(v), 6) for v in recogniser.compute_face_descriptor(image, shape)]


def face_distance(a, b) -> float:
    """The Euclidean distance between two descriptors (`face_descriptor`)."""
    return float(np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64)))


def descriptor_model_paths() -> tuple[str, str]:
    """The landmark and descriptor model files, found WITHOUT importing `face_recognition_models`
    (its import needs `pkg_resources`, which recent setuptools no longer ship)."""
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("telling faces apart needs the face_recognition_models package (dlib's models); "
                         "install the worker's requirements")
    folder = os.path.join(list(spec.submodule_search_locations)[0], "models")
    paths = tuple(os.path.join(folder, name) for name in DESCRIPTOR_MODEL_FILES)
    for path in paths:
        if not os.path.isfile(path):
            raise ModelError(f"dlib model file missing: {path} (it is not downloaded: reinstall face_recognition_models)")
    return paths  # type: ignore[return-value]


# One detector per THREAD: dlib's detector keeps scratch state while it runs, and two threads in one
# detector crash the process (a segfault, seen when two Starts checked face photos at once). Django
# serves requests on several threads, so the portal's check needs this; building one costs ~20 ms.
_local = threading.local()


def _detector(dlib):
    detector = getattr(_local, "detector", None)
    if detector is None:
        detector = _local.detector = dlib.get_frontal_face_detector()
    return detector


def _descriptor_models(dlib):
    # per thread too, as the detector: dlib's models keep scratch state while they run
    models = getattr(_local, "descriptor_models", None)
    if models is None:
        landmarks, resnet = descriptor_model_paths()
        try:
            models = _local.descriptor_models = (dlib.shape_predictor(landmarks), dlib.face_recognition_model_v1(resnet))
        except RuntimeError as exc:
            raise ModelError(f"cannot load dlib's models ({landmarks}, {resnet}): {exc}") from exc
    return models
