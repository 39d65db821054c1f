"""Chapter ``training_knobs`` (claims B3, B4, B5): what batch size, weight decay and learning
rate do to the geometry of the unembedding W and to loss, over the sweep.

The chapter's section of ``params.yaml`` (:class:`Section`), its tables (:class:`Tables`,
:func:`load_tables`) and its verdicts (:func:`verdicts`): each claim decided by its v3 rule
(:func:`b3`, :func:`b4`, :func:`b5`), with its v1 and v2 verdicts kept on the row (declared in
``verdicts.history``, :func:`premises` naming what they assume). Every effect is a mean
difference over matched pairs of models (equal in every other factor) in units of the seed-to-
seed sd, read from ``effects.csv`` (Student-t over the pairs; v2 and v3 read the interval that
also carries the seed sd's own uncertainty). The tables are computed over all models, so a v3
check counts only if every model it compares learned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from geolib.measure.geometry import ID_LOSS
from geolib.measure.stats import proportion_ci
from geolib.verdicts import sweep_v4
from geolib.verdicts.budget_premise import AtBudget
from geolib.verdicts.chapters.interface import own_section
from geolib.verdicts.claims import Claim
from geolib.verdicts.evidence import decide_interval
from geolib.verdicts.history import Premises
from geolib.verdicts.learners import Learners
from geolib.verdicts.rules import INCONCLUSIVE, NOT_RUN, Verdict, rule_from_params
from geolib.verdicts.schema import Field
from geolib.verdicts.sweep_chapters import (
    Decision,
    all_learned,
    budget_rows,
    cell_models,
    combined,
    compared_models,
    learned,
    premised,
    seed_sd_interval,
    settled,
    share_text,
    words,
)
from geolib.verdicts.sweep_tables import ChapterTables, SweepSection, read_budgets
from geolib.verdicts.sweep_v4 import at_budget

CHAPTER = "training_knobs"
#: the MyST target of each claim's verdict cell in the chapter
ANCHORS = {c: f"verdict-{c.lower()}" for c in ("B3", "B4", "B5")}
#: this chapter's tables of intervals (Student-t over matched pairs; counted all the same)
EFFECT_TABLES = ("effects", "interactions", "effects_by_size")
V1_RULES = (
    "b3_batch_rank",
    "b3_u_shape",
    "b4_wd_rank",
    "b4_wd_loss_by_size",
    "b5_lr_loss",
    "b5_lr_rank",
)
V2_FIELDS = (
    Field("v2.min_init_move_share", float, low=0.0, high=1.0, open_low=True),
    Field("v2.paper_weight_decay", float, low=0.0, many=True),  # [low, high]
    Field("v2.seed_sd_after_data", "text"),
    *(Field(f"v2.{claim}", "mapping") for claim in ("B3", "B4", "B5")),
)
V3_RULES = {"b3_v3": ("u_shape",), "b4_v3": (), "b5_v3": ()}


@dataclass(frozen=True)
class Section(SweepSection):
    """The ``geometry_performance`` section as B3, B4 and B5 read it: the shared fields
    (:class:`~geolib.verdicts.sweep_tables.SweepSection`, which checks them), v2's settings of
    B3 and B4 (:data:`V2_FIELDS`, :meth:`check_v2`) and each claim's v3 mapping (B3's U-shape
    rule)."""

    CHAPTER = CHAPTER
    V1_RULES = V1_RULES
    V2_FIELDS = V2_FIELDS
    V2_RULES = ("B5",)
    V3_RULES = V3_RULES

    b3_v3: Mapping[str, Any]
    b4_v3: Mapping[str, Any]
    b5_v3: Mapping[str, Any]

    @staticmethod
    def check_v2(v2: Mapping[str, Any]) -> None:
        """The paper's weight-decay range (B4) as ``[low, high]``."""
        wd = v2["paper_weight_decay"]
        if len(wd) != 2 or not wd[0] <= wd[1]:
            raise ValueError(
                f"geometry_performance.v2.paper_weight_decay must be [low, high], got {wd!r}"
            )


#: the sweep's tables and the unigram entropy of the training split are all this chapter reads
Tables = ChapterTables


def load_tables(section: Section, points: Sequence[str]) -> Tables:
    """Read the tables from where the analysis stage wrote them (``points``: the sweep's)."""
    return Tables(**section.chapter_tables(points))


