"""Gradient energy in tangent subspaces (claims A4, A6, A7): the chapter's verdicts.

Rules v3 (``params.yaml``: ``gradient_energy.a4_v3``, ``a6_v3``, ``a7_v3`` and their ``*_rule_v3``)
take the **trained model** as the unit: every key number is read per model from the tables of
the analysis stage :mod:`geolib.experiments.gradient_energy_models`
(:mod:`~geolib.verdicts.chapters.energy_tables`) and its interval is over models, bounded where
the number is a share. A model enters only if it learned (its final loss ``verdicts.learned_margin``
nats below the unigram entropy); "early" is a declared share of each model's training steps.
The v1 and v2 verdicts (from the stage's ``summary.json``) stay on each row beside v3. The
released model's A4 row describes what one final checkpoint can speak to; it is never combined
into A4's status.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from geolib.config import stage_params
from geolib.measure.energy_counts import a4_released_count
from geolib.measure.energy_per_model import blocks, view
from geolib.measure.stats import (
    count_excluding,
    mean_ci,
    proportion_ci,
    share_over_models,
    t_quantile,
)
from geolib.verdicts.chapters.energy_tables import (
    Tables,
    bracket_words,
    decoders,
    first_after,
    learned_models,
    load_tables,
    margins_words,
    measured_ranks,
    on_steps,
)
from geolib.verdicts.chapters.interface import own_section
from geolib.verdicts.claims import AFTER_DATA, DESCRIPTION, Claim, Confirmation, scale_of_runs
from geolib.verdicts.history import History
from geolib.verdicts.markup import words
from geolib.verdicts.peak_timing import PER_MODEL, warmup_alternative
from geolib.verdicts.rules import (
    INCONCLUSIVE,
    NOT_RUN,
    Verdict,
    deciding_check,
    given_premise,
    premise_fails,
    robustness,
    rule_from_params,
    rule_with,
)
from geolib.verdicts.schema import check_section, learned_margin

CHAPTER = "gradient_energy"


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """The ``gradient_energy`` section as the verdicts read it (``raw``: the whole mapping), with
    ``verdicts.learned_margin`` and the chapter's earlier rules (``verdicts.history``)."""

    key_rank: int
    early_share: float
    learned_margin: float
    ci_level: float
    a4: Mapping[str, Any]
    a6: Mapping[str, Any]
    a7: Mapping[str, Any]
    raw: Mapping[str, Any] = field(repr=False)
    history: History = field(repr=False)
    a7_warmup: Mapping[str, Any] | None = None
    verdict_steps: tuple[int, ...] | None = None
    confirmation: Confirmation = field(default_factory=Confirmation, repr=False)

    @classmethod
    def from_params(
        cls, section: Mapping[str, Any], verdicts: Mapping[str, Any] | None = None
    ) -> Section:
        """From the section and the top-level ``verdicts`` section; an error names every field
        that breaks the schema (:data:`~geolib.verdicts.schema.SCHEMAS`) at once."""
        check_section(CHAPTER, section)
        return cls(
            key_rank=int(section["key_rank"]),
            early_share=float(section["early_share"]),
            learned_margin=learned_margin(verdicts),
            ci_level=float(section["ci_level"]),
            a4=section["a4_v3"],
            a6=section["a6_v3"],
            a7=section["a7_v3"],
            raw=section,
            history=History.from_params(verdicts, CHAPTER, section),
            a7_warmup=section.get("a7_warmup"),
            verdict_steps=_steps(section.get("verdict_steps")),
            confirmation=Confirmation.from_params(verdicts),
        )


def read_section(params_path: str | Path, overrides: Mapping[str, Any] | None = None) -> Section:
    """This chapter's section (``overrides`` applied) with ``verdicts``, every field checked,
    and the released models' rule (``gradient_energy_pretrained.a4_rule``), which a later cell
    reads."""
    check_section(
        "gradient_energy_pretrained", stage_params(params_path, "gradient_energy_pretrained")
    )
    return own_section(params_path, CHAPTER, overrides, Section)


