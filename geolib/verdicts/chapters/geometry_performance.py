"""Chapter ``geometry_performance`` (claims B1, B2, B7): does the geometry of the unembedding W
tell anything about performance that in-distribution loss does not?

The chapter's section of ``params.yaml`` (:class:`Section`), its tables (:class:`Tables`,
:func:`load_tables`) and its verdicts (:func:`verdicts`): each claim decided by its v3 rule
(:func:`b1`, :func:`b2`, :func:`b7`), with its v1 and v2 verdicts kept on the row (declared in
``verdicts.history``, :func:`premises` naming what they assume). The v3 rules count only the
models that learned (:func:`learned`) and hold model size fixed: the two sizes differ in width,
and effective rank grows with width, so an association over all models can come from the size
step alone (Simpson's paradox). Numbers the v3 rules need that the analysis stage does not write
(the signed association, R² gaps within size, partial correlations over the learned models) are
computed here from ``models.csv`` with :mod:`geolib.measure.stats`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from geolib.measure.geometry import GEOMETRY, ID_LOSS
from geolib.measure.stats import (
    Interval,
    interval,
    partial_spearman,
    partial_spearman_within,
    pearson_along,
    spearman_along,
)
from geolib.verdicts import sweep_v4
from geolib.verdicts.budget_premise import AtBudget
from geolib.verdicts.chapters.interface import own_section
from geolib.verdicts.claims import Claim
from geolib.verdicts.evidence import decide_interval
from geolib.verdicts.history import Premises
from geolib.verdicts.learners import Learners
from geolib.verdicts.rules import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    Verdict,
    given_premise,
    rule_from_params,
)
from geolib.verdicts.schema import Field
from geolib.verdicts.sweep_chapters import (
    Decision,
    all_learned,
    budget_rows,
    combined,
    enough_per_size,
    learned,
    premised,
    settled,
    varies_among,
)
from geolib.verdicts.sweep_tables import ChapterTables, SweepSection, read_budgets
from geolib.verdicts.sweep_v4 import V4, at_budget, b1_added_power

CHAPTER = "geometry_performance"
#: the MyST target of each claim's verdict cell in the chapter
ANCHORS = {c: f"verdict-{c.lower()}" for c in ("B1", "B2", "B7")}
#: the W metrics whose partial correlation with OOD loss B7 reads
W_METRICS = tuple(f"w_{m}" for m in GEOMETRY)
#: the tables of this chapter whose intervals are bootstrap intervals (counted, never widened)
BOOTSTRAP_TABLES = ("prediction", "within", "r2_gap", "r2_gap_alternatives", "agreement")
V1_RULES = ("b1_loose", "b2_id_beats_rank", "b7_agree", "b7_no_prediction", "b7_h_varies_less")
V3_RULES = {"b1_v3": ("sign", "loose"), "b2_v3": ("decide",), "b7_v3": ()}


@dataclass(frozen=True)
class Section(SweepSection):
    """The ``geometry_performance`` section as B1, B2 and B7 read it: the shared fields
    (:class:`~geolib.verdicts.sweep_tables.SweepSection`, which checks them) and each claim's v3
    mapping (B1's sign and looseness rules, B2's rule, B7's revision and alternatives)."""

    CHAPTER = CHAPTER
    V1_RULES = V1_RULES
    V2_FIELDS = (Field("v2.B1", "mapping"), Field("v2.B7", "mapping"))
    V2_RULES = ("B1",)
    V3_RULES = V3_RULES

    b1_v3: Mapping[str, Any]
    b2_v3: Mapping[str, Any]
    b7_v3: Mapping[str, Any]


@dataclass(frozen=True)
class Tables(ChapterTables):
    """The sweep's tables (``data/results/geometry_performance``) and the unigram entropy of the
    training split (:class:`~geolib.verdicts.sweep_tables.ChapterTables`), with the Spearman
    matrices of the W and H metrics over models (for the figure)."""

    w_correlations: pd.DataFrame
    h_correlations: pd.DataFrame


def load_tables(section: Section, points: Sequence[str]) -> Tables:
    """Read the tables from where the analysis stage wrote them (``points``: the sweep's)."""
    shared = section.chapter_tables(points)
    folder = shared["sweep"].folder
    corr = {k: pd.read_csv(folder / f"{k}_correlations.csv", index_col=0) for k in ("w", "h")}
    return Tables(**shared, w_correlations=corr["w"], h_correlations=corr["h"])


def read_section(params_path: str | Path, overrides: Mapping[str, Any] | None = None) -> Section:
    """B1, B2 and B7's section (the shared ``geometry_performance``, ``overrides`` applied) with
    ``verdicts``, every field checked."""
    return own_section(params_path, CHAPTER, overrides, Section)


def read(
    params_path: str | Path, overrides: Mapping[str, Any] | None = None
) -> tuple[Section, dict[str, Tables]]:
    """B1, B2 and B7's section (the shared ``geometry_performance``, ``overrides`` applied;
    rules v4 with it) and the sweep's tables at each token budget
    (:mod:`geolib.verdicts.chapters.interface`)."""
    section = read_section(params_path, overrides)
    return section, read_budgets(params_path, lambda b, pts: load_tables(section.at_budget(b), pts))


# ---------------------------------------------------------------------------------------------
# Statistics over the learned models (the trained model is the unit)
# ---------------------------------------------------------------------------------------------


def within_r(x: np.ndarray, y: np.ndarray, groups: np.ndarray, axis: int = -1) -> np.ndarray:
    """Pearson's r of ``x`` and ``y`` once each group's mean is removed from both (its square is
    :func:`geolib.measure.stats.r_squared` with ``groups``), along ``axis`` (resample stacks)."""
    xc, yc = np.array(x, dtype=np.float64), np.array(y, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        for u in np.unique(groups):
            m = groups == u
            n = m.sum(axis=axis, keepdims=True)
            xc = np.where(m, x - np.where(m, x, 0.0).sum(axis=axis, keepdims=True) / n, xc)
            yc = np.where(m, y - np.where(m, y, 0.0).sum(axis=axis, keepdims=True) / n, yc)
    return pearson_along(xc, yc, axis)


def _models(tables: Tables, kept: Sequence[str]) -> pd.DataFrame:
    m = tables.sweep.models
    return m[m["name"].isin(kept)].reset_index(drop=True)


def _groups(models: pd.DataFrame, within: bool) -> np.ndarray:
    if not within:
        return np.zeros(len(models))
    return pd.factorize(models["size"], sort=True)[0].astype(np.float64)


def _interval(statistic: Callable, *arrays: np.ndarray, section: Section, **kw: Any) -> Interval:
    return interval(
        statistic,
        *arrays,
        n_boot=section.n_boot,
        level=section.level,
        seed=section.seed,
        unit="model",
        undefined="nan",
        **kw,
    )


@dataclass(frozen=True)
class Association:
    """The signed association of a predictor with an outcome (``r``: Pearson's, within size
    or over all models) and its square (``r2``), each with its bootstrap interval over models."""

    r: Interval
    r2: Interval


def association(
    tables: Tables,
    section: Section,
    kept: Sequence[str],
    predictor: str,
    outcome: str = ID_LOSS,
    within: bool = True,
) -> Association:
    """:class:`Association` of ``predictor`` with ``outcome`` over the models ``kept``."""
    m = _models(tables, kept)
    x, y, g = m[predictor].to_numpy(float), m[outcome].to_numpy(float), _groups(m, within)

    def r2(*a: np.ndarray, axis: int = -1) -> np.ndarray:
        return within_r(*a, axis=axis) ** 2

    return Association(
        _interval(within_r, x, y, g, section=section, vectorized=True),
        _interval(r2, x, y, g, section=section, vectorized=True),
    )


def rank_loss_by_size(
    tables: Tables, section: Section, kept: Sequence[str], predictor: str = "w_erank"
) -> pd.DataFrame:
    """Per size, Spearman's ρ of ``predictor`` with ID test loss over the learned models, with
    its bootstrap interval (NaN with fewer than 4 models); ``excludes``: the interval excludes
    its estimate (reported, never widened)."""
    rows = []
    for size, g in _models(tables, kept).groupby("size", sort=True):
        row = {"size": size, "models": len(g), "spearman": np.nan, "ci_low": np.nan}
        row["ci_high"] = np.nan
        if len(g) >= 4:
            cols = (g[predictor].to_numpy(float), g[ID_LOSS].to_numpy(float))
            iv = _interval(spearman_along, *cols, section=section, vectorized=True)
            row.update(spearman=iv.value, ci_low=iv.low, ci_high=iv.high)
        rows.append(row)
    out = pd.DataFrame(rows, columns=["size", "models", "spearman", "ci_low", "ci_high"])
    return out.assign(excludes=~out["spearman"].between(out["ci_low"], out["ci_high"]))


#: the fewest models a partial correlation is defined on (geolib.measure.stats needs 4)
MIN_PARTIAL = 4


def r2_gaps(
    tables: Tables,
    section: Section,
    kept: Sequence[str],
    worse: str = "w_erank",
    within: bool = True,
) -> pd.DataFrame:
    """Per OOD domain, R²(OOD ~ ID loss) − R²(OOD ~ ``worse``), within size (or over all
    models), with a paired bootstrap interval over the learned models."""
    m = _models(tables, kept)
    if len(m) <= MIN_PARTIAL:  # too few for an interval over models (the verdict's premise)
        return pd.DataFrame(columns=["outcome", "r2_gap", "ci_low", "ci_high"])
    b, w, g = m[ID_LOSS].to_numpy(float), m[worse].to_numpy(float), _groups(m, within)

    def gap(b: np.ndarray, w: np.ndarray, y: np.ndarray, g: np.ndarray, axis: int = -1):
        return within_r(b, y, g, axis) ** 2 - within_r(w, y, g, axis) ** 2

    rows = []
    for outcome in (o for o in tables.sweep.ood if o != "loss_ood_mean"):
        y = m[outcome].to_numpy(float)
        iv = _interval(gap, b, w, y, g, section=section, vectorized=True)
        rows.append({"outcome": outcome, "r2_gap": iv.value, "ci_low": iv.low, "ci_high": iv.high})
    return pd.DataFrame(rows, columns=["outcome", "r2_gap", "ci_low", "ci_high"])


def _partial_within(x: np.ndarray, y: np.ndarray, z: np.ndarray, g: np.ndarray) -> float:
    """Undefined (NaN) on a resample that holds one size only, or too few models (the BCa
    jackknife leaves one out of a handful)."""
    if x.size < MIN_PARTIAL or np.unique(g).size < 2:
        return np.nan
    return partial_spearman_within(x, y, z, g)


def _partial(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    """:func:`partial_spearman`, undefined (NaN) on too few models."""
    return partial_spearman(x, y, z) if x.size >= MIN_PARTIAL else np.nan


def partials(
    tables: Tables, section: Section, kept: Sequence[str], within: bool = True
) -> pd.DataFrame:
    """Partial Spearman ρ of each W metric with mean OOD loss given ID loss (and size, when
    ``within``), over the learned models, with its bootstrap interval. A metric constant over
    the models (within size) is left out: it has no correlation to speak of."""
    m = _models(tables, kept)
    if len(m) <= MIN_PARTIAL:  # too few for an interval over models (the verdict's premise)
        return pd.DataFrame(columns=["predictor", "partial", "low", "high"])
    y, z, g = m["loss_ood_mean"].to_numpy(float), m[ID_LOSS].to_numpy(float), _groups(m, within)
    rows = []
    for predictor in (p for p in W_METRICS if p in m.columns):
        x = m[predictor].to_numpy(float)
        if np.ptp(x - pd.Series(x).groupby(g).transform("mean").to_numpy()) == 0:
            continue
        stat = _partial_within if within else _partial
        iv = _interval(stat, *((x, y, z, g) if within else (x, y, z)), section=section)
        rows.append({"predictor": predictor, "partial": iv.value, "low": iv.low, "high": iv.high})
    return pd.DataFrame(rows, columns=["predictor", "partial", "low", "high"])


# ---------------------------------------------------------------------------------------------
# v3
# ---------------------------------------------------------------------------------------------


def premises(tables: Tables, section: Section) -> Premises:
    """What the v2 checks declared in ``verdicts.history`` name: ``varies OUTCOME``, the outcome
    varies across all models within size beyond its seed noise
    (:meth:`~geolib.verdicts.sweep_tables.SweepTables.varies`)."""
    ratio = section.v2["premise_min_sd_ratio"]
    return {"varies": lambda outcome: tables.sweep.varies(outcome, ratio)}


def _premise(
    tables: Tables, section: Section, outcome: str, learned_: Learners
) -> tuple[bool, str]:
    """Enough learned models in each size, and ``outcome`` varying among them beyond its noise."""
    ok, why = enough_per_size(tables.sweep.models, learned_, section.min_learned_per_size)
    if not ok:
        return ok, why
    return varies_among(tables.sweep, outcome, learned_.kept, section.v2["premise_min_sd_ratio"])


def _failed(rule: Any, why: str, what: str) -> Decision:
    """Inconclusive: the premise failed, so ``what`` was not computed."""
    v = given_premise(rule, False, why, lambda: rule)
    return Decision(v, f"{what}: not computed", ((v, f"{what}: not computed"),))


def b1(tables: Tables, section: Section, change: Mapping[str, Any] | None = None) -> Decision:
    """B1 v3: over the learned models, size held fixed, after v2's premise. The sign first:
    Paper B's "high-rank models that perform badly" are exceptions to higher rank going with
    better (lower) loss, so r(rank, loss) must be negative; a positive one cannot reproduce the
    claim (not reproduced), an undetermined one is inconclusive. Where the sign holds, v2's
    looseness rule (R² below its bar) decides."""
    change = change or {}
    predictor, within = change.get("predictor", "w_erank"), change.get("within", True)
    spec = section.b1_v3
    sign_rule, loose_rule = rule_from_params(spec["sign"]), rule_from_params(spec["loose"])
    learned_ = learned(tables, section)
    ok, why = _premise(tables, section, ID_LOSS, learned_)
    if not ok:
        return _failed(sign_rule, why, f"r(ID test loss, {predictor})")
    a = association(tables, section, learned_.kept, predictor, within=within)
    where = f"{predictor}, {'within size' if within else 'over all models'}"
    sign = decide_interval(sign_rule, a.r.value, a.r.low, a.r.high, f"r(ID test loss, {where})")
    loose = decide_interval(
        loose_rule, a.r2.value, a.r2.low, a.r2.high, f"R²(ID test loss ~ {where})"
    )
    checks = (sign, loose)
    if sign[0].status == REPRODUCED:
        return Decision(replace(loose[0], numbers=loose[0].labelled(loose[1])), loose[1], checks)
    if sign[0].status == NOT_REPRODUCED:
        reason = f"wrong sign: higher rank goes with higher loss ({sign[0].reason})"
    else:
        reason = f"the sign of the association is undetermined ({sign[0].reason})"
    status = NOT_REPRODUCED if sign[0].status == NOT_REPRODUCED else INCONCLUSIVE
    verdict = Verdict(status, sign_rule.describe(), reason, sign[0].labelled(sign[1]))
    return Decision(verdict, sign[1], checks)


def b2(tables: Tables, section: Section, change: Mapping[str, Any] | None = None) -> Decision:
    """B2 v3: v1's rule on the R² gap of each OOD domain, now within size (v2 pooled the sizes),
    over the learned models, each after its premise (the domain's loss varies beyond its seed
    noise); the key number is the check that decided."""
    change = change or {}
    worse, within = change.get("worse", "w_erank"), change.get("within", True)
    rule = rule_from_params(section.b2_v3["decide"])
    learned_ = learned(tables, section)
    ok, why = enough_per_size(tables.sweep.models, learned_, section.min_learned_per_size)
    if not ok:
        return _failed(rule, why, f"R²(ID) − R²({worse}) per OOD domain")
    checks = []
    for r in r2_gaps(tables, section, learned_.kept, worse, within).itertuples():
        size = "within size" if within else "over all models"
        what = f"R²(ID) − R²({worse}), {r.outcome}, {size}"
        decided = decide_interval(rule, r.r2_gap, r.ci_low, r.ci_high, what)
        varies = varies_among(
            tables.sweep, r.outcome, learned_.kept, section.v2["premise_min_sd_ratio"]
        )
        checks.append(premised(rule, [varies], decided))
    return combined(checks)


def b7(tables: Tables, section: Section, change: Mapping[str, Any] | None = None) -> Decision:
    """B7 v3: v2's three parts (the W metrics agree; none predicts OOD loss beyond ID loss, size
    held fixed, after the premise that OOD loss varies; H varies less than W), over the learned
    models. The partial correlations are recomputed over them; the agreement and the CV ratio
    come from ``agreement.csv``, computed over all models, and count only if every model
    learned."""
    within = (change or {}).get("within", True)
    rule = rule_from_params(section.verdict["b7_no_prediction"])
    learned_ = learned(tables, section)
    everyone = list(tables.sweep.models["name"])
    a, c = tables.sweep.agreement.iloc[0], tables.sweep.agreement.iloc[1]
    ok_all, why_all = all_learned(learned_, everyone, "agreement.csv")

    def from_table(key: str, row: Any, what: str) -> tuple[Verdict, str]:
        rule_ = rule_from_params(section.verdict[key])
        decided = decide_interval(rule_, row.value, row.ci_low, row.ci_high, what)
        return premised(rule_, [(ok_all, why_all)], decided)

    checks = [from_table("b7_agree", a, "median |ρ| between W metrics")]
    ok, why = _premise(tables, section, "loss_ood_mean", learned_)
    if not ok:
        v = given_premise(rule, False, why, lambda: rule)
        checks.append((v, "partial ρ(W metrics, OOD | ID, size): not computed"))
    else:
        given = "ID, size" if within else "ID"
        for r in partials(tables, section, learned_.kept, within).itertuples():
            what = f"partial ρ({r.predictor}, OOD | {given})"
            checks.append(decide_interval(rule, r.partial, r.low, r.high, what))
    checks.append(from_table("b7_h_varies_less", c, "CV(erank H) / CV(erank W)"))
    return combined(checks)


# ---------------------------------------------------------------------------------------------
# The chapter's rows
# ---------------------------------------------------------------------------------------------

DECIDE = {"B1": ("b1_v3", b1), "B2": ("b2_v3", b2), "B7": ("b7_v3", b7)}


def alternatives(tables: Tables, section: Section, claim: str) -> dict[str, str]:
    """The status of ``claim`` under each declared alternative (a rank this run did not
    measure: ``not yet run``)."""
    key, decide = DECIDE[claim]
    columns = set(tables.sweep.models.columns)
    out = {}
    for name, change in getattr(section, key)["alternatives"].items():
        needs = {v for k, v in change.items() if k in ("predictor", "worse")}
        out[name] = decide(tables, section, change).status if needs <= columns else NOT_RUN
    return out


RULE_WORDS = {
    "B1": "v3, learned models, size held fixed, after the premise that ID loss varies: first "
    "the sign, {sign}; where it holds, {loose}",
    "B2": "v3, learned models, per OOD domain within size, after the premise that its loss "
    "varies: {decide}",
    "B7": "v3, learned models, size held fixed: v1's three rules (agreement, no prediction "
    "beyond loss, H varies less), each after its premise",
}


def budget_verdicts(tables: Tables, section: Section) -> list[Claim]:
    """The chapter's claim rows (B1, B2, B7): each v3 verdict with its alternatives, and the v1
    and v2 verdicts beside it."""
    at = budget_rows(CHAPTER, ANCHORS, tables, section, premises(tables, section), BOOTSTRAP_TABLES)
    by_size = rank_loss_by_size(tables, section, at.who.kept)
    sizes = ", ".join(
        f"{r.size} {r.spearman:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]"
        + (" (estimate outside its interval)" if r.excludes and pd.notna(r.ci_low) else "")
        for r in by_size.itertuples()
    )
    extra = {"B1": f" Spearman ρ(erank W, ID test loss) per size: {sizes}."}
    unit = (
        f"trained models that learned ({len(at.who.kept)} of {len(tables.sweep.models)}), "
        "size held fixed"
    )
    rows = []
    for claim, (key, decide) in DECIDE.items():
        spec = getattr(section, key)
        rules = {k: rule_from_params(spec[k]).describe() for k in V3_RULES[key]}
        rows.append(
            at.row(
                claim,
                decide(tables, section, None),
                spec=spec,
                alternatives=alternatives(tables, section, claim),
                rule=RULE_WORDS[claim].format(**rules),
                unit=unit,
                extra=extra.get(claim, ""),
            )
        )
    return rows


# ---------------------------------------------------------------------------------------------
# v4: each row at two token budgets (geolib.verdicts.sweep_v4)
# ---------------------------------------------------------------------------------------------


def b1_v4(
    tables: Tables, section: Section, v4: V4, change: Mapping[str, Any] | None = None
) -> tuple[Verdict, str]:
    """B1 v4 on one budget's learned models, after v3's premise (enough learned models per size,
    the outcome varying beyond its seed noise): rank's added predictive power beyond the
    configuration (:func:`~geolib.verdicts.sweep_v4.b1_added_power`). A declared alternative
    ``{rule: b1_v3}`` is v3's rule on the same models."""
    change = dict(change or {})
    if change.get("rule") == "b1_v3":
        d = b1(tables, section)
        return d.verdict, d.key_number
    rule = rule_from_params(change.get("rule", v4.b1["decide"]))
    learned_ = learned(tables, section)
    outcome = change.get("outcome", ID_LOSS)
    ok, why = _premise(tables, section, outcome, learned_)
    if not ok:
        return given_premise(rule, False, why, lambda: rule), "added power: not computed"
    try:
        verdict, key, _ = b1_added_power(
            tables.sweep.models, learned_.kept, v4.b1, change, level=section.level
        )
    except ValueError as err:  # too few learned models for the configuration's design
        return given_premise(rule, False, str(err), lambda: rule), "added power: not computed"
    return verdict, key


def verdicts(tables: Mapping[str, Tables], section: Section) -> list[Claim]:
    """The chapter's v4 rows (B1, B2, B7): each claim's v3 rule (B1: v4's added power, v3's rule
    an alternative) on the models of each budget, combined by the v4 premise."""
    v4 = section.v4_rules()
    columns = {b: set(t.sweep.models.columns) for b, t in tables.items()}

    def reading(budget: str, claim: str) -> AtBudget:
        t = tables[budget]
        premise = settled(t, section)
        if claim == "B1":
            verdict, key = b1_v4(t, section, v4)
            alts = {}
            for name, change in v4.b1["alternatives"].items():
                needs = {change.get("predictor", "w_erank"), change.get("outcome", ID_LOSS)}
                measured = needs <= columns[budget] | {"loss_ood_mean"}
                alts[name] = b1_v4(t, section, v4, change)[0].status if measured else NOT_RUN
            return at_budget(budget, premise, verdict, key, alts)
        d = DECIDE[claim][1](t, section, None)
        return at_budget(budget, premise, d.verdict, d.key_number, alternatives(t, section, claim))

    b1_rule = rule_from_params(v4.b1["decide"]).describe()
    rules = {
        "B1": "v4, learned models of each budget, after the premise that ID loss varies: "
        f"leave-one-out ΔR² of adding erank W to ID loss ~ {' + '.join(v4.b1['factors'])} "
        f"(one-hot), {b1_rule}"
    }
    return sweep_v4.verdicts_v4(
        lambda b: budget_verdicts(tables[b], section), reading, v4, rules=rules
    )
