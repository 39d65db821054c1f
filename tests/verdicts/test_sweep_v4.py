"""Rules v4 of the sweep rows: names at a budget, B1's added power, the two-budget row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from geolib.verdicts.budget_premise import DEPENDS, RULE_WORDS, AtBudget
from geolib.verdicts.claims import PROSPECTIVE, Claim
from geolib.verdicts.rules import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
)
from geolib.verdicts.settled_premise import RULE_WORDS as V3_PREMISE_WORDS
from geolib.verdicts.settled_premise import WPremise
from geolib.verdicts.sweep_v4 import (
    V4,
    b1_added_power,
    budget_of,
    configuration,
    points_at,
    v4_row,
    verdicts_v4,
)

PARAMS = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())

DECIDE = {"rule": "threshold", "threshold": 0.05, "direction": "below", "reason": "B1: below"}
SPEC = {"factors": ["size", "batch_size"], "decide": DECIDE, "alternatives": {}}
V4_SPEC = {"revision": "v4 because.", "premise": "p", "retired": "settled", "b1": SPEC}


def test_a_point_names_its_budget_configuration_and_seed():
    assert budget_of("S-b8-wd0-lr0.004-f0.1-s1-t2D") == "2D"
    assert configuration("S-b8-wd0-lr0.004-f0.1-s1-t2D") == ("S-b8-wd0-lr0.004-f0.1-t2D", "1")
    # the same configuration at two budgets is two configurations; two seeds share one
    assert configuration("S-b8-s0-tD")[0] != configuration("S-b8-s0-t2D")[0]
    assert configuration("S-b8-s0-tD")[0] == configuration("S-b8-s1-tD")[0]
    for bad in ("S-b8-s0", "-tD"):
        with pytest.raises(ValueError, match="names no budget"):
            budget_of(bad)
    with pytest.raises(ValueError, match="names no seed"):
        configuration("S-b8-tD")
    points = ["S-b8-s0-tD", "S-b8-s0-t2D", "M-b8-s0-tD"]
    assert points_at(points, "D") == ["S-b8-s0-tD", "M-b8-s0-tD"]
    with pytest.raises(ValueError, match="no sweep point at budget '4D'"):
        points_at(points, "4D")


def test_v4_reads_its_section_and_names_what_is_missing():
    v4 = V4.from_params(PARAMS["geometry_performance"])
    assert v4.b1["decide"]["threshold"] == 0.05 and "size" in v4.b1["factors"]
    assert V4.from_params({"sweep_v4": V4_SPEC}).revision == "v4 because."
    with pytest.raises(ValueError, match="missing"):
        V4.from_params({})
    with pytest.raises(ValueError, match=r"missing key\(s\) \['retired'\]"):
        V4.from_params({"sweep_v4": {k: v for k, v in V4_SPEC.items() if k != "retired"}})
    with pytest.raises(ValueError, match="b1: missing key 'factors'"):
        V4.from_params({"sweep_v4": {**V4_SPEC, "b1": {"decide": DECIDE, "alternatives": {}}}})


def _models(rank_effect: float, n_per_cell: int = 6, seed: int = 0) -> pd.DataFrame:
    """Loss set by the configuration (size, batch) plus ``rank_effect`` × a rank that varies
    independently of it, plus noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for size, s_loss in (("S", 5.0), ("M", 4.5)):
        for batch, b_loss in ((8, 0.0), (32, 0.2), (128, 0.5)):
            for i in range(n_per_cell):
                rank = rng.normal(30.0, 3.0)
                loss = s_loss + b_loss + rank_effect * (rank - 30.0) + rng.normal(0, 0.05)
                rows.append(
                    {
                        "name": f"{size}-b{batch}-p{i}-s0-tD",
                        "size": size,
                        "batch_size": batch,
                        "w_erank": rank,
                        "loss_id_test": loss,
                    }
                )
    return pd.DataFrame(rows)


def test_b1_added_power_rank_that_adds_nothing_beyond_the_configuration_is_reproduced():
    models = _models(rank_effect=0.0)
    verdict, key, row = b1_added_power(models, list(models["name"]), SPEC)
    assert verdict.status == REPRODUCED
    assert row["delta_r2_cv_ci_high"] < 0.05 and row["n"] == len(models)
    assert key.startswith("ΔR² (held out) of w_erank for loss_id_test beyond the configuration")


def test_b1_added_power_rank_that_predicts_beyond_the_configuration_is_not_reproduced():
    models = _models(rank_effect=0.1)
    verdict, _, row = b1_added_power(models, list(models["name"]), SPEC)
    assert verdict.status == NOT_REPRODUCED and row["delta_r2_cv_ci_low"] > 0.05
    # only the kept models enter: half of them leave a smaller n
    kept = list(models["name"])[::2]
    assert b1_added_power(models, kept, SPEC)[2]["n"] == len(kept)


def test_b1_added_power_partial_r_alternative_decides_on_its_own_rule():
    models = _models(rank_effect=0.1)
    change = {
        "statistic": "partial_r",
        "rule": {"rule": "within_tolerance", "target": 0.0, "tol": 0.3, "reason": "B1: small"},
    }
    verdict, key, row = b1_added_power(models, list(models["name"]), SPEC, change)
    assert row["partial_r_ci_low"] > 0.3 and verdict.status == NOT_REPRODUCED
    assert key.startswith("partial r of w_erank")


def test_b1_added_power_a_rank_fixed_by_the_configuration_is_undefined_and_inconclusive():
    models = _models(rank_effect=0.0)
    models["w_erank"] = models["batch_size"] / 8.0  # a function of the factors
    change = {
        "statistic": "partial_r",
        "rule": {"rule": "within_tolerance", "target": 0.0, "tol": 0.3, "reason": "B1: small"},
    }
    verdict, key, _ = b1_added_power(models, list(models["name"]), SPEC, change)
    assert verdict.status == INCONCLUSIVE and key.endswith("not defined")