def read_section(params_path: str | Path, overrides: Mapping[str, Any] | None = None) -> Section:
    """B3-B5's section (the shared ``geometry_performance``, ``overrides`` applied) with
    ``verdicts``, every field checked."""
    return own_section(params_path, CHAPTER, overrides, Section)


def read(
    params_path: str | Path, overrides: Mapping[str, Any] | None = None
) -> tuple[Section, dict[str, Tables]]:
    """B3-B5's section (the shared ``geometry_performance`` with B3-B5's v3 mappings,
    ``overrides`` applied; rules v4 with it) and the sweep's tables at each token budget
    (:mod:`geolib.verdicts.chapters.interface`)."""
    section = read_section(params_path, overrides)
    return section, read_budgets(params_path, lambda b, pts: load_tables(section.at_budget(b), pts))


# ---------------------------------------------------------------------------------------------
# Premises
# ---------------------------------------------------------------------------------------------


def moved(tables: Tables, section: Section) -> tuple[bool, str]:
    """v2's premise of B3: at the largest batch, in every size, W's effective rank moved from
    its random start at least ``min_init_move_share`` of its move at the smallest batch
    (``init_moves.csv``); otherwise a higher rank there is distance from initialisation."""
    moves, least = tables.sweep.init_moves, section.v2["min_init_move_share"]
    largest = moves[moves.batch_size == moves.batch_size.max()]
    share = float(largest["share_of_smallest_batch"].min())
    why = (
        f"at batch {int(largest.batch_size.iloc[0])} W's effective rank moved from its random "
        f"start only {share:.2f} of the move at the smallest batch (premise: at least "
        f"{least:g}); a higher rank there is distance from initialisation"
    )
    return bool(share >= least), why


def in_paper_range(tables: Tables, section: Section) -> tuple[bool, str]:
    """v2's premise of B4: the weight decays compared lie in the paper's range."""
    e = tables.sweep.effect("weight_decay", "w_erank")
    lo, hi = (float(w) for w in section.v2["paper_weight_decay"])
    why = (
        f"the design compares weight decay {e.low:g} with {e.high:g}, outside the paper's "
        f"{lo:g}-{hi:g}"
    )
    return bool(lo <= e.low and e.high <= hi), why


def premises(tables: Tables, section: Section) -> Premises:
    """What the v2 checks declared in ``verdicts.history`` name: ``moved`` (:func:`moved`) and
    ``in_paper_range`` (:func:`in_paper_range`). Their table ``lr_rank_by_size`` is
    :func:`weak_by_size` on W's rank."""
    return {
        "moved": lambda: moved(tables, section),
        "in_paper_range": lambda: in_paper_range(tables, section),
    }


def learned_pairs(
    tables: Tables, learned_: Learners, factor: str, more: Sequence[str] = ()
) -> tuple[bool, str]:
    """Premise of a v3 check read from the effect tables: every model the ``factor`` effect
    compares (and the models ``more``) learned."""
    e = tables.sweep.effect(factor, "w_erank")
    names = sorted({*compared_models(tables.sweep.models, factor, e.low, e.high), *more})
    return all_learned(learned_, names, f"the {factor} effect")


def _effect_check(
    tables: Tables, rule: Any, factor: str, quantity: str, change: Mapping[str, Any] | None
) -> tuple[Verdict, str]:
    e = tables.sweep.effect(factor, quantity)
    low, high = seed_sd_interval(e, change)
    what = f"{quantity}, {factor} {e.low:g}→{e.high:g} (seed sd)"
    return decide_interval(rule, e.effect_sd, low, high, what)


def _interaction_check(
    tables: Tables, rule: Any, change: Mapping[str, Any] | None
) -> tuple[Verdict, str]:
    i = tables.sweep.interactions
    i = i[i.factor == "weight_decay"].iloc[0]
    low, high = seed_sd_interval(i, change)
    what = f"wd effect on ID loss, {i.levels} (seed sd)"
    return decide_interval(rule, i.interaction_sd, low, high, what)


def _u_check(tables: Tables, section: Section, rule: Any) -> tuple[Verdict, str]:
    """The share of U-shaped cells with its Clopper-Pearson interval, decided by ``rule``."""
    cells = tables.sweep.u_shape
    k, n = int(cells["u_shaped"].astype(bool).sum()), len(cells)
    if n == 0:
        v = Verdict(INCONCLUSIVE, rule.describe(), "no cell of the design has three batch sizes")
        return v, "U-shaped cells: none with three batch sizes"
    p = proportion_ci(k, n, section.level)
    what = f"share of U-shaped cells ({k} of {n}, Clopper–Pearson)"
    return decide_interval(rule, p.fraction, p.low, p.high, what)


