"""Small statistics shared by the notebooks: every reported number carries its uncertainty."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Estimate:
    """A mean with a two-sided confidence interval ``[low, high]`` at level ``level``."""

    mean: float
    low: float
    high: float
    level: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def mean_ci(values: np.ndarray | list[float], level: float = 0.95) -> Estimate:
    """Mean of independent repeats with a Student-t confidence interval.

    Needs at least two finite values: one repeat has no spread to estimate.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size < 2:
        raise ValueError(f"need at least 2 repeats for an interval, got {v.size}")
    if not np.all(np.isfinite(v)):
        raise ValueError("values contain NaN or inf")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    m = float(v.mean())
    h = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return Estimate(m, m - h, m + h, level, int(v.size))
