"""The engines' similarity fit: the least-squares rotation, scale and shift between point sets."""
import numpy as np
import pytest

from worker.engines.similarity import umeyama


def umeyama_by_svd(src, dst):
    """Umeyama (1991) as scikit-image computes it: the reference the closed form must equal."""
    mu_s, mu_d = src.mean(0), dst.mean(0)
    s, d = src - mu_s, dst - mu_d
    u, sig, vt = np.linalg.svd(d.T @ s / len(src))
    fix = np.diag([1.0, np.sign(np.linalg.det(u @ vt))])
    m = np.empty((2, 3))
    m[:, :2] = (sig * np.diag(fix)).sum() / s.var(0).sum() * (u @ fix @ vt)
    m[:, 2] = mu_d - m[:, :2] @ mu_s
    return m


@pytest.mark.parametrize("seed", range(20))
def test_the_fit_is_umeyamas_for_any_points_mirrored_ones_included(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 69))
    src = rng.uniform(0, 500, (n, 2))
    dst = rng.uniform(0, 500, (n, 2)) if seed % 2 else src[:, ::-1] * rng.uniform(0.2, 3)  # odd: noise; even: mirrored
    assert np.allclose(umeyama(src, dst), umeyama_by_svd(src, dst), atol=1e-9, rtol=1e-9)


def test_an_exact_similarity_is_found_exactly():
    src = np.array([[38.3, 51.7], [73.5, 51.5], [56.0, 71.7], [41.5, 92.4], [70.7, 92.2]])
    angle, scale, shift = np.deg2rad(25.0), 2.5, np.array([310.0, -40.0])
    rot = scale * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    m = umeyama(src, src @ rot.T + shift)
    assert np.allclose(m[:, :2], rot) and np.allclose(m[:, 2], shift)


def test_points_all_on_one_spot_give_no_scale_rather_than_a_division_by_zero():
    m = umeyama(np.ones((5, 2)), np.zeros((5, 2)))
    assert np.array_equal(m[:, :2], np.zeros((2, 2))) and np.allclose(m[:, 2], 0)
