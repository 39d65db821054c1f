"""Residual isotropy after removing the tangent subspace (claim A5): the chapter's verdicts.

Rule v3 (``params.yaml``: ``residual_isotropy.a5_v3`` and ``a5_rule_v3``) takes the **trained
model** as the unit. A model's key number is v2's: the median share ``f`` of the achievable gain
that removing T (frozen at ``a5_source``) delivers beyond the normal controls, over its block
layers and checkpoints after ``a5_source`` (from the analysis stage's ``summary.json``,
:mod:`geolib.experiments.residual_isotropy`). Per family, the mean over its learned seeds with a
Student-t interval over those models is decided by the rule; the families' statuses are combined
(all agree: that status; a mix: partly). A model enters only if it learned. The v1 (pooled) and
v2 (each model on its window bootstrap) verdicts stay on the row; the stage's bootstrap intervals
may exclude their estimate (kept as drawn): the chapter counts them, column by column.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from geolib.measure.stats import count_excluding, mean_ci
from geolib.verdicts.chapters.common import (
    V3Section,
    read_tables,
    run_columns,
    v3_claim,
)
from geolib.verdicts.chapters.interface import own_section, read_with_losses
from geolib.verdicts.claims import Claim
from geolib.verdicts.evidence import decide_clipped
from geolib.verdicts.learners import Learners, learners_of_runs
from geolib.verdicts.markup import sentence, words
from geolib.verdicts.rules import (
    INCONCLUSIVE,
    NOT_RUN,
    Verdict,
    combine_statuses,
    given_premise,
    rule_from_params,
)

CHAPTER, ANCHOR = "residual_isotropy", "verdict-a5"
UNDEFINED = "no unit's top-k removal gains more than its normal controls"
#: the table's columns with bootstrap intervals (``<col>_low``, ``<col>_high``)
BOOTSTRAPPED = ("d_t", "d_n", "d_max", "fraction")


# ---------------------------------------------------------------------------------------------
# Parameters and tables
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Section(V3Section):
    """The ``residual_isotropy`` section as the verdicts read it (the shared fields:
    :class:`~geolib.verdicts.chapters.common.V3Section`), with the key number's rank, zeta and
    source of T, and the fewest learned models a family's interval needs."""

    CHAPTER = CHAPTER
    V3 = "a5_v3"

    key_rank: int
    zeta: float
    a5_source: int
    min_models: int

    @classmethod
    def own_fields(cls, section: Mapping[str, Any], v3: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "key_rank": int(section["key_rank"]),
            "zeta": float(section["zeta"]),
            "a5_source": int(section["a5_source"]),
            "min_models": int(v3["min_models"]),
        }


@dataclass(frozen=True)
class Tables:
    """``residual`` (``residual_isotropy.csv``: one row per run, step, layer, k, zeta and source
    of T), ``summary`` (the stage's ``summary.json``: ``runs`` with family and seed, ``a5``,
    ``a5_v2``, ``by_seed``, the references) and ``losses`` (evaluation loss and unigram entropy
    per run and step: which models learned)."""

    residual: pd.DataFrame
    summary: Mapping[str, Any]
    losses: pd.DataFrame


def load_tables(out_dir: str | Path, losses: str | Path) -> Tables:
    """The tables the analysis stage wrote in ``out_dir``, and the loss table at ``losses``."""
    return read_tables(Tables, out_dir, losses, "residual_isotropy.csv")


def read_section(params_path: str | Path, overrides: Mapping[str, Any] | None = None) -> Section:
    """A5's section (``overrides`` applied) with ``verdicts``, every field checked."""
    return own_section(params_path, CHAPTER, overrides, Section)


def read(
    params_path: str | Path, overrides: Mapping[str, Any] | None = None
) -> tuple[Section, Tables]:
    """A5's section (``overrides`` applied) with the residual-isotropy stage's table and the
    loss table that says who learned (:mod:`geolib.verdicts.chapters.interface`)."""
    return read_with_losses(params_path, CHAPTER, overrides, Section, load_tables)


# ---------------------------------------------------------------------------------------------
# Which models enter
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Per model and per family
# ---------------------------------------------------------------------------------------------


def change_key(section: Section, change: Mapping[str, Any] | None = None) -> str:
    """The stage's key for a zeta and the treatment of undefined units, e.g. ``"0.2/drop"``."""
    change = change or {}
    return f"{float(change.get('zeta', section.zeta)):g}/{change.get('undefined', 'drop')}"