def read(
    params_path: str | Path, overrides: Mapping[str, Any] | None = None
) -> tuple[Section, Tables]:
    """This chapter's section and the tables it decides on
    (:mod:`geolib.verdicts.chapters.interface`); A7's warm-up alternative's tables come from its
    own stage (``warmup_gradient_energy``) where it has run; each model's numbers from the
    per-model stage (``gradient_energy_models``), which computed them with the parameters
    file's numbers, or, under ``overrides``, computed when asked by the stage's own functions
    (:class:`~geolib.verdicts.chapters.energy_tables.Computed`)."""
    section = read_section(params_path, overrides)
    warmup = Path(stage_params(params_path, "warmup_gradient_energy")["out_dir"])
    models = None if overrides else stage_params(params_path, "gradient_energy_models")["out_dir"]
    measured = (warmup / "summary.json").is_file()  # as the per-model stage asks
    return section, load_tables(section.raw["out_dir"], models, warmup if measured else None)


def _steps(steps: list[int] | None) -> tuple[int, ...] | None:
    """``verdict_steps`` in order (the schema checked each is a step), or ``None`` (every
    step); a repeated step would count a checkpoint twice."""
    if steps is None:
        return None
    if len(set(steps)) != len(steps):
        raise ValueError(f"gradient_energy.verdict_steps repeats a step: {steps}")
    return tuple(sorted(steps))


# ---------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One claim's v3 verdict with what the chapter prints: ``per_model`` (the numbers each
    model contributes) and the key number in words."""

    verdict: Verdict
    key_number: str
    per_model: pd.DataFrame
    alternatives: dict[str, str]
    detail: str = ""


def _view(claim: str, section: Section, change: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments ``claim``'s per-model table was computed with under ``change``."""
    return view(claim, section.raw, section.learned_margin, change)


def a4_v3(tables: Tables, section: Section, change: Mapping[str, Any] | None = None) -> Outcome:
    """A4 v3 (see ``params.yaml``): premise R >> 1, then the share of learned early units above
    ``r_bar``, both over learned decoders (:func:`share_over_models`)."""
    change = dict(change or {})
    tables = on_steps(tables, None if change.get("steps") == "all" else section.verdict_steps)
    p = section.a4
    k = int(change.get("k", section.key_rank))
    rule = rule_with(section.raw["a4_rule_v3"], change)
    lv = learned_models(tables, section.learned_margin)
    runs = decoders(tables, lv.kept)
    if k not in measured_ranks(tables):
        return Outcome(Verdict(NOT_RUN, rule.describe(), f"rank {k} not measured"), "", None, {})
    per = tables.models.rows("A4", _view("A4", section, change), runs)
    per = per[per["units"] > 0] if len(per) else per
    if per.empty:
        why = f"no learned decoder has a learned early unit ({lv.words()})"
        v = premise_fails(rule, why)
        return Outcome(v, why, per, {})
    level = section.ci_level
    big = share_over_models(per["effect"], per["units"], level)
    share = share_over_models(per["hits"], per["units"], level)
    why = (
        f"R >> 1 (lower bound above {float(p['no_effect']):g}) in a share {big.value:.3g} "
        f"[{big.low:.3g}, {big.high:.3g}] of the units over {big.n} models: not above one half"
    )
    v = given_premise(
        rule, bool(big.low > 0.5), why, lambda: rule.decide(share.value, share.low, share.high)
    )
    key = (
        f"share of learned early units with R_energy's lower bound above {float(p['r_bar']):g} "
        f"(k={k}) {share.value:.3g} [{share.low:.3g}, {share.high:.3g}] over {share.n} learned "
        f"decoders ({share.method}); R >> 1 in {big.value:.3g} [{big.low:.3g}, {big.high:.3g}]"
    )
    detail = (
        f"{v.reason}. Per model (hits/units): "
        + ", ".join(f"{m} {h}/{u}" for m, h, u in per[["model", "hits", "units"]].to_numpy())
        + f"; at step 0 (untrained): {int(per['step0_hits'].sum())} of "
        f"{int(per['step0_units'].sum())} units above {float(p['r_bar']):g}. {lv.words()}."
    )
    return Outcome(v, key, per, {}, detail)


