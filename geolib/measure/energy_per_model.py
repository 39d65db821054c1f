"""What each trained model contributes to Paper A's A4, A6 and A7 (rules v3), from the
``R_energy`` and loss tables of the gradient-energy analysis stage: its learned early units
above the bar (A4), its typical R_energy at matched learning progress (A6), where its alignment
peaks and what T frozen early in learning keeps at the end (A7).

Tables as :mod:`geolib.experiments.gradient_energy` writes them: ``r_energy`` has one row per
(run, step, layer, k, source of T) with ``r_energy``, ``ci_low``, ``ci_high``, ``ceiling`` and
``decoder``; ``losses`` one row per (run, step) with ``eval_loss`` and ``unigram_entropy``;
``info`` maps each run to its ``family`` and ``seed``. Every function returns one row per run of
``info`` (its order) that has rows at rank ``k`` and a loss (A7: and a checkpoint in its searched
window): which models learned, and so enter a verdict, is the chapter's rule, and a learned
model without a row is the chapter's error.

A *view* is the keyword arguments of one claim's per-model function (:func:`view`): the
section's numbers with one declared alternative's change. The analysis stage
(:mod:`geolib.experiments.gradient_energy_models`) writes every declared view's table; the
chapter finds a view's rows by its arguments, so a table computed with other numbers is never
read as this one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from geolib.measure import validate as check
from geolib.measure.energy_counts import REFIT

#: the gradient-energy stage's tables these numbers are computed from, by its file names
INPUTS = ("r_energy.csv", "losses.csv", "summary.json")
#: what the per-model stage writes, by the names its reader looks for: one table per claim, the
#: warm-up alternative's A7 table, and ``views.json`` (each view's arguments by claim, the
#: warm-up's under :data:`WARMUP`; the SHA-256 of :data:`INPUTS` under ``INPUTS_KEY[warmup]``)
TABLE_FILES = {"A4": "a4.csv", "A6": "a6.csv", "A7": "a7.csv"}
WARMUP_FILE, VIEWS_FILE, WARMUP = "warmup_a7.csv", "views.json", "warmup"
INPUTS_KEY = {False: "inputs", True: "warmup_inputs"}
#: the claims whose tables hold a row for every run measured (A7 leaves out a run with no
#: checkpoint in its searched window)
EVERY_RUN = ("A4", "A6")


@dataclass(frozen=True)
class Bracket:
    """A peak step and the measured checkpoints just before and after it (``None``: none)."""

    peak: int
    before: int | None
    after: int | None

    @property
    def bracketed(self) -> bool:
        return self.before is not None and self.after is not None

    def words(self) -> str:
        side = [str(s) if s is not None else "none" for s in (self.before, self.after)]
        return f"{self.peak} ({side[0]} | {side[1]})"


def bracket(steps: Sequence[int], peak: int) -> Bracket:
    """The checkpoints of ``steps`` (the steps searched for the peak) on each side of ``peak``,
    which must be one of them: a peak read at one checkpoint says little unless a checkpoint
    lies on each side of it."""
    ordered = sorted({int(s) for s in steps})
    if int(peak) not in ordered:
        raise ValueError(f"peak step {peak} is not one of the searched steps {ordered}")
    i = ordered.index(int(peak))
    return Bracket(
        int(peak),
        ordered[i - 1] if i > 0 else None,
        ordered[i + 1] if i + 1 < len(ordered) else None,
    )


def blocks(r: pd.DataFrame, k: int, source: str = REFIT) -> pd.DataFrame:
    """The block layers' rows (not the embedding) at rank ``k`` with T from ``source``."""
    return r[(r["layer"] != "embed") & (r["k"] == k) & (r["source"] == source)]


def learned_steps(losses: pd.DataFrame, run: str, margin: float) -> set[int]:
    """The checkpoints of ``run`` whose evaluation loss lies ``margin`` nats or more below the
    unigram entropy: the model has learned more than token frequencies."""
    g = losses[losses["run"] == run]
    return {int(s) for s in g.loc[g["eval_loss"] <= g["unigram_entropy"] - margin, "step"]}


