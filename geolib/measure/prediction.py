"""Does a quantity predict an outcome across models? Spearman ρ, R², partial Spearman given ID
loss, and the R² gap between two predictors, each with a bootstrap interval over models (the
trained model is the unit). Used by every Paper B comparison (B1, B2, B7, B8). Also what a
quantity adds to the training configuration's prediction of an outcome (:func:`added_power`,
leave-one-out R²).

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
from scipy.stats import norm

from geolib.measure.geometry import ID_LOSS
from geolib.measure.stats import (
    interval,
    mean_ci,
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


def _design(table: pd.DataFrame, factors: Sequence[str]) -> np.ndarray:
    """``(n, k)``: an intercept and, for each factor with more than one level, one indicator per
    level but the first (levels sorted, so the row order does not matter)."""
    cols = [np.ones(len(table))]
    for f in factors:
        codes, levels = pd.factorize(table[f], sort=True)
        if np.any(codes < 0):
            raise ValueError(f"factor {f!r} has missing values")
        cols += [(codes == j).astype(np.float64) for j in range(1, len(levels))]
    return np.column_stack(cols)


def _loo_residuals(x: np.ndarray, y: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """In-sample and leave-one-out residuals of least squares of ``y`` on the columns of ``x``:
    ``e`` and ``e_i / (1 − h_ii)``, ``h`` the diagonal of the hat matrix ``x · pinv(x)`` (a
    rank-deficient ``x`` is fitted on its column span)."""
    p = np.linalg.pinv(x)
    e = y - x @ (p @ y)
    h = np.einsum("ij,ji->i", x, p)
    stuck = np.flatnonzero(h >= 1 - 1e-10)
    if stuck.size:
        raise ValueError(
            f"leave-one-out prediction undefined for {stuck.size} of {x.shape[0]} models (rows "
            f"{stuck[:5].tolist()}) in the {name} design of {x.shape[1]} columns: each fixes its "
            "own fit (leverage 1), e.g. the only model at some factor level"
        )
    return e, e / (1 - h)


def per_model_tables_by_budget(
    table: pd.DataFrame, outcomes: Sequence[str], **bootstrap: Any
) -> dict[str, dict[str, pd.DataFrame]]:
    """:func:`per_model_tables` over the models of each token budget apart (``budget``
    column: budget → its tables), so no association pools models trained on different numbers
    of tokens."""
    if "budget" not in table:
        raise KeyError("the per-model table has no budget column (re-measure the sweep)")
    return {
        str(b): per_model_tables(part, outcomes, **bootstrap)
        for b, part in table.groupby("budget", sort=False)
    }


def added_power(
    table: pd.DataFrame,
    outcome: str,
    predictor: str,
    factors: Sequence[str],
    *,
    level: float = 0.95,
) -> dict[str, Any]:
    """What ``predictor`` adds to the prediction of ``outcome`` beyond the training configuration.

    Paper B's sense of "effective rank does not predict performance": the correlation of W's
    rank with in-distribution loss "falls once the hyperparameters are controlled", and "adding
    rank to a predictor of loss from the hyperparameters changes R² by about −0.003".

    ``table``: one row per model (the unit, ``n`` rows); ``outcome`` and ``predictor`` are
    numeric columns (e.g. ``loss_id_test`` in nats, ``w_erank``); ``factors`` (size, batch_size,
    weight_decay, lr, …) are each a categorical factor: an intercept plus one indicator per level
    but the first (``k`` design columns; a factor with one level gives none). Least squares of
    the outcome on the factors (base) and on factors + predictor (full), rank-deficient designs
    fitted on their column span (``pinv``).

    Returns a dict: ``r2_base_cv``, ``r2_full_cv``: leave-one-out R² = 1 − PRESS/SST (SST about
    the full-sample mean; leave-one-out residuals e_i / (1 − h_ii) in closed form);
    ``delta_r2_cv`` = full − base = Σ_i d_i / SST, d_i = e_base,(i)² − e_full,(i)² (each
    model's leave-one-out squared-error gain), with ``delta_r2_cv_ci_low/high`` = n/SST times
    the Student-t interval of the mean of d_i (:func:`mean_ci`): SST is held fixed and the d_i
    treated as exchangeable, a small-sample interval over models. ``delta_r2_in``: the in-sample
    R² difference, for reference. ``partial_r``: Pearson's correlation of the residuals of
    predictor and outcome on the base design, with a Fisher-z interval (standard error
    1/sqrt(n − (k − 1) − 3)). A predictor that is a function of the factors adds nothing:
    ΔR² = 0, ``partial_r`` NaN, said in ``note`` ("" otherwise).
    """
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    factors = [factors] if isinstance(factors, str) else list(factors)
    missing = [c for c in (outcome, predictor, *factors) if c not in table.columns]
    if missing:
        raise ValueError(f"columns not in the table: {missing}")
    y, x = (table[c].to_numpy(np.float64) for c in (outcome, predictor))
    for name, v in ((outcome, y), (predictor, x)):
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name!r} has {int(np.sum(~np.isfinite(v)))} non-finite values")
    base = _design(table, factors)
    n, k = base.shape
    if n < k + 3:
        raise ValueError(
            f"{n} models for a full model of {k + 1} columns ({k} of the factors, intercept "
            f"included, and the predictor): need at least {k + 3}"
        )
    if np.ptp(x) == 0:
        raise ValueError(f"predictor {predictor!r} is constant across models")
    sst = float(np.sum((y - y.mean()) ** 2))
    if sst == 0:
        raise ValueError(f"outcome {outcome!r} is constant across models")

    e_base, loo_base = _loo_residuals(base, y, "base")
    rx = x - base @ np.linalg.lstsq(base, x, rcond=None)[0]
    in_span = float(np.linalg.norm(rx)) <= 1e-9 * float(np.linalg.norm(x - x.mean()))
    note = ""
    if in_span:  # the full model is the base model
        e_full, loo_full = e_base, loo_base
        note = f"{predictor!r} is a function of the factors: it adds nothing"
    else:
        e_full, loo_full = _loo_residuals(np.column_stack([base, x]), y, "full")
    d = loo_base**2 - loo_full**2
    gain = mean_ci(d, level, unit="model")
    r2_base_cv = 1 - float(loo_base @ loo_base) / sst
    r2_full_cv = 1 - float(loo_full @ loo_full) / sst

    r = lo = hi = math.nan
    if not in_span:
        ry = e_base  # residual of the outcome on the base design
        denom = math.sqrt(float(rx @ rx) * float(ry @ ry))
        if denom > 0:
            r = float(np.clip(float(rx @ ry) / denom, -1.0, 1.0))
        else:
            note = f"{outcome!r} is a function of the factors: no partial correlation"
    dof = n - (k - 1) - 3  # >= 2: n >= k + 3 was checked above
    if math.isfinite(r):
        q = float(norm.ppf(0.5 + level / 2)) / math.sqrt(dof)
        with np.errstate(divide="ignore"):
            z = float(np.arctanh(r))
        lo, hi = math.tanh(z - q), math.tanh(z + q)
    return {
        "outcome": outcome,
        "predictor": predictor,
        "factors": "+".join(factors),
        "n": int(n),
        "k": int(k),
        "r2_base_cv": r2_base_cv,
        "r2_full_cv": r2_full_cv,
        "delta_r2_cv": r2_full_cv - r2_base_cv,
        "delta_r2_cv_ci_low": n / sst * gain.low,
        "delta_r2_cv_ci_high": n / sst * gain.high,
        "delta_r2_in": (float(e_base @ e_base) - float(e_full @ e_full)) / sst,
        "partial_r": r,
        "partial_r_ci_low": lo,
        "partial_r_ci_high": hi,
        "note": note,
    }
