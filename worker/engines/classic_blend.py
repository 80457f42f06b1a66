"""Geometry and blending for the classic engine: pure numpy/OpenCV functions, no models.

All landmark arrays are dlib's 68-point layout, (68, 2) float, in pixel coordinates (x, y).
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from scipy.spatial import Delaunay

from .similarity import umeyama

JAW = slice(0, 17)
BROWS = slice(17, 27)
RIGHT_EYE = slice(36, 42)
LEFT_EYE = slice(42, 48)
OUTER_LIPS = slice(48, 60)
MOUTH = slice(48, 68)
#: The inner-lip points (60-67) are left out of the warp mesh: when the source's mouth is closed
#: they coincide and give zero-area triangles; without them the whole mouth, interior included,
#: comes from the source, so the target's open mouth cannot show through.
MESH_POINTS = 60


@dataclass(frozen=True)
class BlendParams:
    """Tuning of one swap. The defaults were picked by looking at the results and by the identity
    judge of tests/worker/test_classic.py (does dlib's recogniser see the source in the output?)."""

    #: how far target landmarks move toward the source's geometry (0 = target shape, 1 = source)
    inner_shape: float = 0.7
    jaw_shape: float = 0.4
    #: the lips (points 48-67), where the target's expression shows most: 0 keeps the target's mouth
    #: shape (smile, open mouth) and only the texture comes from the source. Equal to inner_shape by
    #: default; `bench/quality.py --params` maps what other values do (docs/worker.md)
    mouth_shape: float = 0.7
    #: forehead height above the brows, as a fraction of the nose-bridge-to-chin length: the warp
    #: covers `forehead`, the mask only `mask_forehead`, so the source's hairline fades out
    forehead: float = 0.3
    #: 0.2: the brows and the low forehead are the source's too (at 0.12 the target's brows stayed)
    mask_forehead: float = 0.2
    #: erosion and feather of the mask, as fractions of the face width
    erode: float = 0.03
    feather: float = 0.08
    #: how much of the target's low-frequency lighting replaces the source's (0..1)
    relight: float = 0.5
    #: the swap may only change pixels inside the face box grown by this fraction on each side
    box_margin: float = 0.2


def apply(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return pts @ m[:, :2].T + m[:, 2]


def frontality(pts: np.ndarray) -> float:
    """1 for a frontal face, toward 0 as the head turns: balance of the nose tip between the jaw sides."""
    left = np.linalg.norm(pts[30] - pts[2])
    right = np.linalg.norm(pts[30] - pts[14])
    return float(min(left, right) / max(left, right, 1e-6))


def blend_shape(target: np.ndarray, source: np.ndarray, p: BlendParams) -> np.ndarray:
    """Target landmarks moved part of the way toward the source's face shape.

    The source is first aligned to the target by a similarity fitted on the stable points (eyes,
    nose, brows), so only the shape differs, not pose or size. The weights shrink as the target
    turns away: a (mostly frontal) source shape would distort a profile. Jaw points move less and
    hardly outward: an outward jaw would paint skin over the background, an inward one only
    leaves a little of the target's own cheek.
    """
    stable = np.r_[17:48]
    aligned = apply(umeyama(source[stable], target[stable]), source)
    turn = np.sqrt(frontality(target))
    w = np.full((len(target), 1), p.inner_shape * turn)
    w[JAW] = p.jaw_shape * turn
    w[MOUTH] = p.mouth_shape * turn
    move = w * (aligned - target)
    jaw = move[JAW]  # a view: scaling it scales `move`
    outward = np.einsum("ij,ij->i", jaw, target[JAW] - target[JAW].mean(0)) > 0
    jaw[outward] *= 0.25
    return target + move


def forehead_points(pts: np.ndarray, height: float) -> np.ndarray:
    """Ten points above the brows, higher in the middle, so the mask and warp cover the forehead."""
    up = pts[BROWS].mean(0) - pts[8]
    length = np.linalg.norm(pts[27] - pts[8]) or 1.0
    up /= np.linalg.norm(up) or 1.0
    dome = height * (1.0 - 0.5 * np.linspace(-1, 1, 10) ** 2)
    return pts[BROWS] + up * (dome[:, None] * length)


def mesh_points(pts: np.ndarray, p: BlendParams) -> np.ndarray:
    return np.vstack([pts[:MESH_POINTS], forehead_points(pts, p.forehead)])


def piecewise_warp(src: np.ndarray, src_pts: np.ndarray, dst_pts: np.ndarray, shape: tuple[int, int]):
    """Warp `src` so that `src_pts` land on `dst_pts` (Delaunay triangles of dst, one affine each).

    Returns the warped image of `shape` (h, w) and a bool mask of the pixels the mesh covers.
    The triangles are rasterised into an index map and the whole face is warped by one remap
    instead of one warpAffine per triangle. (scipy's `find_simplex` per pixel was measured at
    0.25 s per face; this takes a few milliseconds.)
    """
    h, w = shape
    simplices = Delaunay(dst_pts).simplices
    index = np.full((h, w), -1, np.int32)
    for t, corners in enumerate(simplices):
        cv2.fillConvexPoly(index, np.round(dst_pts[corners]).astype(np.int32), t)
    # the affine map dst -> src of every triangle, [x, y, 1] @ A = (u, v); a pseudo-inverse, so
    # that a degenerate (zero-area) triangle gives a finite map instead of an exception
    d_h = np.concatenate([dst_pts[simplices], np.ones((len(simplices), 3, 1))], axis=2)
    affines = np.linalg.pinv(d_h) @ src_pts[simplices]
    inside = index >= 0
    ys, xs = np.nonzero(inside)
    a = affines[index[inside]]
    map_x = np.full((h, w), -1.0, np.float32)
    map_y = np.full((h, w), -1.0, np.float32)
    map_x[inside] = xs * a[:, 0, 0] + ys * a[:, 1, 0] + a[:, 2, 0]
    map_y[inside] = xs * a[:, 0, 1] + ys * a[:, 1, 1] + a[:, 2, 1]
    warped = cv2.remap(src, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return warped, inside


def _poly(mask: np.ndarray, pts: np.ndarray, value: int) -> None:
    cv2.fillConvexPoly(mask, np.round(cv2.convexHull(pts.astype(np.float32))[:, 0]).astype(np.int32), value)


def face_width(pts: np.ndarray) -> float:
    return float(np.linalg.norm(pts[16] - pts[0])) or 1.0


def skin_mask(pts: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Cheeks and nose, between jaw and brows, without eyes and mouth: where skin colour is measured.

    The forehead is left out: hair (a fringe) often covers it in one face and not the other.
    """
    mask = np.zeros(shape, np.uint8)
    _poly(mask, pts[:27], 255)
    for part in (RIGHT_EYE, LEFT_EYE, OUTER_LIPS):
        _poly(mask, pts[part], 0)
    k = max(3, int(face_width(pts) * 0.06) | 1)
    return cv2.erode(mask, np.ones((k, k), np.uint8)) > 0


def lips_mask(pts: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The lips themselves: outer lip polygon less the mouth opening."""
    mask = np.zeros(shape, np.uint8)
    cv2.fillPoly(mask, [np.round(pts[OUTER_LIPS]).astype(np.int32)], 255)
    cv2.fillPoly(mask, [np.round(pts[60:68]).astype(np.int32)], 0)
    return mask > 0


def _masked_blur(x: np.ndarray, mask: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur of `x` using only the masked pixels (normalised convolution)."""
    m = mask.astype(np.float32)
    num = cv2.GaussianBlur(x * m, (0, 0), sigma)
    den = cv2.GaussianBlur(m, (0, 0), sigma)
    return num / np.maximum(den, 1e-3)


def _to_lab(image: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(image.astype(np.float32) / 255.0, cv2.COLOR_BGR2LAB)


def match_colour(
    warped: np.ndarray, target: np.ndarray, dst_pts: np.ndarray, target_pts: np.ndarray, covered: np.ndarray,
    p: BlendParams,
) -> np.ndarray:
    """The warped source recoloured to the target's skin, in LAB, measured on skin only.

    Mean and spread are matched per channel on the cheeks and nose (the spread ratio is clamped,
    so a flat target patch cannot erase the source's features). Part of the target's
    low-frequency lighting then replaces the source's, so that shadows fall on the same side.
    A grey source has no chroma to keep: its chroma is predicted from lightness by a line fitted
    on the target's skin (a constant chroma reads as a grey mask: real skin is more saturated in
    shadow than in highlights), plus the target's lip colour on the lips.
    """
    shape = covered.shape
    region = skin_mask(dst_pts, shape) & covered
    t_region = skin_mask(target_pts, shape)
    if region.sum() < 50 or t_region.sum() < 50:
        return warped.astype(np.float32)
    ws, ts = _to_lab(warped), _to_lab(target)
    out = ws.copy()
    width = face_width(dst_pts)
    for c in range(3):
        s_vals, t_vals = ws[..., c][region], ts[..., c][t_region]
        # lightness keeps at least 60 % of the source's contrast (its features); chroma may
        # vanish, so that a grey target gets no colour blotches
        ratio = np.clip(t_vals.std() / max(s_vals.std(), 1e-3), 0.6 if c == 0 else 0.0, 1.6)
        out[..., c] = (ws[..., c] - s_vals.mean()) * ratio + t_vals.mean()
    if p.relight > 0:
        # broad enough to carry the light's direction, not the target's own relief (eye
        # sockets, cheekbones: at width / 8 they came through as the target's face)
        sigma = max(2.0, width / 4)
        low_t = _masked_blur(ts[..., 0], t_region, sigma)
        low_s = _masked_blur(out[..., 0], region, sigma)
        out[..., 0] += p.relight * (low_t - low_s)
    out[..., 0] = np.clip(out[..., 0], 0, 100)
    if all(ws[..., c][region].std() < 1.5 for c in (1, 2)):
        lightness = ts[..., 0][t_region]
        lips_t = lips_mask(target_pts, shape)
        tint = cv2.GaussianBlur(lips_mask(dst_pts, shape).astype(np.float32), (0, 0), max(1.0, width / 40))
        for c in (1, 2):
            slope, icpt = np.polyfit(lightness, ts[..., c][t_region], 1)
            slope = float(np.clip(slope, -1.0, 1.0))
            out[..., c] = icpt + slope * out[..., 0]
            if lips_t.sum() >= 10:
                lip_offset = ts[..., c][lips_t].mean() - (icpt + slope * ts[..., 0][lips_t].mean())
                out[..., c] += tint * lip_offset
    return np.clip(cv2.cvtColor(out, cv2.COLOR_LAB2BGR) * 255.0, 0, 255)


def blend_mask(dst_pts: np.ndarray, covered: np.ndarray, p: BlendParams) -> np.ndarray:
    """Alpha in 0..1 over jaw, brows and a low forehead: eroded, then feathered so it fades out
    INSIDE that hull, where the warped source is still skin."""
    h, w = covered.shape
    width = face_width(dst_pts)
    hull = np.zeros((h, w), np.uint8)
    _poly(hull, np.vstack([dst_pts[:27], forehead_points(dst_pts, p.mask_forehead)]), 255)
    hull &= covered.astype(np.uint8) * 255
    sigma = max(1.0, width * p.feather / 2)
    # the fade is centred about one sigma inside the hull, so brows and jawline are mostly the
    # source's (two sigma left the target's brows and jaw edge in place)
    k = max(3, int(width * p.erode + 2 * sigma) | 1)
    # zero border: where the swap region is cut (image edge, face-box limit) the mask fades too
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    hull = cv2.erode(hull, kernel, borderType=cv2.BORDER_CONSTANT, borderValue=0)
    alpha = cv2.GaussianBlur(hull.astype(np.float32) / 255.0, (0, 0), sigma)
    return alpha * covered
