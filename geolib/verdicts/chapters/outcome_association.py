"""What B8's rule reads of one outcome (forgetting, or a quantization's loss increase) over the
sweep's learned models: whether it varies beyond its noise (:func:`spread`: seed-to-seed sd and
each model's measurement error), and how it goes with W's rank and with ID loss
(:func:`association`: R² of each, their paired gap, the partial Spearman of the rank given
loss), size held fixed, with bootstrap intervals over models.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from geolib.measure.geometry import ID_LOSS
from geolib.measure.stats import (
    Interval,
    interval,
    partial_spearman,
    partial_spearman_within,
    r_squared,
)
from geolib.verdicts.sweep_v4 import configuration

#: the rank of W whose association B8 reads
RANK = "w_erank"
#: fewest learned models an association over models is computed on (the statistics' floor)
MIN_MODELS = 4
#: the statistics of :class:`Association`, in order
STATISTICS = ("r2_rank", "r2_loss", "gap", "partial")


def spread(frame: pd.DataFrame, column: str, *, within: bool, level: float) -> dict[str, float]:
    """Does ``column`` vary across models beyond its noise? Its sd across models (pooled within
    size when ``within``); its seed-to-seed sd, pooled over groups of models that differ only
    in their seed (``<point>-s<seed>``; NaN without replicates); the root mean square of the
    models' measurement errors (each paired interval's half-width over z at ``level``); the
    noise, the larger of the two; and the ratio of spread to noise."""
    y = frame[column].to_numpy(np.float64)
    if y.size == 0:
        keys = ("spread_sd", "seed_sd", "seed_dof", "measurement_se", "noise", "ratio")
        return {k: 0 if k == "seed_dof" else math.nan for k in keys}
    if within:
        dev = y - frame.groupby("size")[column].transform("mean").to_numpy(np.float64)
        dof = len(y) - frame["size"].nunique()
    else:
        dev, dof = y - y.mean(), len(y) - 1
    across = math.sqrt(float(dev @ dev) / dof) if dof > 0 else math.nan
    ss, seed_dof = 0.0, 0
    for _, g in frame.groupby(frame["name"].map(lambda n: configuration(n)[0])):
        v = g[column].to_numpy(np.float64)
        ss, seed_dof = ss + float(((v - v.mean()) ** 2).sum()), seed_dof + len(v) - 1
    seed_sd = math.sqrt(ss / seed_dof) if seed_dof else math.nan
    half = (frame[f"{column}_ci_high"] - frame[f"{column}_ci_low"]).to_numpy(np.float64) / 2
    z = float(sps.norm.ppf(0.5 + level / 2))
    se = math.sqrt(float(np.mean((half / z) ** 2))) if len(half) else math.nan
    noise = max(seed_sd, se) if seed_dof else math.nan
    return {
        "spread_sd": across,
        "seed_sd": seed_sd,
        "seed_dof": seed_dof,
        "measurement_se": se,
        "noise": noise,
        "ratio": across / noise if noise > 0 else math.nan,
    }


@dataclass(frozen=True)
class Association:
    """What v3 reads of one outcome over the learned models: R² of the outcome on the rank and
    on ID loss, their gap (loss minus rank, paired) and the partial Spearman of the rank with
    the outcome given ID loss; size held fixed when ``within``."""

    n: int
    r2_rank: Interval
    r2_loss: Interval
    gap: Interval
    partial: Interval

    def intervals(self) -> list[Interval]:
        return [getattr(self, name) for name in STATISTICS]


def association(
    frame: pd.DataFrame,
    column: str,
    predictor: str = RANK,
    *,
    within: bool = True,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Association:
    """:class:`Association` of ``column`` with bootstrap intervals over the models of
    ``frame`` (NaN with fewer than :data:`MIN_MODELS`, or where a statistic is undefined)."""
    x, y, z = (frame[c].to_numpy(np.float64) for c in (predictor, column, ID_LOSS))
    g = pd.factorize(frame["size"], sort=True)[0].astype(np.float64)

    def r2(a: np.ndarray, b: np.ndarray, groups: np.ndarray) -> float:
        return r_squared(a, b, groups if within else None)

    def partial(a: np.ndarray, b: np.ndarray, c: np.ndarray, groups: np.ndarray) -> float:
        return partial_spearman_within(a, b, c, groups) if within else partial_spearman(a, b, c)

    fns = {
        "r2_rank": (r2, (x, y, g)),
        "r2_loss": (r2, (z, y, g)),
        "gap": (lambda x, z, y, g: r2(z, y, g) - r2(x, y, g), (x, z, y, g)),
        "partial": (partial, (x, y, z, g)),
    }
    out = {}
    for name, (fn, arrays) in fns.items():

        def safe(*a: np.ndarray, fn: Any = fn) -> float:  # a resample may leave one size
            try:
                return float(fn(*a))
            except ValueError:
                return math.nan

        if len(frame) < MIN_MODELS:
            why = f"fewer than {MIN_MODELS} models"
            out[name] = Interval(math.nan, math.nan, math.nan, level, len(frame), why, "model")
        else:
            kw = {"n_boot": n_boot, "level": level, "seed": seed, "unit": "model"}
            out[name] = interval(safe, *arrays, undefined="nan", **kw)
    return Association(len(frame), **out)
