"""Claim B8, chapter ``forgetting_quantization``: does the geometry of W tell how much a model
forgets when fine-tuned, or loses when quantized, beyond what its ID loss tells?

Paper B: "the same holds for quantization robustness and for forgetting after fine-tuning" —
as for loss (B2, B7), geometry does not predict them and in-distribution loss does better.
Rule v3, per outcome (forgetting; the ID test loss increase of each block-only quantization
setting), over the sweep's models that learned (:func:`geolib.verdicts.learners.learners`), with
model size held fixed:

1. premise: the outcome varies across models within size at least ``premise_min_sd_ratio``
   times its noise, the larger of its seed-to-seed sd (the seed replicates) and one model's
   measurement error (its paired-bootstrap interval as a standard error); otherwise there is
   nothing to predict and the outcome's checks are inconclusive;
2. geometry adds nothing beyond loss: the partial Spearman of erank W with the outcome given ID
   loss (and size) lies within ``no_prediction``'s band;
3. ID loss does better: R²(outcome ~ ID loss) − R²(outcome ~ erank W) beyond
   ``loss_beats_rank``'s threshold (both within size, one paired bootstrap over models).

The statistics are recomputed over the learned models
(:mod:`~geolib.verdicts.chapters.outcome_association`; the analysis stages' tables hold every
model). v1 (over all models: rank "loose" and no prediction) and v2 (within size, after
the premise that most models' intervals lie above 0) are declared in ``verdicts.history`` and
read those tables as they were (:func:`earlier`); they are shown beside v3.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from geolib.config import stage_params
from geolib.measure import validate as check
from geolib.measure.geometry import ID_LOSS
from geolib.measure.prediction import one_row_per_point
from geolib.measure.stats import (
    Interval,
    count_excluding,
)
from geolib.verdicts import sweep_v4
from geolib.verdicts.budget_premise import AtBudget
from geolib.verdicts.chapters.forgetting_section import CHANGES, Section
from geolib.verdicts.chapters.interface import own_sections
from geolib.verdicts.chapters.outcome_association import (
    RANK,
    STATISTICS,
    Association,
    association,
    spread,
)
from geolib.verdicts.claims import PROSPECTIVE, Claim, scale_of_runs
from geolib.verdicts.evidence import decide_interval
from geolib.verdicts.history import version_verdict
from geolib.verdicts.learners import Learners
from geolib.verdicts.rules import (
    Rule,
    Verdict,
    deciding_check,
    given_premise,
    robustness,
    rule_from_params,
    rule_with,
)
from geolib.verdicts.settled_premise import RULE_WORDS as PREMISE_RULE
from geolib.verdicts.settled_premise import (
    PremiseSpec,
    premise_at,
    premise_words,
    premised_row,
    read_study,
)
from geolib.verdicts.sweep_chapters import (
    enough_per_size,
    learned_models,
    learned_text,
    listed,
)
from geolib.verdicts.sweep_tables import (
    excluding_words,
    read_budgets,
    row_where,
    unigram_entropy,
)
from geolib.verdicts.sweep_v4 import configuration

CHAPTER, ANCHOR = "forgetting_quantization", "verdict-b8"
FAMILIES = ("forgetting", "quantization")
_STATS = ("spearman", "r2", "partial_spearman")


@dataclass(frozen=True)
class Outcome:
    """One outcome measured per model: its family, its column in the family's per-model table,
    and its name in words."""

    family: str
    column: str
    label: str


@dataclass(frozen=True)
class Tables:
    """B8's tables: per model (``forgetting``: ``forgetting.csv``; ``quantization``: the
    quantization stage's ``models.csv``), the block-only settings the verdict reads, per family
    the prediction tables (over all models, within size) and R² gaps, and the unigram entropy
    of the training tokens (who learned)."""

    forgetting: pd.DataFrame
    quantization: pd.DataFrame
    block_settings: tuple[str, ...]
    prediction: Mapping[str, pd.DataFrame]
    within: Mapping[str, pd.DataFrame]
    r2_gap: Mapping[str, pd.DataFrame]
    unigram_entropy: float
    study: pd.DataFrame  #: the training-length study's settling table (the premise)
    #: v3's bootstraps computed so far (the notebook's tables and the verdict share them)
    cache: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        check.scalar("unigram_entropy", self.unigram_entropy, low=0.0, strict=True)
        if not self.block_settings:
            raise ValueError("no block-only quantization settings to judge")
        for o in self.outcomes:
            need = ["name", "size", "params", "tokens", ID_LOSS, RANK, o.column]
            need += [f"{o.column}_ci_low", f"{o.column}_ci_high"]
            missing = [c for c in need if c not in self.frame(o.family).columns]
            if missing:
                raise ValueError(f"the {o.family} table lacks column(s) {missing}")
        if sorted(self.forgetting["name"]) != sorted(self.quantization["name"]):
            raise ValueError("the forgetting and quantization tables hold different models")
        for kind in ("prediction", "within", "r2_gap"):
            if set(getattr(self, kind)) != set(FAMILIES):
                raise ValueError(f"{kind}: one table per family {FAMILIES}")

    @property
    def outcomes(self) -> list[Outcome]:
        """Forgetting, then the ID test loss increase of each block-only setting."""
        return [Outcome("forgetting", "forgetting", "forgetting")] + [
            Outcome("quantization", f"q_{b}_id_test", f"{b} ID loss increase")
            for b in self.block_settings
        ]

    def frame(self, family: str) -> pd.DataFrame:
        return {"forgetting": self.forgetting, "quantization": self.quantization}[family]


def load_tables(
    forgetting_dir: str | Path,
    quantization_dir: str | Path,
    points: list[str],
    unigram_counts: str | Path,
    premise: PremiseSpec,
    budget: str,
) -> Tables:
    """B8's tables at one token budget from the stages' folders (``forgetting.out_dir``,
    ``quantization.out_dir``; their prediction tables under ``<budget>/``), one row per sweep
    point of ``points`` (that budget's), the training split's token counts
    (``sweep_v3.unigram_counts``: who learned) and the study's table the premise reads."""
    fg, qz = Path(forgetting_dir), Path(quantization_dir)
    names = ("prediction.csv", "prediction_within_size.csv", "r2_gap.csv")
    read = {
        fam: [pd.read_csv(folder / budget / n) for n in names]
        for fam, folder in zip(FAMILIES, (fg, qz), strict=True)
    }
    models = pd.read_csv(qz / "models.csv")
    models = models[models["name"].isin(points)]
    forgetting = pd.read_csv(fg / "forgetting.csv")
    forgetting = forgetting[forgetting["name"].isin(points)]
    return Tables(
        forgetting=one_row_per_point(forgetting, points, "forgetting.csv"),
        quantization=one_row_per_point(models, points, "quantization models.csv"),
        block_settings=tuple(json.loads((qz / "summary.json").read_text())["block_settings"]),
        prediction={fam: t[0] for fam, t in read.items()},
        within={fam: t[1] for fam, t in read.items()},
        r2_gap={fam: t[2] for fam, t in read.items()},
        unigram_entropy=unigram_entropy(unigram_counts),
        study=read_study(premise),
    )


def read_section(params_path: str | Path, overrides: Mapping[str, Any] | None = None) -> Section:
    """B8's section (``overrides`` applied to the shared ``geometry_performance`` section; the
    ``forgetting`` and ``quantization`` sections' v1 rules) with ``verdicts``, every field
    checked."""
    rules, verdicts_section = own_sections(params_path, CHAPTER, overrides)
    fg, qz = stage_params(params_path, "forgetting"), stage_params(params_path, "quantization")
    return Section.from_params(rules, verdicts_section, forgetting=fg, quantization=qz)


def read(
    params_path: str | Path, overrides: Mapping[str, Any] | None = None
) -> tuple[Section, dict[str, Tables]]:
    """This chapter's section (``overrides`` applied to the shared ``geometry_performance``
    section; rules v4 with it; the ``forgetting`` and ``quantization`` sections' v1 rules) and
    its tables at each token budget (:mod:`geolib.verdicts.chapters.interface`)."""
    section = read_section(params_path, overrides)
    return section, read_budgets(
        params_path,
        lambda b, points: load_tables(
            section.out_dir["forgetting"],
            section.out_dir["quantization"],
            points,
            section.unigram_counts,
            section.w_premise,
            b,
        ),
    )


#: the columns of a prediction row the v1 and v2 checks read (absent: undefined)
_V1_COLUMNS = tuple(
    f"{stat}{end}" for stat in ("r2", "partial_spearman") for end in ("", "_ci_low", "_ci_high")
)


def outcome_rows(tables: Tables) -> dict[str, pd.DataFrame]:
    """What B8's v1 and v2 checks read (``verdicts.history.forgetting_quantization``): per
    family and table (``<family>_prediction``: over all models; ``<family>_within``: within
    size), the row of each of the family's outcomes on erank W, in :attr:`Tables.outcomes`'
    order, with the outcome in words (``label``) and the stage's ``note``."""
    out = {}
    for family in FAMILIES:
        for kind in ("prediction", "within"):
            rows = []
            for o in (o for o in tables.outcomes if o.family == family):
                r = row_where(getattr(tables, kind)[family], outcome=o.column, predictor=RANK)
                values = {c: r.get(c, math.nan) for c in _V1_COLUMNS}
                rows.append(
                    {"outcome": o.column, "label": o.label, "note": r.get("note"), **values}
                )
            out[f"{family}_{kind}"] = pd.DataFrame(rows)
    return out


def above_zero(tables: Tables, section: Section, column: str) -> tuple[bool, str]:
    """v2's premise of outcome ``column``: at least ``min_share_above_zero`` of the models have
    its interval above 0. Returns ``(holds, why not)``."""
    o = next(o for o in tables.outcomes if o.column == column)
    frame, need = tables.frame(o.family), section.v2_min_share_above_zero
    above = int((frame[f"{column}_ci_low"] > 0).sum())
    why = (
        f"{o.label}: only {above} of {len(frame)} models have an interval above 0 "
        f"(premise: at least {need:.0%})"
    )
    return above >= need * len(frame), why


def earlier(tables: Tables, section: Section) -> dict[str, list[tuple[Verdict, str]]]:
    """B8's v1 (over all models: rank "loose", and no prediction given ID loss, per outcome)
    and v2 (the same within size, each outcome after its premise, :func:`above_zero`), as
    declared: ``{version: [(Verdict, words)]}``."""
    premises = {"above_zero": lambda column: above_zero(tables, section, column)}
    return section.earlier_rules().checks(tables=outcome_rows(tables), premises=premises)["B8"]


def learned(tables: Tables, section: Section) -> Learners:
    """The sweep models that learned: ID test loss at least ``learned_margin`` nats below the
    unigram entropy of the training tokens."""
    return learned_models(tables.forgetting, tables.unigram_entropy, section.learned_margin)


def _kept(frame: pd.DataFrame, who: Learners) -> pd.DataFrame:
    return frame[frame["name"].isin(who.kept)].reset_index(drop=True)


def premise(
    tables: Tables, section: Section, o: Outcome, within: bool = True
) -> tuple[bool, str, dict[str, float]]:
    """v3's premise for outcome ``o``: at least ``min_learned_per_size`` learned models in each
    size, seed replicates among them, and the outcome's spread at least
    ``premise_min_sd_ratio`` times its noise (:func:`spread`). ``(holds, why not, spread)``."""
    who = learned(tables, section)
    frame = _kept(tables.frame(o.family), who)
    sp = spread(frame, o.column, within=within, level=section.outcome_level[o.family])
    holds, why = enough_per_size(tables.frame(o.family), who, section.min_learned_per_size)
    if not holds:
        return False, why, sp
    if not sp["seed_dof"]:
        return False, f"{o.label}: no seed replicates among the learned models", sp
    need = section.premise_min_sd_ratio
    why = (
        f"{o.label} varies {'within size' if within else 'across models'} only "
        f"{sp['ratio']:.2g}x its noise (sd {sp['spread_sd']:.2g}; seed sd {sp['seed_sd']:.2g}, "
        f"measurement error {sp['measurement_se']:.2g}; premise: at least {need:g}x)"
    )
    return bool(sp["ratio"] >= need), why, sp


def _association(
    tables: Tables, section: Section, o: Outcome, predictor: str, within: bool
) -> Association:
    who = learned(tables, section)
    key = (o.column, predictor, within, who.kept, section.n_boot, section.ci_level, section.seed)
    if key not in tables.cache:
        frame = _kept(tables.frame(o.family), who)
        kw = {"n_boot": section.n_boot, "level": section.ci_level, "seed": section.seed}
        tables.cache[key] = association(frame, o.column, predictor, within=within, **kw)
    return tables.cache[key]


def outcome_checks(
    tables: Tables, section: Section, o: Outcome, change: Mapping[str, Any] | None = None
) -> list[tuple[Verdict, str]]:
    """v3's checks of one outcome (module docstring), or one inconclusive row saying why the
    premise fails. ``change``: an alternative's settings (``predictor``, ``within``,
    ``loss_beats_rank``: fields of that rule; ``loose``: also v1's bar on R²(outcome ~ rank))."""
    change = dict(change or {})
    unknown = sorted(set(change) - set(CHANGES))
    if unknown:
        raise ValueError(f"unknown alternative setting(s) {unknown}; known: {CHANGES}")
    within, predictor = bool(change.get("within", True)), str(change.get("predictor", RANK))
    who = learned(tables, section)
    frame = _kept(tables.frame(o.family), who)
    if predictor not in frame.columns:
        raise ValueError(f"the {o.family} table has no predictor column {predictor!r}")
    holds, why, _ = premise(tables, section, o, within)
    a = _association(tables, section, o, predictor, within)
    given = ", size" if within else ""
    rank = "erank W" if predictor == RANK else predictor
    parts: list[tuple[Rule, Interval, str]] = [
        (
            rule_from_params(section.no_prediction),
            a.partial,
            f"partial ρ({rank}, {o.label} | ID loss{given})",
        ),
        (
            rule_with(section.loss_beats_rank, change.get("loss_beats_rank", {})),
            a.gap,
            f"R² gap ({o.label} ~ ID loss minus ~ {rank}{' | size' if within else ''})",
        ),
    ]
    if change.get("loose"):
        what = f"R²({o.label} ~ {rank}{' | size' if within else ''})"
        parts.append((rule_from_params(section.v1[o.family]["loose"]), a.r2_rank, what))
    if not holds:  # one inconclusive row for the outcome, saying which number failed
        return [(given_premise(parts[0][0], False, why, lambda: parts[0][0].decide(0, 0, 0)), why)]
    return [decide_interval(rule, iv.value, iv.low, iv.high, what) for rule, iv, what in parts]


def b8_checks(
    tables: Tables, section: Section, change: Mapping[str, Any] | None = None
) -> list[tuple[Verdict, str]]:
    """v3's checks of every outcome, forgetting first."""
    return [c for o in tables.outcomes for c in outcome_checks(tables, section, o, change)]


def v3_table(tables: Tables, section: Section) -> pd.DataFrame:
    """Per outcome, over the learned models within size: the premise's numbers (spread, seed
    sd, measurement error, their ratio) and v3's statistics with their intervals."""
    rows = []
    for o in tables.outcomes:
        holds, _, sp = premise(tables, section, o)
        a = _association(tables, section, o, RANK, True)
        row: dict[str, Any] = {"outcome": o.label, "models": a.n, **sp, "premise": holds}
        for name, iv in zip(STATISTICS, a.intervals(), strict=True):
            row |= {name: iv.value, f"{name}_ci_low": iv.low, f"{name}_ci_high": iv.high}
        rows.append(row)
    return pd.DataFrame(rows)


def excluding(tables: Tables, section: Section | None = None) -> pd.DataFrame:
    """How many bootstrap intervals exclude their estimate (kept as drawn, never widened), per
    table and interval: the stages' prediction and R²-gap tables, each model's paired interval,
    and (with ``section``) v3's, recomputed over the learned models. For
    :func:`~geolib.verdicts.sweep_tables.excluding_words`."""
    rows = []

    def add(table: str, name: str, est: Any, lo: Any, hi: Any) -> None:
        k, n = count_excluding(est, lo, hi)
        rows.append({"table": table, "interval": name, "excluding": k, "intervals": n})

    for fam in FAMILIES:
        frame = tables.frame(fam)
        csv = {"forgetting": "forgetting.csv", "quantization": "models.csv"}[fam]
        for kind, name in (
            ("prediction", "prediction.csv"),
            ("within", "prediction_within_size.csv"),
        ):
            t = getattr(tables, kind)[fam]
            for s in _STATS:
                if {s, f"{s}_ci_low", f"{s}_ci_high"} <= set(t.columns):
                    add(f"{fam}/{name}", s, t[s], t[f"{s}_ci_low"], t[f"{s}_ci_high"])
        g = tables.r2_gap[fam]
        if {"r2_gap", "ci_low", "ci_high"} <= set(g.columns):
            add(f"{fam}/r2_gap.csv", "r2_gap", g["r2_gap"], g["ci_low"], g["ci_high"])
        for c in frame.columns:
            s = c.removesuffix("_ci_low")
            if s != c and not s.startswith("loss_") and {s, f"{s}_ci_high"} <= set(frame.columns):
                add(f"{fam}/{csv}", s, frame[s], frame[c], frame[f"{s}_ci_high"])
    for o in tables.outcomes if section is not None else []:
        a = _association(tables, section, o, RANK, True)
        for name, iv in zip(STATISTICS, a.intervals(), strict=True):
            add(
                "v3 (learned models, within size)",
                f"{name} of {o.label}",
                iv.value,
                iv.low,
                iv.high,
            )
    return pd.DataFrame(rows, columns=["table", "interval", "excluding", "intervals"])


def _scale(tables: Tables, who: Learners) -> str:
    f = tables.forgetting[tables.forgetting["name"].isin(who.kept)]
    if f.empty:
        return f"{len(tables.forgetting)} sweep models, none learned"
    runs = {}
    for r in f.to_dict("records"):
        point, seed = configuration(r["name"])
        runs[r["name"]] = {
            "family": point,
            "seed": seed,
            "params": r["params"],
            "tokens": r["tokens"],
        }
    return scale_of_runs(runs)


def b8(tables: Tables, section: Section) -> Claim:
    """B8's row: v3 (the outcomes' checks combined; the key number is the check that decided),
    its robustness over the declared alternatives, v1 and v2 beside it."""
    who = learned(tables, section)
    checks = b8_checks(tables, section)
    status, key = deciding_check(checks)
    numbers = next(v for v, what in checks if what == key).labelled(key)
    alts = {
        n: deciding_check(b8_checks(tables, section, c))[0] for n, c in section.alternatives.items()
    }
    premise = premise_at(tables.study, section.w_premise, tables.forgetting)
    status, key, alts = premised_row(premise, status, key, alts)
    before = earlier(tables, section)
    v1, v2 = before["v1"], before["v2"]
    rules = [rule_from_params(section.no_prediction), rule_from_params(section.loss_beats_rank)]

    detail = (
        f"v3: {listed(checks)}. {premise_words(premise)}. Models: {learned_text(who)}. "
        f"{excluding_words(excluding(tables, section))}. v2: {listed(v2)}. v1: {listed(v1)}. "
        f"Outcomes: forgetting and the ID loss increase of {', '.join(tables.block_settings)} "
        "(blocks only, the head kept float)."
    )
    return Claim(
        "B8",
        status,
        key,
        CHAPTER,
        detail,
        anchor=ANCHOR,
        rule=(
            "v3, per outcome over the models that learned, size held fixed. Premise: the outcome "
            f"varies at least {section.premise_min_sd_ratio:g}x its noise (the larger of its "
            f"seed sd and one model's measurement error). (1) {rules[0].describe()} "
            f"(2) {rules[1].describe()}; {PREMISE_RULE}"
        ),
        unit=f"trained models that learned (n = {len(who.kept)} of {len(tables.forgetting)})",
        robust=robustness(status, alts),
        rule_v1=version_verdict(v1).status,
        rule_v2=version_verdict(v2).status,
        revision=section.revision,
        scale=f"{_scale(tables, who)}; {section.w_premise.paper_scale}",
        decided=PROSPECTIVE,
        numbers=numbers,
    )


def budget_verdicts(tables: Tables, section: Section) -> list[Claim]:
    """B8's v3 row at one budget."""
    return [b8(tables, section)]


def verdicts(tables: Mapping[str, Tables], section: Section) -> list[Claim]:
    """The chapter's claim rows: B8's v4 row, v3's checks and alternatives on the models of each
    budget combined by the v4 premise (:mod:`geolib.verdicts.sweep_v4`)."""
    v4 = section.v4_rules()

    def reading(budget: str, claim: str) -> AtBudget:
        t = tables[budget]
        status, key = deciding_check(b8_checks(t, section))
        alts = {
            n: deciding_check(b8_checks(t, section, c))[0] for n, c in section.alternatives.items()
        }
        premise = premise_at(t.study, section.w_premise, t.forgetting)
        return AtBudget(budget, premise, status, key, alts)

    return sweep_v4.verdicts_v4(lambda b: budget_verdicts(tables[b], section), reading, v4)
