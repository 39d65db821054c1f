"""Rules v4 of the sweep rows (claims B1–B5, B7, B8): each row decided at two token budgets,
D and 2D, and kept only where the answer no longer depends on training length.

Every chapter's v3 rule is applied to the models of each budget apart (their tables are the
analysis stages' ``<budget>/`` folders), with its declared alternatives; the premise is
:mod:`geolib.verdicts.budget_premise`'s (W past its rank's turn at both budgets, the same verdict
at both). B1's rule is new in v4 (:func:`b1_added_power`): what W's rank adds to the prediction
of ID loss beyond the training configuration, Paper B's sense of "does not predict"; v3's
within-size R² is one of its declared alternatives. Each row keeps v1, v2 and v3 (v3 read at
D, where its premise "W settled" failed by construction) in its history; v4 and the two-budget
design were committed before the sweep's runs at two budgets: prospective.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from geolib.measure.geometry import ID_LOSS
from geolib.measure.prediction import added_power
from geolib.verdicts.budget_premise import (
    BUDGETS,
    RULE_WORDS,
    AtBudget,
    retired_settled_words,
    two_budget_row,
)
from geolib.verdicts.claims import PROSPECTIVE, Claim
from geolib.verdicts.markup import words
from geolib.verdicts.rules import Verdict, premise_fails, robustness, rule_from_params
from geolib.verdicts.settled_premise import RULE_WORDS as V3_PREMISE_WORDS
from geolib.verdicts.settled_premise import WPremise


def budget_of(name: str) -> str:
    """The budget label a sweep point's name ends with (``…-s0-t2D`` → ``2D``)."""
    head, sep, budget = name.rpartition("-t")
    if not sep or not head:
        raise ValueError(f"{name!r} names no budget (…-t<budget>)")
    return budget


def points_at(points: Sequence[str], budget: str) -> list[str]:
    """The points of ``points`` trained at ``budget``, in listed order (error if none)."""
    out = [p for p in points if budget_of(p) == budget]
    if not out:
        raise ValueError(f"no sweep point at budget {budget!r}")
    return out


def configuration(name: str) -> tuple[str, str]:
    """A point's configuration at its budget and its seed: ``S-b8-…-s1-tD`` →
    ``("S-b8-…-tD", "1")`` (the unit a scale counts seeds of)."""
    budget = budget_of(name)
    point, sep, seed = name[: -len(budget) - 2].rpartition("-s")
    if not sep or not point or not seed.isdigit():
        raise ValueError(f"{name!r} names no seed (…-s<seed>-t<budget>)")
    return f"{point}-t{budget}", seed


#: the error of a section without rules v4 (``sweep_v4``)
MISSING = "geometry_performance.sweep_v4: missing (rules v4 of the sweep rows)"


@dataclass(frozen=True)
class V4:
    """``geometry_performance.sweep_v4``: why v4 differs (``revision``) and B1's rule
    (``b1``: the configuration's ``factors``, the ``decide`` rule, the ``alternatives``)."""

    revision: str
    b1: Mapping[str, Any]

    @classmethod
    def from_params(cls, section: Mapping[str, Any]) -> V4:
        where = "geometry_performance.sweep_v4"
        spec = section.get("sweep_v4")
        if not isinstance(spec, Mapping):
            raise ValueError(MISSING)
        missing = [k for k in ("revision", "b1", "premise", "retired") if k not in spec]
        if missing:
            raise ValueError(f"{where}: missing key(s) {missing}")
        b1 = spec["b1"]
        for k in ("factors", "decide", "alternatives"):
            if k not in b1:
                raise ValueError(f"{where}.b1: missing key {k!r}")
        rule_from_params(b1["decide"])
        return cls(words(spec["revision"]), b1)


def v4_of(section: Mapping[str, Any]) -> V4 | None:
    """The section's rules v4, or ``None`` for a section that has none (a v3-only section)."""
    return V4.from_params(section) if "sweep_v4" in section else None


def required(v4: V4 | None) -> V4:
    """``v4``, or the error :meth:`V4.from_params` gives where a section has no rules v4."""
    if v4 is None:
        raise ValueError(MISSING)
    return v4


