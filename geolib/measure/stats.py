"""Statistics shared by the chapters: every reported number carries its uncertainty.

Each statistic lives here once. Intervals: one type, :class:`Interval`, and one function,
:func:`interval` (Student-t on a mean of few units, BCa bootstrap otherwise; it may exclude
its estimate), with :func:`mean_ci` (the t interval) and :func:`percentile_interval` (for joint
resampling schemes built from :func:`bootstrap_weights`) beneath it. A bootstrap interval may
exclude its estimate (a biased statistic): it is kept as drawn, never widened, and
:func:`count_excluding` counts such rows so that each chapter reports them. Shares get bounded
intervals: :func:`proportion_ci` (Clopper–Pearson) for a count, :func:`share_over_models`
(logit scale, Student-t over models) for a share measured on each of a few models. Also the
Student-t quantile (:func:`t_quantile`), the log–log slope with its interval
(:func:`fit_loglog`), the interval of a proportion (:func:`proportion_ci`, for coverage
checks), Zipf's slope of a corpus with its document bootstrap (:func:`zipf_fit`,
:func:`zipf_bootstrap`), and associations over models
(:func:`spearman`, :func:`r_squared`, :func:`partial_spearman`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from geolib.measure.validate import array


def _level(level: float) -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return level


def t_quantile(level: float, dof: int) -> float:
    """Half-width multiplier q of a two-sided ``level`` interval: P(|T_dof| <= q) = level."""
    level = _level(level)
    if isinstance(dof, bool) or int(dof) != dof or dof < 1:
        raise ValueError(f"dof must be an integer >= 1, got {dof!r}")
    return float(stats.t.ppf(0.5 + level / 2.0, int(dof)))


#: Below this many units an interval of a mean is Student-t's, not a bootstrap's: a bootstrap of
#: a handful of seeds understates the spread (it never sees a value outside the sample).
SMALL_N = 20


@dataclass(frozen=True)
class Interval:
    """A number with its two-sided interval at ``level``: the one interval type of the book.

    ``n`` units (seeds, models, windows: ``unit``) were resampled or averaged; ``method`` says
    how: ``"t"`` (Student-t on a mean), ``"bca"`` (bias-corrected and accelerated bootstrap,
    ``scipy.stats.bootstrap``), ``"percentile"`` (bootstrap where BCa is undefined),
    ``"logit-t"``/``"logit-z"`` (a share over models, :func:`share_over_models`). A bootstrap
    interval may exclude its estimate (a biased or skewed statistic, such as R² near 0): it is
    kept as drawn, never stretched to the estimate; :attr:`excludes_estimate` says so and the
    chapters count such rows (:func:`count_excluding`). Bounds must be ordered.
    """

    value: float
    low: float
    high: float
    level: float
    n: int
    method: str = "t"
    unit: str = "unit"
    n_boot: int = 0

    def __post_init__(self) -> None:
        if math.isfinite(self.low) and math.isfinite(self.high) and self.low > self.high:
            raise ValueError(f"an interval's bounds must be ordered, got [{self.low}, {self.high}]")

    @property
    def excludes_estimate(self) -> bool:
        """The estimate lies outside its (finite) interval: a biased bootstrap, reported."""
        finite = all(math.isfinite(v) for v in (self.value, self.low, self.high))
        return finite and not self.low <= self.value <= self.high

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def label(self, digits: int = 3) -> str:
        """E.g. ``"0.61 [0.38, 0.76] (95%, bca over 32 models)"``."""
        f = f"{{:.{digits}g}}"
        return (
            f"{f.format(self.value)} [{f.format(self.low)}, {f.format(self.high)}] "
            f"({100 * self.level:g}%, {self.method} over {self.n} {self.unit}s)"
        )


def mean_ci(values: np.ndarray | list[float], level: float = 0.95, unit: str = "unit") -> Interval:
    """Mean of independent repeats with a Student-t confidence interval.

    Needs at least two finite values: one repeat has no spread to estimate.
    """
    v = array("values (one per repeat)", values, min_size=2)
    level = _level(level)
    m = float(v.mean())
    h = t_quantile(level, v.size - 1) * float(v.std(ddof=1)) / math.sqrt(v.size)
    return Interval(m, m - h, m + h, level, int(v.size), "t", unit)


@dataclass(frozen=True)
class SlopeFit:
    """OLS fit ``log y = intercept + slope · log x`` with a two-sided Student-t CI on the slope.

    ``stderr`` is the classical OLS standard error (residual variance / Σ(log x − mean)², ν = n − 2
    degrees of freedom); ``ci_low, ci_high = slope ∓ t_{ν}(level) · stderr``. The interval is the
    OLS one, not a bootstrap: it assumes independent, homoscedastic scatter in log y.
    ``intercept`` is in natural log.
    """

    slope: float
    intercept: float
    stderr: float
    ci_low: float
    ci_high: float
    level: float
    n_points: int
    r_squared: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies inside the confidence interval."""
        return self.ci_low <= value <= self.ci_high

    def predict(self, x: Any) -> np.ndarray:
        """The fitted power law ``exp(intercept) · x**slope``."""
        return np.exp(self.intercept) * np.asarray(x, dtype=np.float64) ** self.slope

    def label(self, digits: int = 2) -> str:
        """E.g. ``"slope 2.01 [1.97, 2.05] (95% CI)"``."""
        f = f"{{:.{digits}f}}"
        pct = f"{100 * self.level:g}"
        return (
            f"slope {f.format(self.slope)} [{f.format(self.ci_low)}, {f.format(self.ci_high)}]"
            f" ({pct}% CI)"
        )