def a6_v3(tables: Tables, section: Section, change: Mapping[str, Any] | None = None) -> Outcome:
    """A6 v3: learned decoders over learned encoders at matched learning progress; the ratio
    exp(mean log R_dec − mean log R_enc) with a Welch interval over models."""
    change = dict(change or {})
    tables = on_steps(tables, None if change.get("steps") == "all" else section.verdict_steps)
    k = int(change.get("k", section.key_rank))
    progress = float(change.get("progress", section.a6["progress"]))
    rule = rule_with(section.raw["a6_rule_v3"], change)
    if k not in measured_ranks(tables):
        return Outcome(Verdict(NOT_RUN, rule.describe(), f"rank {k} not measured"), "", None, {})
    lv = learned_models(tables, section.learned_margin)
    per = tables.models.rows("A6", _view("A6", section, change), lv.kept)
    dec = per.loc[per["decoder"] == True, "log_r"].dropna().to_numpy()  # noqa: E712
    enc = per.loc[per["decoder"] == False, "log_r"].dropna().to_numpy()  # noqa: E712
    if dec.size < 2 or enc.size < 2:
        why = (
            f"{dec.size} learned decoders and {enc.size} learned encoders: an interval over "
            f"models needs at least two of each ({lv.words()})"
        )
        v = premise_fails(rule, why)
        return Outcome(v, why, per, {}, f"{v.reason}. {margins_words(tables)}.")
    diff, low, high = welch(dec, enc, section.ci_level)
    ratio = (math.exp(diff), math.exp(low), math.exp(high))
    v = rule.decide(*ratio)
    key = (
        f"decoders/encoders typical R_energy at {progress:g} of the loss drop {ratio[0]:.3g} "
        f"[{ratio[1]:.3g}, {ratio[2]:.3g}] (Welch over {dec.size} + {enc.size} learned models)"
    )
    return Outcome(v, key, per, {}, f"{v.reason}. {lv.words()}. {margins_words(tables)}.")


def welch(a: np.ndarray, b: np.ndarray, level: float) -> tuple[float, float, float]:
    """Mean of ``a`` minus mean of ``b`` with its Welch–Satterthwaite t interval."""
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    d = float(a.mean() - b.mean())
    se = math.sqrt(va + vb)
    if se == 0:
        return d, d, d
    dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    h = t_quantile(level, max(1, int(math.floor(dof)))) * se
    return d, d - h, d + h


def a7_v3(tables: Tables, section: Section, change: Mapping[str, Any] | None = None) -> Outcome:
    """A7 v3: (1) strongest early — the share of learned decoders whose peak lies in the first
    ``early_share`` of training and above their final value (Clopper–Pearson over models) —
    and (2) maintained beyond a null — T frozen early in learning against T frozen before it at
    the final checkpoint (t over models). Both must hold (:func:`deciding_check`)."""
    change = dict(change or {})
    k = int(change.get("k", section.key_rank))
    rule = rule_with(section.raw["a7_rule_v3"], change)
    null_rule = rule_from_params(section.raw["a7_null_rule_v3"])
    if k not in measured_ranks(tables):
        return Outcome(Verdict(NOT_RUN, rule.describe(), f"rank {k} not measured"), "", None, {})
    lv = learned_models(tables, section.learned_margin)
    runs = decoders(tables, lv.kept)
    if not runs:
        why = f"no learned decoder ({lv.words()})"
        return Outcome(premise_fails(rule, why), why, None, {})
    per = tables.models.rows("A7", _view("A7", section, change), runs)
    if per.empty:
        why = "no learned decoder has a checkpoint in the searched window"
        v = premise_fails(rule, why)
        return Outcome(v, why, per, {})
    n, hits = len(per), int(per["strongest_early"].sum())
    cp = proportion_ci(hits, n, section.ci_level)
    v_early = rule.decide(cp.fraction, cp.low, cp.high)
    gains = per["end_log_r_gain"].dropna().to_numpy()
    if gains.size >= 2:
        iv = mean_ci(gains, section.ci_level, "model")
        v_null = null_rule.decide(iv.value, iv.low, iv.high)
        null_words = (
            f"end log R_energy, T frozen early in learning minus T frozen before learning "
            f"{iv.value:.3g} [{iv.low:.3g}, {iv.high:.3g}] over {gains.size} models (t)"
        )
    else:
        why = f"{gains.size} models have both a pre-learning and an early learned source step"
        v_null = Verdict(INCONCLUSIVE, null_rule.describe(), f"undefined: {why}")
        null_words = why
    early_words = (
        f"{hits} of {n} learned decoders peak in the first {section.early_share:.0%} of "
        f"training above their final value, share {cp.fraction:.3g} [{cp.low:.3g}, "
        f"{cp.high:.3g}] (Clopper-Pearson)"
    )
    status, what = deciding_check([(v_early, early_words), (v_null, null_words)])
    warm = int(section.a7["warmup_steps"])
    at_first = int((per["peak_step"] == first_after(tables, warm)).sum())
    null = per.dropna(subset=["end_log_r_gain"])
    null_words_end = (
        "T frozen before learning (step "
        + ", ".join(str(int(s)) for s in sorted(null["null_source"].unique()))
        + f") ends with median R_energy {null['null_end_r'].median():.3g} over the models, "
        "T frozen early in learning (step "
        + ", ".join(str(int(s)) for s in sorted(null["early_source"].unique()))
        + f") with {null['early_end_r'].median():.3g}. "
        if len(null)
        else ""
    )
    peaks = ", ".join(f"{r.model} {bracket_words(r)}" for r in per.itertuples())
    alternative = "" if change else warmup_words(tables, section, per, k)
    detail = (
        f"{null_words_end}strongest early: {v_early.reason}; beyond the null: {v_null.reason}. "
        f"Peak steps (the searched checkpoints before | after): {peaks}; "
        f"{int(per['bracketed'].sum())} of {n} with a checkpoint on each side; {at_first} of "
        f"{n} at the first checkpoint after the {warm}-step warm-up. {alternative}"
        f"{lv.words()}."
    )
    numbers = v_early.labelled("peaks early") + v_null.labelled("beyond the null")
    verdict = Verdict(status, f"{rule.describe()} And: {null_rule.describe()}", what, numbers)
    return Outcome(verdict, f"{early_words}; {null_words}", per, {}, detail)