PAST = WPremise(True, False, "S: turn at 4.5, budget 50")
NOT_PAST = WPremise(False, False, "S: turn at 80, budget 50")


def _claim(status: str, budget: str, claim: str = "B3") -> Claim:
    return Claim(
        claim,
        status,
        chapter="training_knobs",
        key_number=f"key at {budget}",
        detail=f"detail at {budget}.",
        rule=f"v3: above a half; {V3_PREMISE_WORDS}",
        rule_v1=NOT_REPRODUCED,
        rule_v2=INCONCLUSIVE,
        revision="v3 because.",
        scale=f"models at {budget}",
    )


def test_the_v4_row_keeps_v3_and_the_retired_premise_and_states_both_budgets():
    v4 = V4.from_params({"sweep_v4": V4_SPEC})
    v3 = {"D": _claim(INCONCLUSIVE, "D"), "2D": _claim(INCONCLUSIVE, "2D")}
    at = {
        "D": AtBudget("D", PAST, REPRODUCED, "0.8 [0.6, 0.9]", {"alt": REPRODUCED}),
        "2D": AtBudget("2D", PAST, REPRODUCED, "0.85 [0.7, 0.95]", {"alt": NOT_REPRODUCED}),
    }
    row = v4_row(v3, at, v4)
    assert row.status == REPRODUCED and row.decided == PROSPECTIVE
    assert row.key_number == "D: 0.8 [0.6, 0.9]; 2D: 0.85 [0.7, 0.95]"
    assert (row.rule_v1, row.rule_v2, row.rule_v3) == (NOT_REPRODUCED, INCONCLUSIVE, INCONCLUSIVE)
    assert row.scale == "D: models at D; 2D: models at 2D"
    assert row.rule == f"v3: above a half; {RULE_WORDS}"  # v3's premise words replaced
    assert row.revision.startswith('v3 because. v4: v4 because. v3 premise "W left its random')
    assert "(retired in v4): failed (S: turn at 4.5, budget 50)" in row.revision
    assert row.robust == "fragile: alt → inconclusive"  # the alternative differs between budgets
    assert "At D:" in row.detail and "v3 there: detail at 2D." in row.detail


def test_the_v4_row_is_inconclusive_where_the_budgets_disagree_or_w_is_not_past_its_turn():
    v4 = V4.from_params({"sweep_v4": V4_SPEC})
    v3 = {b: _claim(INCONCLUSIVE, b) for b in ("D", "2D")}
    at = {
        "D": AtBudget("D", PAST, REPRODUCED, "a", {"alt": REPRODUCED}),
        "2D": AtBudget("2D", PAST, NOT_REPRODUCED, "b", {"alt": REPRODUCED}),
    }
    row = v4_row(v3, at, v4)
    assert row.status == INCONCLUSIVE and DEPENDS in row.key_number
    at["D"] = AtBudget("D", NOT_PAST, REPRODUCED, "a", {"alt": REPRODUCED})
    at["2D"] = AtBudget("2D", PAST, REPRODUCED, "b", {"alt": REPRODUCED})
    row = v4_row(v3, at, v4)
    assert row.status == INCONCLUSIVE and "not past its rank's turn at D" in row.key_number
    with pytest.raises(ValueError, match="need the rows at each of"):
        v4_row({"D": v3["D"]}, at, v4)


def test_verdicts_v4_joins_each_claim_of_a_chapter_over_the_budgets():
    v4 = V4.from_params({"sweep_v4": V4_SPEC})

    def v3_rows(budget):
        return [_claim(INCONCLUSIVE, budget), _claim(INCONCLUSIVE, budget, "B4")]

    statuses = {("D", "B3"): REPRODUCED, ("2D", "B3"): REPRODUCED}

    def reading(budget, claim):
        status = statuses.get((budget, claim), NOT_REPRODUCED if budget == "D" else REPRODUCED)
        return AtBudget(budget, PAST, status, f"{claim}@{budget}", {"alt": status})

    rows = verdicts_v4(v3_rows, reading, v4, rules={"B4": "v4's own rule"})
    assert [(r.claim_id, r.status) for r in rows] == [("B3", REPRODUCED), ("B4", INCONCLUSIVE)]
    assert rows[1].rule == f"v4's own rule; {RULE_WORDS}"


def test_the_v4_row_carries_each_budgets_numbers_under_its_name():
    from dataclasses import replace

    from geolib.verdicts.rules import KeyNumber

    v4 = V4.from_params({"sweep_v4": V4_SPEC})
    d = KeyNumber("r", REPRODUCED, 0.8, 0.6, 0.9, 0.5)
    dd = KeyNumber("r", PARTLY, 0.2, 0.1, 0.3, 0.5)
    v3 = {
        "D": replace(_claim(REPRODUCED, "D"), numbers=(d,)),
        "2D": replace(_claim(PARTLY, "2D"), numbers=(dd,)),
    }
    at = {b: AtBudget(b, PAST, REPRODUCED, "k", {"alt": REPRODUCED}) for b in ("D", "2D")}
    row = v4_row(v3, at, v4)
    assert row.numbers == (d.labelled("D"), dd.labelled("2D"))
    assert [n.label for n in row.numbers] == ["D: r", "2D: r"]
    no_numbers = {b: _claim(INCONCLUSIVE, b) for b in ("D", "2D")}
    assert v4_row(no_numbers, at, v4).numbers == ()
