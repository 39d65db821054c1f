"""Frequency and geometric freedom in trained models (claim A1, empirical half): the chapter's
verdicts.

Rules v3 (``params.yaml``: ``frequency_collapse.a1_v3``, ``a1_states_rule_v3``,
``a1_rows_rule_v3``) take the **trained model** as the unit, on the tables of the analysis stage
(:mod:`geolib.experiments.frequency_collapse`). States: each learned AdamW model's share of its
block layers whose within-type variance falls with frequency (the slope's whole interval below
0), summarised over models with a bounded interval
(:func:`geolib.measure.stats.share_over_models`). Rows: the share of learned AdamW models whose
embedding rows both jitter less late and settle earlier with frequency (Clopper–Pearson over
models). Premise: the fits of every entering model span ``min_decades`` of training frequency.
The two halves are combined (:func:`~geolib.verdicts.rules.deciding_check`); the v1 and v2
verdicts (pooled units, from the stage's ``summary.json``) stay on the row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from geolib.measure.stats import count_excluding, proportion_ci, share_over_models
from geolib.verdicts.chapters.common import V3Section, read_tables, run_columns, v3_claim
from geolib.verdicts.chapters.interface import own_section, read_with_losses
from geolib.verdicts.claims import Claim
from geolib.verdicts.learners import Learners, learners_of_runs
from geolib.verdicts.markup import sentence
from geolib.verdicts.rules import (
    NOT_RUN,
    Verdict,
    deciding_check,
    given_premise,
    premise_fails,
    rule_from_params,
    rule_with,
)

CHAPTER, ANCHOR = "frequency_collapse", "verdict-a1-trained"
MAIN_OPTIMIZER = "adamw"


# ---------------------------------------------------------------------------------------------
# Parameters and tables
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Section(V3Section):
    """The ``frequency_collapse`` section as the verdicts read it (the shared fields:
    :class:`~geolib.verdicts.chapters.common.V3Section`), with the fewest decades of training
    frequency a model's fits must span (``a1_v3.min_decades``)."""

    CHAPTER = CHAPTER
    V3 = "a1_v3"

    min_decades: float

    @classmethod
    def check_v3(cls, v3: Mapping[str, Any]) -> None:
        """A declared alternative changes the optimizer or the bar, nothing else."""
        for name, change in v3["alternatives"].items():
            if not change or not set(change) <= {"optimizer", "threshold"}:
                raise ValueError(
                    f"alternative {name!r} may change the optimizer or the bar only: {change}"
                )

    @classmethod
    def own_fields(cls, section: Mapping[str, Any], v3: Mapping[str, Any]) -> dict[str, Any]:
        return {"min_decades": float(v3["min_decades"])}


@dataclass(frozen=True)
class Tables:
    """The stage's tables: ``states`` (run, layer, type, train_count, …), ``rows`` (run, type,
    train_count, jitter, settle_step), ``fits`` (run, optimizer, measure, layer, estimate, low,
    high, n_types), ``models`` (``a1_per_model.csv``: each model's A1 v3 numbers), ``summary``
    (``summary.json``: v1 counts per optimizer, ``runs`` with family and seed) and ``losses``
    (evaluation loss and unigram entropy per run and step)."""

    states: pd.DataFrame
    rows: pd.DataFrame
    fits: pd.DataFrame
    models: pd.DataFrame
    summary: Mapping[str, Any]
    losses: pd.DataFrame


def load_tables(out_dir: str | Path, losses: str | Path) -> Tables:
    """The tables the analysis stage wrote in ``out_dir``, and the loss table at ``losses``."""
    return read_tables(
        Tables, out_dir, losses, "states.csv", "rows.csv", "fits.csv", "a1_per_model.csv"
    )


def read_section(params_path: str | Path, overrides: Mapping[str, Any] | None = None) -> Section:
    """A1's section (``overrides`` applied) with ``verdicts``, every field checked."""
    return own_section(params_path, CHAPTER, overrides, Section)


def read(
    params_path: str | Path, overrides: Mapping[str, Any] | None = None
) -> tuple[Section, Tables]:
    """A1's section (``overrides`` applied), the frequency-collapse stage's tables and the loss
    table that says who learned (:mod:`geolib.verdicts.chapters.interface`)."""
    return read_with_losses(params_path, CHAPTER, overrides, Section, load_tables)


# ---------------------------------------------------------------------------------------------
# Per model
# ---------------------------------------------------------------------------------------------


