"""geolib.verdicts.settled_premise: the sweep rows' premise read from hand-made study tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from geolib.verdicts.rules import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, REPRODUCED
from geolib.verdicts.settled_premise import (
    PAST_TURN_ONLY,
    PremiseSpec,
    WPremise,
    premise_words,
    premised_row,
    read_study,
    tokens_per_param,
    w_premise,
)

SPEC = PremiseSpec.from_params(
    {
        "study": "settling.csv",
        "quantity": "w_erank",
        "sizes": {"S": "d32", "M": "d64"},
        "paper_scale": "the paper: 10^3",
    }
)


def study(turn=(4.5, 1.6), settled_at=(None, None)) -> pd.DataFrame:
    rows = []
    for size, t, at in zip(("d32", "d64"), turn, settled_at, strict=True):
        rows.append(
            {
                "size": size,
                "quantity": "w_erank",
                "settled": at is not None,
                "settled_at": math.nan if at is None else at,
                "turn_at": t,
                "reason": f"{size} not settled by 30",
            }
        )
        # another quantity of the same size: never read for W's rank
        rows.append({**rows[-1], "quantity": "loss", "turn_at": 0.1, "settled": True})
    return pd.DataFrame(rows)


def test_past_the_turn_but_not_settled_fails_on_settling():
    p = w_premise(study(), SPEC, {"S": 29.3, "M": 10.3})
    assert (p.past_turn, p.settled, p.holds) == (True, False, False)
    assert "S at 29.3 tokens per parameter: in the study (d32) W's w_erank turns at 4.5" in p.why
    assert "d64 not settled by 30 (not settled by then)" in p.why


def test_settled_only_where_the_study_settled_at_or_below_the_sweeps_tokens():
    both = w_premise(study(settled_at=(8.0, 10.0)), SPEC, {"S": 29.3, "M": 10.3})
    assert both.holds and "settled from 10 on (settled by then)" in both.why
    late = w_premise(study(settled_at=(8.0, 12.0)), SPEC, {"S": 29.3, "M": 10.3})
    assert late.past_turn and not late.settled


def test_before_the_turn_or_without_one_w_has_not_left_its_start():
    early = w_premise(study(), SPEC, {"S": 29.3, "M": 1.0})  # M stops before its turn at 1.6
    assert not early.past_turn and "not past it" in early.why
    none = w_premise(study(turn=(4.5, math.nan)), SPEC, {"S": 29.3, "M": 10.3})
    assert not none.past_turn and "has no turn" in none.why


def test_a_size_the_study_did_not_train_fails_and_is_named():
    p = w_premise(study().query("size == 'd32'"), SPEC, {"S": 29.3, "M": 10.3})
    assert not p.past_turn and not p.settled
    assert "M: the study holds no w_erank of this size's model (d64: 0 rows)" in p.why
    unmapped = w_premise(study(), SPEC, {"L": 5.0})
    assert not unmapped.holds and "L: the study holds no w_erank" in unmapped.why


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="no sweep sizes"):
        w_premise(study(), SPEC, {})
    with pytest.raises(ValueError, match="must be > 0"):
        w_premise(study(), SPEC, {"S": 0.0})
    with pytest.raises(ValueError, match="missing key"):
        PremiseSpec.from_params({"study": "x", "quantity": "w_erank"})
    with pytest.raises(ValueError, match="map each sweep size"):
        PremiseSpec.from_params({**vars(SPEC), "sizes": {}})


def test_the_study_table_is_read_with_its_columns(tmp_path):
    spec = PremiseSpec(tmp_path / "settling.csv", "w_erank", {"S": "d32"}, "p")
    with pytest.raises(FileNotFoundError, match="training_length_tables"):
        read_study(spec)
    study().to_csv(spec.study, index=False)
    pd.testing.assert_frame_equal(read_study(spec), pd.read_csv(spec.study))
    study().drop(columns="turn_at").to_csv(spec.study, index=False)
    with pytest.raises(ValueError, match="turn_at"):
        read_study(spec)


def test_tokens_per_parameter_is_the_fewest_of_each_size():
    models = pd.DataFrame(
        {"size": ["S", "S", "M"], "tokens": [1000, 900, 1000], "params": [100, 100, 50]}
    )
    assert tokens_per_param(models) == {"S": 9.0, "M": 20.0}


def test_a_failed_premise_makes_the_row_and_its_alternatives_inconclusive():
    alts = {"sigma^2": REPRODUCED, "not measured": NOT_RUN}
    status, key, out = premised_row(WPremise(True, False, "why"), REPRODUCED, "r: 0.5", alts)
    assert status == INCONCLUSIVE and key == "r: 0.5 (premise fails: W has not settled)"
    assert out == {"sigma^2": INCONCLUSIVE, "not measured": NOT_RUN, PAST_TURN_ONLY: REPRODUCED}
    status, key, out = premised_row(WPremise(False, False, "why"), NOT_REPRODUCED, "k", alts)
    assert (status, out[PAST_TURN_ONLY]) == (INCONCLUSIVE, INCONCLUSIVE)
    assert key == "k (premise fails: W has not left its random start)"
    # a premise that holds changes nothing and adds its alternative with the same status
    status, key, out = premised_row(WPremise(True, True, "why"), NOT_REPRODUCED, "k", alts)
    assert (status, key) == (NOT_REPRODUCED, "k")
    assert out == {**alts, PAST_TURN_ONLY: NOT_REPRODUCED}
    with pytest.raises(ValueError, match="own alternative"):
        premised_row(WPremise(True, True, "w"), REPRODUCED, "k", {PAST_TURN_ONLY: REPRODUCED})
    assert premise_words(WPremise(True, False, "S: x")) == (
        "Premise W left its random start and settled: fails (S: x)"
    )