def weak_by_size(tables: Tables, quantity: str, change: Mapping[str, Any] | None) -> pd.DataFrame:
    """The lr effect on ``quantity`` in each size (``effects_by_size.csv``) with its interval in
    seed-sd units (:func:`seed_sd_interval`) and whether it is ``weak``: its interval contains
    0, or its sign differs from the pooled effect's. One row per size."""
    pooled = tables.sweep.effect("lr", quantity)
    by = tables.sweep.effects_by_size
    rows = []
    for r in by[(by.factor == "lr") & (by.quantity == quantity)].itertuples():
        lo, hi = seed_sd_interval(r, change)
        weak = lo <= 0 <= hi or np.sign(r.effect_sd) != np.sign(pooled.effect_sd)
        rows.append({"size": r.size, "effect_sd": r.effect_sd, "low": lo, "high": hi, "weak": weak})
    return pd.DataFrame(rows, columns=["size", "effect_sd", "low", "high", "weak"])


def _weak_by_size(
    tables: Tables, rule: Any, quantity: str, change: Mapping[str, Any] | None, level: float
) -> tuple[Verdict, str]:
    """B5's geometry half: in each size the lr effect on ``quantity`` is weak or inconsistent
    (:func:`weak_by_size`), in enough of the sizes for ``rule``."""
    sizes = weak_by_size(tables, quantity, change)
    k, n = int(sizes["weak"].sum()), len(sizes)
    per = [f"{r.size} {r.effect_sd:.3g} [{r.low:.3g}, {r.high:.3g}]" for r in sizes.itertuples()]
    share = share_text(k, n, level)
    return rule.decide(k, n), (
        f"lr effect on {quantity} per size (seed sd): {', '.join(per)}; weak in {share}"
    )


# ---------------------------------------------------------------------------------------------
# v3
# ---------------------------------------------------------------------------------------------


def b3(tables: Tables, section: Section, change: Mapping[str, Any] | None = None) -> Decision:
    """B3 v3: both halves after one premise, W left its random start at the largest batch
    (v2's, for the rank half only) and every compared model learned. Rank half: v2's rule on the
    batch effect on W's rank (seed-sd units). U-shape half: the share of U-shaped cells on its
    Clopper-Pearson interval, against "most", with chance (1/3) as its null."""
    q = (change or {}).get("quantity", "w_erank")
    rank_rule = rule_from_params(section.verdict["b3_batch_rank"])
    u_rule = rule_from_params(section.b3_v3["u_shape"])
    cells = cell_models(tables.sweep.models, tables.sweep.u_shape)
    holds = [
        moved(tables, section),
        learned_pairs(tables, learned(tables, section), "batch_size", cells),
    ]
    return combined(
        [
            premised(rank_rule, holds, _effect_check(tables, rank_rule, "batch_size", q, change)),
            premised(u_rule, holds, _u_check(tables, section, u_rule)),
        ]
    )


def b4(tables: Tables, section: Section, change: Mapping[str, Any] | None = None) -> Decision:
    """B4 v3: v2's two checks (weight decay keeps W's rank higher; its effect on loss differs
    by size), after v2's premise (the paper's weight-decay range) and that every compared model
    learned."""
    q = (change or {}).get("quantity", "w_erank")
    rank_rule = rule_from_params(section.verdict["b4_wd_rank"])
    loss_rule = rule_from_params(section.verdict["b4_wd_loss_by_size"])
    holds = [
        in_paper_range(tables, section),
        learned_pairs(tables, learned(tables, section), "weight_decay"),
    ]
    return combined(
        [
            premised(rank_rule, holds, _effect_check(tables, rank_rule, "weight_decay", q, change)),
            premised(loss_rule, holds, _interaction_check(tables, loss_rule, change)),
        ]
    )


