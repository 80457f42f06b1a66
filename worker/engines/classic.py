"""The classic engine: dlib's HOG detector, 68 landmarks and ResNet descriptor, and a landmark warp.

Runs on the CPU with the models that the `face_recognition_models` package ships, so it needs no
download. The swap warps the best source face onto each target face (Delaunay triangles), with the
target's landmarks moved part of the way toward the source's face shape, recolours it to the
target's skin and lighting, and alpha-blends it with a feathered mask (see `classic_blend`).
"""
from __future__ import annotations

import importlib.util
import logging
import os
from dataclasses import dataclass

import cv2
import numpy as np

from .. import pose
from ..errors import EngineUnavailable, ModelError, SourceError
from .base import Face, Identity
from .classic_blend import (
    BlendParams,
    apply,
    blend_mask,
    blend_shape,
    frontality,
    match_colour,
    mesh_points,
    piecewise_warp,
)
from .similarity import umeyama

log = logging.getLogger("worker.engines.classic")

MODEL_FILES = {
    "landmarks": "shape_predictor_68_face_landmarks.dat",
    "descriptor": "dlib_face_recognition_resnet_model_v1.dat",
}

#: HOG detections scoring below this are dropped: measured real faces scored >= 0.2 (a tilted
#: head in t1.jpg), a jacket patch in the astronaut photo 0.12.
DETECT_THRESHOLD = 0.15
#: images up to this many pixels are searched at twice their size: HOG finds faces of ~80 px and
#: up, and a 2x search of a 1280x886 photo costs 0.5 s against 0.14 s.
UPSAMPLE_MAX_PIXELS = 600_000
#: below this `frontality` the source's hidden half gets stretched over the target's visible one
#: (a 3/4 view measures ~0.1, Tom Hanks' slight turn 0.32)
TURNED_SOURCE = 0.25


