"""geolib.measure.metrics against closed forms, independent computations and the IsoScore package.

References used here are written independently of geolib (numpy SVD / O(n^2) loops / the literal
PAPERS.md formulas), so a shared mistake cannot make both sides agree.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from geolib.measure import blocks as B
from geolib.measure import metrics as M
from geolib.measure.synthetic import spectrum_effective_rank, spectrum_isoscore

RNG_SEED = 20240601


# ------------------------------------------------------------------------------------------------
# independent references
# ------------------------------------------------------------------------------------------------
def rng(k: int = 0) -> np.random.Generator:
    return np.random.default_rng(RNG_SEED + k)


def orthogonal(d: int, g: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(g.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def with_spectrum(sigma: np.ndarray, n: int, d: int, g: np.random.Generator) -> np.ndarray:
    """n x d matrix with singular values sigma (len <= min(n, d)) and random singular vectors."""
    r = len(sigma)
    u = np.linalg.qr(g.standard_normal((n, r)))[0]  # orthonormal columns (reduced QR)
    v = np.linalg.qr(g.standard_normal((d, r)))[0]
    return (u * sigma) @ v.T


def erank_ref(w: np.ndarray, squared: bool = False, center: bool = False) -> float:
    a = w - w.mean(axis=0) if center else w
    s = torch.linalg.svdvals(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))).numpy()
    return spectrum_effective_rank(s**2 if squared else s)


def mean_cos_brute(x: np.ndarray) -> float:
    """O(n^2): all pairwise cosines from the normalised Gram matrix, diagonal removed."""
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    g = u @ u.T
    n = len(x)
    return float((g.sum() - np.trace(g)) / (n * (n - 1)))


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force 64-row chunks so the chunked / merged code paths run on small data."""
    monkeypatch.setattr(B, "_CHUNK_ELEMENTS", 1)


# ------------------------------------------------------------------------------------------------
# closed forms
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 5, 17])
@pytest.mark.parametrize("squared", [False, True])
def test_identity_effective_rank_and_stable_rank(n: int, squared: bool) -> None:
    assert M.effective_rank(np.eye(n), squared=squared) == pytest.approx(n, rel=1e-12)
    assert M.singular_entropy(np.eye(n), squared=squared) == pytest.approx(0.0, abs=1e-12)
    assert M.stable_rank(np.eye(n)) == pytest.approx(n, rel=1e-12)


@pytest.mark.parametrize("d", [2, 3, 10])
def test_isotropic_covariance_isoscore_is_one(d: int) -> None:
    assert M.isoscore_from_cov(np.eye(d)) == pytest.approx(1.0, abs=1e-12)
    assert M.isoscore_from_cov(3.7 * np.eye(d)) == pytest.approx(1.0, abs=1e-12)
    points = 2.5 * np.vstack([np.eye(d), -np.eye(d)])  # +-e_i: covariance proportional to I
    assert M.isoscore(points) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("squared", [False, True])
def test_rank_one(squared: bool) -> None:
    g = rng(1)
    u, v = g.standard_normal(30), g.standard_normal(8)
    w = np.outer(u, v)
    assert M.effective_rank(w, squared=squared) == pytest.approx(1.0, abs=1e-12)
    assert M.singular_entropy(w, squared=squared) == pytest.approx(math.log(8), abs=1e-12)
    assert M.stable_rank(w) == pytest.approx(1.0, abs=1e-12)
    line = np.outer(g.standard_normal(40), v) + g.standard_normal(8)  # points on an affine line
    assert M.effective_rank(line, squared=squared, center=True) == pytest.approx(1.0, abs=1e-12)
    assert M.isoscore(line) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(("k", "d"), [(1, 4), (2, 5), (3, 3), (4, 9)])
def test_k_of_d_dimensions_used_equally(k: int, d: int) -> None:
    w = np.zeros((2 * k, d))
    w[:k, :k] = np.eye(k)
    w[k:, :k] = -np.eye(k)  # +-e_i for i < k: centred, equal variance along k axes
    for squared in (False, True):
        assert M.effective_rank(w, squared=squared) == pytest.approx(k, rel=1e-12)
        assert M.effective_rank(w, squared=squared, center=True) == pytest.approx(k, rel=1e-12)
    assert M.isoscore(w) == pytest.approx((k - 1) / (d - 1), abs=1e-12)
    cov = np.diag([1.0] * k + [0.0] * (d - k))
    assert M.isoscore_from_cov(cov) == pytest.approx((k - 1) / (d - 1), abs=1e-12)
    assert M.stable_rank(w) == pytest.approx(k, rel=1e-12)


