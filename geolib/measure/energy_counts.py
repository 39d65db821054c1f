"""The units of Paper A's A4 and A7 rules (v2), counted from ``R_energy`` tables.

A table row is one (run, checkpoint, layer, rank, source of T) with ``r_energy``, its interval
(``ci_low``, ``ci_high``) and its ``ceiling`` (the most any rank-k subspace reaches), as
:mod:`geolib.experiments.gradient_energy` writes them. A unit is a decoder block layer (at a
checkpoint, for A4); these functions count the units and the successes a chapter's rule
decides on. Pure functions of pandas tables: a chapter can count a released model's units
without importing any model code.
"""

from __future__ import annotations

from typing import Any

#: the source label of a tangent subspace T fitted at the checkpoint being measured (as opposed
#: to one fitted at an earlier step and kept)
REFIT = "refit"


def _decoder_blocks(table: Any, k: int, source: str = REFIT) -> Any:
    rows = table[table["decoder"].astype(bool) & (table["layer"] != "embed")]
    return rows[(rows["k"] == k) & (rows["source"] == source)]


def a4_count(
    table: Any,
    losses: Any,
    *,
    k: int,
    early_max: int,
    threshold: float,
    no_effect: float,
    phase: str = "learned",
    bound: str = "ci_low",
) -> dict[str, Any]:
    """A4 (rule v2): how often R_energy is above ``threshold`` early in training.

    Units: decoder block layers at rank ``k``, T refitted, at the checkpoints of the phase —
    ``"learned"``: steps 1..``early_max`` whose evaluation loss is below the unigram entropy
    (the model has learned more than token frequencies); ``"early"``: every step
    1..``early_max`` (rule v1's window). A unit whose ceiling (the most any rank-k subspace
    reaches) is below ``threshold`` cannot show the effect and is left out (counted in
    ``n_below_ceiling``). A unit succeeds when ``bound`` (``"ci_low"``, or ``"r_energy"``: the
    point estimate) is above ``threshold``. ``premise``: more than half of the units have
    ``ci_low`` above ``no_effect`` (the isotropic value 1: the effect exists at all).
    ``table``: ``r_energy.csv``; ``losses``: ``losses.csv``.
    """
    if phase not in ("learned", "early"):
        raise ValueError(f"phase must be 'learned' or 'early', got {phase!r}")
    if bound not in ("ci_low", "r_energy"):
        raise ValueError(f"bound must be 'ci_low' or 'r_energy', got {bound!r}")
    rows = _decoder_blocks(table, k)
    rows = rows[(rows["step"] >= 1) & (rows["step"] <= early_max)]
    if phase == "learned":
        learned = losses[losses["eval_loss"] < losses["unigram_entropy"]]
        rows = rows.merge(learned[["run", "step"]], on=["run", "step"])
    return _a4_units(rows, "run", threshold, no_effect, bound)


def _a4_units(rows: Any, group: str, threshold: float, no_effect: float, bound: str) -> dict:
    """A4's count over the candidate ``rows`` (one per unit): those whose ceiling reaches
    ``threshold`` are the units, a unit succeeds when ``bound`` is above ``threshold``; the
    premise is that more than half of the units have ``ci_low`` above ``no_effect``.
    ``per_run`` counts (hits, units) by column ``group``."""
    can = rows[rows["ceiling"] >= threshold]
    hits = can[bound] > threshold
    per_run = {str(g): [int(h.sum()), int(h.size)] for g, h in hits.groupby(can[group], sort=True)}
    n_effect = int((can["ci_low"] > no_effect).sum())
    return {
        "successes": int(hits.sum()),
        "n_units": int(len(can)),
        "n_below_ceiling": int(len(rows) - len(can)),
        "n_effect": n_effect,
        "premise": bool(len(can) > 0 and n_effect > len(can) / 2),
        "per_run": per_run,
        "steps": sorted(int(s) for s in can["step"].unique()),
    }


def a4_released_count(
    table: Any,
    *,
    k: int,
    threshold: float,
    no_effect: float,
    bound: str = "ci_low",
    **_not_applicable: Any,
) -> dict[str, Any]:
    """A4 (rule v2) on a released model measured at its final checkpoint only
    (:func:`run_pretrained_stage`'s ``r_energy.csv``): units are its block layers × corpus
    domains at rank ``k``, T refitted; the rest as :func:`a4_count` (ceiling, bound, premise).
    There is no early or learned phase to select (one checkpoint): keys of that kind
    (``phase``, ``early_max``) are accepted and ignored, so one declared alternative applies
    to both. ``per_run`` is by domain."""
    if bound not in ("ci_low", "r_energy"):
        raise ValueError(f"bound must be 'ci_low' or 'r_energy', got {bound!r}")
    return _a4_units(_decoder_blocks(table, k), "domain", threshold, no_effect, bound)


def a7_count(
    table: Any, *, k: int, early_max: int, a7_source: int, no_effect: float
) -> dict[str, Any]:
    """A7 (rule v2): is the alignment strongest in the first phase and then maintained?

    Per decoder block layer at rank ``k``: the checkpoint (step >= 1) where the refitted
    R_energy peaks; the unit has an effect to imprint when that peak's lower bound is above
    ``no_effect`` (else it is left out: ``n_without_effect``). It succeeds when the peak lies in
    steps 1..``early_max`` (strongest early) and T frozen at ``a7_source`` still has R_energy
    with lower bound above ``no_effect`` at the final checkpoint (maintained).
    """
    rows = _decoder_blocks(table, k)
    rows = rows[rows["step"] >= 1]
    frozen = _decoder_blocks(table, k, f"step-{a7_source}")
    units = []
    for (run, layer), g in rows.groupby(["run", "layer"], sort=True):
        peak = g.loc[g["r_energy"].idxmax()]
        final = int(g["step"].max())
        fz = frozen[(frozen["run"] == run) & (frozen["layer"] == layer)]
        fz = fz[fz["step"] == final]
        units.append(
            {
                "run": str(run),
                "layer": str(layer),
                "peak_step": int(peak["step"]),
                "peak": float(peak["r_energy"]),
                "peak_low": float(peak["ci_low"]),
                "final_step": final,
                "final_refit": float(g.loc[g["step"] == final, "r_energy"].iloc[0]),
                "final_frozen_low": float(fz["ci_low"].iloc[0]) if len(fz) else float("nan"),
            }
        )
    with_effect = [u for u in units if u["peak_low"] > no_effect]
    for u in with_effect:
        u["strongest_early"] = u["peak_step"] <= early_max
        u["maintained"] = bool(u["final_frozen_low"] > no_effect)
    return {
        "successes": sum(u["strongest_early"] and u["maintained"] for u in with_effect),
        "n_units": len(with_effect),
        "n_without_effect": len(units) - len(with_effect),
        "units": units,
    }
