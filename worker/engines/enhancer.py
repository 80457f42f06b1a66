"""The optional face enhancer: a GFPGAN / CodeFormer-style ONNX model run on each swapped face.

It is on when an admin has installed the file and registered it under the name `face_enhancer`
(`worker.weights.ENHANCER_MODEL`) with its SHA-256, like the other models; with no such entry, or the
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
    """A paste-back mask with what `paste_back` reads of it on every call made once: its 8-bit
    form, the bounding box of its non-zero part, and the 4-channel factor that premultiplies a
    BGRA crop by it. (The engines paste every face of every frame with the same mask.)"""

    alpha8: np.ndarray
    rect: tuple[int, int, int, int]
    #: (a, a, a, 255) per pixel, a = alpha8: BGR times the mask, the mask itself kept
    premultiply: np.ndarray

    @classmethod
    def of(cls, mask: np.ndarray) -> "PasteMask":
        alpha8 = np.clip(np.rint(mask * 255.0), 0, 255).astype(np.uint8)
        premultiply = cv2.merge([alpha8, alpha8, alpha8, np.full_like(alpha8, 255)])
        for a in (alpha8, premultiply):
            a.flags.writeable = False
        return cls(alpha8, tuple(int(v) for v in cv2.boundingRect(alpha8)), premultiply)


def paste_back(image: np.ndarray, crop: np.ndarray, matrix: np.ndarray, mask: "np.ndarray | PasteMask",
               blend: float = 1.0, inplace: bool = False) -> np.ndarray:
    """`image` with `crop` (aligned by `matrix`, image -> crop) blended back under `mask` * `blend`.

    Works on the bounding rectangle of the crop's footprint only; pixels outside it, and inside it
    where the mask is 0, keep their exact values. `image` is not modified unless `inplace` (the
    caller's own copy: a video frame's paste-back then copies nothing).

    The crop, premultiplied by its mask (as 8 bits) with the mask beside it, is warped in ONE
    4-channel warp; the image's pixels are then scaled by what the mask leaves of them and the
    warped face added: out = face * w + roi * (1 - w), within 3 levels of the float sum (8-bit
    rounding at four steps; under half a level on average). Premultiplied, the bilinear warp mixes
    no colour of a pixel the mask leaves out into its neighbours (alpha compositing's own rule),
    and the blend is integer passes over the rectangle instead of a float one. With the constant
    border (`_border`): 1.4 -> 0.7 ms for a 230-pixel face, 9.1 -> 6.6 for a 430-pixel one (medians
    of 7 alternated runs of 100 pastes into a 1080p frame, one core). Before that, the single
    4-channel warp had taken a 400-pixel face in a 1080p frame from 7.1 ms to 1.9 ms.
    """
    h, w = image.shape[:2]
    inverse = cv2.invertAffineTransform(matrix)
    # only where the mask is above 0 (plus the ring of zeros around it, which bilinear warping
    # blends in) can a pixel change: the footprint of that part of the crop is all there is to warp
    mask = mask if isinstance(mask, PasteMask) else PasteMask.of(mask)
    mx, my, mw, mh = mask.rect
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
    face = cv2.cvtColor(np.ascontiguousarray(crop, np.uint8), cv2.COLOR_BGR2BGRA)
    cv2.insertChannel(mask.alpha8, face, 3)
    factor = mask.premultiply
    if blend != 1.0:
        factor = cv2.multiply(factor, (blend, blend, blend, blend))
    face = cv2.multiply(face, factor, scale=1.0 / 255.0)
    face = cv2.warpAffine(face, shifted, size, flags=cv2.INTER_LINEAR, borderMode=_border(mask.rect, cw, ch))
    # what the mask leaves of the image: 255 - w, as many channels as the image; where w is 0 that is
    # 255 and roi * 255 / 255 is roi exactly
    left_of_image = cv2.cvtColor(cv2.bitwise_not(cv2.extractChannel(face, 3)), cv2.COLOR_GRAY2BGR)
    roi = out[y0:y1, x0:x1]
    roi[...] = cv2.add(cv2.cvtColor(face, cv2.COLOR_BGRA2BGR), cv2.multiply(roi, left_of_image, scale=1.0 / 255.0))
    return out


def _border(rect: tuple[int, int, int, int], cw: int, ch: int) -> int:
    """The warp's border for a mask with non-zero `rect` in a `cw` x `ch` crop.

    Where the mask is 0 all round the crop's edge (both engines' masks), a pixel whose bilinear taps
    reach past the edge reads only edge pixels of the crop besides, all with weight 0: its weight is
    0 whatever the border holds, so the paste is the same bit for bit with a constant border, which
    OpenCV warps 2 to 2.5 times faster than a repeated one (0.84 -> 0.37 ms for a 271-pixel footprint,
    one core). A mask non-zero on the edge keeps the repeated border, so that no black bleeds in."""
    x, y, w, h = rect
    inside = x > 0 and y > 0 and x + w < cw and y + h < ch
    return cv2.BORDER_CONSTANT if inside else cv2.BORDER_REPLICATE


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
