"""The premise of every sweep row under rules v4 (claims B1–B5, B7, B8): the answer no longer
depends on training length.

Paper B compares end-of-schedule models across training configurations at each token budget;
its claims are directions and associations, and it never asks that W stop moving. Rules v4
therefore read each row at two budgets of the same design, D and 2D tokens per model (each
model annealed to the end of its own schedule), and ask:

1. **past the turn, at both budgets**: the training-length study's turn of W's effective rank
   (:func:`geolib.verdicts.settled_premise.w_premise`, its first part) lies at or below each
   budget's tokens per parameter, at every size;
2. **the same verdict at D and 2D**: the row's rule (v3's, with its alternatives) gives the same
   status on the models of each budget.

Where (1) fails the row is *inconclusive* (W has not left its random start). Where (2) fails it
is *inconclusive*, with both answers shown: "still depends on training length" when both
budgets decided and disagree, "decided at one budget only" when one of them could not decide.
v3's second premise part (W *settled*) is retired: it failed by construction within any budget
reached here. Its outcome is kept visible in the rule history (:func:`retired_settled_words`),
never applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from geolib.measure import validate as check
from geolib.verdicts.rules import INCONCLUSIVE, NOT_RUN, STATUSES
from geolib.verdicts.settled_premise import WPremise

#: the budgets' labels, in order
BUDGETS = ("D", "2D")
#: what every v4 sweep row's rule says of its premise, after the rule itself
RULE_WORDS = (
    "before any of it, the v4 premise: W past its effective rank's turn (training-length study) "
    "at both budgets, D and 2D tokens per model, and the same verdict at both"
)
DEPENDS = "still depends on training length"
ONE_BUDGET = "decided at one budget only"


@dataclass(frozen=True)
class AtBudget:
    """A row decided on the models of one budget: the label (``D`` or ``2D``), the premise's
    reading of the study at that budget's tokens per parameter (only ``past_turn`` is used),
    the status and key number of the row's rule there, and its alternatives' statuses."""

    budget: str
    premise: WPremise
    status: str
    key: str
    alternatives: Mapping[str, str]

    def __post_init__(self) -> None:
        check.one_of("budget", self.budget, BUDGETS)
        for what, status in [("status", self.status), *self.alternatives.items()]:
            if status not in STATUSES:
                raise ValueError(f"{self.budget}: {what} {status!r} is not one of {STATUSES}")


@dataclass(frozen=True)
class TwoBudgetRow:
    """The v4 row: its ``status``, ``key`` number (both budgets'), the premise in words
    (``premise``), whether the premise held (``holds``) and the alternatives' combined
    statuses."""

    status: str
    key: str
    premise: str
    holds: bool
    alternatives: dict[str, str]


def _combined(d: str, dd: str) -> tuple[str, str]:
    """One status from the statuses at D and 2D, and why (empty when they agree)."""
    if NOT_RUN in (d, dd):
        return NOT_RUN, "not run at both budgets"
    if d == dd:
        return d, ""
    if INCONCLUSIVE in (d, dd):
        return INCONCLUSIVE, f"{ONE_BUDGET} (D: {d}; 2D: {dd})"
    return INCONCLUSIVE, f"{DEPENDS} (D: {d}; 2D: {dd})"


def two_budget_row(at_d: AtBudget, at_2d: AtBudget) -> TwoBudgetRow:
    """The v4 verdict of one sweep row from its verdicts at D (``at_d``) and 2D (``at_2d``).

    Past the turn must hold at both budgets, else the row and every alternative are
    inconclusive. Then the row's status is the common status where D and 2D agree, else
    inconclusive with both answers (:func:`_combined`); each alternative likewise."""
    if (at_d.budget, at_2d.budget) != BUDGETS:
        raise ValueError(
            f"need the rows at {BUDGETS} in that order, got {at_d.budget}, {at_2d.budget}"
        )
    if set(at_d.alternatives) != set(at_2d.alternatives):
        raise ValueError(
            "the alternatives must be the same at both budgets: "
            f"{sorted(at_d.alternatives)} against {sorted(at_2d.alternatives)}"
        )
    key = f"D: {at_d.key}; 2D: {at_2d.key}"
    past = {b.budget: b.premise.past_turn for b in (at_d, at_2d)}
    turn_words = "; ".join(
        f"{b.budget}: {'past' if b.premise.past_turn else 'not past'} the turn ({b.premise.why})"
        for b in (at_d, at_2d)
    )
    if not all(past.values()):
        missing = [b for b, ok in past.items() if not ok]
        alternatives = {
            n: s if s == NOT_RUN else INCONCLUSIVE for n, s in at_d.alternatives.items()
        }
        return TwoBudgetRow(
            INCONCLUSIVE,
            f"{key} (premise fails: W not past its rank's turn at {', '.join(missing)})",
            f"Premise (v4) fails: {turn_words}",
            False,
            alternatives,
        )
    status, why = _combined(at_d.status, at_2d.status)
    alternatives = {}
    for name, s_d in at_d.alternatives.items():
        alternatives[name] = _combined(s_d, at_2d.alternatives[name])[0]
    same = not why
    premise = (
        f"Premise (v4) {'holds' if same else 'fails'}: {turn_words}; verdict at D "
        f"{at_d.status}, at 2D {at_2d.status}" + ("" if same else f": {why}")
    )
    return TwoBudgetRow(status, key if same else f"{key} ({why})", premise, same, alternatives)


def retired_settled_words(premise: WPremise) -> str:
    """v3's premise part "W settled", retired by v4, with the outcome it had (for the rule
    history: shown, never applied)."""
    outcome = "held" if premise.settled else "failed"
    return (
        f'v3 premise "W left its random start and settled" (retired in v4): {outcome} '
        f"({premise.why})"
    )