@pytest.mark.parametrize(("q", "r"), [(0.5, 6), (0.9, 40), (0.97, 64)])
def test_geometric_spectrum_closed_form(q: float, r: int) -> None:
    w = with_spectrum(q ** np.arange(r), 3 * r, r + 5, rng(2))

    def entropy(qq: float) -> float:
        # p_i = qq^i / S, S = (1 - qq^r)/(1 - qq); H = log S - log(qq) E[i]
        s = (1 - qq**r) / (1 - qq)
        sum_i = qq * (1 - r * qq ** (r - 1) + (r - 1) * qq**r) / (1 - qq) ** 2
        return math.log(s) - math.log(qq) * sum_i / s

    assert M.effective_rank(w) == pytest.approx(math.exp(entropy(q)), rel=1e-10)
    assert M.effective_rank(w, squared=True) == pytest.approx(math.exp(entropy(q * q)), rel=1e-10)
    # r = min(shape) = r + 5 here: the zero singular values count as unused dimensions
    assert M.singular_entropy(w) == pytest.approx(math.log(r + 5) - entropy(q), abs=1e-10)
    assert M.stable_rank(w) == pytest.approx((1 - q ** (2 * r)) / (1 - q * q), rel=1e-10)


def test_stable_rank_of_diagonal() -> None:
    s = np.array([3.0, 2.0, 0.5, 0.1])
    assert M.stable_rank(np.diag(s)) == pytest.approx((s**2).sum() / 9.0, rel=1e-14)


def test_mean_cosine_known_configurations() -> None:
    g = rng(3)
    v = g.standard_normal(6)
    same = np.outer(np.abs(g.standard_normal(9)) + 0.1, v)  # all on one ray
    assert M.mean_cosine_similarity(same) == pytest.approx(1.0, abs=1e-14)
    for n in (2, 3, 7, 20):
        simplex = np.eye(n) - 1.0 / n  # n vertices of a regular simplex, centred
        assert M.mean_cosine_similarity(simplex) == pytest.approx(-1.0 / (n - 1), abs=1e-14)
    assert M.mean_cosine_similarity(np.eye(5)) == pytest.approx(0.0, abs=1e-15)
    assert M.mean_cosine_similarity(np.vstack([v, -v])) == pytest.approx(-1.0, abs=1e-14)


def test_partition_isotropy_symmetric_sets() -> None:
    d = 5
    assert M.partition_isotropy(1.7 * np.vstack([np.eye(d), -np.eye(d)])) == pytest.approx(
        1.0, abs=1e-14
    )
    # +-a_i e_i with distinct a_i: eigenvectors are the axes, Z(+-e_i) = 2 cosh a_i + 2 (d - 1)
    a = np.array([0.3, 0.7, 1.1, 1.9, 2.5])
    z = 2 * np.cosh(a) + 2 * (d - 1)
    expected = z.min() / z.max()
    assert M.partition_isotropy(np.vstack([np.diag(a), -np.diag(a)])) == pytest.approx(
        expected, rel=1e-12
    )


def test_partition_isotropy_against_direct_sum_and_sign_invariance() -> None:
    g = rng(4)
    w = g.standard_normal((60, 4)) + np.array([1.0, 0.0, 0.0, 0.0])  # a common direction
    vecs = np.linalg.eigh(w.T @ w)[1]
    z = np.array([np.exp(w @ (s * c)).sum() for c in vecs.T for s in (1.0, -1.0)])
    expected = z.min() / z.max()
    assert M.partition_isotropy(w) == pytest.approx(expected, rel=1e-10)
    assert M.partition_isotropy(-w) == pytest.approx(expected, rel=1e-10)
    # flipping the sign of any eigenvector returned by eigh leaves the result unchanged
    m = B.validate(w, "W")
    basis = torch.from_numpy(vecs)
    flips = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64)
    lz1, lz2 = M._log_partition(m, basis), M._log_partition(m, basis * flips)
    assert lz1.min() - lz1.max() == pytest.approx(lz2.min() - lz2.max(), abs=1e-13)
    assert M.partition_isotropy(w) == M.partition_isotropy(w)  # deterministic


