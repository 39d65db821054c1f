import numpy as np

from geolib.verdicts.evidence import decide_clipped, decide_count, decide_interval, interval_text
from geolib.verdicts.rules import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, rule_from_params

HALF = rule_from_params({"rule": "threshold", "threshold": 0.5, "reason": "B2: above a half"})
FRACTION = rule_from_params(
    {"rule": "fraction", "min_fraction": 0.75, "min_units": 4, "reason": "A7: three in four"}
)


def test_an_interval_in_words_to_three_digits():
    assert interval_text("x", 2.0, 1.23456, 3.0) == "x: 2 [1.23, 3]"
    assert interval_text("x", None, 1.0, 3.0) == "x: nan [1, 3]"


def test_an_interval_that_excludes_its_estimate_is_decided_on_the_interval_and_said_so():
    v, text = decide_interval(HALF, 0.4, 0.55, 0.9, "R² gap")  # a biased bootstrap
    assert v.status == REPRODUCED and "estimate outside its interval" in v.reason
    assert (
        text == "R² gap: 0.4 [0.55, 0.9] (estimate outside its interval: decided on the interval)"
    )
    (n,) = v.numbers
    assert (n.estimate, n.low, n.high, n.bar) == (0.55, 0.55, 0.9, 0.5)  # moved to its bound
    v, text = decide_interval(HALF, 0.7, 0.6, 0.8, "R² gap")
    assert v.status == REPRODUCED and text == "R² gap: 0.7 [0.6, 0.8]"
    v, _ = decide_interval(HALF, 0.7, np.nan, np.nan, "R² gap")
    assert v.status == INCONCLUSIVE and "undefined" in v.reason
    v, _ = decide_interval(HALF, None, 0.1, 0.2, "R² gap")
    assert v.status == INCONCLUSIVE


def test_a_clipped_interval_reports_its_exclusion_apart_and_keeps_the_rules_reason():
    v, excluded = decide_clipped(HALF, {"value": 0.9, "low": 0.55, "high": 0.8}, "none")
    assert excluded and v.status == REPRODUCED and "0.8 [0.55, 0.8]" in v.reason
    assert "outside" not in v.reason
    v, excluded = decide_clipped(HALF, {"value": 0.9, "low": 0.6, "high": 1.0}, "none")
    assert not excluded and v.status == REPRODUCED
    v, excluded = decide_clipped(HALF, {"value": None, "low": 0.6, "high": 1.0}, "no unit gains")
    assert v.status == INCONCLUSIVE and not excluded and v.reason == "undefined: no unit gains"
    v, excluded = decide_clipped(HALF, None, "absent")
    assert v.status == INCONCLUSIVE and v.reason == "undefined: absent"


def test_a_count_is_decided_by_its_rule_and_too_few_units_decide_nothing():
    assert decide_count(FRACTION, {"successes": 3, "n_units": 4}).status == REPRODUCED
    assert decide_count(FRACTION, {"successes": 2, "n_units": 4}).status == NOT_REPRODUCED
    v = decide_count(FRACTION, {"successes": 0, "n_units": 0})
    assert v.status == INCONCLUSIVE and "fewer than 4" in v.reason
