"""The similarity transform between two point sets, shared by the engines (numpy only)."""
from __future__ import annotations

import numpy as np


def umeyama(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The 2x3 similarity (rotation, uniform scale, shift) that best maps `src` points onto `dst`."""
    mu_s, mu_d = src.mean(0), dst.mean(0)
    s, d = src - mu_s, dst - mu_d
    u, sig, vt = np.linalg.svd(d.T @ s / len(src))
    fix = np.diag([1.0, np.sign(np.linalg.det(u @ vt))])
    rot = u @ fix @ vt
    scale = (sig * np.diag(fix)).sum() / s.var(0).sum()
    m = np.empty((2, 3))
    m[:, :2] = scale * rot
    m[:, 2] = mu_d - m[:, :2] @ mu_s
    return m