def warmup_per_model(tables: Tables, section: Section, per: pd.DataFrame | None, k: int) -> tuple:
    """A7's per-model peaks of the default family (``per``: :func:`a7_per_model` of the learned
    decoders) and of the warm-up alternative's learned models, for
    :func:`~geolib.verdicts.peak_timing.warmup_alternative`."""
    p = section.a7_warmup or {}
    default = per[per["family"] == p.get("family")] if per is not None and len(per) else None
    alt = tables.warmup
    lv = learned_models(alt, section.learned_margin)
    longer = alt.models.rows("A7", _view("A7", section, {"k": k}), lv.kept)
    none = pd.DataFrame(columns=["model", *PER_MODEL])  # nothing learned: nothing to pair
    return (
        none if default is None or default.empty else default,
        none if longer.empty else longer,
        lv,
    )


def warmup_words(tables: Tables, section: Section, per: pd.DataFrame, k: int) -> str:
    """The warm-up alternative's sentence for A7's detail (empty where it is not measured)."""
    p = section.a7_warmup
    if p is None or tables.warmup is None:
        return ""
    default, longer, lv = warmup_per_model(tables, section, per, k)
    alt = warmup_alternative(
        default,
        longer,
        warmup_shift=int(p["shift_steps"]),
        tolerance=float(p["tolerance"]),
        min_pairs=int(p["min_pairs"]),
    )
    peaks = ", ".join(f"{r.model} {bracket_words(r)}" for r in longer.itertuples())
    return (
        f"Warm-up alternative ({p['family']}, declared before the runs; it does not change the "
        f"status): {alt.words}. Its peaks: {peaks or 'none'}; {lv.words()}. "
    )


def with_alternatives(outcome: Outcome, decide, section_alts: Mapping[str, Mapping]) -> Outcome:
    """``outcome`` with each declared alternative's status (``decide(change)``)."""
    alts = {name: decide(change).verdict.status for name, change in section_alts.items()}
    return Outcome(outcome.verdict, outcome.key_number, outcome.per_model, alts, outcome.detail)


# ---------------------------------------------------------------------------------------------
# The rows
# ---------------------------------------------------------------------------------------------


def outcomes(tables: Tables, section: Section) -> dict[str, Outcome]:
    """Each claim's v3 outcome with its declared alternatives."""
    return {
        "A4": with_alternatives(
            a4_v3(tables, section),
            lambda c: a4_v3(tables, section, c),
            section.a4["alternatives"],
        ),
        "A6": with_alternatives(
            a6_v3(tables, section),
            lambda c: a6_v3(tables, section, c),
            section.a6["alternatives"],
        ),
        "A7": with_alternatives(
            a7_v3(tables, section),
            lambda c: a7_v3(tables, section, c),
            section.a7["alternatives"],
        ),
    }


