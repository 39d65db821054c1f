"""Geometry against performance over the sweep (Paper B, claims B1–B5, B7): the analysis stage.

    python -m geolib.experiments.geometry_performance --params params.yaml

Gathers every point's ``measures.json`` (stage ``sweep_measure``) into one table
(``models.csv``, one row per model of every budget), then, for the models of each token budget
apart (``<budget>/``, e.g. ``D/`` and ``2D/``: rules v4 decide each sweep row at both),
computes what the chapter's verdicts read:

* **factor effects** (``effects.csv``): for a factor and two of its levels, the differences of a
  quantity between points that differ in that factor only (matched tokens), in units of the
  pooled seed-to-seed standard deviation of the same quantity, with a Student-t interval over
  the pairs. The same after removing the across-model linear trend of the quantity on ID loss
  (``basis = matched_loss``): the effect at equal loss.
* **interactions** (``interactions.csv``): a factor's effect at size M minus at size S.
* **U-shape** (``u_shape.csv``): per cell of the other factors, whether the middle batch size has
  the lowest ID loss.
* **prediction** (``prediction.csv``): for each OOD domain, Spearman ρ and R² of each W/H
  metric and of ID loss with the OOD loss, the partial Spearman of each metric given ID loss,
  and R²(ID loss) − R²(erank of W), all with bootstrap intervals over models.
* **agreement** (``agreement.csv``): the median |Spearman| between pairs of W metrics and the
  ratio of across-model coefficients of variation, erank of H ÷ erank of W; the Spearman
  matrices of the W and H metrics over models (``w_correlations.csv``, ``h_correlations.csv``).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from geolib.files import write_csv, write_table
from geolib.measure.geometry import GEOMETRY, ID_LOSS, flatten_measures
from geolib.measure.prediction import prediction, r2_gaps
from geolib.measure.stats import (
    interval,
    mean_ci,
    spearman,
    t_quantile,
    within_groups,
)
from geolib.models.grid import FACTORS, check_points_listed, measures_path
from geolib.stage import stage

#: the other effective ranks the paper's text admits (σ² instead of σ; W centred first): the
#: declared alternatives of the rules v2
V2_RANKS = ("w_erank_sq", "w_erank_centered")

#: W metrics whose agreement B7 reads (IsoScore* is not defined for W: no larger sample).
W_METRICS = [f"w_{m}" for m in GEOMETRY]


def gather(measures_root: str | Path, names: Sequence[str]) -> pd.DataFrame:
    """One row per point from ``<measures_root>/<name>/measures.json`` (error naming missing
    ones)."""
    paths = [measures_path(measures_root, n) for n in names]
    missing = [n for n, p in zip(names, paths, strict=True) if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} sweep points not measured yet: {missing}")
    rows = [flatten_measures(json.loads(p.read_text())) for p in paths]
    return pd.DataFrame(rows)


def seed_sd(table: pd.DataFrame, quantity: str) -> tuple[float, int]:
    """Pooled within-group standard deviation of ``quantity`` over groups of points that differ
    only in their seed, and its degrees of freedom (Σ (n_g − 1))."""
    others = [f for f in FACTORS if f != "seed"]
    ss, dof = 0.0, 0
    for _, group in table.groupby(others):
        if len(group) > 1:
            v = group[quantity].to_numpy(dtype=float)
            ss += float(((v - v.mean()) ** 2).sum())
            dof += len(v) - 1
    if dof == 0:
        raise ValueError("no seed replicates: every effect needs the seed-to-seed spread")
    sd = math.sqrt(ss / dof)
    if sd == 0:
        raise ValueError(f"{quantity}: replicates identical, the seed spread is 0")
    return sd, dof


def matched_differences(
    table: pd.DataFrame, factor: str, low: Any, high: Any, quantity: str
) -> pd.DataFrame:
    """Pairs of points equal in every factor but ``factor`` (at ``low`` and ``high``): the
    other factors and ``quantity`` at high minus at low, one row per pair."""
    if factor not in FACTORS:
        raise KeyError(f"{factor!r} is not a factor; factors: {FACTORS}")
    others = [f for f in FACTORS if f != factor]
    lo = table[table[factor] == low].set_index(others)[quantity]
    hi = table[table[factor] == high].set_index(others)[quantity]
    common = lo.index.intersection(hi.index)
    if len(common) == 0:
        raise ValueError(f"no pairs of points differing only in {factor} ({low} vs {high})")
    out = pd.DataFrame({"difference": hi.loc[common] - lo.loc[common]}).reset_index()
    return out


def per_seed_sd(raw_low: float, raw_high: float, sd: float, dof: int, level: float):
    """``[raw_low, raw_high]`` (a difference in the quantity's own units) in units of the seed
    sd σ, carrying σ's own uncertainty: σ's chi-square interval from its ``dof`` degrees of
    freedom (``sd²·dof/σ² ~ χ²(dof)``) at ``level``, the bounds divided by whichever end of it
    widens them. Both intervals at √(joint level) each make the result conservative at the
    joint level. Returns ``(low, high)``."""
    from scipy.stats import chi2

    alpha = 1.0 - level
    sigma_low = sd * math.sqrt(dof / chi2.ppf(1.0 - alpha / 2, dof))
    sigma_high = sd * math.sqrt(dof / chi2.ppf(alpha / 2, dof))
    low = raw_low / (sigma_low if raw_low < 0 else sigma_high)
    high = raw_high / (sigma_low if raw_high > 0 else sigma_high)
    return low, high


def effect(
    table: pd.DataFrame, factor: str, low: Any, high: Any, quantity: str, level: float = 0.95
) -> dict[str, Any]:
    """Mean matched difference (high − low) of ``quantity`` in seed-sd units with two intervals:
    ``ci_*`` treats the seed sd as known (Student-t over the pairs); ``ci_*_sd`` also carries
    the seed sd's own uncertainty (:func:`per_seed_sd`, each part at √level), what a rule
    judging "more than the seed spread" reads."""
    pairs = matched_differences(table, factor, low, high, quantity)
    sd, dof = seed_sd(table, quantity)
    est = mean_ci(pairs["difference"] / sd, level)
    raw = mean_ci(pairs["difference"], math.sqrt(level))
    wide = per_seed_sd(raw.low, raw.high, sd, dof, math.sqrt(level))
    return {
        "factor": factor,
        "low": low,
        "high": high,
        "quantity": quantity,
        "effect_sd": est.value,
        "ci_low": est.low,
        "ci_high": est.high,
        "ci_low_sd": wide[0],
        "ci_high_sd": wide[1],
        "n_pairs": est.n,
        "raw_difference": float(pairs["difference"].mean()),
        "seed_sd": sd,
        "seed_dof": dof,
    }


def detrended(table: pd.DataFrame, quantity: str, on: str = ID_LOSS) -> pd.Series:
    """``quantity`` minus its least-squares line on ``on`` over all models: the part of it that
    ID loss does not account for (effects of this are effects at matched loss)."""
    b, a = np.polyfit(table[on].to_numpy(float), table[quantity].to_numpy(float), 1)
    return table[quantity] - (a + b * table[on])


def interaction(
    table: pd.DataFrame,
    factor: str,
    low: Any,
    high: Any,
    quantity: str,
    by: str = "size",
    levels: tuple[Any, Any] = ("S", "M"),
    level: float = 0.95,
) -> dict[str, Any]:
    """The effect of ``factor`` on ``quantity`` at ``by = levels[1]`` minus at ``levels[0]``, in
    seed-sd units, with a Welch interval (``ci_*``: seed sd known; ``ci_*_sd``: carrying its
    uncertainty, as in :func:`effect`)."""
    pairs = matched_differences(table, factor, low, high, quantity)
    sd, sd_dof = seed_sd(table, quantity)
    a = (pairs[pairs[by] == levels[0]]["difference"] / sd).to_numpy()
    b = (pairs[pairs[by] == levels[1]]["difference"] / sd).to_numpy()
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"need ≥ 2 pairs at each of {levels}, got {len(a)} and {len(b)}")
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se > 0 else 1
    diff = float(b.mean() - a.mean())
    h = t_quantile(level, max(1, int(dof))) * se
    h_each = t_quantile(math.sqrt(level), max(1, int(dof))) * se
    wide = per_seed_sd((diff - h_each) * sd, (diff + h_each) * sd, sd, sd_dof, math.sqrt(level))
    return {
        "factor": factor,
        "quantity": quantity,
        "by": by,
        "levels": f"{levels[1]} − {levels[0]}",
        "interaction_sd": diff,
        "ci_low": diff - h,
        "ci_high": diff + h,
        "ci_low_sd": wide[0],
        "ci_high_sd": wide[1],
        "n_pairs": len(a) + len(b),
    }


def u_shape(
    table: pd.DataFrame, quantity: str = ID_LOSS, factor: str = "batch_size"
) -> pd.DataFrame:
    """Per cell of the other factors with ≥ 3 levels of ``factor``: whether a middle level has
    the lowest ``quantity`` (below both the smallest and the largest level). No such cell: an
    empty table (a rule on it then has no units to count)."""
    others = [f for f in FACTORS if f != factor]
    rows = []
    for key, cell in table.groupby(others):
        if cell[factor].nunique() < 3:
            continue
        cell = cell.sort_values(factor)
        v = cell[quantity].to_numpy(float)
        best = int(np.argmin(v))
        rows.append(
            {
                **dict(zip(others, key, strict=True)),
                "levels": ", ".join(map(str, cell[factor])),
                "values": ", ".join(f"{x:.4f}" for x in v),
                "u_shaped": bool(0 < best < len(v) - 1),
            }
        )
    return pd.DataFrame(rows, columns=[*others, "levels", "values", "u_shaped"])


def metric_agreement(
    table: pd.DataFrame,
    metrics: Sequence[str],
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Median |Spearman ρ| over all pairs of ``metrics`` across models, bootstrap over models."""
    pairs = list(itertools.combinations(range(len(metrics)), 2))

    def median_abs_rho(*cols: np.ndarray) -> float:
        return float(np.median([abs(spearman(cols[i], cols[j])) for i, j in pairs]))

    cols = [table[m].to_numpy(float) for m in metrics]
    a = interval(median_abs_rho, *cols, n_boot=n_boot, level=level, seed=seed)
    return {
        "statistic": "median |spearman| of W metrics",
        "value": a.value,
        "ci_low": a.low,
        "ci_high": a.high,
        "n_metrics": len(metrics),
    }


def cv_ratio(
    table: pd.DataFrame,
    numerator: str = "h_erank",
    denominator: str = "w_erank",
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Across-model coefficient of variation of ``numerator`` ÷ that of ``denominator``."""

    def ratio(a: np.ndarray, b: np.ndarray) -> float:
        return (a.std(ddof=1) / abs(a.mean())) / (b.std(ddof=1) / abs(b.mean()))

    cols = (table[c].to_numpy(float) for c in (numerator, denominator))
    a = interval(ratio, *cols, n_boot=n_boot, level=level, seed=seed)
    return {
        "statistic": f"CV({numerator}) / CV({denominator})",
        "value": a.value,
        "ci_low": a.low,
        "ci_high": a.high,
        "n_metrics": 2,
    }


def spread(table: pd.DataFrame, outcomes: Sequence[str], by: str = "size") -> pd.DataFrame:
    """Does an outcome vary across models beyond its noise? Per outcome: its seed-to-seed
    standard deviation (:func:`seed_sd`), its standard deviation across models within each
    ``by`` group (pooled), and their ratio (the premise of a prediction claim: an outcome that
    varies no more than between seeds has nothing to predict)."""
    groups = pd.factorize(table[by], sort=True)[0]
    rows = []
    for outcome in outcomes:
        sd, dof = seed_sd(table, outcome)
        within = within_groups(table[outcome].to_numpy(float), groups)
        across = float(np.sqrt((within**2).sum() / (within.size - len(set(groups)))))
        rows.append(
            {
                "outcome": outcome,
                "seed_sd": sd,
                "seed_dof": dof,
                "within_size_sd": across,
                "ratio": across / sd,
            }
        )
    return pd.DataFrame(rows)


def init_moves(table: pd.DataFrame, batch_sizes: Sequence[Any]) -> pd.DataFrame:
    """How far training moved W's effective rank from its random start, per size and batch
    size (mean of ``init_w_erank − w_erank`` over the points), and that move as a share of the
    move at the smallest batch of the same size (B3's premise: at matched tokens a large batch
    takes few steps; if W hardly leaves its start, a "higher rank" is distance from
    initialisation, not an effect of batch size)."""
    if "init_w_erank" not in table:
        raise ValueError("models.csv has no init_w_erank: re-measure the sweep points")
    rows = []
    for size, g in table.groupby("size", sort=True):
        base = None
        for b in sorted(batch_sizes):
            at = g[g["batch_size"] == b]
            move = float((at["init_w_erank"] - at["w_erank"]).mean())
            base = move if base is None else base
            rows.append(
                {
                    "size": size,
                    "batch_size": b,
                    "n_points": len(at),
                    "erank_move": move,
                    "share_of_smallest_batch": move / base if base else float("nan"),
                }
            )
    return pd.DataFrame(rows)


def analyse(
    table: pd.DataFrame,
    spec: Mapping[str, Any],
    factorial: Mapping[str, Sequence[Any]],
    out_dir: str | Path,
    widths: Mapping[str, int] | None = None,
) -> dict[str, Path]:
    """Every table the chapter reads, written under ``out_dir``; returns their paths.

    ``factorial``: the sweep's factorial levels; each factor's effect compares its lowest and
    highest level, and only factorial points (the ``final_lr_ratio`` of the factorial) enter
    the U-shape cells. ``widths``: each size's ``d_model``, for the rank-per-width alternative
    of B1 (``w_erank_per_width``).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n_boot, level, seed = int(spec["n_boot"]), float(spec["ci_level"]), int(spec.get("seed", 0))
    in_factorial = table["final_lr_ratio"].isin(factorial["final_lr_ratio"])
    if widths is not None:
        table = table.assign(w_erank_per_width=table["w_erank"] / table["size"].map(widths))
    work = table.copy()
    for q in ("w_erank", "h_erank"):
        work[f"{q}_at_matched_loss"] = detrended(table, q)
    ends = {f: (min(factorial[f]), max(factorial[f])) for f in ("batch_size", "weight_decay", "lr")}
    effects = []
    for factor, (low, high) in ends.items():
        for quantity in (
            "w_erank",
            "h_erank",
            ID_LOSS,
            "w_erank_at_matched_loss",
            *V2_RANKS,
        ):
            data = work if quantity.endswith("matched_loss") else table
            row = effect(data, factor, low, high, quantity, level)
            row["basis"] = "matched_loss" if quantity.endswith("matched_loss") else "matched_tokens"
            effects.append(row)
    sizes = tuple(factorial["size"])
    interactions = [
        interaction(table, f, *ends[f], ID_LOSS, levels=(sizes[0], sizes[-1]), level=level)
        for f in ("weight_decay", "lr")
    ]
    ood = [
        c
        for c in table.columns
        if c.startswith("loss_ood_") and not c.endswith(("_ci_low", "_ci_high"))
    ]
    table = table.assign(loss_ood_mean=table[ood].mean(axis=1))
    outcomes = [ID_LOSS, *ood, "loss_ood_mean"]
    predictors = [ID_LOSS, *W_METRICS, *(f"h_{m}" for m in GEOMETRY), "h_isoscore_star"]
    if "w_erank_per_width" in table:
        predictors.append("w_erank_per_width")
    sizes_ = sorted(table["size"].unique())
    by_size = [
        {"size": size, **effect(table[table["size"] == size], f, *ends[f], q, level)}
        for f in ("batch_size", "weight_decay", "lr")
        for q in ("w_erank", *V2_RANKS, ID_LOSS)
        for size in sizes_
    ]
    paths = {
        "models": out / "models.csv",
        "effects": out / "effects.csv",
        "interactions": out / "interactions.csv",
        "u_shape": out / "u_shape.csv",
        "prediction": out / "prediction.csv",
        "r2_gap": out / "r2_gap.csv",
        "agreement": out / "agreement.csv",
        "w_correlations": out / "w_correlations.csv",
        "h_correlations": out / "h_correlations.csv",
        "effects_by_size": out / "effects_by_size.csv",
        "prediction_within_size": out / "prediction_within_size.csv",
        "spread": out / "spread.csv",
        "init_moves": out / "init_moves.csv",
        "r2_gap_alternatives": out / "r2_gap_alternatives.csv",
    }
    matched = [f"{q}_at_matched_loss" for q in ("w_erank", "h_erank")]
    write_table(paths["models"], table.assign(**{c: work[c] for c in matched}))
    write_table(paths["effects"], pd.DataFrame(effects))
    write_table(paths["interactions"], pd.DataFrame(interactions))
    write_csv(paths["u_shape"], u_shape(table[in_factorial]), index=False)
    kw = {"n_boot": n_boot, "level": level, "seed": seed}
    write_table(paths["prediction"], prediction(table, outcomes, predictors, **kw))
    write_table(paths["r2_gap"], r2_gaps(table, outcomes[1:], **kw))
    alt_gaps = [r2_gaps(table, outcomes[1:], worse=w, **kw) for w in V2_RANKS]
    write_table(paths["r2_gap_alternatives"], pd.concat(alt_gaps, ignore_index=True))
    # rules v2: within size (the sizes differ in width, so rank differs by size), the outcomes'
    # spread against their seed noise, and how far W moved from its random start
    write_table(
        paths["prediction_within_size"],
        prediction(table, outcomes, [ID_LOSS, *W_METRICS], by="size", **kw),
    )
    write_table(paths["effects_by_size"], pd.DataFrame(by_size))
    write_table(paths["spread"], spread(table, outcomes))
    write_table(paths["init_moves"], init_moves(table[in_factorial], factorial["batch_size"]))
    agreement = [metric_agreement(table, W_METRICS, **kw), cv_ratio(table, **kw)]
    write_table(paths["agreement"], pd.DataFrame(agreement))
    h_metrics = [f"h_{m}" for m in GEOMETRY] + ["h_isoscore_star"]
    for key, cols in (("w_correlations", W_METRICS), ("h_correlations", h_metrics)):
        write_csv(paths[key], table[cols].corr(method="spearman"), float_format="%.6g")
    return paths


def analyse_budgets(
    table: pd.DataFrame,
    spec: Mapping[str, Any],
    factorial: Mapping[str, Sequence[Any]],
    models_table: str | Path,
    widths: Mapping[str, int] | None = None,
) -> dict[str, dict[str, Path]]:
    """:func:`analyse` on the models of each budget (``budget`` column) apart, into
    ``<folder of models_table>/<budget>/``: every effect, prediction and premise table compares
    models trained on the same number of tokens. ``models_table`` gets every model of every
    budget (what the per-model stages, forgetting and quantization, read)."""
    if "budget" not in table:
        raise KeyError("the models table has no budget column (re-measure the sweep)")
    models_table = Path(models_table)
    models_table.parent.mkdir(parents=True, exist_ok=True)
    write_table(models_table, table)
    return {
        str(b): analyse(
            table[table["budget"] == b], spec, factorial, models_table.parent / b, widths
        )
        for b in table["budget"].unique()
    }


def main(argv: list[str] | None = None) -> int:
    st = stage(__doc__, "geometry_performance", argv)
    sweep = st.section_of("sweep")
    table = gather(sweep["measures_root"], check_points_listed(sweep))
    widths = {size: int(cfg["d_model"]) for size, cfg in sweep["sizes"].items()}
    paths = analyse_budgets(table, st.params, sweep["factorial"], st.params["models_table"], widths)
    return st.done(
        {
            "models": len(table),
            "tables": [str(p) for by in paths.values() for p in by.values()],
        }
    )


if __name__ == "__main__":
    raise SystemExit(main())
