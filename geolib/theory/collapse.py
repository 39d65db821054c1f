"""Claim A1, frequency-induced variance collapse: a token's representation estimated from its
n occurrences, by the sample mean (variance σ²/n) and by SGD (decay to a floor set by the step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from geolib.stats import SlopeFit, fit_loglog
from geolib.theory import validate as check
from geolib.theory.validate import Seed


def zipf_counts(n_types: int, n_tokens: int, exponent: float = 1.0, seed: Seed = 0) -> np.ndarray:
    """Token counts of a corpus of ``n_tokens`` drawn from a Zipf law p_r ∝ r^(−exponent).

    One multinomial draw over ``n_types`` ranks; types never seen are dropped. Returned sorted
    in decreasing order (int64).
    """
    v, n = check.integer("n_types", n_types), check.integer("n_tokens", n_tokens)
    s = check.scalar("exponent", exponent, low=0.0)
    p = np.arange(1, v + 1, dtype=np.float64) ** -s
    counts = check.rng(seed).multinomial(n, p / p.sum())
    return np.sort(counts[counts > 0])[::-1].astype(np.int64)


def _lr_schedule(n_max: int, lr: float, lr_power: float) -> np.ndarray:
    """Per-type step sizes η_k = lr · k^(−lr_power), k = 1..n_max."""
    return lr * np.arange(1, n_max + 1, dtype=np.float64) ** -lr_power


def sgd_dispersion_theory(
    counts: Any,
    *,
    lr: float,
    lr_power: float = 0.0,
    noise: float = 1.0,
    init_var: Any = 1.0,
) -> np.ndarray:
    """Exact expected squared error per coordinate of SGD after n updates (quadratic toy).

    Update on each occurrence y = μ + σε of the type: e ← e − η_k (e − y), i.e. SGD on
    ½‖e − y‖². With a_n = Π_{k≤n}(1 − η_k) and v_n = Σ_j η_j² Π_{j<k≤n}(1 − η_k)²
    (recursion v_k = (1 − η_k)² v_{k−1} + η_k²):

        E[(e_n − μ)²] = a_n² · init_var + σ² · v_n,

    where ``init_var`` = E[(e_0 − μ)²] per coordinate (scalar or one value per type). Constant
    η (lr_power 0) gives exponential forgetting down to a floor σ²η/(2 − η): no power law. For
    0 < p < 1 the tail is ≈ σ²η_n/2 ∝ n^(−p); lr = 1, p = 1 is the running mean, σ²/n.
    """
    counts = check.array("counts", counts, positive=True)
    if np.any(counts != np.round(counts)):
        raise ValueError("counts must be integers")
    lr = check.scalar("lr", lr, low=0.0, strict=True)
    if lr > 1.0:
        raise ValueError(f"lr must be <= 1 (larger steps overshoot the target), got {lr}")
    p = check.scalar("lr_power", lr_power, low=0.0)
    sigma = check.scalar("noise", noise, low=0.0)
    n = counts.astype(np.int64)
    eta = _lr_schedule(int(n.max()), lr, p)
    a = np.cumprod(1.0 - eta)
    v = np.empty_like(eta)
    acc = 0.0
    for k, e in enumerate(eta):
        acc = (1.0 - e) ** 2 * acc + e**2
        v[k] = acc
    init_var = np.asarray(init_var, dtype=np.float64)
    return a[n - 1] ** 2 * init_var + sigma**2 * v[n - 1]


def sample_mean_dispersion(
    counts: Any, *, dim: int = 4, noise: float = 1.0, n_replicates: int = 64, seed: Seed = 0
) -> np.ndarray:
    """Per-type dispersion of the sample-mean estimate around the ideal centroid (simulated).

    Type i's ``counts[i]`` occurrences are y = μ_i + noise·ε (ε ~ N(0, I_dim)) in each of
    ``n_replicates`` independent replicate corpora; the estimate is their mean. Returns, per
    type, the mean over replicates and coordinates of (ê − μ)², whose expectation is noise²/n
    (A1's law). The error ê − μ does not depend on μ, so the centroids are not drawn.
    """
    counts = check.array("counts", counts, positive=True)
    if np.any(counts != np.round(counts)):
        raise ValueError("counts must be integers >= 1")
    n = counts.astype(np.int64)
    dim, reps = check.integer("dim", dim), check.integer("n_replicates", n_replicates)
    sigma = check.scalar("noise", noise, low=0.0, strict=True)
    rng = check.rng(seed)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]])
    total = int(n.sum())
    chunk = max(1, 4_000_000 // (total * dim))
    sq = np.zeros(n.size)
    for first in range(0, reps, chunk):
        c = min(chunk, reps - first)
        errors = (
            np.add.reduceat(rng.normal(size=(c, total, dim)), starts, axis=1) / n[None, :, None]
        )
        sq += (sigma**2 * errors**2).sum(axis=(0, 2))
    return sq / (reps * dim)


@dataclass(frozen=True)
class VarianceCollapse:
    """Per-type dispersion around the ideal centroid against the type's count.

    Dispersion = mean over replicates and coordinates of (estimate − μ)²; for the unbiased
    sample mean it is the sampling variance, for SGD it also contains the remaining bias from
    the initialisation. ``*_theory`` are the exact expectations (σ²/n and
    :func:`sgd_dispersion_theory`); ``fit_*`` are log–log slopes against the counts over all
    types (``fit_sgd_theory`` fits the expectation, to separate law from sampling noise).
    """

    counts: np.ndarray
    sample_mean: np.ndarray
    sgd: np.ndarray
    sample_mean_theory: np.ndarray
    sgd_theory: np.ndarray
    fit_sample_mean: SlopeFit
    fit_sgd: SlopeFit
    fit_sgd_theory: SlopeFit
    lr: float
    lr_power: float


def variance_collapse(
    counts: Any,
    *,
    dim: int = 4,
    noise: float = 1.0,
    n_replicates: int = 64,
    lr: float = 0.1,
    lr_power: float = 0.0,
    init_scale: float = 1.0,
    centroid_scale: float = 1.0,
    level: float = 0.95,
    seed: Seed = 0,
) -> VarianceCollapse:
    """Simulate A1: estimate each type's representation from its ``counts[i]`` occurrences.

    Each type i has an ideal centroid μ_i ~ N(0, centroid_scale² I_dim) (fixed). In each of
    ``n_replicates`` independent replicate corpora, its n_i occurrences are y = μ_i + noise·ε.
    Two estimators see the same occurrences: (1) the sample mean; (2) SGD on ½‖e − y‖², one step
    per occurrence with step η_k = lr·k^(−lr_power) at the type's k-th update, from
    e_0 ~ N(0, init_scale² I) drawn per replicate. Types are independent (separate parameters),
    so the interleaving of types in the corpus does not change either estimator.
    """
    counts = check.array("counts", counts, positive=True)
    if np.any(counts != np.round(counts)):
        raise ValueError("counts must be integers >= 1")
    n = counts.astype(np.int64)
    dim, reps = check.integer("dim", dim), check.integer("n_replicates", n_replicates, low=2)
    sigma = check.scalar("noise", noise, low=0.0, strict=True)
    init_scale = check.scalar("init_scale", init_scale, low=0.0)
    centroid_scale = check.scalar("centroid_scale", centroid_scale, low=0.0)
    lr = check.scalar("lr", lr, low=0.0, strict=True)
    if lr > 1.0:
        raise ValueError(f"lr must be <= 1, got {lr}")
    p = check.scalar("lr_power", lr_power, low=0.0)
    rng = check.rng(seed)

    order = np.argsort(-n, kind="stable")  # types by decreasing count: updates act on a prefix
    ns = n[order]
    n_types, total = ns.size, int(ns.sum())
    starts = np.concatenate([[0], np.cumsum(ns)[:-1]])
    owner = np.repeat(np.arange(n_types), ns)
    mu = rng.normal(0.0, centroid_scale, size=(n_types, dim))
    eta = _lr_schedule(int(ns[0]), lr, p)
    active = np.searchsorted(-ns, -np.arange(1, ns[0] + 1), side="right")  # #types with n >= k

    chunk = max(1, 4_000_000 // (total * dim))
    sq_mean, sq_sgd = np.zeros(n_types), np.zeros(n_types)
    for first in range(0, reps, chunk):
        c = min(chunk, reps - first)
        y = mu[owner][None] + sigma * rng.normal(size=(c, total, dim))
        means = np.add.reduceat(y, starts, axis=1) / ns[None, :, None]
        sq_mean += ((means - mu[None]) ** 2).sum(axis=(0, 2))
        e = init_scale * rng.normal(size=(c, n_types, dim))
        for k in range(ns[0]):
            m = active[k]
            e[:, :m] -= eta[k] * (e[:, :m] - y[:, starts[:m] + k])
        sq_sgd += ((e - mu[None]) ** 2).sum(axis=(0, 2))

    inv = np.empty_like(order)
    inv[order] = np.arange(n_types)
    disp_mean = (sq_mean / (reps * dim))[inv]
    disp_sgd = (sq_sgd / (reps * dim))[inv]
    mean_theory = sigma**2 / n
    init_var = init_scale**2 + (mu**2).mean(axis=1)[inv]
    sgd_theory = sgd_dispersion_theory(n, lr=lr, lr_power=p, noise=sigma, init_var=init_var)
    return VarianceCollapse(
        counts=n,
        sample_mean=disp_mean,
        sgd=disp_sgd,
        sample_mean_theory=mean_theory,
        sgd_theory=sgd_theory,
        fit_sample_mean=fit_loglog(n, disp_mean, level),
        fit_sgd=fit_loglog(n, disp_sgd, level),
        fit_sgd_theory=fit_loglog(n, sgd_theory, level),
        lr=lr,
        lr_power=p,
    )