def per_model(tables: Tables, optimizer: str, margin: float) -> pd.DataFrame:
    """One row per run trained with ``optimizer`` (the stage's ``a1_per_model.csv``: its
    layers with a state fit and those that fall, the decades its fits span, whether its rows
    settle), with its family, seed and whether it learned."""
    m = tables.models[tables.models["optimizer"] == optimizer]
    lv = learners_of_runs(m["run"].tolist(), tables.losses, margin)
    numbers = ["layers", "falls", "state_decades", "rows_settle", "row_decades"]
    return pd.DataFrame(
        [
            {**run_columns(tables.summary, r["run"], lv), **r[numbers].to_dict()}
            | {"rows_settle": None if pd.isna(r["rows_settle"]) else bool(r["rows_settle"])}
            for _, r in m.iterrows()
        ]
    )


# ---------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """A1's v3 verdict with what the chapter prints."""

    verdict: Verdict
    key_number: str
    models: pd.DataFrame
    learners: Learners | None
    detail: str = ""


def _span_premise(models: pd.DataFrame, column: str, min_decades: float) -> tuple[bool, str]:
    short = models[models[column] < min_decades]
    why = "fits spanning fewer than {:g} decades of training frequency: {}".format(
        min_decades, ", ".join(f"{m} ({d:.2g})" for m, d in short[["model", column]].to_numpy())
    )
    return short.empty, why


#: a half's share over the entering models: ``(estimate, low, high, in words)``
Share = tuple[float, float, float, str]


def _half(
    models: pd.DataFrame,
    section: Section,
    change: Mapping[str, Any] | None,
    rule_key: str,
    enters: Callable[[pd.DataFrame], pd.Series],
    none_enter: str,
    decades: str,
    share: Callable[[pd.DataFrame], Share],
) -> tuple[Verdict, str]:
    """One half of A1 v3, decided alike for states and rows: ``share`` over the entering models
    (learned, and ``enters``) against rule ``rule_key`` (its ``threshold`` replaced where a
    declared alternative changes it), after the premise that their fits span ``min_decades``
    (column ``decades``); with no model entering, the premise fails (``none_enter``)."""
    rule = rule_with(section.raw[rule_key], change or {})
    m = models[models["learned"] & enters(models)]
    if m.empty:
        return premise_fails(rule, none_enter), none_enter
    value, low, high, words = share(m)
    holds, why = _span_premise(m, decades, section.min_decades)
    return given_premise(rule, holds, why, lambda: rule.decide(value, low, high)), words


def states_v3(
    models: pd.DataFrame, section: Section, change: Mapping[str, Any] | None = None
) -> tuple[Verdict, str]:
    """The states half on the entering models (learned, with a state fit): their shares of
    falling layers over models (logit scale, bounded), against ``a1_states_rule_v3`` (its
    ``threshold`` replaced where a declared alternative changes it)."""

    def share(m: pd.DataFrame) -> Share:
        iv = share_over_models(m["falls"], m["layers"], section.ci_level)
        return (
            iv.value,
            iv.low,
            iv.high,
            f"share of block layers whose state variance falls with frequency {iv.value:.3g} "
            f"[{iv.low:.3g}, {iv.high:.3g}] over {iv.n} learned model{'s' * (iv.n != 1)} "
            f"({iv.method}; {int(m['falls'].sum())} of {int(m['layers'].sum())} layers)",
        )

    return _half(
        models,
        section,
        change,
        "a1_states_rule_v3",
        lambda m: m["layers"] > 0,
        "no learned model has a state fit",
        "state_decades",
        share,
    )


def rows_v3(
    models: pd.DataFrame, section: Section, change: Mapping[str, Any] | None = None
) -> tuple[Verdict, str]:
    """The rows half: the share of entering models whose rows settle by frequency
    (Clopper–Pearson over models), against ``a1_rows_rule_v3`` (as :func:`states_v3`)."""

    def share(m: pd.DataFrame) -> Share:
        k = int(m["rows_settle"].astype(bool).sum())
        cp = proportion_ci(k, len(m), section.ci_level)
        return (
            cp.fraction,
            cp.low,
            cp.high,
            f"rows settle by frequency in {k} of {len(m)} learned model{'s' * (len(m) != 1)}, "
            f"share {cp.fraction:.3g} [{cp.low:.3g}, {cp.high:.3g}] (Clopper-Pearson)",
        )

    return _half(
        models,
        section,
        change,
        "a1_rows_rule_v3",
        lambda m: m["rows_settle"].notna(),
        "no learned model has both row fits",
        "row_decades",
        share,
    )