def b5(tables: Tables, section: Section, change: Mapping[str, Any] | None = None) -> Decision:
    """B5 v3: v2's two checks (the learning rate moves ID loss beyond the seed spread; its
    effect on W's rank is weak or inconsistent in at least half of the sizes), after the
    premise that every compared model learned."""
    q = (change or {}).get("quantity", "w_erank")
    loss_rule = rule_from_params(section.verdict["b5_lr_loss"])
    geometry_rule = rule_from_params(section.v2["B5"]["decide"])
    holds = [learned_pairs(tables, learned(tables, section), "lr")]
    return combined(
        [
            premised(loss_rule, holds, _effect_check(tables, loss_rule, "lr", ID_LOSS, change)),
            premised(
                geometry_rule, holds, _weak_by_size(tables, geometry_rule, q, change, section.level)
            ),
        ]
    )


# ---------------------------------------------------------------------------------------------
# The chapter's rows
# ---------------------------------------------------------------------------------------------

DECIDE = {
    "B3": ("b3_v3", b3, "batch_size"),
    "B4": ("b4_v3", b4, "weight_decay"),
    "B5": ("b5_v3", b5, "lr"),
}
UNITS = {
    "B3": lambda t: f"; cells of three batch sizes (n = {len(t.sweep.u_shape)})",
    "B4": lambda t: "",
    "B5": lambda t: ", per size",
}
RULE_WORDS = {
    "B3": "v3, after the premise that W left its random start at the largest batch and every "
    "compared model learned: rank half, {rank}; U-shape half, {u_shape}",
    "B4": "v3, after the premises that the design covers the paper's weight-decay range and "
    "every compared model learned: {rank}; and {loss}",
    "B5": "v3, after the premise that every compared model learned: {loss}; and {geometry}",
}


def alternatives(tables: Tables, section: Section, claim: str) -> dict[str, str]:
    """The status of ``claim`` under each declared alternative (a quantity whose effects this
    run did not compute: ``not yet run``)."""
    key, decide, factor = DECIDE[claim]
    sweep = tables.sweep
    out = {}
    for name, change in getattr(section, key)["alternatives"].items():
        q = change.get("quantity", "w_erank")
        measured = ((sweep.effects.factor == factor) & (sweep.effects.quantity == q)).any()
        if claim == "B5":
            by = sweep.effects_by_size
            measured = measured and ((by.factor == "lr") & (by.quantity == q)).any()
        out[name] = decide(tables, section, change).status if measured else NOT_RUN
    return out


def budget_verdicts(tables: Tables, section: Section) -> list[Claim]:
    """The chapter's claim rows (B3, B4, B5): each v3 verdict with its alternatives, and the v1
    and v2 verdicts beside it."""
    derived = {"lr_rank_by_size": weak_by_size(tables, "w_erank", None)}
    at = budget_rows(
        CHAPTER, ANCHORS, tables, section, premises(tables, section), EFFECT_TABLES, derived
    )
    describe = {k: rule_from_params(section.verdict[k]).describe() for k in V1_RULES}
    rules = {
        "B3": {
            "rank": describe["b3_batch_rank"],
            "u_shape": rule_from_params(section.b3_v3["u_shape"]).describe(),
        },
        "B4": {"rank": describe["b4_wd_rank"], "loss": describe["b4_wd_loss_by_size"]},
        "B5": {
            "loss": describe["b5_lr_loss"],
            "geometry": rule_from_params(section.v2["B5"]["decide"]).describe(),
        },
    }
    rows = []
    for claim, (key, decide, factor) in DECIDE.items():
        d = decide(tables, section, None)
        n_pairs = int(tables.sweep.effect(factor, "w_erank").n_pairs)
        rows.append(
            at.row(
                claim,
                d,
                spec=getattr(section, key),
                alternatives=alternatives(tables, section, claim),
                rule=RULE_WORDS[claim].format(**rules[claim]),
                unit=f"matched pairs of trained models (n = {n_pairs})" + UNITS[claim](tables),
                post_hoc=words(section.v2["seed_sd_after_data"]),
            )
        )
    return rows


def verdicts(tables: Mapping[str, Tables], section: Section) -> list[Claim]:
    """The chapter's v4 rows (B3, B4, B5): each claim's v3 rule and alternatives on the models
    of each budget, combined by the v4 premise (:mod:`geolib.verdicts.sweep_v4`)."""
    v4 = section.v4_rules()

    def reading(budget: str, claim: str) -> AtBudget:
        t = tables[budget]
        d = DECIDE[claim][1](t, section, None)
        alts = alternatives(t, section, claim)
        return at_budget(budget, settled(t, section), d.verdict, d.key_number, alts)

    return sweep_v4.verdicts_v4(lambda b: budget_verdicts(tables[b], section), reading, v4)
