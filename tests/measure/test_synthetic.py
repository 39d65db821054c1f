"""The synthetic samplers against their closed forms (independent of geolib.measure.metrics)."""

import numpy as np
import pytest

from geolib.measure import synthetic as syn


def test_random_orthogonal_is_orthogonal():
    q = syn.random_orthogonal(7, np.random.default_rng(0))
    np.testing.assert_allclose(q @ q.T, np.eye(7), atol=1e-12)


def test_k_of_d_spans_k_dimensions():
    x = syn.k_of_d(200, 10, 3, np.random.default_rng(1))
    s = np.linalg.svd(x, compute_uv=False)
    assert np.sum(s > 1e-9 * s[0]) == 3


def test_cone_angle_and_mean_cosine():
    rng = np.random.default_rng(2)
    x = syn.cone(3000, 16, 30.0, rng)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-12)
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    g = u @ u.T
    n = len(u)
    brute = (g.sum() - np.trace(g)) / (n * (n - 1))
    assert brute == pytest.approx(syn.cone_mean_cosine(30.0), abs=0.01)


def test_matrix_with_spectrum_has_that_spectrum():
    sigma = syn.power_law_spectrum(12, 1.0)
    w = syn.matrix_with_spectrum(sigma, 40, np.random.default_rng(3))
    np.testing.assert_allclose(np.linalg.svd(w, compute_uv=False), sigma, rtol=1e-10)


def test_spectrum_effective_rank_closed_forms():
    assert syn.spectrum_effective_rank(np.ones(9)) == pytest.approx(9.0)
    assert syn.spectrum_effective_rank(np.array([3.0, 0.0, 0.0])) == pytest.approx(1.0)


def test_spectrum_isoscore_closed_forms():
    assert syn.spectrum_isoscore(np.ones(10)) == pytest.approx(1.0)
    assert syn.spectrum_isoscore(np.r_[1.0, np.zeros(9)]) == pytest.approx(0.0, abs=1e-12)
    # k of d dimensions used equally: (k - 1)/(d - 1)
    assert syn.spectrum_isoscore(np.r_[np.ones(4), np.zeros(6)]) == pytest.approx(3 / 9)


def test_isoscore_expectation_limits():
    assert syn.isoscore_isotropic_expectation(10**9, 50) == pytest.approx(1.0, abs=1e-6)
    # n - 1 = d: gamma = 1, k = d / 2
    assert syn.isoscore_isotropic_expectation(51, 50) == pytest.approx((25 - 1) / 49)


def test_isoscore_expectation_matches_direct_simulation():
    """Independent of geolib.measure.metrics: the literal IsoScore steps on the sample
    covariance."""
    rng = np.random.default_rng(4)
    n, d = 200, 40
    scores = []
    for _ in range(30):
        lam = np.linalg.eigvalsh(np.cov(rng.standard_normal((n, d)), rowvar=False))
        scores.append(syn.spectrum_isoscore(lam))
    assert np.mean(scores) == pytest.approx(syn.isoscore_isotropic_expectation(n, d), abs=0.01)


@pytest.mark.parametrize(
    "call",
    [
        lambda: syn.isotropic_gaussian(1, 3, np.random.default_rng()),
        lambda: syn.k_of_d(10, 3, 4, np.random.default_rng()),
        lambda: syn.cone(10, 1, 10.0, np.random.default_rng()),
        lambda: syn.cone(10, 3, 200.0, np.random.default_rng()),
        lambda: syn.power_law_spectrum(5, -1.0),
        lambda: syn.matrix_with_spectrum(np.ones(5), 3, np.random.default_rng()),
    ],
)
def test_bad_input(call):
    with pytest.raises(ValueError):
        call()


def test_isoscore_expectation_k_of_d_limits():
    # population value (k - 1)/(d - 1) when n -> infinity
    assert syn.isoscore_isotropic_expectation(10**9, 50, 10) == pytest.approx(9 / 49, abs=1e-6)
    assert syn.isoscore_isotropic_expectation(10**9, 50, 1) == pytest.approx(0.0, abs=1e-6)
