"""Does a quantity predict an outcome across models? Spearman ρ, R², partial Spearman given ID
loss, and the R² gap between two predictors, each with a bootstrap interval over models (the
trained model is the unit). Used by every Paper B comparison (B1, B2, B7, B8).

``table``: one row per model; columns are named quantities (see
:func:`geolib.measure.geometry.flatten_measures`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from geolib.measure.geometry import ID_LOSS
from geolib.measure.stats import (
    interval,
    partial_spearman,
    partial_spearman_within,
    r_squared,
    spearman,
    within_groups,
)

#: what B8 compares as predictors of an outcome across models: ID loss, the effective ranks of
#: W and of H
PER_MODEL_PREDICTORS = (ID_LOSS, "w_erank", "h_erank")


def prediction(
    table: pd.DataFrame,
    outcomes: Sequence[str],
    predictors: Sequence[str],
    *,
    control: str = ID_LOSS,
    by: str | None = None,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """For each outcome and predictor: Spearman ρ, R², and the partial Spearman given
    ``control``, each with a bootstrap interval over models. A predictor that is constant over
    the models gets a row without numbers and ``note = "constant across models"``.

    With ``by`` (a column such as model size) its groups are held fixed: ``r2`` is the pooled
    within-group R² and ``partial_spearman`` is given ``control`` and the group (no plain ρ);
    what an association across all models owes to the groups' different levels (Simpson's
    paradox) is removed.
    """
    groups = None if by is None else pd.factorize(table[by], sort=True)[0].astype(np.float64)
    where = "across models" if by is None else f"within each {by}"

    def spread(v: np.ndarray) -> float:
        return float(np.ptp(v if groups is None else within_groups(v, groups)))

    rows = []
    for outcome, predictor in itertools.product(outcomes, predictors):
        x, y, z = (table[c].to_numpy(float) for c in (predictor, outcome, control))
        row: dict[str, Any] = {"outcome": outcome, "predictor": predictor}
        if by is not None:
            row["by"] = by
        if spread(x) == 0 or spread(y) == 0:  # constant: no correlation to speak of
            row["note"] = f"constant {where}"
            rows.append(row)
            continue
        if groups is None:
            stats_: dict[str, tuple[Callable, tuple]] = {
                "spearman": (spearman, (x, y)),
                "r2": (r_squared, (x, y)),
            }
            partial: tuple[Callable, tuple] = (partial_spearman, (x, y, z))
        else:
            stats_ = {"r2": (r_squared, (x, y, groups))}
            partial = (partial_spearman_within, (x, y, z, groups))
        if control not in (predictor, outcome):  # given itself, nothing is left to correlate
            stats_["partial_spearman"] = partial
        for name, (fn, args) in stats_.items():
            a = interval(fn, *args, n_boot=n_boot, level=level, seed=seed, undefined="nan")
            row.update({name: a.value, f"{name}_ci_low": a.low, f"{name}_ci_high": a.high})
            if math.isnan(a.low):  # too many tied resamples: no interval, said so in the row
                row["note"] = "; ".join(filter(None, [row.get("note"), f"{name}: {a.method}"]))
        rows.append(row)
    return pd.DataFrame(rows)


def r2_gap(
    table: pd.DataFrame,
    outcome: str,
    better: str = ID_LOSS,
    worse: str = "w_erank",
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """R²(outcome ~ ``better``) − R²(outcome ~ ``worse``), bootstrap over models (paired)."""

    def gap(b: np.ndarray, w: np.ndarray, y: np.ndarray) -> float:
        return r_squared(b, y) - r_squared(w, y)

    cols = (table[c].to_numpy(float) for c in (better, worse, outcome))
    a = interval(gap, *cols, n_boot=n_boot, level=level, seed=seed)
    return {
        "outcome": outcome,
        "better": better,
        "worse": worse,
        "r2_gap": a.value,
        "ci_low": a.low,
        "ci_high": a.high,
    }


def r2_gaps(
    table: pd.DataFrame, outcomes: Sequence[str], worse: str = "w_erank", **bootstrap: Any
) -> pd.DataFrame:
    """:func:`r2_gap` (ID loss against ``worse``, by default the effective rank of W) for each
    outcome, one row each."""
    return pd.DataFrame([r2_gap(table, o, worse=worse, **bootstrap) for o in outcomes])


def one_row_per_point(table: pd.DataFrame, names: Sequence[str], source: str) -> pd.DataFrame:
    """``table`` if it holds exactly one row per sweep point of ``names`` (column ``name``);
    otherwise an error naming ``source`` and the points missing, extra or repeated: a table cut
    short by a full disk still parses, and would pass for a smaller sweep."""
    got = list(table["name"]) if "name" in table.columns else []
    missing = sorted(set(names) - set(got))
    extra = sorted(set(got) - set(names))
    repeated = sorted({n for n in got if got.count(n) > 1})
    if missing or extra or repeated:
        raise ValueError(
            f"{source}: {len(got)} rows for {len(names)} sweep points; missing {missing[:5]}"
            f"{'…' if len(missing) > 5 else ''}, not in the sweep {extra[:5]}, repeated "
            f"{repeated[:5]} (cut short, or from another sweep: rerun its stage)"
        )
    return table


def join_per_model(
    models: pd.DataFrame, rows: pd.DataFrame, names: Sequence[str], source: str
) -> pd.DataFrame:
    """The sweep's per-model table ``models`` (read from ``source``) joined with an analysis's
    per-model ``rows`` on ``name``, each checked by :func:`one_row_per_point` first."""
    one_row_per_point(models, names, source)
    one_row_per_point(rows, names, f"the rows measured beside {source}")
    return models.merge(rows, on="name", how="inner", validate="one_to_one")


def per_model_tables(
    table: pd.DataFrame, outcomes: Sequence[str], **bootstrap: Any
) -> dict[str, pd.DataFrame]:
    """What B8 asks of an outcome measured per model (forgetting, a quantization setting's loss
    increase), as tables by file stem: :func:`prediction` by :data:`PER_MODEL_PREDICTORS`
    over all models and within size, and :func:`r2_gaps`."""
    return {
        "prediction": prediction(table, outcomes, PER_MODEL_PREDICTORS, **bootstrap),
        "r2_gap": r2_gaps(table, outcomes, **bootstrap),
        "prediction_within_size": prediction(
            table, outcomes, PER_MODEL_PREDICTORS, by="size", **bootstrap
        ),
    }