def on_steps(
    r_energy: pd.DataFrame, losses: pd.DataFrame, steps: Sequence[int] | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both tables with only the checkpoints at ``steps`` (``None``: all of them)."""
    if steps is None:
        return r_energy, losses
    keep = {int(s) for s in steps}
    return r_energy[r_energy["step"].isin(keep)], losses[losses["step"].isin(keep)]


def a4_per_model(
    r_energy: pd.DataFrame,
    losses: pd.DataFrame,
    info: Mapping[str, Mapping[str, Any]],
    *,
    k: int,
    early_share: float,
    margin: float,
    r_bar: float,
    no_effect: float,
    bound: str = "ci_low",
    steps: Sequence[int] | None = None,
) -> pd.DataFrame:
    """A4 v3's count per model: its units are block layers × learned early checkpoints
    (1 <= step <= early_share × final step, loss ``margin`` below the unigram entropy; of
    ``steps`` only, where given) at rank ``k``, T refitted, whose ceiling reaches ``r_bar``;
    ``hits``: units whose ``bound`` is above ``r_bar``; ``effect``: units whose lower bound is
    above ``no_effect`` (R >> 1); ``step0_hits`` of ``step0_units``: the same count on the
    untrained network (step 0)."""
    if bound not in ("ci_low", "r_energy"):
        raise ValueError(f"bound must be 'ci_low' or 'r_energy', got {bound!r}")
    r_energy, losses = on_steps(r_energy, losses, steps)
    rows = []
    rows_k = blocks(r_energy, k)
    for run in info:
        g = rows_k[rows_k["run"] == run]
        if g.empty:  # not measured at this rank: no row (the chapter names a learned one)
            continue
        final = int(g["step"].max())
        early = {s for s in learned_steps(losses, run, margin) if 1 <= s}
        early = {s for s in early if s <= early_share * final}
        units = g[g["step"].isin(early) & (g["ceiling"] >= r_bar)]
        step0 = g[(g["step"] == 0) & (g["ceiling"] >= r_bar)]
        rows.append(
            {
                "run": run,
                "model": Path(run).name,
                "family": str(info[run]["family"]),
                "steps": ", ".join(str(s) for s in sorted(units["step"].unique())),
                "units": len(units),
                "hits": int((units[bound] > r_bar).sum()),
                "effect": int((units["ci_low"] > no_effect).sum()),
                "step0_units": len(step0),
                "step0_hits": int((step0["ci_low"] > r_bar).sum()),
            }
        )
    return pd.DataFrame(rows)


def a6_per_model(
    r_energy: pd.DataFrame,
    losses: pd.DataFrame,
    info: Mapping[str, Mapping[str, Any]],
    *,
    k: int,
    progress: float,
    steps: Sequence[int] | None = None,
) -> pd.DataFrame:
    """A6 v3's value per model at matched learning progress: the first checkpoint (of
    ``steps``, where given) where the model has made ``progress`` of its loss drop from its
    first to its final checkpoint, and there the median over block layers of log R_energy
    (rank ``k``, T refitted)."""
    progress = check.scalar("progress", progress, low=0.0, strict=True)
    if progress > 1:
        raise ValueError(f"progress must be in (0, 1], got {progress}")
    r_energy, losses = on_steps(r_energy, losses, steps)
    rows_k = blocks(r_energy, k)
    rows = []
    for run in info:
        lo = losses[losses["run"] == run].sort_values("step")
        if lo.empty:  # no loss recorded: no matched progress (the chapter names a learned one)
            continue
        first, last = float(lo["eval_loss"].iloc[0]), float(lo["eval_loss"].iloc[-1])
        drop = (first - lo["eval_loss"]) / (first - last) if first > last else lo["step"] * 0.0
        reached = lo.loc[drop >= progress - 1e-12, "step"]
        step = int(reached.iloc[0]) if len(reached) else int(lo["step"].iloc[-1])
        at = rows_k[(rows_k["run"] == run) & (rows_k["step"] == step)]
        rows.append(
            {
                "run": run,
                "model": Path(run).name,
                "family": str(info[run]["family"]),
                "decoder": bool(at["decoder"].iloc[0]) if len(at) else None,
                "step": step,
                "log_r": float(np.median(np.log(at["r_energy"]))) if len(at) else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=["run", "model", "family", "decoder", "step", "log_r"])


def a6_per_step(r_energy: pd.DataFrame, runs: Sequence[str], *, k: int) -> pd.DataFrame:
    """v2's kind of number step by step, for ``runs``: the decoders' median R_energy over the
    encoders' at each checkpoint both have (block layers, rank ``k``, T refitted). A
    description, not a per-model number."""
    b = blocks(r_energy, k)
    b = b[b["run"].isin(list(runs)) & (b["step"] >= 1)]
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
    r_energy: pd.DataFrame,
    losses: pd.DataFrame,
    info: Mapping[str, Mapping[str, Any]],
    *,
    k: int,
    frozen_sources: Sequence[int],
    early_share: float,
    margin: float,
    after_warmup: float = 0.0,
    warmup_steps: int = 0,
    null_source: int | None = None,
) -> pd.DataFrame:
    """A7 v3 per model: where the median over block layers of the refitted R_energy peaks
    (steps > ``after_warmup`` × ``warmup_steps``, and >= 1) and the searched checkpoints on
    each side of it (:func:`bracket`), the first checkpoint at which the model has learned
    (``learned_step``; NaN: never), whether the peak is in the first ``early_share`` of
    training, the peak-to-final ratio with conservative bounds (peak low / final high, peak
    high / final low; medians over layers), and, at the final checkpoint, the difference of
    median log R_energy between T frozen at the first learned source step within the early
    phase and T frozen at the null: the last source step not yet learned (or ``null_source``).
    A run with no checkpoint in the searched window has no row."""
    rows_k = blocks(r_energy, k)
    rows = []
    for run in info:
        g = rows_k[rows_k["run"] == run]
        if g.empty:
            continue
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
        learned = learned_steps(losses, run, margin)
        first_learned = min((t for t in learned if t >= 1), default=None)
        early = early_share * final
        post = [s for s in sorted(frozen_sources) if s in learned and s <= early]
        pre = [s for s in sorted(frozen_sources) if s not in learned and s < final]
        pre_s = null_source if null_source is not None else (pre[-1] if pre else None)
        post_s = post[0] if post else None
        ends = {}
        for s in {pre_s, post_s} - {None}:
            f = blocks(r_energy, k, f"step-{s}")
            f = f[(f["run"] == run) & (f["step"] == final)]
            ends[s] = float(np.median(np.log(f["r_energy"]))) if len(f) else math.nan
        diff = math.nan
        if pre_s is not None and post_s is not None and post_s != pre_s:
            diff = ends[post_s] - ends[pre_s]
        rows.append(
            {
                "run": run,
                "model": Path(run).name,
                "family": str(info[run]["family"]),
                "seed": info[run].get("seed"),
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


PER_MODEL = {"A4": a4_per_model, "A6": a6_per_model, "A7": a7_per_model}
CLAIMS = tuple(PER_MODEL)


def view(
    claim: str, section: Mapping[str, Any], margin: float, change: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The keyword arguments of ``claim``'s per-model function under the gradient-energy
    ``section`` of ``params.yaml`` (``key_rank``, ``early_share``, ``verdict_steps``,
    ``frozen_sources``, ``a4_v3``, ``a6_v3``, ``a7_v3``), the learned ``margin`` (nats) and
    one alternative's ``change``, as JSON values: what the stage writes beside each table and
    what the chapter looks a table up by. A4 and A6 read the declared ``verdict_steps`` unless
    the change says ``steps: all``; A7 reads every checkpoint."""
    check.one_of("claim", claim, PER_MODEL)
    c = dict(change or {})
    k = int(c.get("k", section["key_rank"]))
    declared = section.get("verdict_steps")
    every = c.get("steps") == "all" or declared is None
    steps = None if every else sorted(int(s) for s in declared)
    if steps is not None and len(set(steps)) != len(steps):
        raise ValueError(f"verdict_steps repeats a step: {declared}")
    margin = check.scalar("margin", margin, low=0.0)
    if claim == "A4":
        p = section["a4_v3"]
        return {
            "k": k,
            "early_share": float(section["early_share"]),
            "margin": margin,
            "r_bar": float(p["r_bar"]),
            "no_effect": float(p["no_effect"]),
            "bound": str(c.get("bound", "ci_low")),
            "steps": steps,
        }
    if claim == "A6":
        progress = float(c.get("progress", section["a6_v3"]["progress"]))
        return {"k": k, "progress": progress, "steps": steps}
    null = c.get("null_source")
    return {
        "k": k,
        "early_share": float(c.get("early_share", section["early_share"])),
        "margin": margin,
        "frozen_sources": [int(s) for s in section["frozen_sources"]],
        "after_warmup": float(c.get("after_warmup", 0.0)),
        "warmup_steps": int(section["a7_v3"]["warmup_steps"]),
        "null_source": None if null is None else int(null),
    }


def declared_views(section: Mapping[str, Any], margin: float) -> dict[str, dict[str, dict]]:
    """Every view the section declares, per claim: ``"primary"`` (the rule's own numbers) and
    each alternative of ``a4_v3``, ``a6_v3``, ``a7_v3`` by its name; alternatives that change
    only the rule share the primary's arguments."""
    out = {}
    for claim in CLAIMS:
        alts = section[f"{claim.lower()}_v3"].get("alternatives") or {}
        out[claim] = {"primary": view(claim, section, margin)} | {
            name: view(claim, section, margin, change) for name, change in alts.items()
        }
    return out


def per_model(
    claim: str,
    r_energy: pd.DataFrame,
    losses: pd.DataFrame,
    info: Mapping[str, Mapping[str, Any]],
    args: Mapping[str, Any],
) -> pd.DataFrame:
    """``claim``'s per-model table for one view's arguments (:func:`view`)."""
    return PER_MODEL[claim](r_energy, losses, info, **args)
