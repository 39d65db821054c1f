"""geolib.verdicts.math_checks: each check decided by its rule, the table, and the combined
status."""

from __future__ import annotations

import pytest

from geolib.verdicts.math_checks import COLUMNS, decide, decide_checks
from geolib.verdicts.rules import (
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
    combine_statuses,
    rule_from_params,
)

SLOPE = rule_from_params({"rule": "within_tolerance", "target": 1.0, "tol": 0.1, "reason": "r"})
IDENTITY = rule_from_params({"rule": "identity", "tol": 1e-10, "reason": "r"})


def test_each_check_is_decided_by_its_rule_and_the_status_combines_them():
    table, status = decide_checks(
        [
            ("inside", SLOPE, 1.02, 0.95, 1.08),  # the whole interval within 1 +- 0.1
            ("outside", SLOPE, 2.0, 1.9, 2.1),  # the whole interval beyond it
        ]
    )
    assert list(table.columns) == COLUMNS and list(table["check"]) == ["inside", "outside"]
    assert list(table["status"]) == [REPRODUCED, NOT_REPRODUCED]
    assert status == PARTLY == combine_statuses([REPRODUCED, NOT_REPRODUCED])
    assert table["interval"].iloc[0] == "[0.9500, 1.0800]" and table["value"].iloc[0] == 1.02
    assert table["reason"].iloc[1] == SLOPE.decide(2.0, 1.9, 2.1).reason


def test_a_rule_that_reads_the_number_alone_takes_no_interval():
    table, status = decide_checks([("identity", IDENTITY, 3e-16, None, None)])
    assert status == REPRODUCED and table["interval"].iloc[0] == ""
    _, status = decide_checks([("identity", IDENTITY, 1e-6, None, None)])
    assert status == NOT_REPRODUCED
    assert decide(IDENTITY, 1e-6) == IDENTITY.decide(1e-6)


def test_bad_checks_are_refused():
    with pytest.raises(ValueError, match="at least one"):
        decide_checks([])
    with pytest.raises(ValueError, match="not finite"):
        decide_checks([("nan", SLOPE, float("nan"), 0.0, 1.0)])
    with pytest.raises(ValueError, match="both ends"):
        decide(SLOPE, 1.0, 0.9)
    with pytest.raises(ValueError, match="low <= estimate <= high"):
        decide_checks([("swapped", SLOPE, 1.0, 1.1, 0.9)])