def test_partition_isotropy_large_values_do_not_overflow() -> None:
    w = rng(5).standard_normal((50, 3)) * 400.0  # exp(c.w) overflows float64 without logsumexp
    value = M.partition_isotropy(w)
    assert 0.0 <= value <= 1.0
    assert math.isfinite(value)


def test_isoscore_formula_simplification_matches_literal() -> None:
    g = rng(6)
    for d in (2, 3, 16, 200):
        lam = np.abs(g.standard_normal(d)) ** 3
        lam[: d // 3] = 0.0 if d > 3 else lam[: d // 3]
        expected = spectrum_isoscore(lam)
        assert M._isoscore_from_eigenvalues(lam) == pytest.approx(expected, abs=1e-12)


# ------------------------------------------------------------------------------------------------
# independent computations
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("n", "d"), [(40, 7), (7, 40), (300, 64), (2, 3)])
def test_mean_cosine_vs_brute_force(n: int, d: int) -> None:
    x = rng(7).standard_normal((n, d)) + 0.8
    assert M.mean_cosine_similarity(x) == pytest.approx(mean_cos_brute(x), abs=1e-13)


@pytest.mark.parametrize(("n", "d"), [(200, 30), (30, 200), (500, 64), (64, 64)])
@pytest.mark.parametrize("squared", [False, True])
@pytest.mark.parametrize("center", [False, True])
def test_effective_rank_vs_svd(n: int, d: int, squared: bool, center: bool) -> None:
    g = rng(8)
    w = g.standard_normal((n, d)) * np.geomspace(1.0, 1e-3, d) + 2.0 * g.standard_normal(d)
    got = M.effective_rank(w, squared=squared, center=center)
    assert got == pytest.approx(erank_ref(w, squared, center), rel=1e-11)


def test_effective_rank_chunked_paths(small_chunks: None) -> None:
    g = rng(9)
    w = g.standard_normal((700, 20)) * np.geomspace(5.0, 0.1, 20) + 30.0
    for center in (False, True):
        for squared in (False, True):
            want = erank_ref(w, squared, center)
            assert M.effective_rank(w, squared=squared, center=center) == pytest.approx(
                want, rel=1e-11
            )
            assert M.effective_rank(w.T, squared=squared) == pytest.approx(
                erank_ref(w.T, squared), rel=1e-11
            )
    assert M.isoscore(w) == pytest.approx(
        spectrum_isoscore(np.linalg.eigvalsh(np.cov(w, rowvar=False))), abs=1e-12
    )
    u = w[:150]
    assert M.mean_cosine_similarity(u) == pytest.approx(mean_cos_brute(u), abs=1e-13)


def test_gram_route_on_ill_conditioned_matrix_is_float64_accurate() -> None:
    # condition number 1e6: sigma_min^2 / sigma_max^2 = 1e-12, near the Gram noise floor
    w = with_spectrum(np.geomspace(1.0, 1e-6, 50), 400, 50, rng(10))
    for squared in (False, True):
        assert M.effective_rank(w, squared=squared) == pytest.approx(
            erank_ref(w, squared), rel=1e-9
        )


