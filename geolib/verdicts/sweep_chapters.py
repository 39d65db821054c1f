"""The rules the three sweep chapters share (claims B1–B5, B7, B8): a row with its v1 and v2
checks beside it (declared as data, :mod:`geolib.verdicts.history`), and what the v3 rules
share (which models learned, the premise that an outcome varies beyond its seed noise,
intervals decided as drawn, a row's claim). What they read is
:mod:`geolib.verdicts.sweep_tables`.

What a chapter's section holds and checks
(:class:`~geolib.verdicts.sweep_tables.SweepSection`) is declared with the tables.

The chapters are ``geometry_performance`` (B1, B2, B7: geometry against performance),
``training_knobs`` (B3–B5: batch size, weight decay, learning rate) and
``forgetting_quantization`` (B8). Each reads the rules of the ``geometry_performance`` section
(``verdict``: v1, fixed before the sweep ran; ``v2``: revised after, each with its reason; the
``b*_v3`` mappings and ``sweep_v3``: the v3 rules, written after v1 and v2 were seen).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from geolib.measure.geometry import ID_LOSS
from geolib.measure.stats import proportion_ci, within_groups
from geolib.verdicts.claims import PROSPECTIVE, Claim, history, scale_of_runs
from geolib.verdicts.history import Premises, version_verdict
from geolib.verdicts.learners import Learners, learners
from geolib.verdicts.markup import words
from geolib.verdicts.rules import (
    Rule,
    Verdict,
    deciding_check,
    given_premise,
    robustness,
)
from geolib.verdicts.settled_premise import RULE_WORDS as PREMISE_RULE
from geolib.verdicts.settled_premise import (
    WPremise,
    premise_at,
    premise_words,
    premised_row,
)
from geolib.verdicts.sweep_tables import (
    FACTORS,
    ChapterTables,
    SweepSection,
    SweepTables,
    excluding,
    excluding_words,
)
from geolib.verdicts.sweep_v4 import configuration


def seed_sd_interval(row: Any, change: Mapping[str, Any] | None = None) -> tuple[float, float]:
    """The interval a v2 rule reads in seed-sd units: carrying the seed sd's own uncertainty
    (``ci_low_sd``, ``ci_high_sd``), or, as the declared alternative ``seed_sd: known``, with
    the sd treated as known (v1's ``ci_low``, ``ci_high``)."""
    known = (change or {}).get("seed_sd") == "known"
    return (row.ci_low, row.ci_high) if known else (row.ci_low_sd, row.ci_high_sd)


def listed(checks: Sequence[tuple[Verdict, str]]) -> str:
    """Checks in words, each with its status: ``"what → status; ..."``."""
    return "; ".join(f"{what} → {v.status}" for v, what in checks)


#: how :func:`geolib.verdicts.rules.given_premise` begins the reason of a premise that failed
PREMISE = "premise fails:"


@dataclass(frozen=True)
class Decision:
    """A claim's decision under one rule version: the verdict, the key number in words (the
    check that decided) and every check in words."""

    verdict: Verdict
    key: str
    checks: tuple[tuple[Verdict, str], ...] = ()

    @property
    def status(self) -> str:
        return self.verdict.status

    @property
    def key_number(self) -> str:
        """The key number, with the premise that failed when one decided the verdict."""
        premise = self.verdict.reason.startswith(PREMISE)
        return f"{self.key} ({self.verdict.reason})" if premise else self.key

    def words(self) -> str:
        """Every check with its status, then each premise that failed (once)."""
        checks = listed(self.checks) or self.key
        failed = dict.fromkeys(v.reason for v, _ in self.checks if v.reason.startswith(PREMISE))
        return "; ".join([checks, *failed])


def combined(checks: Sequence[tuple[Verdict, str]]) -> Decision:
    """Several checks of one claim as one :class:`Decision` (:func:`deciding_check`: the key
    number of a row that is partly or not reproduced is the check that failed)."""
    status, key = deciding_check(checks)
    deciding = next(v for v, what in checks if what == key)
    verdict = Verdict(status, deciding.rule, deciding.reason, deciding.labelled(key))
    return Decision(verdict, key, tuple(checks))


def premised(
    rule: Rule, holds: Sequence[tuple[bool, str]], decided: tuple[Verdict, str]
) -> tuple[Verdict, str]:
    """A check after its premises: ``decided`` (a verdict and the check in words) if every
    premise of ``holds`` (``(holds, why not)`` pairs) holds, else inconclusive with the first
    that fails (:func:`geolib.verdicts.rules.given_premise`); the words stay the check's."""
    failed = [why for ok, why in holds if not ok]
    verdict = given_premise(rule, not failed, failed[0] if failed else "-", lambda: decided[0])
    return verdict, decided[1]


# ---------------------------------------------------------------------------------------------
# What the v3 rules share
# ---------------------------------------------------------------------------------------------


def learned_models(models: pd.DataFrame, entropy: float, margin: float) -> Learners:
    """Which sweep models learned: ID test loss at least ``margin`` nats below the unigram
    entropy of the training split (:func:`geolib.verdicts.learners.learners`)."""
    loss = dict(zip(models["name"], models[ID_LOSS], strict=True))
    return learners(loss, dict.fromkeys(loss, entropy), margin)


def settled(tables: ChapterTables, section: SweepSection) -> WPremise:
    """The premise of every sweep row, at the sweep's tokens per parameter of each size
    (:mod:`geolib.verdicts.settled_premise`)."""
    return premise_at(tables.study, section.w_premise, tables.sweep.models)


def learned(tables: ChapterTables, section: SweepSection) -> Learners:
    """The models that learned (only they enter a v3 verdict)."""
    return learned_models(tables.sweep.models, tables.unigram_entropy, section.learned_margin)


def all_learned(learned: Learners, names: Sequence[str], what: str) -> tuple[bool, str]:
    """Premise of a number read from a table computed over the models ``names``: every one of
    them learned. Returns ``(holds, why not)``."""
    out = [n for n in names if n in learned.left_out]
    more = "…" if len(out) > 4 else ""
    why = (
        f"{what} was computed over {len(names)} models, {len(out)} of which did not learn "
        f"({', '.join(out[:4])}{more}; at least {learned.margin:g} nats below the unigram "
        "entropy needed): a model enters a verdict only if it learned"
    )
    return not out, why


def enough_per_size(models: pd.DataFrame, learned: Learners, minimum: int) -> tuple[bool, str]:
    """Premise of a number held at fixed size: at least ``minimum`` learned models in each size
    (fewer leave nothing to hold size fixed on). Returns ``(holds, why not)``."""
    kept = models[models["name"].isin(learned.kept)]
    counts = kept.groupby("size").size().reindex(sorted(models["size"].unique()), fill_value=0)
    short = ", ".join(f"{n} in size {s}" for s, n in counts.items() if n < minimum)
    why = f"too few models learned: {short} (premise: at least {minimum} per size)"
    return not short, why


def learned_text(learned: Learners, shown: int = 4) -> str:
    """Which models learned, in one short sentence (the first ``shown`` left out named)."""
    if not learned.left_out:
        return learned.words()
    n, gone = len(learned.kept) + len(learned.left_out), list(learned.left_out.items())
    named = ", ".join(f"{m} ({d:.3g})" for m, d in gone[:shown])
    more = f" and {len(gone) - shown} more" if len(gone) > shown else ""
    return (
        f"{len(learned.kept)} of {n} models learned; left out (nats below the unigram entropy, "
        f"margin {learned.margin:g}): {named}{more}"
    )


def compared_models(models: pd.DataFrame, factor: str, low: Any, high: Any) -> list[str]:
    """The models of the matched pairs of ``factor`` (``low`` against ``high``): points equal in
    every other factor, one at each level (what an effect of ``effects.csv`` averages)."""
    if factor not in FACTORS:
        raise KeyError(f"{factor!r} is not a factor; factors: {FACTORS}")
    others = [f for f in FACTORS if f != factor]
    at = models[models[factor].isin([low, high])]
    names: list[str] = []
    for _, group in at.groupby(others):
        if set(group[factor]) >= {low, high}:
            names += list(group["name"])
    return sorted(names)


def cell_models(models: pd.DataFrame, cells: pd.DataFrame) -> list[str]:
    """The models of the cells of ``cells`` (rows naming the other factors' levels, as
    ``u_shape.csv`` does)."""
    on = [f for f in FACTORS if f in cells.columns]
    if cells.empty or not on:
        return []
    return sorted(models.merge(cells[on].drop_duplicates(), on=on)["name"])


def varies_among(
    tables: SweepTables, outcome: str, kept: Sequence[str], min_sd_ratio: float
) -> tuple[bool, str]:
    """Premise of a prediction claim over the models ``kept`` (those that learned): ``outcome``
    varies across them within size at least ``min_sd_ratio`` times its seed-to-seed sd
    (``spread.csv``: from the seed replicates, which must be among them). Returns
    ``(holds, why not)``."""
    models = tables.models
    family = models["name"].map(lambda n: configuration(n)[0])
    replicates = sorted(models.loc[family.duplicated(keep=False), "name"])
    gone = [r for r in replicates if r not in set(kept)]
    if gone:
        return (
            False,
            f"the seed spread of {outcome} comes from replicates that did not learn: {gone}",
        )
    m = models[models["name"].isin(kept)]
    groups = pd.factorize(m["size"], sort=True)[0]
    dof = len(m) - len(set(groups))
    if dof < 1:
        return False, f"{len(m)} learned models leave no spread within size to measure"
    centred = within_groups(m[outcome].to_numpy(np.float64), groups)
    ratio = float(np.sqrt((centred**2).sum() / dof)) / float(tables.spread.loc[outcome, "seed_sd"])
    why = (
        f"{outcome} varies across the {len(m)} learned models within size only {ratio:.2g}x its "
        f"seed-to-seed sd (premise: at least {min_sd_ratio:g}x)"
    )
    return ratio >= min_sd_ratio, why


def share_text(k: int, n: int, level: float) -> str:
    """``"k of n (share [low, high], Clopper–Pearson)"``: a count of units with its bounded
    interval (no units: said so)."""
    if n == 0:
        return "no units"
    p = proportion_ci(k, n, level)
    return f"{k} of {n} ({p.fraction:.2g} [{p.low:.2g}, {p.high:.2g}], Clopper–Pearson)"


def claim_text(claims: Sequence[Claim], anchor: str) -> str:
    """The row of ``claims`` with ``anchor``, in words: what a chapter prints under its MyST
    target (the status with the rule's history, key number, rule, robustness, unit, detail)."""
    row = next((c for c in claims if c.anchor == anchor), None)
    if row is None:
        raise KeyError(f"no claim row with anchor {anchor!r}")
    return "\n".join(
        [
            f"{row.claim_id}: {row.status}. {history(row)}",
            f"key number: {row.key_number}",
            f"rule: {row.rule}",
            f"robust: {row.robust}",
            f"unit: {row.unit}",
            f"detail: {row.detail}",
        ]
    )


def sweep_claim(
    claim: str,
    chapter: str,
    decision: Decision,
    v1: Sequence[tuple[Verdict, str]],
    *,
    v2: str,
    spec: Mapping[str, Any],
    tables: SweepTables,
    who: Learners,
    premise: WPremise,
    paper_scale: str,
    counts: str,
    alternatives: Mapping[str, str],
    anchor: str,
    rule: str,
    unit: str,
    extra: str = "",
    post_hoc: str = "",
) -> Claim:
    """A sweep chapter's row of ``claim``: v3's ``decision`` after the premise that W left its
    random start and settled (``premise``: :func:`geolib.verdicts.settled_premise.premised_row`)
    and whether it survives each declared alternative, with v1's checks and v2's status beside
    it and why v3 differs (``spec``: the claim's v3 mapping). The v3 rules and the premise were
    committed before the sweep's runs at this design: prospective. Its detail: v3's checks,
    ``extra`` words, the premise, who learned (``who``), the ``counts`` of intervals that
    exclude their estimate (:func:`excluding_words`) and v1's checks. Its scale states the
    paper's (``paper_scale``) beside ours."""
    status, key, alts = premised_row(premise, decision.status, decision.key_number, alternatives)
    return Claim(
        claim,
        status,
        key,
        chapter,
        f"v3: {decision.words()}.{extra} {premise_words(premise)}. {learned_text(who)}. "
        f"{counts}. v1: {listed(v1)}",
        anchor=anchor,
        rule=f"{rule}; {PREMISE_RULE}",
        unit=unit,
        robust=robustness(status, alts),
        post_hoc=post_hoc,
        rule_v1=version_verdict(v1).status,
        rule_v2=v2,
        revision=words(spec["revision"]),
        scale=f"{scale_of_runs(tables.scale_runs())}; {paper_scale}",
        decided=PROSPECTIVE,
        numbers=decision.verdict.numbers,
    )


@dataclass(frozen=True)
class BudgetRows:
    """What a sweep chapter's claim rows at one budget share (:func:`budget_rows`): the v1 and
    v2 checks of each claim (``earlier``: ``{claim: {version: [(Verdict, words)]}}``), who
    learned, the premise, the paper's scale and the ``counts`` of intervals that exclude their
    estimate. :meth:`row` is :func:`sweep_claim` with them filled in."""

    chapter: str
    anchors: Mapping[str, str]
    tables: SweepTables
    earlier: Mapping[str, Mapping[str, Sequence[tuple[Verdict, str]]]]
    who: Learners
    premise: WPremise
    paper_scale: str
    counts: str

    def row(
        self,
        claim: str,
        decision: Decision,
        *,
        spec: Mapping[str, Any],
        alternatives: Mapping[str, str],
        **text: str,
    ) -> Claim:
        """``claim``'s row (:func:`sweep_claim`; ``text``: its ``rule``, ``unit``, ``extra`` and
        ``post_hoc``), anchored at ``anchors[claim]``."""
        return sweep_claim(
            claim,
            self.chapter,
            decision,
            self.earlier[claim]["v1"],
            v2=version_verdict(self.earlier[claim]["v2"]).status,
            spec=spec,
            tables=self.tables,
            who=self.who,
            premise=self.premise,
            paper_scale=self.paper_scale,
            counts=self.counts,
            alternatives=alternatives,
            anchor=self.anchors[claim],
            **text,
        )


def budget_rows(
    chapter: str,
    anchors: Mapping[str, str],
    tables: ChapterTables,
    section: SweepSection,
    premises: Premises,
    interval_tables: Sequence[str],
    derived: Mapping[str, pd.DataFrame] | None = None,
) -> BudgetRows:
    """A chapter's :class:`BudgetRows`: its v1 and v2 rules (the section's rule history) on
    the sweep's tables and the chapter's ``derived`` ones, with the ``premises`` their checks
    name, and the tables whose intervals it counts (``interval_tables``, :func:`excluding`)."""
    frames = {**tables.sweep.frames(), **(derived or {})}
    return BudgetRows(
        chapter,
        anchors,
        tables.sweep,
        section.earlier_rules().checks(tables=frames, premises=premises),
        learned(tables, section),
        settled(tables, section),
        section.w_premise.paper_scale,
        excluding_words(excluding(tables.sweep, interval_tables)),
    )


def claims_frame(claims: Sequence[Claim]) -> pd.DataFrame:
    """The rows of a chapter's claims side by side: v1, v2 and v3 status (and v4 where a row
    has it), key number, robust."""
    v4 = any(c.rule_v3 for c in claims)
    versions = ["v1", "v2", "v3", "v4"] if v4 else ["v1", "v2", "v3"]
    return pd.DataFrame(
        [
            {
                "claim": c.claim_id,
                **dict(
                    zip(
                        versions,
                        [c.rule_v1, c.rule_v2, *([c.rule_v3] if v4 else []), c.status],
                        strict=True,
                    )
                ),
                "key number": c.key_number,
                "robust": c.robust,
            }
            for c in claims
        ],
        columns=["claim", *versions, "key number", "robust"],
    )