def per_model(tables: Tables, section: Section, change: Mapping[str, Any] | None = None):
    """One row per run: family, seed, whether it learned, its key number (median f) with the
    window-bootstrap interval, units and undefined units, whether that interval excludes its
    estimate, and its v2-style status (the rule on that interval). ``None`` if the stage did
    not measure this zeta."""
    by_run = tables.summary.get("a5_v2", {}).get(change_key(section, change))
    if by_run is None:
        return None
    rule = rule_from_params(section.raw["a5_rule_v3"])
    lv = learners_of_runs(list(by_run), tables.losses, section.learned_margin)
    return pd.DataFrame(
        [{**run_columns(tables.summary, run, lv), **decided(rule, d)} for run, d in by_run.items()]
    )


def _number(v: Any) -> float:
    return math.nan if v is None else float(v)


def decided(rule, d: Mapping[str, Any] | None) -> dict[str, Any]:
    """A stage interval ``d`` as a table's columns: its estimate (``value``), bounds, units and
    undefined units, whether it excludes its estimate, and ``rule``'s status on it
    (:func:`decide_clipped`)."""
    v, excluded = decide_clipped(rule, d, UNDEFINED)
    d = d or {}
    return {
        "value": _number(d.get("value")),
        "low": _number(d.get("low")),
        "high": _number(d.get("high")),
        "n_units": d.get("n_units", 0),
        "n_undefined": d.get("n_undefined", 0),
        "excludes_estimate": excluded,
        "status": v.status,
    }


def per_family(models: pd.DataFrame, section: Section) -> pd.DataFrame:
    """Per family: the mean of its learned models' key numbers with a Student-t interval over
    those models, and the rule's status; inconclusive with fewer than ``min_models`` learned
    models whose share is defined (an interval over models needs them)."""
    rule = rule_from_params(section.raw["a5_rule_v3"])
    rows = []
    for family, g in models.groupby("family", sort=False):
        vals = g.loc[g["learned"] & np.isfinite(g["value"]), "value"].to_numpy(dtype=float)
        row = {"family": family, "models": int(vals.size), "of": len(g)}
        if vals.size < section.min_models:
            why = (
                f"premise fails: {vals.size} learned model(s) of {family} with a defined "
                f"share; an interval over models needs {section.min_models}"
            )
            row |= {"value": math.nan, "low": math.nan, "high": math.nan}
            row |= {"status": INCONCLUSIVE, "reason": why}
        else:
            iv = mean_ci(vals, section.ci_level, "model")
            v = rule.decide(iv.value, iv.low, iv.high)
            row |= {"value": iv.value, "low": iv.low, "high": iv.high}
            row |= {"status": v.status, "reason": v.reason}
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Outcome:
    """A5's v3 verdict with what the chapter prints."""

    verdict: Verdict
    key_number: str
    families: pd.DataFrame | None
    models: pd.DataFrame | None
    learners: Learners | None


def a5_v3(tables: Tables, section: Section, change: Mapping[str, Any] | None = None) -> Outcome:
    """A5 v3: each family decided on its learned models (:func:`per_family`), combined.
    Premise: at least one learned model. ``change``: a declared alternative (zeta, undefined
    units); a zeta the stage did not measure is ``not yet run``."""
    rule = rule_from_params(section.raw["a5_rule_v3"])
    models = per_model(tables, section, change)
    if models is None:
        why = f"the stage did not measure {change_key(section, change)}"
        return Outcome(Verdict(NOT_RUN, rule.describe(), why), "", None, None, None)
    lv = learners_of_runs(models["run"].tolist(), tables.losses, section.learned_margin)
    fams = per_family(models, section)

    def decide() -> Verdict:
        status = combine_statuses(fams["status"])
        why = "; ".join(
            f"{f}: {s} ({r})" for f, s, r in fams[["family", "status", "reason"]].values
        )
        defined = fams[np.isfinite(fams["value"].astype(float))]
        numbers = tuple(
            n
            for f, e, lo, hi in defined[["family", "value", "low", "high"]].values
            for n in rule.decide(e, lo, hi).labelled(str(f))
        )
        return Verdict(status, rule.describe(), why, numbers)

    v = given_premise(rule, bool(lv.kept), f"no model learned ({lv.words()})", decide)
    key = (
        f"median share f of the top-{section.key_rank} gain, T frozen at step "
        f"{section.a5_source}, mean over learned seeds per family: "
        + "; ".join(_family_words(r) for r in fams.to_dict("records"))
    )
    return Outcome(v, key, fams, models, lv)