def _forbid(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    def boom(*args: object, **kwargs: object) -> np.ndarray:
        raise AssertionError(f"{name} should not be needed here")

    monkeypatch.setattr(M, name, boom)


@pytest.mark.parametrize("spread", [1e-1, 1e-2, 1e-3])
@pytest.mark.parametrize("squared", [False, True])
def test_gram_eigenvalues_alone_up_to_condition_1e3(
    monkeypatch: pytest.MonkeyPatch, spread: float, squared: bool
) -> None:
    _forbid(monkeypatch, "_exact_singular_values")  # the fast route must suffice here
    w = with_spectrum(np.geomspace(1.0, spread, 60), 1500, 60, rng(11))
    assert M.effective_rank(w, squared=squared) == pytest.approx(erank_ref(w, squared), rel=1e-11)


@pytest.mark.parametrize(("n", "d"), [(80, 12), (12, 80)])
@pytest.mark.parametrize("center", [False, True])
def test_rank_deficient_falls_back_to_exact_svd(
    monkeypatch: pytest.MonkeyPatch, n: int, d: int, center: bool
) -> None:
    # rank 3 of 12: the Gram route alone gives sigma ~ 1e-8 sigma_max for the null space and an
    # erank off by ~1e-6; the error estimate must send this case to the exact SVD.
    calls: list[bool] = []
    exact = M._exact_singular_values

    def spy(m: B.Matrix, *, center: bool) -> np.ndarray:
        calls.append(center)
        return exact(m, center=center)

    monkeypatch.setattr(M, "_exact_singular_values", spy)
    w = with_spectrum(np.array([3.0, 2.0, 1.0]), n, d, rng(12)) + (5.0 if center else 0.0)
    assert M.effective_rank(w, center=center) == pytest.approx(
        erank_ref(w, center=center), rel=1e-12
    )
    assert calls == [center]


isoscore_pkg = pytest.importorskip("IsoScore.IsoScore")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_isoscore_vs_package(dtype: type) -> None:
    g = rng(13)
    x = (g.standard_normal((800, 24)) * np.geomspace(4.0, 0.05, 24) + 3.0).astype(dtype)
    ours = M.isoscore(x)
    pkg = float(isoscore_pkg.IsoScore(x))
    # The package computes the covariance in the input dtype and sqrt(d) in float32 (torch.sqrt of
    # an int64 tensor), so even for float64 input it agrees only to float32 rounding.
    tol = 1e-4 if dtype == np.float32 else 1e-6
    assert ours == pytest.approx(pkg, abs=tol)
    cov = np.cov(x.astype(np.float64), rowvar=False)
    assert M.isoscore_from_cov(cov) == pytest.approx(
        float(isoscore_pkg.IsoScore_cov(cov)), abs=1e-6
    )
    lam = np.clip(np.linalg.eigvalsh(cov), 0.0, None)
    assert M.isoscore_from_cov(cov) == pytest.approx(spectrum_isoscore(lam), abs=1e-12)


@pytest.mark.parametrize("zeta", [0.0, 0.2, 0.75, 1.0])
def test_isoscore_star_vs_package(zeta: float) -> None:
    g = rng(14)
    big = g.standard_normal((3000, 10)) * np.geomspace(2.0, 0.2, 10)
    c0 = np.cov(big, rowvar=False)
    x = big[:40] @ orthogonal(10, g)[:, :10] * 0.5
    pkg = float(isoscore_pkg.IsoScore_star(x, torch.from_numpy(c0), zeta))
    assert M.isoscore_star(x, c0, zeta) == pytest.approx(pkg, abs=1e-6)  # float32 sqrt(d) there
    cov = np.cov(x, rowvar=False)
    shrunk = (1 - zeta) * cov + zeta * c0
    expected = spectrum_isoscore(np.clip(np.linalg.eigvalsh(shrunk), 0.0, None))
    assert M.isoscore_star(x, c0, zeta) == pytest.approx(expected, abs=1e-12)
    assert M.isoscore_star_from_cov(cov, c0, zeta) == pytest.approx(expected, abs=1e-12)
    ident = float(isoscore_pkg.IsoScore_star(x, torch.eye(10, dtype=torch.float64), zeta))
    assert M.isoscore_star(x, None, zeta) == pytest.approx(ident, abs=1e-6)


def test_isoscore_star_zero_zeta_is_isoscore_and_one_is_c0() -> None:
    g = rng(15)
    x = g.standard_normal((50, 6)) * np.arange(1, 7)
    c0 = np.diag(np.arange(1.0, 7.0))
    assert M.isoscore_star(x, c0, 0.0) == M.isoscore(x)
    assert M.isoscore_star(x, c0, 1.0) == pytest.approx(M.isoscore_from_cov(c0), abs=1e-14)


def test_streaming_covariance_matches_np_cov() -> None:
    g = rng(16)
    data = g.standard_normal((523, 9)) * np.arange(1, 10) + 5.0
    acc = M.StreamingCovariance(9)
    start = 0
    for size in (1, 7, 0, 300, 2, 213):
        acc.update(data[start : start + size])
        start += size
    assert acc.count == 523
    np.testing.assert_allclose(acc.mean, data.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(acc.covariance(), np.cov(data, rowvar=False), rtol=1e-12)
    np.testing.assert_allclose(
        acc.covariance(ddof=0), np.cov(data, rowvar=False, bias=True), rtol=1e-12
    )
    cov = acc.covariance()
    assert np.array_equal(cov, cov.T)


def test_streaming_covariance_merge_and_chunks(small_chunks: None) -> None:
    g = rng(17)
    a, b = g.standard_normal((400, 5)), g.standard_normal((90, 5)) * 3.0 - 2.0
    left = M.StreamingCovariance(5).update(a)
    right = M.StreamingCovariance(5).update(torch.from_numpy(b).float())
    left.merge(right).merge(M.StreamingCovariance(5))
    both = np.vstack([a, torch.from_numpy(b).float().double().numpy()])
    assert left.count == 490 and right.count == 90
    np.testing.assert_allclose(left.covariance(), np.cov(both, rowvar=False), rtol=1e-12)
    np.testing.assert_allclose(left.mean, both.mean(axis=0), rtol=1e-13, atol=1e-15)


def test_streaming_covariance_stable_with_large_mean() -> None:
    # 1e6 + small integers are exact in float64; the naive Gram - n mu mu^T loses ~12 digits here
    y = rng(18).integers(-5, 6, size=(1000, 4)).astype(np.float64)
    acc = M.StreamingCovariance(4).update(1e6 + y)
    np.testing.assert_allclose(acc.covariance(), np.cov(y, rowvar=False), rtol=1e-9)
    assert M.effective_rank(1e6 + y, center=True) == pytest.approx(
        erank_ref(y, center=True), rel=1e-9
    )


def _count_gram_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    passes: list[int] = []
    gram = B.gram

    def spy(*args: object, **kwargs: object) -> np.ndarray:
        passes.append(1)
        return gram(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(B, "gram", spy)  # the scatter pass
    monkeypatch.setattr(M, "gram", spy)  # the metrics' own passes
    return passes


def test_scatter_one_pass_in_random_order_two_when_first_block_is_unlike_the_rest(
    monkeypatch: pytest.MonkeyPatch, small_chunks: None
) -> None:
    # offset 1e4 x the spread: the shift (first block's mean) must absorb it, or ~8 digits go
    g = rng(30)
    y = g.standard_normal((640, 5)) * np.array([3.0, 1.0, 0.1, 0.01, 1e-3])
    want = np.cov(y, rowvar=False)
    passes = _count_gram_passes(monkeypatch)
    n, mean, m2 = B.scatter(B.validate(y + 10.0, "X"))
    assert (n, len(passes)) == (640, 1)
    np.testing.assert_allclose(m2 / (n - 1), want, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(mean, (y + 10.0).mean(axis=0), rtol=1e-14)
    # sorted by the first coordinate: the first 64-row block is far from the mean
    drift = y[np.argsort(y[:, 0])] + 10.0
    passes.clear()
    n, _, m2 = B.scatter(B.validate(drift, "X"))
    assert len(passes) == 2
    np.testing.assert_allclose(m2 / (n - 1), want, rtol=1e-10, atol=1e-15)


def test_scatter_of_constant_columns_is_exactly_zero() -> None:
    x = np.full((7, 3), 0.1)  # 7 * 0.1 / 7 != 0.1 in floating point
    x[:, 1] = np.arange(7.0)
    _, mean, m2 = B.scatter(B.validate(x, "X"))
    assert mean[0] == 0.1 and mean[2] == 0.1
    assert not m2[0].any() and not m2[:, 2].any()
    assert m2[1, 1] == pytest.approx(28.0, rel=1e-15)
    with pytest.raises(ValueError, match="zero covariance"):
        M.isoscore(np.full((9, 4), 0.1))


@pytest.mark.parametrize("offset", [1.0, 1e3, 1e5])
def test_float32_activations_with_offset_match_float64_reference(offset: float) -> None:
    # LM-like activations: a common offset large against the spread of most directions; the
    # reference is the float64 covariance of the same (upcast) float32 values
    g = rng(31)
    x = g.standard_normal((5000, 48)) * np.geomspace(3.0, 0.01, 48) + offset * g.standard_normal(48)
    x32 = x.astype(np.float32)
    x64 = x32.astype(np.float64)
    lam = np.clip(np.linalg.eigvalsh(np.cov(x64, rowvar=False)), 0.0, None)
    assert M.isoscore(x32) == pytest.approx(spectrum_isoscore(lam), rel=1e-9)
    for squared in (False, True):
        assert M.effective_rank(x32, squared=squared, center=True) == pytest.approx(
            erank_ref(x64, squared, center=True), rel=1e-9
        )


def test_streaming_covariance_batches_far_from_the_running_mean() -> None:
    g = rng(32)
    parts = [g.standard_normal((300, 4)) * 0.01 + c for c in (0.0, 1e4, -3e3)]
    acc = M.StreamingCovariance(4)
    for p in parts:
        acc.update(p)
    both = np.vstack(parts)
    np.testing.assert_allclose(acc.covariance(), np.cov(both, rowvar=False), rtol=1e-10)
    np.testing.assert_allclose(acc.mean, both.mean(axis=0), rtol=1e-13)


# ------------------------------------------------------------------------------------------------
# invariances (only those that hold)
# ------------------------------------------------------------------------------------------------
def test_rotation_invariance() -> None:
    g = rng(19)
    x = g.standard_normal((120, 12)) * np.geomspace(3.0, 0.1, 12) + 1.5
    q = orthogonal(12, g)
    xq = x @ q
    for f in (
        M.effective_rank,
        lambda w: M.effective_rank(w, squared=True, center=True),
        M.isoscore,
        M.stable_rank,
        M.mean_cosine_similarity,
    ):
        assert f(xq) == pytest.approx(f(x), rel=1e-10, abs=1e-12)


def test_translation_invariance() -> None:
    g = rng(20)
    x = g.standard_normal((150, 8)) * np.geomspace(2.0, 0.3, 8)
    b = 7.0 * g.standard_normal(8)
    assert M.isoscore(x + b) == pytest.approx(M.isoscore(x), abs=1e-12)
    for squared in (False, True):
        assert M.effective_rank(x + b, squared=squared, center=True) == pytest.approx(
            M.effective_rank(x, squared=squared, center=True), rel=1e-11
        )


@pytest.mark.parametrize("scale", [1e-3, 2.5, 1e4])
def test_scale_invariance(scale: float) -> None:
    x = rng(21).standard_normal((90, 7)) * np.geomspace(2.0, 0.3, 7) + 0.5
    for f in (
        M.effective_rank,
        lambda w: M.effective_rank(w, squared=True),
        lambda w: M.effective_rank(w, center=True),
        M.singular_entropy,
        M.isoscore,
        M.stable_rank,
        M.mean_cosine_similarity,
    ):
        assert f(scale * x) == pytest.approx(f(x), rel=1e-11, abs=1e-13)


# ------------------------------------------------------------------------------------------------
# dtypes and containers
# ------------------------------------------------------------------------------------------------
METRICS = {
    "erank": M.effective_rank,
    "erank_sq_c": lambda w: M.effective_rank(w, squared=True, center=True),
    "sentropy": M.singular_entropy,
    "isoscore": M.isoscore,
    "isoscore_star": lambda w: M.isoscore_star(w, np.eye(w.shape[1]), 0.3),
    "stable_rank": M.stable_rank,
    "mean_cos": M.mean_cosine_similarity,
    "partition": M.partition_isotropy,
}


@pytest.mark.parametrize("name", sorted(METRICS))
@pytest.mark.parametrize("dtype", ["np16", "np32", "t16", "tbf16", "t32"])
def test_low_precision_inputs_give_float64_result_of_upcast_values(name: str, dtype: str) -> None:
    f = METRICS[name]
    x = rng(22).standard_normal((70, 6)) * np.geomspace(2.0, 0.5, 6) + 0.3
    if dtype.startswith("np"):
        low = x.astype(np.float16 if dtype == "np16" else np.float32)
        up = low.astype(np.float64)
    else:
        tdt = {"t16": torch.float16, "tbf16": torch.bfloat16, "t32": torch.float32}[dtype]
        low = torch.from_numpy(x).to(tdt)
        up = low.double().numpy()
    got = f(low)
    assert isinstance(got, float)
    assert got == pytest.approx(f(up), rel=1e-12, abs=1e-14)


def test_torch_views_grad_and_lists() -> None:
    x = rng(23).standard_normal((40, 30))
    t = torch.from_numpy(x).requires_grad_(True)
    assert M.effective_rank(t) == pytest.approx(erank_ref(x), rel=1e-11)
    assert M.effective_rank(torch.from_numpy(x).T) == pytest.approx(erank_ref(x.T), rel=1e-11)
    assert M.isoscore(np.asfortranarray(x)) == pytest.approx(M.isoscore(x), abs=1e-14)
    x.setflags(write=False)
    assert M.isoscore(x[::2]) == pytest.approx(M.isoscore(x[::2].copy()), abs=1e-14)
    assert M.mean_cosine_similarity([[1.0, 0.0], [0.0, 1.0]]) == 0.0


@pytest.mark.device  # needs a CUDA GPU: `make test-device` on a machine with one (never in CI)
def test_cuda_tensor_input() -> None:
    """A GPU tensor gives the CPU result (read in blocks, upcast to float64 on the host)."""
    x = rng(24).standard_normal((64, 16))
    assert M.isoscore(torch.from_numpy(x).cuda()) == pytest.approx(M.isoscore(x), abs=1e-13)


# ------------------------------------------------------------------------------------------------
# properties
# ------------------------------------------------------------------------------------------------
def matrices(min_rows: int = 2, min_cols: int = 1) -> st.SearchStrategy[np.ndarray]:
    shapes = st.tuples(st.integers(min_rows, 12), st.integers(min_cols, 8))
    elems = st.floats(-10, 10, allow_nan=False, allow_infinity=False, width=64)
    return shapes.flatmap(lambda s: arrays(np.float64, s, elements=elems))


PROPS = settings(max_examples=25, deadline=None, derandomize=True)  # reproducible in CI


@PROPS
@given(matrices())
def test_prop_rank_bounds(w: np.ndarray) -> None:
    assume(np.abs(w).max() > 1e-3)
    n, d = w.shape
    rank = np.linalg.matrix_rank(w)
    er, er2, sr = M.effective_rank(w), M.effective_rank(w, squared=True), M.stable_rank(w)
    assert 1.0 - 1e-9 <= er <= rank + 1e-6
    assert 1.0 - 1e-9 <= sr <= min(n, d) + 1e-9
    # Renyi ordering: min-entropy <= Shannon(sigma^2) <= Shannon(sigma) (tempering sharpens p)
    assert sr <= er2 * (1 + 1e-9) and er2 <= er * (1 + 1e-9)
    assert er == pytest.approx(erank_ref(w), rel=1e-9)


@PROPS
@given(matrices(min_cols=2))
def test_prop_isoscore_in_unit_interval(x: np.ndarray) -> None:
    assume(np.ptp(x, axis=0).max() > 1e-3)
    value = M.isoscore(x)
    assert 0.0 <= value <= 1.0
    lam = np.clip(np.linalg.eigvalsh(np.cov(x, rowvar=False)), 0.0, None)
    assert value == pytest.approx(spectrum_isoscore(lam), abs=1e-9)


@PROPS
@given(matrices())
def test_prop_mean_cosine_bounds(x: np.ndarray) -> None:
    assume(np.linalg.norm(x, axis=1).min() > 1e-3)
    n = len(x)
    value = M.mean_cosine_similarity(x)
    assert -1.0 / (n - 1) - 1e-12 <= value <= 1.0 + 1e-12
    assert value == pytest.approx(mean_cos_brute(x), abs=1e-12)


@PROPS
@given(matrices())
def test_prop_partition_isotropy_in_unit_interval(w: np.ndarray) -> None:
    value = M.partition_isotropy(w)
    assert 0.0 < value <= 1.0


# ------------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------------
ALL = [
    M.effective_rank,
    M.singular_entropy,
    M.stable_rank,
    M.isoscore,
    M.isoscore_star,
    M.mean_cosine_similarity,
    M.partition_isotropy,
]
ALL_IDS = [f.__name__ for f in ALL]


@pytest.mark.parametrize("f", ALL, ids=ALL_IDS)
@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (np.ones(5), "must be 2-D"),
        (np.ones((2, 3, 4)), "must be 2-D"),
        (np.ones((1, 3)), "at least 2 rows"),
        (np.array([[1.0, np.nan], [0.0, 1.0]]), "NaN or inf"),
        (np.array([[1.0, 2.0], [np.inf, 1.0]]), "NaN or inf"),
        (torch.tensor([[1.0, 2.0], [-math.inf, 1.0]], dtype=torch.bfloat16), "NaN or inf"),
        (np.array([[1e200, 1.0], [1.0, 1.0]]), "too large"),
        (np.ones((3, 2), dtype=np.int64), "floating dtype"),
        (torch.ones((3, 2), dtype=torch.int32), "floating dtype"),
        (np.ones((3, 2), dtype=bool), "floating dtype"),
        (np.ones((3, 2), dtype=np.complex128), "floating dtype"),
        (np.ones((3, 0)), "at least 1 column"),
    ],
)
def test_bad_inputs(f: object, bad: object, match: str) -> None:
    with warnings.catch_warnings(), pytest.raises(ValueError, match=match):
        warnings.simplefilter("error")  # the error is ours, with no numpy warnings on the way
        f(bad)  # type: ignore[operator]


def test_zero_variance_and_zero_matrices() -> None:
    same = np.tile(np.array([1.0, 2.0, 3.0]), (5, 1))
    with pytest.raises(ValueError, match="zero covariance"):
        M.isoscore(same)
    with pytest.raises(ValueError, match="zero covariance"):
        M.isoscore_from_cov(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="zero variance"):
        M.effective_rank(same, center=True)
    with pytest.raises(ValueError, match="all zeros"):
        M.effective_rank(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="all zeros"):
        M.stable_rank(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="zero row"):
        M.mean_cosine_similarity(np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]))


