"""geolib.verdicts.budget_premise: the v4 premise (past the turn at both budgets, the same verdict
at D and 2D) on hand-made rows, every branch."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from geolib.verdicts.budget_premise import (
    DEPENDS,
    ONE_BUDGET,
    AtBudget,
    retired_settled_words,
    two_budget_row,
)
from geolib.verdicts.rules import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, PARTLY, REPRODUCED
from geolib.verdicts.settled_premise import PremiseSpec, WPremise, w_premise

PAST = WPremise(past_turn=True, settled=False, why="S turns at 4.5")
NOT_PAST = WPremise(past_turn=False, settled=False, why="S has no turn")
ALTS = ("sigma^2 effective rank", "within-size R² (v3)")


def row(budget, status, premise=PAST, alts=(REPRODUCED, REPRODUCED), key=None):
    return AtBudget(
        budget, premise, status, key or f"k{budget}", dict(zip(ALTS, alts, strict=True))
    )


def test_same_verdict_at_both_budgets_decides_and_shows_both_keys():
    out = two_budget_row(row("D", REPRODUCED), row("2D", REPRODUCED, alts=(REPRODUCED, PARTLY)))
    assert out.status == REPRODUCED and out.holds
    assert out.key == "D: kD; 2D: k2D"
    assert "holds" in out.premise and "at 2D reproduced" in out.premise
    # each alternative is combined the same way: agreeing stays, disagreeing is inconclusive
    assert out.alternatives == {ALTS[0]: REPRODUCED, ALTS[1]: INCONCLUSIVE}


@pytest.mark.parametrize(
    "d, dd, why",
    [
        (REPRODUCED, NOT_REPRODUCED, DEPENDS),
        (NOT_REPRODUCED, PARTLY, DEPENDS),
        (REPRODUCED, INCONCLUSIVE, ONE_BUDGET),
        (INCONCLUSIVE, NOT_REPRODUCED, ONE_BUDGET),
    ],
)
def test_verdicts_that_differ_are_inconclusive_with_both_answers(d, dd, why):
    out = two_budget_row(row("D", d), row("2D", dd))
    assert out.status == INCONCLUSIVE and not out.holds
    assert why in out.key and f"D: {d}; 2D: {dd}" in out.key
    assert "fails" in out.premise


def test_both_inconclusive_is_inconclusive_and_the_premise_holds():
    out = two_budget_row(row("D", INCONCLUSIVE), row("2D", INCONCLUSIVE))
    assert out.status == INCONCLUSIVE and out.holds


@pytest.mark.parametrize("which", ["D", "2D"])
def test_not_past_the_turn_at_either_budget_fails_the_row_and_its_alternatives(which):
    d = row("D", REPRODUCED, premise=NOT_PAST if which == "D" else PAST)
    dd = row(
        "2D", REPRODUCED, premise=NOT_PAST if which == "2D" else PAST, alts=(NOT_RUN, REPRODUCED)
    )
    out = two_budget_row(d, dd)
    assert out.status == INCONCLUSIVE and not out.holds
    assert f"not past its rank's turn at {which}" in out.key
    assert set(out.alternatives.values()) <= {INCONCLUSIVE, NOT_RUN}


def test_not_run_at_one_budget_is_not_run():
    assert two_budget_row(row("D", NOT_RUN), row("2D", REPRODUCED)).status == NOT_RUN


def test_bad_input():
    with pytest.raises(ValueError, match="budget must be"):
        row("3D", REPRODUCED)
    with pytest.raises(ValueError, match="is not one of"):
        row("D", "fine")
    with pytest.raises(ValueError, match="in that order"):
        two_budget_row(row("2D", REPRODUCED), row("D", REPRODUCED))
    other = AtBudget("2D", PAST, REPRODUCED, "k", {"another": REPRODUCED})
    with pytest.raises(ValueError, match="same at both budgets"):
        two_budget_row(row("D", REPRODUCED), other)


def test_past_the_turn_read_from_the_study_at_each_budget_and_the_retired_part_shown():
    """The same study table read at a budget before and after the turn (the premise's first
    part comes from settled_premise.w_premise; v4 ignores its settling part)."""
    spec = PremiseSpec.from_params(
        {"study": "s.csv", "quantity": "w_erank", "sizes": {"S": "d32"}, "paper_scale": "x"}
    )
    study = pd.DataFrame(
        [
            {
                "size": "d32",
                "quantity": "w_erank",
                "settled": False,
                "settled_at": math.nan,
                "turn_at": 4.5,
                "reason": "still rising",
            }
        ]
    )
    early, late = w_premise(study, spec, {"S": 3.0}), w_premise(study, spec, {"S": 100.0})
    assert not early.past_turn and late.past_turn and not late.settled
    out = two_budget_row(
        AtBudget("D", early, REPRODUCED, "a", {}), AtBudget("2D", late, REPRODUCED, "b", {})
    )
    assert out.status == INCONCLUSIVE and "turn at D" in out.key
    assert (
        two_budget_row(
            AtBudget("D", late, REPRODUCED, "a", {}), AtBudget("2D", late, REPRODUCED, "b", {})
        ).status
        == REPRODUCED
    )  # not settled, yet decided: v4 does not ask it
    words = retired_settled_words(late)
    assert "retired in v4" in words and "failed" in words and "still rising" in words