def fit_loglog(x: Any, y: Any, level: float = 0.95) -> SlopeFit:
    """Fit the log–log slope of ``y`` against ``x`` (both strictly positive, at least 3 points).

    The one log–log fit of the project (theory chapters, Zipf's law of the corpus).
    """
    x, y = (array(n, v, positive=True, min_size=3) for n, v in (("x", x), ("y", y)))
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length, got {x.size} and {y.size}")
    level = _level(level)
    lx, ly = np.log(x), np.log(y)
    mx, my = lx.mean(), ly.mean()
    sxx = float(np.sum((lx - mx) ** 2))
    if sxx <= 0.0:
        raise ValueError("x must take at least two distinct values")
    slope = float(np.sum((lx - mx) * (ly - my)) / sxx)
    intercept = float(my - slope * mx)
    resid = ly - (intercept + slope * lx)
    ssr, sst = float(resid @ resid), float(np.sum((ly - my) ** 2))
    dof = x.size - 2
    stderr = math.sqrt(ssr / dof / sxx)
    q = t_quantile(level, dof)
    r2 = 1.0 if sst == 0.0 else 1.0 - ssr / sst
    return SlopeFit(
        slope, intercept, stderr, slope - q * stderr, slope + q * stderr, level, int(x.size), r2
    )


@dataclass(frozen=True)
class Proportion:
    """``successes`` out of ``n`` with an exact (Clopper–Pearson) interval ``[low, high]``."""

    successes: int
    n: int
    low: float
    high: float
    level: float

    @property
    def fraction(self) -> float:
        return self.successes / self.n


def proportion_ci(successes: int, n: int, level: float = 0.95) -> Proportion:
    """Clopper–Pearson interval of a binomial proportion (e.g. the coverage of an interval)."""
    level = _level(level)
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if isinstance(successes, bool) or int(successes) != successes or not 0 <= successes <= n:
        raise ValueError(f"successes must be an integer in [0, n={n}], got {successes!r}")
    k, n = int(successes), int(n)
    alpha = 1.0 - level
    low = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return Proportion(k, n, low, high, level)


