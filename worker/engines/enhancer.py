"""The optional face enhancer: a GFPGAN / CodeFormer-style ONNX model run on each swapped face.

It is on when an admin has installed the file and registered it under the name `face_enhancer`
(`worker.models.ENHANCER_MODEL`) with its SHA-256, like the other models; with no such entry, or the
file not there, the engine runs without it and says so in the log. A file that is there but does not
hash to its registered value stops the task (ModelError), as for any other model.

The model's contract (that of GFPGAN 1.4 and CodeFormer as FaceFusion exports them): one float32 input
1x3x512x512, RGB scaled to [-1, 1], the face aligned to the FFHQ 5-point template; one output of the
same shape and scale. CodeFormer's extra `weight` input (fidelity, a double) is fed 1.0.

Each face is aligned from its 5 landmarks, enhanced, and pasted back with a soft-edged mask, touching
only the rectangle the aligned crop covers: the rest of the image keeps its exact bytes, and the cost
follows the face's size, not the photo's.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..errors import ModelError

log = logging.getLogger("worker.engines.enhancer")

SIZE = 512
#: FFHQ 5-point template (eyes, nose tip, mouth corners) as fractions of the crop, FaceFusion's `ffhq_512`
FFHQ_TEMPLATE = np.array([
    [0.37691676, 0.46864664], [0.62285697, 0.46912813], [0.50123859, 0.61331904],
    [0.39308822, 0.72541100], [0.61150205, 0.72490465],
], np.float32)
#: share of the enhanced face in the result (FaceFusion's default face_enhancer_blend is 80)
DEFAULT_BLEND = 0.8
#: the mask's soft edge, as a fraction of the crop's half-width (FaceFusion's default face_mask_blur 0.3)
MASK_BLUR = 0.3
#: CodeFormer's fidelity input: 1.0 keeps the most of the input face
CODEFORMER_WEIGHT = 1.0


def soft_box_mask(size: int = SIZE, blur: float = MASK_BLUR) -> np.ndarray:
    """A float32 size x size mask: 0 on the border, rising smoothly to 1 over `blur` of the half-width.

    Exactly 0 at the edge (a blurred box never quite gets there), so the crop's own border, where the
    warp repeated edge pixels, never shows and leaves no seam.
    """
    ramp = max(size * 0.5 * blur, 1.0)
    edge = np.minimum(np.arange(size), np.arange(size)[::-1]).astype(np.float32)  # distance to the border
    t = np.clip(edge / np.float32(ramp), 0.0, 1.0)
    line = t * t * (3.0 - 2.0 * t)  # smoothstep: no kink where the ramp meets the flat middle
    return np.minimum(line[:, None], line[None, :]).astype(np.float32)


@dataclass(frozen=True)
class PasteMask:
    """A paste-back mask with what `paste_back` reads of it on every call measured once: its 8-bit
    form and the bounding box of its non-zero part. (The engines paste every face of every frame
    with the same mask.)"""

    alpha8: np.ndarray
    rect: tuple[int, int, int, int]

    @classmethod
    def of(cls, mask: np.ndarray) -> "PasteMask":
        alpha8 = np.clip(np.rint(mask * 255.0), 0, 255).astype(np.uint8)
        alpha8.flags.writeable = False
        return cls(alpha8, tuple(int(v) for v in cv2.boundingRect(alpha8)))


def paste_back(image: np.ndarray, crop: np.ndarray, matrix: np.ndarray, mask: "np.ndarray | PasteMask",
               blend: float = 1.0, inplace: bool = False) -> np.ndarray:
    """`image` with `crop` (aligned by `matrix`, image -> crop) blended back under `mask` * `blend`.

    Works on the bounding rectangle of the crop's footprint only; pixels outside it, and inside it
    where the mask is 0, keep their exact values. `image` is not modified unless `inplace` (the
    caller's own copy: a video frame's paste-back then copies nothing).

    The crop and its mask (as 8 bits) are warped in ONE 4-channel warp and mixed by OpenCV's
    blendLinear: a 400-pixel face in a 1080p frame went from 7.1 ms to 1.9 ms, a 900-pixel one from 25 to 13 (one core of this machine).
    """
    h, w = image.shape[:2]
    inverse = cv2.invertAffineTransform(matrix)
    # only where the mask is above 0 (plus the ring of zeros around it, which bilinear warping
    # blends in) can a pixel change: the footprint of that part of the crop is all there is to warp
    mask = mask if isinstance(mask, PasteMask) else PasteMask.of(mask)
    alpha8, (mx, my, mw, mh) = mask.alpha8, mask.rect
    if mw == 0 or mh == 0:
        return image if inplace else image.copy()
    ch, cw = crop.shape[:2]
    left, top, right, bottom = max(0, mx - 1), max(0, my - 1), min(cw, mx + mw + 1), min(ch, my + mh + 1)
    corners = np.array([[left, top, 1], [right, top, 1], [left, bottom, 1], [right, bottom, 1]],
                       np.float64) @ inverse.T
    x0, y0 = (max(0, int(np.floor(v))) for v in corners.min(axis=0))
    x1, y1 = (int(np.ceil(v)) for v in corners.max(axis=0))
    x1, y1 = min(w, x1), min(h, y1)
    out = image if inplace else image.copy()
    if x1 <= x0 or y1 <= y0:
        return out
    shifted = inverse.copy()
    shifted[:, 2] -= (x0, y0)
    size = (x1 - x0, y1 - y0)
    # the mask is exactly 0 on the crop's border, so repeating the border outwards keeps it 0 there
    both = cv2.warpAffine(np.dstack([np.ascontiguousarray(crop, np.uint8), alpha8]), shifted, size,
                          flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    # (w * face + (255 - w) * roi) / 255, rounded, w = the mask's 0..255 times `blend`: where the mask
    # is 0 the pixel is exactly roi. (Slicing channels out with numpy cost more than the whole blend.)
    weight = cv2.extractChannel(both, 3).astype(np.float32)
    if blend != 1.0:
        weight *= np.float32(blend)
    roi = out[y0:y1, x0:x1]
    out[y0:y1, x0:x1] = cv2.blendLinear(cv2.cvtColor(both, cv2.COLOR_BGRA2BGR), roi, weight,
                                        np.float32(255.0) - weight)
    return out


class FaceEnhancer:
    """One ONNX session, loaded once per task; `enhance` improves one face of an image."""

    def __init__(self, path: str | Path, providers: list[str], blend: float = DEFAULT_BLEND):
        import onnxruntime

        try:
            self.session = onnxruntime.InferenceSession(str(path), providers=list(providers))
        except Exception as exc:  # onnxruntime raises its own types for unloadable graphs
            raise ModelError(f"face enhancer {Path(path).name} at {path} could not be loaded: {exc}") from exc
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        self._input = inputs[0].name
        self._extra = {}
        for extra in inputs[1:]:
            if extra.name != "weight":
                raise ModelError(f"face enhancer {Path(path).name} has an input {extra.name!r} it cannot be given; "
                                 f"expected one image input (and CodeFormer's `weight`)")
            self._extra[extra.name] = np.array([CODEFORMER_WEIGHT], np.float64)
        for what, arg in (("input", inputs[0]), ("output", outputs[0])):
            if not _is_face_tensor(arg.shape):
                raise ModelError(f"face enhancer {Path(path).name}: {what} {arg.name!r} has shape {arg.shape}, "
                                 f"expected 1x3x{SIZE}x{SIZE}")
        self.blend = float(blend)
        self.mask = PasteMask.of(soft_box_mask())
        self.device = self.session.get_providers()[0]

    def enhance(self, image: np.ndarray, landmarks: np.ndarray) -> np.ndarray:
        """`image` (BGR uint8) with the face at these 5 landmarks enhanced; `image` is not modified."""
        kps = np.asarray(landmarks, np.float32).reshape(5, 2)
        matrix, _ = cv2.estimateAffinePartial2D(kps, FFHQ_TEMPLATE * SIZE, method=cv2.RANSAC,
                                                ransacReprojThreshold=100)
        if matrix is None:  # degenerate landmarks (all on one point): nothing sensible to enhance
            return image.copy()
        crop = cv2.warpAffine(image, matrix, (SIZE, SIZE), flags=cv2.INTER_AREA, borderMode=cv2.BORDER_REPLICATE)
        blob = crop[:, :, ::-1].astype(np.float32) / np.float32(127.5) - np.float32(1.0)
        blob = np.ascontiguousarray(blob.transpose(2, 0, 1)[None])
        pred = self.session.run(None, {self._input: blob, **self._extra})[0][0]
        pred = (np.clip(pred, -1.0, 1.0) + 1.0) * 127.5
        enhanced = np.clip(np.rint(pred.transpose(1, 2, 0)[:, :, ::-1]), 0, 255).astype(np.uint8)
        return paste_back(image, enhanced, matrix, self.mask, self.blend)


def _is_face_tensor(shape) -> bool:
    """1x3x512x512, any dimension but the channels may be symbolic (a str or None)."""
    if len(shape) != 4:
        return False
    want = (1, 3, SIZE, SIZE)
    return shape[1] == 3 and all(not isinstance(d, int) or d == v for d, v in zip(shape, want))
