"""Controlled synthetic point clouds with known geometry, used to validate the metrics.

Every sampler takes an explicit ``np.random.Generator`` (no global state) and returns a
float64 array of shape ``(n, d)``, rows = points. Each comes with the closed form it is
checked against.
"""

from __future__ import annotations

import numpy as np


def _check_sizes(n: int, d: int) -> None:
    if n < 2 or d < 1:
        raise ValueError(f"need n >= 2 points and d >= 1 dimensions, got n={n}, d={d}")


def random_orthogonal(d: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-random ``(d, d)`` orthogonal matrix (QR of a Gaussian with sign fix)."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def isotropic_gaussian(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` i.i.d. points from N(0, I_d): population IsoScore exactly 1."""
    _check_sizes(n, d)
    return rng.standard_normal((n, d))


def k_of_d(n: int, d: int, k: int, rng: np.random.Generator, rotate: bool = True) -> np.ndarray:
    """Points using ``k`` of ``d`` dimensions with equal variance (population IsoScore (k−1)/(d−1)).

    With ``rotate`` the k-dimensional subspace is a random one rather than the first k axes.
    """
    _check_sizes(n, d)
    if not 1 <= k <= d:
        raise ValueError(f"k must be in [1, d={d}], got {k}")
    x = np.zeros((n, d))
    x[:, :k] = rng.standard_normal((n, k))
    return x @ random_orthogonal(d, rng).T if rotate else x


def cone(n: int, d: int, half_angle_deg: float, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors at a fixed angle θ from a common axis, uniform in azimuth.

    ``x = cos θ · a + sin θ · u`` with ``u`` uniform on the unit sphere orthogonal to ``a``.
    Mean cosine over pairs → cos²θ (E[uᵢ·uⱼ] = 0), while the covariance is isotropic in the
    d − 1 directions orthogonal to ``a``: the cone is anisotropic in the cosine sense yet
    nearly isotropic in the IsoScore sense ((d − 2)/(d − 1) in population).
    """
    _check_sizes(n, d)
    if d < 2 or not 0.0 <= half_angle_deg <= 180.0:
        raise ValueError(f"need d >= 2 and an angle in [0, 180] degrees, got {d}, {half_angle_deg}")
    theta = np.deg2rad(half_angle_deg)
    u = rng.standard_normal((n, d - 1))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    x = np.concatenate([np.full((n, 1), np.cos(theta)), np.sin(theta) * u], axis=1)
    return x @ random_orthogonal(d, rng).T


def cone_mean_cosine(half_angle_deg: float) -> float:
    """Population mean pairwise cosine of :func:`cone` points: cos²θ."""
    return float(np.cos(np.deg2rad(half_angle_deg)) ** 2)


def power_law_spectrum(d: int, decay: float) -> np.ndarray:
    """Singular values σ_i = i^(−decay), i = 1..d (decay 0 = flat spectrum)."""
    if d < 1 or not np.isfinite(decay) or decay < 0:
        raise ValueError(f"need d >= 1 and a finite decay >= 0, got d={d}, decay={decay}")
    return np.arange(1, d + 1, dtype=np.float64) ** (-decay)


def matrix_with_spectrum(sigma: np.ndarray, n_rows: int, rng: np.random.Generator) -> np.ndarray:
    """A ``(n_rows, d)`` matrix U diag(σ) Vᵀ with Haar-random orthonormal U, V (n_rows ≥ d)."""
    sigma = np.asarray(sigma, dtype=np.float64)
    d = sigma.size
    if n_rows < d:
        raise ValueError(f"n_rows={n_rows} must be >= len(sigma)={d}")
    u, _ = np.linalg.qr(rng.standard_normal((n_rows, d)))
    return (u * sigma) @ random_orthogonal(d, rng).T


def spectrum_effective_rank(sigma: np.ndarray) -> float:
    """exp(Shannon entropy of σ/Σσ): the Roy–Vetterli effective rank read off a known spectrum."""
    p = np.asarray(sigma, dtype=np.float64)
    p = p[p > 0] / p.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


def spectrum_isoscore(lam: np.ndarray) -> float:
    """IsoScore read off known covariance eigenvalues ``lam`` (d ≥ 2), the PAPERS.md formula
    term by term: Σ̂ = √d λ/‖λ‖, δ = ‖Σ̂ − 1‖/√(2(d − √d)), k = (d − δ²(d − √d))²/d,
    (k − 1)/(d − 1). Written independently of :mod:`geolib.measure.metrics`, which it checks.
    """
    lam = np.asarray(lam, dtype=np.float64)
    d = lam.size
    sig = np.sqrt(d) * lam / np.linalg.norm(lam)
    delta = np.linalg.norm(sig - 1.0) / np.sqrt(2 * (d - np.sqrt(d)))
    k = (d - delta**2 * (d - np.sqrt(d))) ** 2 / d
    return float((k - 1) / (d - 1))


def isoscore_isotropic_expectation(n: int, d: int, k: int | None = None) -> float:
    """Large-sample prediction of the IsoScore of ``n`` Gaussian points isotropic in ``k`` of ``d``
    dimensions (``k = d`` by default).

    The sample covariance's ``k`` non-zero eigenvalues follow the Marchenko–Pastur law with
    ratio γ = k / (n − 1) (one degree of freedom spent on the mean), whose moments are
    E[λ] = 1 and E[λ²] = 1 + γ. Substituting into the IsoScore steps (Σ̂ = √d λ/‖λ‖, defect δ,
    k_iso = (d − δ²(d − √d))²/d) gives k_iso = k/(1 + γ), hence

        IsoScore ≈ (k/(1 + γ) − 1)/(d − 1),

    a downward bias that vanishes only when n ≫ k. Valid up to O(1/√k) fluctuations.
    """
    _check_sizes(n, d)
    k = d if k is None else k
    if not 1 <= k <= d or d < 2:
        raise ValueError(f"need d >= 2 and k in [1, d], got d={d}, k={k}")
    gamma = k / (n - 1)
    return float((k / (1.0 + gamma) - 1.0) / (d - 1.0))
