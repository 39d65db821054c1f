"""The gradient-energy stage's tables as the verdicts read them, and what each trained model
contributes to A4, A6 and A7: its share of learned early units above the bar, its typical
R_energy at matched learning progress, and where its alignment peaks.

Every function takes the tables of :mod:`geolib.experiments.gradient_energy` (``Tables``) and
returns one row per model; the rules that turn these rows into verdicts are in
:mod:`geolib.verdicts.chapters.gradient_energy`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from geolib.measure import validate as check
from geolib.measure.energy_counts import REFIT
from geolib.verdicts.learners import Learners, learners_of_runs
from geolib.verdicts.peak_timing import bracket


@dataclass(frozen=True)
class Tables:
    """The stage's tables: ``r_energy`` (one row per run, step, layer, k, source of T),
    ``losses`` (evaluation loss and unigram entropy per run and step), ``summary`` (the
    stage's ``summary.json``: runs with family, seed and size; the v1/v2 counts), and
    ``warmup``: the same tables of A7's warm-up alternative (``None``: not measured)."""

    r_energy: pd.DataFrame
    losses: pd.DataFrame
    summary: Mapping[str, Any]
    warmup: Tables | None = None

    def model(self, run: str) -> str:
        return Path(run).name

    def family(self, run: str) -> str:
        return str(self.summary["runs"][run]["family"])


def load_tables(out_dir: str | Path, warmup_dir: str | Path | None = None) -> Tables:
    """The tables :mod:`geolib.experiments.gradient_energy` wrote in ``out_dir`` (and, with
    ``warmup_dir``, those of A7's warm-up alternative)."""
    out = Path(out_dir)
    return Tables(
        pd.read_csv(out / "r_energy.csv"),
        pd.read_csv(out / "losses.csv"),
        json.loads((out / "summary.json").read_text()),
        load_tables(warmup_dir) if warmup_dir is not None else None,
    )


def on_steps(tables: Tables, steps: tuple[int, ...] | None) -> Tables:
    """``tables`` with only the checkpoints at ``steps`` (``None``: all of them): what A4's
    units and A6's matched progress read (``gradient_energy.verdict_steps``)."""
    if steps is None:
        return tables
    keep = set(steps)
    return Tables(
        tables.r_energy[tables.r_energy["step"].isin(keep)],
        tables.losses[tables.losses["step"].isin(keep)],
        tables.summary,
        tables.warmup,
    )


def learned_models(tables: Tables, margin: float) -> Learners:
    """Which of the stage's runs learned (:func:`geolib.verdicts.learners.learners_of_runs`)."""
    return learners_of_runs(list(tables.summary["runs"]), tables.losses, margin)


def learned_steps(losses: pd.DataFrame, run: str, margin: float) -> set[int]:
    g = losses[losses["run"] == run]
    return {int(s) for s in g.loc[g["eval_loss"] <= g["unigram_entropy"] - margin, "step"]}


def blocks(r: pd.DataFrame, k: int, source: str = REFIT) -> pd.DataFrame:
    return r[(r["layer"] != "embed") & (r["k"] == k) & (r["source"] == source)]


def decoders(tables: Tables, runs: tuple[str, ...]) -> list[str]:
    dec = set(tables.r_energy.loc[tables.r_energy["decoder"].astype(bool), "run"])
    return [r for r in runs if r in dec]


def measured_ranks(tables: Tables) -> set[int]:
    return {int(v) for v in tables.r_energy["k"].unique()}


def a4_per_model(
    tables: Tables,
    runs: list[str],
    *,
    k: int,
    early_share: float,
    margin: float,
    r_bar: float,
    no_effect: float,
    bound: str = "ci_low",
) -> pd.DataFrame:
    """A4 v3's count per model: its units are block layers × learned early checkpoints
    (1 <= step <= early_share × final step, loss ``margin`` below the unigram entropy) at rank
    ``k``, T refitted, whose ceiling reaches ``r_bar``; ``hits``: units whose ``bound`` is above
    ``r_bar``; ``effect``: units whose lower bound is above ``no_effect`` (R >> 1);
    ``step0_hits`` of ``step0_units``: the same count on the untrained network (step 0)."""
    if bound not in ("ci_low", "r_energy"):
        raise ValueError(f"bound must be 'ci_low' or 'r_energy', got {bound!r}")
    rows = []
    rows_k = blocks(tables.r_energy, k)
    for run in runs:
        g = rows_k[rows_k["run"] == run]
        if g.empty:
            raise ValueError(f"no rank-{k} rows for {run}")
        final = int(g["step"].max())
        early = {s for s in learned_steps(tables.losses, run, margin) if 1 <= s}
        early = {s for s in early if s <= early_share * final}
        units = g[g["step"].isin(early) & (g["ceiling"] >= r_bar)]
        step0 = g[(g["step"] == 0) & (g["ceiling"] >= r_bar)]
        rows.append(
            {
                "run": run,
                "model": tables.model(run),
                "family": tables.family(run),
                "steps": ", ".join(str(s) for s in sorted(units["step"].unique())),
                "units": len(units),
                "hits": int((units[bound] > r_bar).sum()),
                "effect": int((units["ci_low"] > no_effect).sum()),
                "step0_units": len(step0),
                "step0_hits": int((step0["ci_low"] > r_bar).sum()),
            }
        )
    return pd.DataFrame(rows)


def a6_per_model(tables: Tables, runs: list[str], *, k: int, progress: float) -> pd.DataFrame:
    """A6 v3's value per model at matched learning progress: the first checkpoint where the
    model has made ``progress`` of its loss drop from step 0 to its final step, and there the
    median over block layers of log R_energy (rank ``k``, T refitted)."""
    progress = check.scalar("progress", progress, low=0.0, strict=True)
    if progress > 1:
        raise ValueError(f"progress must be in (0, 1], got {progress}")
    rows_k = blocks(tables.r_energy, k)
    rows = []
    for run in runs:
        lo = tables.losses[tables.losses["run"] == run].sort_values("step")
        first, last = float(lo["eval_loss"].iloc[0]), float(lo["eval_loss"].iloc[-1])
        drop = (first - lo["eval_loss"]) / (first - last) if first > last else lo["step"] * 0.0
        reached = lo.loc[drop >= progress - 1e-12, "step"]
        step = int(reached.iloc[0]) if len(reached) else int(lo["step"].iloc[-1])
        at = rows_k[(rows_k["run"] == run) & (rows_k["step"] == step)]
        rows.append(
            {
                "run": run,
                "model": tables.model(run),
                "family": tables.family(run),
                "decoder": bool(at["decoder"].iloc[0]) if len(at) else None,
                "step": step,
                "log_r": float(np.median(np.log(at["r_energy"]))) if len(at) else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=["run", "model", "family", "decoder", "step", "log_r"])


def a6_per_step(tables: Tables, runs: list[str], *, k: int) -> pd.DataFrame:
    """v2's kind of number step by step, for learned models: the decoders' median R_energy over
    the encoders' at each checkpoint both have (block layers, rank ``k``, T refitted)."""
    b = blocks(tables.r_energy, k)
    b = b[b["run"].isin(runs) & (b["step"] >= 1)]
    med = b.groupby(["decoder", "step"])["r_energy"].median().unstack(0)
    if True not in med or False not in med:
        return pd.DataFrame(columns=["step", "decoders", "encoders", "ratio"])
    both = med.dropna()
    return pd.DataFrame(
        {
            "step": both.index.astype(int),
            "decoders": both[True].to_numpy(),
            "encoders": both[False].to_numpy(),
            "ratio": (both[True] / both[False]).to_numpy(),
        }
    )


def a7_per_model(
    tables: Tables,
    runs: list[str],
    *,
    k: int,
    early_share: float,
    margin: float,
    frozen_sources: list[int],
    after_warmup: float = 0.0,
    warmup_steps: int = 0,
    null_source: int | None = None,
) -> pd.DataFrame:
    """A7 v3 per model: where the median over block layers of the refitted R_energy peaks
    (steps > ``after_warmup`` × ``warmup_steps``, and >= 1) and the searched checkpoints on
    each side of it (:func:`~geolib.verdicts.peak_timing.bracket`), the first checkpoint at which
    the model has learned (``learned_step``; NaN: never), whether the peak is in the first
    ``early_share`` of training, the peak-to-final ratio with conservative bounds (peak low /
    final high, peak high / final low; medians over layers), and, at the final checkpoint, the
    difference of median log R_energy between T frozen at the first learned source step within
    the early phase and T frozen at the null: the last source step not yet learned (or
    ``null_source``)."""
    rows_k = blocks(tables.r_energy, k)
    rows = []
    for run in runs:
        g = rows_k[rows_k["run"] == run]
        final = int(g["step"].max())
        window = g[(g["step"] >= 1) & (g["step"] > after_warmup * warmup_steps)]
        if window.empty:  # no checkpoint to search (a run shorter than the warm-up asked for)
            continue
        curve = window.groupby("step")["r_energy"].median()
        peak = int(curve.idxmax())
        around = bracket(curve.index, peak)
        at_peak = g[g["step"] == peak].set_index("layer")
        at_end = g[g["step"] == final].set_index("layer").loc[at_peak.index]
        ratio = float(np.median(at_peak["r_energy"] / at_end["r_energy"]))
        low = float(np.median(at_peak["ci_low"] / at_end["ci_high"]))
        high = float(np.median(at_peak["ci_high"] / at_end["ci_low"]))
        learned = learned_steps(tables.losses, run, margin)
        first_learned = min((t for t in learned if t >= 1), default=None)
        early = early_share * final
        post = [s for s in sorted(frozen_sources) if s in learned and s <= early]
        pre = [s for s in sorted(frozen_sources) if s not in learned and s < final]
        pre_s = null_source if null_source is not None else (pre[-1] if pre else None)
        post_s = post[0] if post else None
        ends = {}
        for s in {pre_s, post_s} - {None}:
            f = blocks(tables.r_energy, k, f"step-{s}")
            f = f[(f["run"] == run) & (f["step"] == final)]
            ends[s] = float(np.median(np.log(f["r_energy"]))) if len(f) else math.nan
        diff = math.nan
        if pre_s is not None and post_s is not None and post_s != pre_s:
            diff = ends[post_s] - ends[pre_s]
        rows.append(
            {
                "run": run,
                "model": tables.model(run),
                "family": tables.family(run),
                "seed": tables.summary["runs"][run].get("seed"),
                "peak_step": peak,
                "before_peak": around.before,
                "after_peak": around.after,
                "bracketed": around.bracketed,
                "learned_step": first_learned if first_learned is not None else math.nan,
                "final_step": final,
                "peak_early": peak <= early,
                "peak_over_final": ratio,
                "ratio_low": low,
                "ratio_high": high,
                "strongest_early": bool(peak <= early and low > 1.0),
                "null_source": pre_s,
                "early_source": post_s,
                "null_end_r": math.exp(ends[pre_s]) if pre_s is not None else math.nan,
                "early_end_r": math.exp(ends[post_s]) if post_s is not None else math.nan,
                "end_log_r_gain": diff,
            }
        )
    return pd.DataFrame(rows)


def bracket_words(row: Any) -> str:
    """``"64 (48 | 80)"``: a per-model row's peak step and the checkpoints around it."""
    side = [str(int(x)) if pd.notna(x) else "none" for x in (row.before_peak, row.after_peak)]
    return f"{int(row.peak_step)} ({side[0]} | {side[1]})"


def first_after(tables: Tables, warmup: int) -> int:
    steps = sorted(int(s) for s in tables.r_energy["step"].unique() if s > warmup)
    return steps[0] if steps else -1


def margins_words(tables: Tables) -> str:
    """Every run's final margin below the unigram entropy (nats), encoders and decoders, e.g.
    ``"Final loss below the unigram entropy (nats): pythia 1.21, bert 0.61"``."""
    last = tables.losses.loc[tables.losses.groupby("run", sort=False)["step"].idxmax()]
    below = last["unigram_entropy"] - last["eval_loss"]
    return "Final loss below the unigram entropy (nats): " + ", ".join(
        f"{tables.model(r)} {m:.3g}" for r, m in zip(last["run"], below, strict=True)
    )