ANCHORS = {"A4": "verdict-a4", "A6": "verdict-a6", "A7": "verdict-a7"}
UNITS = {
    "A4": "trained model (learned decoders; each model's share of its learned early units)",
    "A6": "trained model (learned decoders and encoders, at matched learning progress)",
    "A7": "trained model (learned decoders)",
}


def excluding_words(table: pd.DataFrame, name: str = "r_energy.csv") -> str:
    """How many rows' bootstrap intervals exclude their estimate (kept as drawn, never
    widened), e.g. ``"0 of 14,400 rows of r_energy.csv"``."""
    x, n = count_excluding(table["r_energy"], table["ci_low"], table["ci_high"])
    return f"bootstrap intervals excluding their estimate: {x:,} of {n:,} rows of {name}"


def verdicts(tables: Tables, section: Section) -> list[Claim]:
    """The chapter's rows for our trained models: A4, A6, A7 by the v3 rules, each with its v1
    and v2 verdicts; decided after seeing data, or prospective with the seen seeds' verdict
    beside it where every model is of a confirmatory seed (``section.confirmation``)."""
    out = outcomes(tables, section)
    excluded = excluding_words(tables.r_energy)
    before = section.history.statuses(tables.summary)
    scale = scale_of_runs(tables.summary["runs"])
    revisions = {"A4": section.a4, "A6": section.a6, "A7": section.a7}
    rows = []
    for cid, o in out.items():
        n = 0 if o.per_model is None else len(o.per_model)
        rows.append(
            Claim(
                cid,
                o.verdict.status,
                o.key_number,
                CHAPTER,
                f"{o.detail or o.verdict.reason} The table's {excluded}.",
                anchor=ANCHORS[cid],
                rule=o.verdict.rule,
                unit=f"{UNITS[cid]} (n = {n})",
                robust=robustness(o.verdict.status, o.alternatives) if o.alternatives else "",
                rule_v1=before[cid]["v1"],
                rule_v2=before[cid]["v2"],
                revision=words(revisions[cid]["revision"]),
                post_hoc=words(section.raw.get("after_data", {}).get(cid, "")),
                scale=scale,
                decided=AFTER_DATA,
                numbers=o.verdict.numbers,
            )
        )
    return [section.confirmation.apply(r, tables.summary["runs"]) for r in rows]


def released_row(
    table: pd.DataFrame,
    section: Section,
    name: str,
    scale: str,
    released_rule: Mapping[str, Any],
) -> Claim:
    """The released model's A4 row, a description: one final checkpoint cannot speak to
    "largest early in training", only to whether R_energy is above 1 (and above ``r_bar``) on
    its block layer × domain units. Its status is that of "R >> 1": the share of units whose
    lower bound is above ``no_effect``, Clopper–Pearson, against ``released_rule``
    (``gradient_energy_pretrained.a4_rule``)."""
    p, k = section.a4, section.key_rank
    count = a4_released_count(
        table, k=k, threshold=float(p["r_bar"]), no_effect=float(p["no_effect"])
    )
    units = count["n_units"] + count["n_below_ceiling"]
    units_k = blocks(table, k)
    effect = int((units_k["ci_low"] > float(p["no_effect"])).sum())
    cp = proportion_ci(effect, len(units_k), section.ci_level) if len(units_k) else None
    rule = rule_from_params(released_rule)
    v = rule.decide(cp.fraction, cp.low, cp.high) if cp else None
    key = (
        f"R_energy's lower bound above {float(p['no_effect']):g} in {effect} of {len(units_k)} "
        f"block layer x domain units of {name} (k={k}), share {cp.fraction:.3g} [{cp.low:.3g}, "
        f"{cp.high:.3g}]; above {float(p['r_bar']):g} in {count['successes']} of {units}"
        if cp
        else f"rank {k} not measured on {name}"
    )
    return Claim(
        "A4",
        v.status if v else NOT_RUN,
        key,
        CHAPTER,
        "A final released checkpoint describes; it cannot test 'largest early in training'. "
        f"Per domain (hits above {float(p['r_bar']):g}, units): {count['per_run']}.",
        anchor="verdict-a4-released",
        rule=v.rule if v else "",
        evidence=DESCRIPTION,
        unit=f"block layer x corpus domain of one model (n = {len(units_k)})",
        scale=scale,
        decided=AFTER_DATA,
    )