def share_over_models(successes: Any, n: Any, level: float = 0.95, unit: str = "model") -> Interval:
    """A share measured on each of a few models (``successes[i]`` of ``n[i]`` units of model i),
    with its interval over models, bounded in (0, 1): the trained model is the unit.

    Each model's empirical logit ``log((k + ½) / (n − k + ½))`` (finite at 0 and n); the estimate
    is the back-transformed mean logit (the models' typical share), the interval the mean logit ±
    the larger of Student-t over models (``t_{m−1} · s / √m``) and the counts' own sampling error
    (``z · √(mean_i v_i / m)``, ``v_i = 1/(k+½) + 1/(n−k+½)``): models that agree more closely
    than their counts can tell (e.g. every one at 24 of 24) do not give a zero-width interval.
    One model: its sampling error only. Models with no units (``n = 0``) are an error.
    """
    level = _level(level)
    k = np.asarray(successes, dtype=np.float64).ravel()
    m = np.asarray(n, dtype=np.float64).ravel()
    if k.size == 0 or k.shape != m.shape:
        raise ValueError(f"one count and one total per model, got {k.shape} and {m.shape}")
    bad = ~np.isfinite(k) | ~np.isfinite(m) | (k != np.round(k)) | (m != np.round(m))
    if bad.any() or np.any(m < 1) or np.any(k < 0) or np.any(k > m):
        raise ValueError(f"need integer counts 0 <= successes <= n with n >= 1, got {k}, {m}")
    logit = np.log((k + 0.5) / (m - k + 0.5))
    var = 1.0 / (k + 0.5) + 1.0 / (m - k + 0.5)
    centre = float(logit.mean())
    z = float(stats.norm.ppf(0.5 + level / 2.0))
    half = z * math.sqrt(float(var.mean()) / k.size)
    method = "logit-z"
    if k.size > 1:
        spread = t_quantile(level, k.size - 1) * float(logit.std(ddof=1)) / math.sqrt(k.size)
        if spread >= half:
            half, method = spread, "logit-t"

    def expit(x: float) -> float:
        return float(1.0 / (1.0 + math.exp(-x)))

    return Interval(
        expit(centre), expit(centre - half), expit(centre + half), level, int(k.size), method, unit
    )


def count_excluding(estimate: Any, low: Any, high: Any) -> tuple[int, int]:
    """``(excluding, n)``: how many of ``n`` rows with a finite interval have their estimate
    outside it (a biased bootstrap, reported in each chapter, never widened)."""
    e, lo, hi = (np.asarray(v, dtype=np.float64).ravel() for v in (estimate, low, high))
    if not e.shape == lo.shape == hi.shape:
        raise ValueError(f"estimate, low and high must have one length: {e.shape}, {lo.shape}")
    finite = np.isfinite(e) & np.isfinite(lo) & np.isfinite(hi)
    outside = finite & ((e < lo) | (e > hi))
    return int(outside.sum()), int(finite.sum())


def entropy_of_counts(counts: Any) -> float:
    """Shannon entropy (nats) of the distribution that non-negative ``counts`` define (0 log 0 =
    0): for token counts, the loss of the best predictor that ignores context."""
    c = np.asarray(counts, dtype=np.float64).ravel()
    if c.size == 0 or not np.all(np.isfinite(c)) or np.any(c < 0) or c.sum() <= 0:
        raise ValueError("counts must be finite, >= 0 and not all zero")
    p = c[c > 0] / c.sum()
    return float(-(p * np.log(p)).sum())


def zipf_fit(
    counts: np.ndarray, rank_min: int = 1, rank_max: int | None = None
) -> dict[str, float]:
    """Least-squares slope of log10 count against log10 rank over ranks ``[rank_min, rank_max]``.

    Zero counts are dropped first. Returns ``slope``, ``intercept``, ``r2`` and the rank range.
    """
    freq = np.sort(np.asarray(counts, dtype=np.float64))[::-1]
    freq = freq[freq > 0]
    rank_max = freq.size if rank_max is None else min(rank_max, freq.size)
    if rank_min < 1 or rank_max - rank_min < 2:
        raise ValueError(f"need at least 3 ranks with non-zero counts in [{rank_min}, {rank_max}]")
    ranks = np.arange(rank_min, rank_max + 1, dtype=np.float64)
    fit = fit_loglog(ranks, freq[rank_min - 1 : rank_max])
    slope, intercept, r2 = fit.slope, fit.intercept / math.log(10.0), fit.r_squared
    return {
        "slope": float(slope),
        "intercept": float(intercept),
        "r2": r2,
        "rank_min": rank_min,
        "rank_max": int(rank_max),
    }