def test_isoscore_needs_two_dimensions() -> None:
    with pytest.raises(ValueError, match="d >= 2"):
        M.isoscore(np.arange(5.0).reshape(5, 1))


def test_bad_covariances_c0_and_zeta() -> None:
    x = rng(25).standard_normal((20, 3))
    with pytest.raises(ValueError, match=r"C0 must have shape \(3, 3\)"):
        M.isoscore_star(x, np.eye(4), 0.5)
    with pytest.raises(ValueError, match="C0 must be symmetric"):
        M.isoscore_star(x, np.triu(np.ones((3, 3))), 0.5)
    with pytest.raises(ValueError, match="C0 contains NaN"):
        M.isoscore_star(x, np.full((3, 3), np.nan), 0.5)
    for zeta in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match=r"zeta must be in \[0, 1\]"):
            M.isoscore_star(x, np.eye(3), zeta)
        with pytest.raises(ValueError, match=r"zeta must be in \[0, 1\]"):
            M.isoscore_star_from_cov(np.eye(3), np.eye(3), zeta)
    with pytest.raises(ValueError, match="square"):
        M.isoscore_from_cov(np.ones((3, 4)))
    with pytest.raises(ValueError, match="positive semidefinite"):
        M.isoscore_from_cov(np.diag([1.0, -1.0, 2.0]))
    with pytest.raises(ValueError, match="positive semidefinite"):
        M.isoscore_star(x, -5.0 * np.eye(3), 1.0)