def _family_words(r: Mapping[str, Any]) -> str:
    if not math.isfinite(r["value"]):
        return f"{r['family']} undefined ({r['models']} of {r['of']} models)"
    return (
        f"{r['family']} {r['value']:.3g} [{r['low']:.3g}, {r['high']:.3g}] "
        f"({r['models']} of {r['of']} models, t)"
    )


# ---------------------------------------------------------------------------------------------
# v1, v2, seeds, the table's intervals
# ---------------------------------------------------------------------------------------------


def v1_by_zeta(tables: Tables, section: Section) -> pd.DataFrame:
    """The v1 rule (pooled over models) at every zeta the stage measured: does it hinge on
    zeta? One row per zeta: the pooled median f, its interval, units, undefined units, whether
    the interval excludes its estimate, and the status."""
    rule = rule_from_params(section.raw["a5_rule"])
    rows = [
        {"zeta": float(z), **decided(rule, d)}
        for z, d in tables.summary.get("a5_by_zeta", {}).items()
    ]
    names = {"value": "median f", "n_units": "units", "n_undefined": "undefined"}
    return pd.DataFrame(rows).rename(columns=names)


def seed_statuses(tables: Tables, section: Section) -> dict[str, str]:
    """Each seed's status: one model per family per seed has no interval over models, so a
    seed's learned models are decided on their window-bootstrap intervals and combined."""
    models = per_model(tables, section)
    out = {}
    for seed, g in models.groupby("seed", sort=False):
        kept = g[g["learned"]]
        out[str(seed)] = combine_statuses(kept["status"]) if len(kept) else INCONCLUSIVE
    return out


def excluding(residual: pd.DataFrame) -> pd.DataFrame:
    """Per bootstrapped column of ``residual_isotropy.csv``: how many rows' intervals exclude
    their estimate, of the rows with an interval (kept as drawn, never widened)."""
    rows = []
    for col in BOOTSTRAPPED:
        if f"{col}_low" not in residual:
            continue
        x, n = count_excluding(residual[col], residual[f"{col}_low"], residual[f"{col}_high"])
        rows.append({"column": col, "excluding": x, "rows": n})
    return pd.DataFrame(rows, columns=["column", "excluding", "rows"])


def excluding_words(table: pd.DataFrame) -> str:
    parts = ", ".join(f"{c} {x:,} of {n:,}" for c, x, n in table.to_numpy())
    return f"bootstrap intervals excluding their estimate in residual_isotropy.csv: {parts}"


# ---------------------------------------------------------------------------------------------
# The row
# ---------------------------------------------------------------------------------------------


def alternatives(tables: Tables, section: Section) -> dict[str, str]:
    """Each declared alternative's v3 status."""
    return {n: a5_v3(tables, section, c).verdict.status for n, c in section.alternatives.items()}


def verdicts(tables: Tables, section: Section) -> list[Claim]:
    """The chapter's A5 row: v3's status with v1 and v2 beside it, decided after seeing data."""
    o = a5_v3(tables, section)
    before = section.history.verdicts(tables.summary, change=change_key(section))["A5"]
    v1, v2 = before["v1"], before["v2"].status
    seeds = seed_statuses(tables, section)
    excl = excluding(tables.residual)
    m = o.models if o.models is not None else pd.DataFrame()
    per = "; ".join(
        f"{r['model']} {r['value']:.3g} [{r['low']:.3g}, {r['high']:.3g}] → {r['status']}"
        + (" (interval excludes its estimate)" if r["excludes_estimate"] else "")
        for r in m.to_dict("records")
        if r["learned"]
    )
    n_models = int(m["learned"].sum()) if len(m) else 0
    detail = (
        f"{o.verdict.reason}. Per learned model (window bootstrap): {per or 'none'}. "
        f"{sentence(o.learners.words()) if o.learners else ''}. "
        f"{sentence(excluding_words(excl))}. "
        f"v1 (pooled): {v1.reason}."
    )
    return [
        v3_claim(
            "A5",
            section,
            o.verdict,
            o.key_number,
            detail,
            anchor=ANCHOR,
            unit=f"trained model (learned), per family over its seeds (n = {n_models})",
            seeds=seeds,
            alternatives=alternatives(tables, section),
            rule_v1=v1.status,
            rule_v2=v2,
            runs=tables.summary["runs"],
            post_hoc=words(section.raw.get("after_data", {}).get("A5", "")),
        )
    ]