def zipf_bootstrap(
    doc_counts: np.ndarray,
    *,
    n_boot: int = 200,
    seed: int = 0,
    rank_min: int = 1,
    rank_max: int | None = None,
    level: float = 0.95,
    method: str = "basic",
) -> dict[str, float]:
    """Zipf slope with a confidence interval from resampling documents with replacement.

    ``method="basic"`` (default) gives the reverse-percentile interval
    ``[2s - q_hi, 2s - q_lo]``, which corrects the bias of the resampled slopes (duplicated
    documents concentrate their rare tokens); ``"percentile"`` gives ``[q_lo, q_hi]``. The
    interval covers sampling of documents only, not the choice of the fitted rank range.
    """
    doc_counts = np.asarray(doc_counts)
    if doc_counts.ndim != 2 or doc_counts.shape[0] < 2:
        raise ValueError("doc_counts must be [documents >= 2, vocab]")
    if method not in ("basic", "percentile"):
        raise ValueError(f"method must be 'basic' or 'percentile', got {method!r}")
    if not 0 < level < 1 or n_boot < 2:
        raise ValueError(f"need 0 < level < 1 and n_boot >= 2, got {level=}, {n_boot=}")
    weights = bootstrap_weights(doc_counts.shape[0], n_boot, seed).astype(np.int64)
    slopes = np.array([zipf_fit(w @ doc_counts, rank_min, rank_max)["slope"] for w in weights])
    point = zipf_fit(doc_counts.sum(axis=0), rank_min, rank_max)
    q_lo, q_hi = np.quantile(slopes, [(1 - level) / 2, (1 + level) / 2])
    s = point["slope"]
    lo, hi = (2 * s - q_hi, 2 * s - q_lo) if method == "basic" else (q_lo, q_hi)
    return {
        **point,
        "ci_low": float(lo),
        "ci_high": float(hi),
        "level": level,
        "method": method,
        "n_boot": n_boot,
        "boot_mean": float(slopes.mean()),
        "boot_sd": float(slopes.std(ddof=1)),
    }


# ---------------------------------------------------------------------------------------------
# Association over models (Paper B's predictive comparison: B1, B2, B7, B8)
# ---------------------------------------------------------------------------------------------


def _paired(*arrays: Any, min_n: int = 4) -> list[np.ndarray]:
    out = [np.asarray(a, dtype=np.float64).ravel() for a in arrays]
    n = out[0].size
    if any(a.size != n for a in out):
        raise ValueError(f"arrays differ in length: {[a.size for a in out]}")
    if n < min_n:
        raise ValueError(f"need at least {min_n} paired values, got {n}")
    if not all(np.all(np.isfinite(a)) for a in out):
        raise ValueError("values contain NaN or inf")
    return out


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denom = math.sqrt(float(x @ x) * float(y @ y))
    return float(x @ y) / denom if denom > 0 else float("nan")


def spearman(x: Any, y: Any) -> float:
    """Spearman's rank correlation (Pearson's of average ranks; ties share their mean rank)."""
    x, y = _paired(x, y, min_n=3)
    return _pearson(stats.rankdata(x), stats.rankdata(y))


def pearson_along(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Pearson's correlation of each pair of rows of ``x`` and ``y`` along ``axis`` (stacks of
    resamples, for :func:`interval`'s ``vectorized``); NaN where a row is constant."""
    x = x - x.mean(axis=axis, keepdims=True)
    y = y - y.mean(axis=axis, keepdims=True)
    denom = np.sqrt((x * x).sum(axis=axis) * (y * y).sum(axis=axis))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (x * y).sum(axis=axis) / denom, np.nan)