def test_streaming_covariance_bad_use() -> None:
    with pytest.raises(ValueError, match="positive integer"):
        M.StreamingCovariance(0)
    acc = M.StreamingCovariance(3)
    with pytest.raises(ValueError, match="no data"):
        _ = acc.mean
    with pytest.raises(ValueError, match="must have 3 columns"):
        acc.update(np.ones((4, 2)))
    with pytest.raises(ValueError, match="must be 2-D"):
        acc.update(np.ones(3))
    acc.update(np.ones((1, 3)))
    with pytest.raises(ValueError, match="needs more than 1 rows"):
        acc.covariance()
    assert np.array_equal(acc.covariance(ddof=0), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="same dim"):
        acc.merge(M.StreamingCovariance(4))
    with pytest.raises(ValueError, match="non-negative integer"):
        acc.covariance(ddof=-1)


def test_isoscore_star_refuses_a_target_that_is_not_a_covariance() -> None:
    """Even where the shrunk matrix stays positive semidefinite (small zeta)."""
    rng = np.random.default_rng(0)
    c0 = np.eye(4)
    c0[0, 0] = -0.2
    with pytest.raises(ValueError, match="C0 is not positive semidefinite"):
        M.isoscore_star(rng.standard_normal((50, 4)), C0=c0, zeta=0.1)
    with pytest.raises(ValueError, match="C0 is not positive semidefinite"):
        M.isoscore_star_from_cov(np.eye(4), C0=c0, zeta=0.1)