def models_dir() -> str:
    """Where `face_recognition_models` keeps dlib's .dat files, found WITHOUT importing it.

    Importing it needs `pkg_resources`, which recent setuptools no longer ship.
    """
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the classic engine needs the face_recognition_models package (dlib's models)")
    return os.path.join(list(spec.submodule_search_locations)[0], "models")


@dataclass
class ClassicSource:
    """What the classic engine keeps of the source person (`Identity.native`).

    image: a crop around the best source face; landmarks: its 68 points in crop coordinates;
    shape: the mean landmark shape over all sources, in the same frame (used for the geometry).
    """

    image: np.ndarray
    landmarks: np.ndarray
    shape: np.ndarray


class ClassicEngine:
    name = "classic"
    device = "dlib (CPU)"
    #: dlib's documented same-person threshold is 0.6 euclidean on raw descriptors, whose norms
    #: measured 1.36-1.57; with |a| = |b| = n, cosine distance = d^2 / (2 n^2) = 0.36 / 4.4 ~ 0.08.
    #: The closest two different people measured (two of the six in t1.jpg) were at 0.085, so a
    #: little stricter (~0.56 euclidean); the same photo flipped or re-compressed was <= 0.011.
    default_reference_distance = 0.07
    #: faces the last `swap` left as they are because they were turned toward profile
    last_left_as_is = 0

    def __init__(self, params: BlendParams | None = None, model_dir: str | None = None):
        try:
            import dlib
        except ImportError as exc:  # pragma: no cover - depends on the node
            raise EngineUnavailable(f"the classic engine needs dlib (pip install dlib-bin): {exc}") from exc
        self._dlib = dlib
        self.params = params or BlendParams()
        folder = model_dir or models_dir()
        paths = {k: os.path.join(folder, f) for k, f in MODEL_FILES.items()}
        for path in paths.values():
            if not os.path.isfile(path):
                raise ModelError(f"dlib model file missing: {path}")
        try:
            self._detector = dlib.get_frontal_face_detector()
            self._predictor = dlib.shape_predictor(paths["landmarks"])
            self._recogniser = dlib.face_recognition_model_v1(paths["descriptor"])
        except RuntimeError as exc:
            raise ModelError(f"cannot load dlib's models from {folder}: {exc}") from exc

    # -- detection and identity vectors -----------------------------------------------------

    def detect(self, image: np.ndarray) -> list[Face]:
        """All faces in the image, largest first, with 68 landmarks each."""
        rgb = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        h, w = rgb.shape[:2]
        upsample = 1 if h * w <= UPSAMPLE_MAX_PIXELS else 0
        rects, scores, _ = self._detector.run(rgb, upsample, DETECT_THRESHOLD)
        faces = []
        for rect, score in zip(rects, scores):
            shape = self._predictor(rgb, rect)
            pts = np.array([(p.x, p.y) for p in shape.parts()], dtype=np.float64)
            bbox = (float(rect.left()), float(rect.top()), float(rect.right()), float(rect.bottom()))
            faces.append(Face(bbox=bbox, landmarks=pts, score=float(score), native=shape))
        faces.sort(key=lambda f: f.area, reverse=True)
        return faces

    def embed(self, image: np.ndarray, face: Face) -> np.ndarray:
        """dlib's 128-D descriptor of `face`, L2-normalised, also stored on `face.embedding`."""
        rgb = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        vec = np.array(self._recogniser.compute_face_descriptor(rgb, self._shape(face)), dtype=np.float64)
        vec /= np.linalg.norm(vec) or 1.0
        face.embedding = vec
        return vec

    def _shape(self, face: Face):
        if isinstance(face.native, self._dlib.full_object_detection):
            return face.native
        x1, y1, x2, y2 = (int(round(v)) for v in face.bbox)
        points = [self._dlib.point(int(round(x)), int(round(y))) for x, y in face.landmarks]
        return self._dlib.full_object_detection(self._dlib.rectangle(x1, y1, x2, y2), points)

    def identity(self, sources: list[np.ndarray]) -> Identity:
        """One identity from the largest face of each source image.

        The embedding is the normalised mean of the sources' embeddings. For texture the best
        source face is kept (largest times most frontal); the face shape is the mean over all.
        """
        found: list[tuple[np.ndarray, Face]] = []
        for image in sources:
            faces = self.detect(image)
            if faces:
                self.embed(image, faces[0])
                found.append((image, faces[0]))
        if not found:
            raise SourceError("no face found in the source image(s); use a clear, front-facing photo")
        mean = np.mean([f.embedding for _, f in found], axis=0)
        mean /= np.linalg.norm(mean) or 1.0
        best_image, best = max(found, key=lambda pair: pair[1].area * frontality(pair[1].landmarks))
        if frontality(best.landmarks) < TURNED_SOURCE:
            log.warning("the source face is turned away; a front-facing source photo gives a better swap")
        shape = np.mean([apply(umeyama(f.landmarks, best.landmarks), f.landmarks) for _, f in found], axis=0)
        crop, offset = _crop_around(best_image, mesh_points(best.landmarks, self.params), margin=0.25)
        native = ClassicSource(image=crop, landmarks=best.landmarks - offset, shape=shape - offset)
        return Identity(embedding=mean, sources_used=len(found), native=native)

    # -- swapping ---------------------------------------------------------------------------

    def too_turned(self, face: Face, was_turned: bool = False) -> bool:
        """Whether `face` is turned so far toward profile that the swap leaves it as it is: a 2-D
        warp of a front-facing source smears a profile (`worker.pose`). `was_turned`: this person
        was left as is in the video's previous frame; they then need to face the camera a little
        more (PROFILE_YAW_BACK) to be swapped again."""
        return pose.is_profile(face.landmarks, pose.PROFILE_YAW_BACK if was_turned else pose.PROFILE_YAW)

    def swap(self, image: np.ndarray, faces: list[Face], identity: Identity) -> np.ndarray:
        """A new image with each face replaced by the identity; pixels far from faces untouched.

        Faces turned toward profile (`too_turned`) are left as they are; how many, of the last call,
        is in `last_left_as_is` (for the target's note: the caller counted them as swapped).
        """
        source = identity.native
        if not isinstance(source, ClassicSource):
            raise ValueError("this identity was not built by the classic engine")
        out = image.copy()
        self.last_left_as_is = 0
        for face in faces:
            if self.too_turned(face):
                self.last_left_as_is += 1
                continue
            self._swap_one(out, image, face, source)
        return out

    def _swap_one(self, out: np.ndarray, original: np.ndarray, face: Face, source: ClassicSource) -> None:
        """Blend the source onto one face, in place in `out`; colours are measured on `original`."""
        p = self.params
        target = np.asarray(face.landmarks, dtype=np.float64)
        if target.shape != (68, 2):
            raise ValueError("the classic engine swaps faces with dlib's 68 landmarks only")
        dst = blend_shape(target, source.shape, p)
        dst_mesh = mesh_points(dst, p)
        src_mesh = mesh_points(source.landmarks, p)

        # the region the swap may touch: the mesh, cut to the face box grown by box_margin
        h, w = out.shape[:2]
        x1, y1, x2, y2 = face.bbox
        mx, my = (x2 - x1) * p.box_margin, (y2 - y1) * p.box_margin
        lo = np.maximum(np.floor(dst_mesh.min(0)) - 2, [x1 - mx, y1 - my])
        hi = np.minimum(np.ceil(dst_mesh.max(0)) + 3, [x2 + mx, y2 + my])
        rx1, ry1 = (int(max(0, v)) for v in lo)
        rx2, ry2 = int(min(w, hi[0])), int(min(h, hi[1]))
        if rx2 - rx1 < 8 or ry2 - ry1 < 8:
            return
        offset = np.array([rx1, ry1], dtype=np.float64)
        dst_mesh_roi, dst_roi = dst_mesh - offset, dst - offset
        shape = (ry2 - ry1, rx2 - rx1)

        warped, covered = piecewise_warp(source.image, src_mesh, dst_mesh_roi, shape)
        target_roi = original[ry1:ry2, rx1:rx2]
        recoloured = match_colour(warped, target_roi, dst_roi, target - offset, covered, p)
        alpha = blend_mask(dst_roi, covered, p)[..., None]
        base = out[ry1:ry2, rx1:rx2].astype(np.float32)
        out[ry1:ry2, rx1:rx2] = np.clip(alpha * recoloured + (1 - alpha) * base + 0.5, 0, 255).astype(np.uint8)


def _crop_around(image: np.ndarray, pts: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """A copy of the image around `pts`, grown by `margin`; returns the crop and its (x, y) offset."""
    h, w = image.shape[:2]
    lo, hi = pts.min(0), pts.max(0)
    pad = (hi - lo) * margin
    x1, y1 = (int(max(0, v)) for v in np.floor(lo - pad))
    x2, y2 = int(min(w, np.ceil(hi[0] + pad[0]))), int(min(h, np.ceil(hi[1] + pad[1])))
    return np.ascontiguousarray(image[y1:y2, x1:x2]), np.array([x1, y1], dtype=np.float64)