def spearman_along(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`spearman` of each pair of rows along ``axis`` (average ranks per row)."""
    return pearson_along(stats.rankdata(x, axis=axis), stats.rankdata(y, axis=axis), axis)


def loglog_slope_along(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """The slope of :func:`fit_loglog` of each pair of rows along ``axis`` (positive values);
    NaN where a row of ``x`` takes one value."""
    lx, ly = np.log(x), np.log(y)
    lx = lx - lx.mean(axis=axis, keepdims=True)
    ly = ly - ly.mean(axis=axis, keepdims=True)
    sxx = (lx * lx).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sxx > 0, (lx * ly).sum(axis=axis) / sxx, np.nan)


def _group_dummies(groups: np.ndarray) -> np.ndarray:
    """``(n, g - 1)`` indicator columns of all groups but the first (beside an intercept)."""
    levels = np.unique(groups)
    if levels.size < 2:
        raise ValueError("groups must hold at least two groups")
    return np.column_stack([(groups == u).astype(np.float64) for u in levels[1:]])


def within_groups(values: Any, groups: Any) -> np.ndarray:
    """``values`` minus the mean of their group (what is left once the groups' levels are
    removed: e.g. effective rank within one model size)."""
    v, g = _paired(values, groups, min_n=2)
    out = v.copy()
    for u in np.unique(g):
        out[g == u] -= v[g == u].mean()
    return out


def r_squared(x: Any, y: Any, groups: Any = None) -> float:
    """R² of the least-squares line ``y ≈ a + b·x`` (= Pearson's r², the share of the variance of
    ``y`` a linear function of ``x`` explains, in sample).

    With ``groups`` (one label per unit, e.g. model size as a number): the pooled within-group
    R², both ``x`` and ``y`` centred on their group means first; an association that only runs
    between groups (Simpson's paradox) does not count.
    """
    if groups is not None:
        x, y = within_groups(x, groups), within_groups(y, groups)
    x, y = _paired(x, y, min_n=3)
    return _pearson(x, y) ** 2


def partial_spearman(x: Any, y: Any, control: Any) -> float:
    """Rank correlation of ``x`` and ``y`` with ``control`` held fixed: Pearson's correlation of
    the residuals of rank(x) and rank(y) after a least-squares line on rank(control).

    Paper B's question "does geometry (x) tell us about an outcome (y) beyond loss (control)?":
    ≈ 0 when x relates to y only through the control.
    """
    x, y, z = (stats.rankdata(a) for a in _paired(x, y, control))
    z = z - z.mean()

    def residual(v: np.ndarray) -> np.ndarray:
        v = v - v.mean()
        return v - z * (float(z @ v) / float(z @ z)) if z @ z > 0 else v

    return _pearson(residual(x), residual(y))


def partial_spearman_within(x: Any, y: Any, control: Any, groups: Any) -> float:
    """:func:`partial_spearman` with the groups held fixed too: the residuals of rank(x) and
    rank(y) after least squares on rank(control) and one indicator per group (e.g. model size
    as a covariate)."""
    x, y, z, g = _paired(x, y, control, groups)
    design = np.column_stack([np.ones(x.size), stats.rankdata(z), _group_dummies(g)])

    def residual(v: np.ndarray) -> np.ndarray:
        beta, *_ = np.linalg.lstsq(design, v, rcond=None)
        return v - design @ beta

    return _pearson(residual(stats.rankdata(x)), residual(stats.rankdata(y)))


def interval(
    statistic: Any,
    *arrays: Any,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    unit: str = "unit",
    undefined: str = "raise",
    vectorized: bool = False,
) -> Interval:
    """``statistic(*arrays)`` with its interval over the units (one value per unit in each array).

    The one interval function of the book. ``statistic=None`` means the mean of one array: with
    fewer than :data:`SMALL_N` units that is Student-t's interval (:func:`mean_ci`). Otherwise a
    BCa bootstrap resampling units with replacement (``scipy.stats.bootstrap``, paired
    arrays); where BCa is undefined (its jackknife or bias term is not finite), the percentile
    interval of the same draws. Resamples whose statistic is undefined (NaN: e.g. all resampled
    units tied) are dropped; if more than 5% are, the interval would describe a selected
    subset: an error, or with ``undefined="nan"`` an interval with NaN bounds whose ``method``
    says how many were undefined (for a table row among many). The interval always contains the
    estimate (see :class:`Interval`).

    ``vectorized``: ``statistic(*arrays, axis=-1)`` takes stacks ``(..., n)`` of resamples and
    returns one value per resample (NaN where undefined), SciPy's convention; the draws are the
    same as without it, and a statistic over thousands of units then takes no Python loop over
    the BCa jackknife's n resamples.
    """
    if undefined not in ("raise", "nan"):
        raise ValueError(f"undefined must be 'raise' or 'nan', got {undefined!r}")
    level = _level(level)
    if n_boot < 100:
        raise ValueError(f"n_boot must be >= 100 for a {level:.0%} interval, got {n_boot}")
    if statistic is None:
        if len(arrays) != 1:
            raise ValueError("statistic=None (the mean) takes exactly one array")
        data = _paired(arrays[0], min_n=2)
        if data[0].size < SMALL_N:
            return mean_ci(data[0], level, unit)
        statistic = _mean
    else:
        data = _paired(*arrays)
    value = float(statistic(*data, axis=-1) if vectorized else statistic(*data))

    def stat(*a: np.ndarray, axis: int = -1) -> float | np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            if vectorized:
                return np.asarray(statistic(*a, axis=axis), dtype=np.float64)
            return float(statistic(*a))

    with warnings.catch_warnings():  # degenerate draws: BCa undefined, handled below
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap(
            data,
            stat,
            n_resamples=n_boot,
            paired=True,
            vectorized=vectorized,
            confidence_level=level,
            method="BCa",
            rng=np.random.default_rng(seed),
        )
    draws = np.asarray(res.bootstrap_distribution, dtype=np.float64)
    ok = draws[np.isfinite(draws)]
    if ok.size < 0.95 * n_boot:
        why = f"statistic undefined in {n_boot - ok.size} of {n_boot} resamples"
        if undefined == "raise":
            raise ValueError(why)
        n = int(data[0].size)
        return Interval(value, math.nan, math.nan, level, n, why, unit, int(ok.size))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    n = int(data[0].size)
    if not (math.isfinite(lo) and math.isfinite(hi)) or ok.size < n_boot:
        return percentile_interval(ok, value, level, n, unit)
    return Interval(value, lo, hi, level, n, "bca", unit, int(ok.size))


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x))


def percentile_interval(
    draws: Any, value: float, level: float, n: int, unit: str = "unit", method: str = "percentile"
) -> Interval:
    """The percentile interval of bootstrap ``draws`` of a statistic whose estimate is ``value``
    (non-finite draws dropped), as drawn: it may exclude ``value`` (reported, not widened).

    For resampling schemes :func:`interval` does not cover (e.g. sequences resampled jointly
    across units by shared weights, :func:`bootstrap_weights`). No finite draw: NaN bounds.
    """
    level = _level(level)
    d = np.asarray(draws, dtype=np.float64).ravel()
    d = d[np.isfinite(d)]
    if d.size == 0:
        return Interval(float(value), math.nan, math.nan, level, int(n), method, unit, 0)
    lo, hi = (float(q) for q in np.quantile(d, [(1 - level) / 2, (1 + level) / 2]))
    return Interval(float(value), lo, hi, level, int(n), method, unit, int(d.size))


def bootstrap_weights(n_sequences: int, n_boot: int, seed: int) -> np.ndarray:
    """``(n_boot, n_sequences)`` multiplicities of a sequence bootstrap, shared by every unit.

    One draw of all ``n_boot × n_sequences`` indices (the same stream as ``n_boot`` draws of
    ``n_sequences``, tested) counted in one ``bincount``: a loop of small draws cost ~10 ms."""
    if int(n_sequences) != n_sequences or n_sequences < 1 or int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"need n_sequences >= 1 and n_boot >= 1, got {n_sequences}, {n_boot}")
    n, b = int(n_sequences), int(n_boot)
    idx = np.random.default_rng(seed).integers(0, n, (b, n))
    flat = (idx + n * np.arange(b)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)


def paired_change(
    before: np.ndarray, after: np.ndarray, *, n_boot: int, level: float, seed: int
) -> Interval:
    """Mean of ``after − before`` over windows, with its bootstrap interval over the windows (the
    same windows before and after: the pairing removes window difficulty)."""
    return interval(
        lambda b, a: float(np.mean(a - b)),
        before,
        after,
        n_boot=n_boot,
        level=level,
        seed=seed,
        unit="window",
    )
