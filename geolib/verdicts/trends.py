"""A claim's key number against model size (the ladder): the trend rule and its table rows.

:func:`trend_with_size` fits each trained model's key number on log10 of its non-embedding
parameters and says which way it goes (:data:`GROWS`, :data:`SHRINKS`, :data:`NO_TREND`);
:class:`TrendRow` is one claim's cell of the claims table, written and read by
:func:`write_trends` and :func:`read_trends`. What a trend says at the papers' scale is an
extrapolation, never a verdict.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from geolib.files import write_text_atomic
from geolib.measure import validate as check
from geolib.measure.stats import t_quantile
from geolib.verdicts.markup import checked_name
from geolib.verdicts.rules import CLAIMS

#: the words of :func:`trend_with_size`
GROWS, SHRINKS, NO_TREND = "grows with size", "shrinks with size", "no trend resolvable"
#: the slope tests of :func:`trend_with_size`, and how its reason names each
OLS, THEIL_SEN = "ols", "theil_sen"
TESTS = {OLS: "t interval", THEIL_SEN: "Theil-Sen interval from Kendall's tau"}


@dataclass(frozen=True)
class Trend:
    """A key number against model size: ``slope`` per decade of non-embedding parameters (of
    the value on log10 of the count, every model one point), its interval by ``test``, and the
    trend in words with why."""

    slope: float
    low: float
    high: float
    level: float
    n_models: int
    n_sizes: int
    span: float
    words: str
    reason: str
    test: str = OLS
    #: the fitted line's value at 1 parameter (log10 = 0): OLS's, or Theil-Sen's through the
    #: medians; ``nan`` where nothing was fitted
    intercept: float = float("nan")

    def at(self, params: Any) -> Any:
        """The fitted line at ``params`` non-embedding parameters (an extrapolation outside
        the ladder: a hint, never a verdict)."""
        return self.intercept + self.slope * np.log10(np.asarray(params, dtype=np.float64))


def trend_with_size(
    params: Any,
    values: Any,
    *,
    level: float = 0.95,
    min_sizes: int = 4,
    min_span: float = 30.0,
    test: str = OLS,
) -> Trend:
    """Which way a claim's key number goes with scale (the ladder of model sizes).

    ``params``: each trained model's non-embedding parameter count; ``values``: its key number
    (several models of one size — seeds — are separate points). The slope of ``values`` on
    ``log10(params)`` with its interval decides: :data:`GROWS` when the interval lies above 0,
    :data:`SHRINKS` below 0, :data:`NO_TREND` when it contains 0 — and also, before any fit is
    read, when the ladder has fewer than ``min_sizes`` distinct sizes or spans less than
    ``min_span``× in parameters (too short to speak of a trend). What it says at the papers'
    scale is an extrapolation, never a verdict.

    ``test``: :data:`OLS`, the least-squares slope with its Student-t interval (n − 2 degrees
    of freedom), which assumes normal errors of one spread; or :data:`THEIL_SEN`, the median of
    the slopes between every two models of different sizes with its distribution-free interval
    from Kendall's tau (Sen 1968; ``scipy.stats.theilslopes``). A share bounded by 0 and 1, piled
    at a bound on some rungs, breaks the t interval's assumptions; the rank-based one makes
    none, and one outlying model cannot swing it.
    """
    x = np.asarray(params, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(
            f"params and values must be 1-D and of one length, got {x.shape}, {y.shape}"
        )
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("params and values must be finite")
    if np.any(x <= 0):
        raise ValueError("parameter counts must be positive")
    check.scalar("level", level, low=0.0, strict=True)
    if level >= 1:
        raise ValueError(f"level must be below 1, got {level}")
    check.one_of("trend test", test, sorted(TESTS))
    if x.size == 0:  # every model's key number undefined (e.g. no unit to count)
        why = "no model has this key number defined"
        return Trend(np.nan, np.nan, np.nan, level, 0, 0, np.nan, NO_TREND, why, test)
    sizes = np.unique(x)
    span = float(sizes.max() / sizes.min())
    if sizes.size < max(min_sizes, 2) or span < min_span or x.size < 3:
        why = (
            f"{sizes.size} sizes spanning {span:.3g}x in parameters (the rule needs at least "
            f"{min_sizes} sizes spanning {min_span:g}x)"
        )
        return Trend(
            np.nan, np.nan, np.nan, level, int(x.size), int(sizes.size), span, NO_TREND, why, test
        )
    if np.ptp(y) == 0:  # OLS gives slope 0 with a zero-width interval; scipy's stderr is nan
        why = f"the key number is {y[0]:.3g} on every one of the {x.size} models: nothing varies"
        n, n_sizes = int(x.size), int(sizes.size)  # the flat line through the one value
        return Trend(0.0, 0.0, 0.0, level, n, n_sizes, span, NO_TREND, why, test, float(y[0]))
    if test == OLS:
        fit = stats.linregress(np.log10(x), y)
        h = t_quantile(level, x.size - 2) * float(fit.stderr)
        slope = float(fit.slope)
        low, high = slope - h, slope + h
    else:
        fit = stats.theilslopes(y, np.log10(x), alpha=level)
        slope, low, high = float(fit.slope), float(fit.low_slope), float(fit.high_slope)
    intercept = float(fit.intercept)
    words = GROWS if low > 0 else SHRINKS if high < 0 else NO_TREND
    reason = (
        f"slope {slope:.3g} [{low:.3g}, {high:.3g}] per decade of parameters ({100 * level:g}% "
        f"{TESTS[test]}, {x.size} models, {sizes.size} sizes over {span:.3g}x)"
    )
    n, n_sizes = int(x.size), int(sizes.size)
    return Trend(slope, low, high, level, n, n_sizes, span, words, reason, test, intercept)


@dataclass(frozen=True)
class TrendRow:
    """One claim's ``trend with size`` cell: :func:`trend_with_size`'s ``words``, a short
    ``detail`` (slope and interval, models, sizes) and the MyST ``anchor`` of its figure."""

    claim_id: str
    words: str
    detail: str
    anchor: str

    def __post_init__(self) -> None:
        if self.claim_id not in CLAIMS:
            raise ValueError(f"unknown claim {self.claim_id!r}; known: {', '.join(CLAIMS)}")
        check.one_of("trend words", self.words, (GROWS, SHRINKS, NO_TREND))
        if not self.anchor:
            raise ValueError(f"claim {self.claim_id}: a trend row needs the anchor of its figure")
        checked_name(f"trend of {self.claim_id}: anchor", self.anchor)


def write_trends(path: str | Path, rows: Iterable[TrendRow]) -> Path:
    """Write the trend rows as JSON (sorted, stable bytes); one row per claim."""
    rows = sorted(rows, key=lambda r: r.claim_id)
    ids = [r.claim_id for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"one trend row per claim, got {ids}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps([asdict(r) for r in rows], indent=2, sort_keys=True, ensure_ascii=False)
    write_text_atomic(path, text + "\n")
    return path


def read_trends(path: str | Path) -> dict[str, TrendRow]:
    """The trend rows of :func:`write_trends`, by claim (a malformed file is an error naming it)."""
    try:
        rows = [TrendRow(**r) for r in json.loads(Path(path).read_text())]
    except (OSError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: cannot read the trend rows: {err}") from None
    out = {r.claim_id: r for r in rows}
    if len(out) != len(rows):
        raise ValueError(f"{path}: more than one trend row for a claim")
    return out
