"""The similarity transform between two point sets, shared by the engines (numpy only)."""
from __future__ import annotations

import numpy as np


def umeyama(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The 2x3 similarity (rotation, uniform scale, shift) that best maps `src` points onto `dst`
    (least squares): Umeyama's estimate, as scikit-image's SimilarityTransform makes it.

    In the plane a similarity is z -> a * z + b on complex numbers, and the least-squares a is
    sum(conj(s) * d) / sum(|s|^2) over the centred points: the same optimum as Umeyama's SVD (a
    reflection cannot arise), in a few scalar operations. It runs for every face of every frame; the
    SVD's numpy calls cost ~0.3 ms a frame."""
    src, dst = np.asarray(src, np.float64), np.asarray(dst, np.float64)
    z, w = src[:, 0] + 1j * src[:, 1], dst[:, 0] + 1j * dst[:, 1]
    mz, mw = z.mean(), w.mean()
    s, d = z - mz, w - mw
    spread = np.vdot(s, s).real
    a = np.vdot(s, d) / spread if spread > 0 else 0j  # vdot conjugates its first argument
    b = mw - a * mz
    return np.array([[a.real, -a.imag, b.real], [a.imag, a.real, b.imag]])