def b1_added_power(
    models: pd.DataFrame,
    kept: Sequence[str],
    spec: Mapping[str, Any],
    change: Mapping[str, Any] | None = None,
    level: float = 0.95,
) -> tuple[Verdict, str, dict[str, Any]]:
    """B1 v4 on the learned models ``kept`` of one budget (``models``: the per-model table):
    :func:`~geolib.measure.prediction.added_power` of ``predictor`` (default erank W) for
    ``outcome`` (default ID test loss) beyond ``spec["factors"]``, decided on the cross-validated
    ΔR² (or, with ``change["statistic"] == "partial_r"``, on the partial r given the factors)
    by ``spec["decide"]`` (or ``change["rule"]``). Returns the verdict, the key number in words
    and the statistic's row."""
    change = change or {}
    outcome = change.get("outcome", ID_LOSS)
    predictor = change.get("predictor", "w_erank")
    statistic = change.get("statistic", "delta_r2_cv")
    rule = rule_from_params(change.get("rule", spec["decide"]))
    table = models[models["name"].isin(kept)].reset_index(drop=True)
    row = added_power(table, outcome, predictor, list(spec["factors"]), level=level)
    est, lo, hi = (row[statistic], row[f"{statistic}_ci_low"], row[f"{statistic}_ci_high"])
    name = "ΔR² (held out)" if statistic == "delta_r2_cv" else "partial r"
    what = (
        f"{name} of {predictor} for {outcome} beyond the configuration "
        f"({row['factors']}; n = {row['n']})"
    )
    if not all(map(pd.notna, (est, lo, hi))):
        verdict = premise_fails(rule, row["note"] or f"{name} undefined")
        return verdict, f"{what}: not defined", row
    verdict = rule.decide(est, lo, hi)
    return verdict, f"{what} {est:+.3g} [{lo:+.3g}, {hi:+.3g}]", row


def at_budget(
    budget: str,
    premise: WPremise,
    verdict: Verdict,
    key: str,
    alternatives: Mapping[str, str],
) -> AtBudget:
    """One budget's reading of a row (for :func:`v4_row`)."""
    return AtBudget(budget, premise, verdict.status, key, dict(alternatives))


def v4_row(
    v3: Mapping[str, Claim],
    at: Mapping[str, AtBudget],
    v4: V4,
    *,
    rule: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> Claim:
    """The v4 row of one claim from its v3 rows at each budget (``v3``: budget → row, whose
    rule words, unit and history it keeps) and each budget's reading (``at``: budget →
    :class:`~geolib.verdicts.budget_premise.AtBudget`). The status and the alternatives are
    :func:`~geolib.verdicts.budget_premise.two_budget_row`'s; v3's status (at D) goes to the
    history with the outcome of its retired premise; the scale states both budgets. ``rule``:
    the v4 rule in words where it differs from v3's (B1); ``extra``: words per budget for the
    detail."""
    if set(v3) != set(BUDGETS) or set(at) != set(BUDGETS):
        raise ValueError(f"need the rows at each of {BUDGETS}, got {sorted(v3)}, {sorted(at)}")
    first = v3[BUDGETS[0]]
    row = two_budget_row(at[BUDGETS[0]], at[BUDGETS[1]])
    extra = extra or {}
    detail = " ".join(
        [f"v4: {row.premise}."]
        + [f"At {b}: {extra.get(b, '')} v3 there: {v3[b].detail}" for b in BUDGETS]
    )
    rule_words = (rule or first.rule).replace(V3_PREMISE_WORDS, RULE_WORDS)
    if RULE_WORDS not in rule_words:
        rule_words = f"{rule_words}; {RULE_WORDS}"
    return replace(
        first,
        status=row.status,
        key_number=row.key,
        detail=detail,
        rule=rule_words,
        robust=robustness(row.status, row.alternatives),
        rule_v3=first.status,
        revision=(
            f"{first.revision} v4: {v4.revision} {retired_settled_words(at[BUDGETS[0]].premise)}"
        ),
        scale="; ".join(f"{b}: {v3[b].scale}" for b in BUDGETS),
        decided=PROSPECTIVE,
        numbers=tuple(n.labelled(b) for b in BUDGETS for n in v3[b].numbers),
    )


def verdicts_v4(
    v3_rows: Callable[[str], list[Claim]],
    reading: Callable[[str, str], AtBudget],
    v4: V4,
    *,
    rules: Mapping[str, str] | None = None,
    extra: Callable[[str, str], str] | None = None,
) -> list[Claim]:
    """Every v4 row of a chapter: ``v3_rows(budget)`` gives the chapter's v3 rows on that
    budget's models, ``reading(budget, claim)`` a claim's reading there; ``rules``: claim → v4
    rule words where they differ from v3's; ``extra(budget, claim)``: detail words."""
    v3 = {b: {c.claim_id: c for c in v3_rows(b)} for b in BUDGETS}
    out = []
    for claim in v3[BUDGETS[0]]:
        rows = {b: v3[b][claim] for b in BUDGETS}
        at = {b: reading(b, claim) for b in BUDGETS}
        ext = {b: extra(b, claim) for b in BUDGETS} if extra else None
        out.append(v4_row(rows, at, v4, rule=(rules or {}).get(claim), extra=ext))
    return out
