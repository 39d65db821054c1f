"""Claim A1, frequency-induced variance collapse: a token's representation estimated from its
n occurrences, by the sample mean (variance σ²/n) and by SGD (decay to a floor set by the step).

* :func:`variance_collapse` simulates both estimators on the same occurrences. The sample mean
  is summarised by the log–log slope of dispersion against count (A1's quantity, −1). SGD is
  not a power law and is summarised by what its theory says: beyond the transient
  (:func:`transient_end`), a plateau at the floor σ²η/(2 − η) (:func:`sgd_floor`) for a
  constant step, a tail slope → −p for steps η·k^(−p).
* :func:`slope_coverage` repeats the sample-mean slope fit on independent corpora and counts
  how often its interval covers −1, with the diagnostics that would explain a miss (bias,
  mis-scaled standard error, serial correlation, heteroscedasticity of the residuals).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from geolib.measure import validate as check
from geolib.measure.stats import Interval, Proportion, SlopeFit, fit_loglog, mean_ci, proportion_ci
from geolib.measure.validate import Seed


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


def _counts(counts: Any) -> np.ndarray:
    c = check.array("counts", counts, positive=True)
    if np.any(c != np.round(c)):
        raise ValueError("counts must be integers >= 1")
    return c.astype(np.int64)


def _lr(lr: Any) -> float:
    lr = check.scalar("lr", lr, low=0.0, strict=True)
    if lr > 1.0:
        raise ValueError(f"lr must be in (0, 1] (larger steps overshoot the target), got {lr}")
    return lr


@dataclass(frozen=True)
class StepSchedule:
    """SGD step sizes η_k = lr · k^(−lr_power) at a type's k-th update, checked once.

    One object for the theory, the transient and the simulation, so all three use the same
    steps. ``lr`` in (0, 1] (larger steps overshoot the target), ``lr_power`` >= 0.
    """

    lr: float
    lr_power: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", _lr(self.lr))
        object.__setattr__(self, "lr_power", check.scalar("lr_power", self.lr_power, low=0.0))

    def steps(self, n_max: int) -> np.ndarray:
        """η_k for k = 1..n_max."""
        return self.lr * np.arange(1, n_max + 1, dtype=np.float64) ** -self.lr_power

    def recursion(self, n_max: int) -> tuple[np.ndarray, np.ndarray]:
        """a_n² and v_n for n = 1..n_max (see :func:`sgd_dispersion_theory`)."""
        eta = self.steps(n_max)
        a2 = np.cumprod((1.0 - eta) ** 2)
        v = np.empty_like(eta)
        acc = 0.0
        for k, e in enumerate(eta):
            acc = (1.0 - e) ** 2 * acc + e**2
            v[k] = acc
        return a2, v


def sgd_dispersion_theory(
    counts: Any, schedule: StepSchedule, *, noise: float = 1.0, init_var: Any = 1.0
) -> np.ndarray:
    """Exact expected squared error per coordinate of SGD after n updates (quadratic toy).

    Update on each occurrence y = μ + σε of the type: e ← e − η_k (e − y), i.e. SGD on
    ½‖e − y‖². With a_n = Π_{k≤n}(1 − η_k) and v_n = Σ_j η_j² Π_{j<k≤n}(1 − η_k)²
    (recursion v_k = (1 − η_k)² v_{k−1} + η_k²):

        E[(e_n − μ)²] = a_n² · init_var + σ² · v_n,

    with η_k from ``schedule`` and ``init_var`` = E[(e_0 − μ)²] per coordinate (scalar or one
    value per type). Constant η (lr_power 0) gives exponential forgetting down to a floor
    σ²η/(2 − η): no power law. For 0 < p < 1 the tail is ≈ σ²η_n/2 ∝ n^(−p); lr = 1, p = 1 is
    the running mean, σ²/n.
    """
    n = _counts(counts)
    sigma = check.scalar("noise", noise, low=0.0)
    init_var = np.asarray(init_var, dtype=np.float64)
    if not np.all(np.isfinite(init_var)) or np.any(init_var < 0):
        raise ValueError("init_var must be finite and >= 0")
    if init_var.ndim > 1 or (init_var.ndim == 1 and init_var.shape != n.shape):
        raise ValueError(f"init_var must be a scalar or one value per count, got {init_var.shape}")
    a2, v = schedule.recursion(int(n.max()))
    return a2[n - 1] * init_var + sigma**2 * v[n - 1]


def sgd_floor(lr: float, noise: float = 1.0) -> float:
    """The constant-step floor σ²η/(2 − η): the limit of the dispersion as n → ∞ (any start)."""
    lr, sigma = _lr(lr), check.scalar("noise", noise, low=0.0)
    return sigma**2 * lr / (2.0 - lr)


def transient_end(
    n_max: int,
    schedule: StepSchedule,
    *,
    noise: float = 1.0,
    init_var: float = 1.0,
    tol: float = 0.01,
) -> int | None:
    """First count beyond the transient: the smallest n <= ``n_max`` with a_n² · init_var <=
    tol · σ² v_n, i.e. the initial-condition term of :func:`sgd_dispersion_theory` at most
    ``tol`` of the noise term (for a constant step σ² v_n ≈ the floor σ²η/(2 − η)).

    The ratio a_n²/v_n never increases with n, so every larger count is beyond the transient
    too. ``None`` when no n <= ``n_max`` qualifies. Pass the largest initial distance of the
    types (not the mean) to make the cut hold for every type.
    """
    n_max = check.integer("n_max", n_max)
    sigma = check.scalar("noise", noise, low=0.0, strict=True)
    init_var = check.scalar("init_var", init_var, low=0.0)
    tol = check.scalar("tol", tol, low=0.0, strict=True)
    a2, v = schedule.recursion(n_max)
    ok = a2 * init_var <= tol * sigma**2 * v
    return int(np.argmax(ok)) + 1 if ok.any() else None


def sample_mean_dispersion(
    counts: Any, *, dim: int = 4, noise: float = 1.0, n_replicates: int = 64, seed: Seed = 0
) -> np.ndarray:
    """Per-type dispersion of the sample-mean estimate around the ideal centroid (simulated).

    Type i's ``counts[i]`` occurrences are y = μ_i + noise·ε (ε ~ N(0, I_dim)) in each of
    ``n_replicates`` independent replicate corpora; the estimate is their mean. Returns, per
    type, the mean over replicates and coordinates of (ê − μ)², whose expectation is noise²/n
    (A1's law). The error ê − μ does not depend on μ, so the centroids are not drawn.
    """
    n = _counts(counts)
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
    """Per-type dispersion around the ideal centroid against the type's count, two estimators.

    Dispersion = mean over replicates and coordinates of (estimate − μ)²; for the unbiased
    sample mean it is the sampling variance, for SGD it also contains the remaining bias from
    the initialisation. ``*_theory`` are the exact expectations (σ²/n and
    :func:`sgd_dispersion_theory` with each type's own initial distance).

    * ``fit_sample_mean``: log–log slope of the sample mean's dispersion against the count over
      all types (theory −1): A1's quantity.
    * SGD, beyond the transient only (``tail``: the types with count >= ``n_min``, from
      :func:`transient_end` with ``transient_tol`` and the largest initial distance of any
      type; ``n_min`` is None when no count gets there). ``plateau``: for a constant step
      (``lr_power`` 0), the mean dispersion of the tail types with its interval, to compare with
      ``floor`` = σ²η/(2 − η) (None for a decaying step, which has no floor). ``fit_tail``: the
      log–log slope over the tail types, whose n → ∞ limit is −``lr_power``;
      ``fit_tail_theory`` fits the exact expectation over the same counts (the finite-n value
      the simulation should match). None when the tail has fewer than 2 types (plateau) or
      fewer than 3 types or 2 distinct counts (fits).
    """

    counts: np.ndarray
    sample_mean: np.ndarray
    sgd: np.ndarray
    sample_mean_theory: np.ndarray
    sgd_theory: np.ndarray
    fit_sample_mean: SlopeFit
    lr: float
    lr_power: float
    transient_tol: float
    n_min: int | None
    tail: np.ndarray
    floor: float | None
    plateau: Interval | None
    fit_tail: SlopeFit | None
    fit_tail_theory: SlopeFit | None


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
    transient_tol: float = 0.01,
    level: float = 0.95,
    seed: Seed = 0,
) -> VarianceCollapse:
    """Simulate A1: estimate each type's representation from its ``counts[i]`` occurrences.

    Each type i has an ideal centroid μ_i ~ N(0, centroid_scale² I_dim) (fixed). In each of
    ``n_replicates`` independent replicate corpora, its n_i occurrences are y = μ_i + noise·ε.
    Two estimators see the same occurrences: (1) the sample mean; (2) SGD on ½‖e − y‖², one step
    per occurrence with step η_k = lr·k^(−lr_power) at the type's k-th update, from
    e_0 ~ N(0, init_scale² I) drawn per replicate. Types are independent (separate parameters),
    so the interleaving of types in the corpus does not change either estimator. The same seed
    gives the same sample-mean estimates whatever ``lr`` and ``lr_power``.
    """
    n = _counts(counts)
    dim, reps = check.integer("dim", dim), check.integer("n_replicates", n_replicates, low=2)
    sigma = check.scalar("noise", noise, low=0.0, strict=True)
    init_scale = check.scalar("init_scale", init_scale, low=0.0)
    centroid_scale = check.scalar("centroid_scale", centroid_scale, low=0.0)
    schedule = StepSchedule(lr, lr_power)
    tol = check.scalar("transient_tol", transient_tol, low=0.0, strict=True)
    if n.size < 3 or np.unique(n).size < 2:
        raise ValueError("counts needs at least 3 types with 2 distinct counts for a slope")
    rng = check.rng(seed)

    order = np.argsort(-n, kind="stable")  # types by decreasing count: updates act on a prefix
    ns = n[order]
    n_types, total = ns.size, int(ns.sum())
    starts = np.concatenate([[0], np.cumsum(ns)[:-1]])
    owner = np.repeat(np.arange(n_types), ns)
    mu = rng.normal(0.0, centroid_scale, size=(n_types, dim))
    eta = schedule.steps(int(ns[0]))
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
    init_var = init_scale**2 + (mu**2).mean(axis=1)[inv]
    sgd_theory = sgd_dispersion_theory(n, schedule, noise=sigma, init_var=init_var)

    n_min = transient_end(
        int(n.max()), schedule, noise=sigma, init_var=float(init_var.max()), tol=tol
    )
    tail = n >= n_min if n_min is not None else np.zeros(n.size, dtype=bool)
    fittable = tail.sum() >= 3 and np.unique(n[tail]).size >= 2
    fit_tail = fit_loglog(n[tail], disp_sgd[tail], level) if fittable else None
    fit_tail_theory = fit_loglog(n[tail], sgd_theory[tail], level) if fittable else None
    floor = sgd_floor(schedule.lr, sigma) if schedule.lr_power == 0.0 else None
    plateau = mean_ci(disp_sgd[tail], level) if floor is not None and tail.sum() >= 2 else None
    return VarianceCollapse(
        counts=n,
        sample_mean=disp_mean,
        sgd=disp_sgd,
        sample_mean_theory=sigma**2 / n,
        sgd_theory=sgd_theory,
        fit_sample_mean=fit_loglog(n, disp_mean, level),
        lr=schedule.lr,
        lr_power=schedule.lr_power,
        transient_tol=tol,
        n_min=n_min,
        tail=tail,
        floor=floor,
        plateau=plateau,
        fit_tail=fit_tail,
        fit_tail_theory=fit_tail_theory,
    )


# ---------------------------------------------------------------------------------------------
# Coverage of the sample-mean slope interval
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlopeCoverage:
    """How often the sample-mean slope interval covers ``target`` on independent corpora.

    Per corpus (``n`` of them): ``slopes``, ``stderrs`` and ``covered``. ``coverage`` is the
    number covered with its Clopper–Pearson interval (nominal: ``level``). The diagnostics,
    each a mean over corpora with its interval, name the usual causes of a miss:

    * ``bias``: slope − target (0 if the slope estimator is unbiased);
    * ``z2``: ((slope − target)/stderr)², ≈ 1 (exactly ν/(ν − 2) for ν = types − 2) when the
      OLS standard error has the right scale and degrees of freedom;
    * ``lag1``: lag-1 autocorrelation of the log residuals with types ordered by count (serial
      correlation; for independent errors ≈ −tr(HA)/(types − 2) ≈ −2/types, H the hat matrix and
      A the lag-1 shift, as the regressor is sorted — a correlation ρ between neighbours in
      count would scale the slope's variance by about 1 + 2ρ);
    * ``het``: correlation of the squared log residuals with log count (0 when the scatter is
      the same at every count).
    """

    target: float
    level: float
    counts_redrawn: bool
    n_types: np.ndarray
    slopes: np.ndarray
    stderrs: np.ndarray
    covered: np.ndarray
    coverage: Proportion
    bias: Interval
    z2: Interval
    lag1: Interval
    het: Interval


def _lag1(r: np.ndarray) -> float:
    r = r - r.mean()
    return float(r[:-1] @ r[1:] / (r @ r))


def slope_coverage(
    counts: Any = None,
    *,
    zipf: tuple[int, int, float] | None = None,
    n_seeds: int,
    dim: int = 4,
    noise: float = 1.0,
    n_replicates: int = 64,
    target: float = -1.0,
    level: float = 0.95,
    seed: Seed = 0,
) -> SlopeCoverage:
    """Coverage of the sample-mean slope interval (:func:`fit_loglog` of
    :func:`sample_mean_dispersion` against the counts) on ``n_seeds`` independent corpora.

    Give exactly one of ``counts`` — a fixed design: the same counts, fresh noise per corpus,
    which checks the interval conditional on these counts, as it is reported — or
    ``zipf=(n_types, n_tokens, exponent)``: counts redrawn per corpus by :func:`zipf_counts`
    (the procedure over corpora). The OLS interval is exact given the counts when the log
    residuals are iid Gaussian, so both should reach ``level``.
    """
    if (counts is None) == (zipf is None):
        raise ValueError("give exactly one of counts (fixed) or zipf=(n_types, n_tokens, exponent)")
    if zipf is not None:
        if not isinstance(zipf, tuple | list) or len(zipf) != 3:
            raise ValueError(f"zipf must be (n_types, n_tokens, exponent), got {zipf!r}")
        n_types = check.integer("zipf n_types", zipf[0], low=3)
        n_tokens = check.integer("zipf n_tokens", zipf[1], low=3)
        exponent = check.scalar("zipf exponent", zipf[2], low=0.0)
    else:
        fixed = _counts(counts)
        if fixed.size < 3 or np.unique(fixed).size < 2:
            raise ValueError("counts needs at least 3 types with 2 distinct counts for a slope")
    n_seeds = check.integer("n_seeds", n_seeds, low=2)
    target = check.scalar("target", target)
    seeds = check.child_seeds(seed, n_seeds)
    rows = []
    for s in seeds:
        rng = np.random.default_rng(s)
        c = fixed if zipf is None else zipf_counts(n_types, n_tokens, exponent, seed=rng)
        d = sample_mean_dispersion(c, dim=dim, noise=noise, n_replicates=n_replicates, seed=rng)
        fit = fit_loglog(c, d, level)
        x = np.log(c)
        r = np.log(d) - (fit.intercept + fit.slope * x)
        order = np.argsort(-c, kind="stable")
        het = float(np.corrcoef(r**2, x)[0, 1]) if np.ptp(r**2) > 0 else 0.0
        rows.append((c.size, fit.slope, fit.stderr, fit.contains(target), _lag1(r[order]), het))
    sizes, slopes, stderrs, covered, lag1, het = (np.array(col) for col in zip(*rows, strict=True))
    return SlopeCoverage(
        target=target,
        level=level,
        counts_redrawn=zipf is not None,
        n_types=sizes.astype(np.int64),
        slopes=slopes,
        stderrs=stderrs,
        covered=covered.astype(bool),
        coverage=proportion_ci(int(covered.sum()), n_seeds, level),
        bias=mean_ci(slopes - target, level),
        z2=mean_ci(((slopes - target) / stderrs) ** 2, level),
        lag1=mean_ci(lag1, level),
        het=mean_ci(het, level),
    )