def a1_v3(
    tables: Tables,
    section: Section,
    change: Mapping[str, Any] | None = None,
    runs: list[str] | None = None,
) -> Outcome:
    """A1 v3 on the runs of one optimizer (``change``: a declared alternative; default AdamW),
    or on a subset of them (``runs``: one seed's). Both halves must hold (deciding_check). Not
    yet run: no run of that optimizer, or none whose loss any stage records."""
    optimizer = (change or {}).get("optimizer", MAIN_OPTIMIZER)
    rule = rule_from_params(section.raw["a1_states_rule_v3"])
    models = per_model(tables, optimizer, section.learned_margin)
    if runs is not None and len(models):
        models = models[models["run"].isin(runs)]
    if models.empty:
        why = f"no {optimizer} run measured"
        return Outcome(Verdict(NOT_RUN, rule.describe(), why), "", models, None)
    lv = learners_of_runs(models["run"].tolist(), tables.losses, section.learned_margin)
    if all(math.isnan(d) for d in lv.left_out.values()) and not lv.kept:
        why = (
            f"no stage records the losses of the {optimizer} runs: whether they learned is unknown"
        )
        return Outcome(Verdict(NOT_RUN, rule.describe(), why), "", models, lv)
    bar = {k: v for k, v in (change or {}).items() if k == "threshold"}
    v_states, w_states = states_v3(models, section, bar)
    v_rows, w_rows = rows_v3(models, section, bar)
    status, what = deciding_check([(v_states, w_states), (v_rows, w_rows)])
    rules = f"States: {v_states.rule} Rows: {v_rows.rule}"
    detail = (
        f"States: {v_states.status} ({v_states.reason}); rows: {v_rows.status} ({v_rows.reason})"
    )
    numbers = v_states.labelled("states") + v_rows.labelled("rows")
    return Outcome(
        Verdict(status, rules, what, numbers),
        f"{optimizer}: {w_states}; {w_rows}",
        models,
        lv,
        detail,
    )


# ---------------------------------------------------------------------------------------------
# Seeds, the table's intervals
# ---------------------------------------------------------------------------------------------


def seed_statuses(tables: Tables, section: Section, models: pd.DataFrame) -> dict[str, str]:
    """The v3 rules again on each seed's AdamW models."""
    return {
        str(seed): a1_v3(tables, section, runs=g["run"].tolist()).verdict.status
        for seed, g in models.groupby("seed", sort=False)
    }


def excluding(fits: pd.DataFrame) -> pd.DataFrame:
    """Per measure of ``fits.csv``: how many fits' bootstrap intervals (over types) exclude
    their estimate, of those with an interval (kept as drawn, never widened)."""
    rows = []
    for measure, g in fits.groupby("measure", sort=False):
        x, n = count_excluding(g["estimate"], g["low"], g["high"])
        rows.append({"measure": measure, "excluding": x, "fits": n})
    return pd.DataFrame(rows, columns=["measure", "excluding", "fits"])


def excluding_words(table: pd.DataFrame) -> str:
    parts = ", ".join(f"{m} {x} of {n}" for m, x, n in table.to_numpy())
    return f"bootstrap intervals excluding their estimate in fits.csv: {parts}"


# ---------------------------------------------------------------------------------------------
# The row
# ---------------------------------------------------------------------------------------------


def verdicts(tables: Tables, section: Section) -> list[Claim]:
    """The chapter's A1 row (trained models): v3 with v1 and v2 beside it, decided after
    seeing data."""
    o = a1_v3(tables, section)
    alts = {n: a1_v3(tables, section, c).verdict.status for n, c in section.alternatives.items()}
    before = section.history.statuses(tables.summary)["A1"]
    seeds = seed_statuses(tables, section, o.models) if len(o.models) else {}
    n = int(o.models["learned"].sum()) if len(o.models) else 0
    gone = o.learners.words() if o.learners else ""
    detail = (
        f"{o.detail or o.verdict.reason}. {sentence(gone)}. "
        f"{sentence(excluding_words(excluding(tables.fits)))}."
    )
    return [
        v3_claim(
            "A1",
            section,
            o.verdict,
            o.key_number,
            detail,
            anchor=ANCHOR,
            unit=f"trained model (learned {MAIN_OPTIMIZER} runs; n = {n})",
            seeds=seeds,
            alternatives=alts,
            rule_v1=before["v1"],
            rule_v2=before["v2"],
            runs=tables.summary["runs"],
        )
    ]
