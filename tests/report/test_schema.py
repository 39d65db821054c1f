"""geolib.report.schema: every field of a section against its kind and bounds, all at once."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from geolib.config import stage_params
from geolib.report.schema import SCHEMAS, Field, check_section, problems

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
FIELDS = (
    Field("dim", int, low=2),
    Field("k", int, low=1, high="dim", many=True),
    Field("zeta", float, low=0.0, high=1.0),
)


def test_the_repositorys_sections_pass_their_schemas():
    for name in SCHEMAS:
        check_section(name, stage_params(PARAMS, name))


def test_every_problem_is_named_at_once():
    bad = {"dim": 4, "k": [1, 4, 5, 0], "zeta": 1.5}
    assert problems(bad, FIELDS) == [
        "k must be in [1, dim=4]: 5, 0",
        "zeta must be in [0, 1]: 1.5",
    ]
    assert problems({"dim": 4, "k": [2], "zeta": 0.0}, FIELDS) == []


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"k": [1], "zeta": 0.5}, "dim is missing"),
        ({"dim": 4.0, "k": [1], "zeta": 0.5}, "dim must be in [2, inf]: 4.0 is not an integer"),
        ({"dim": True, "k": [1], "zeta": 0.5}, "dim must be in [2, inf]: True is not an integer"),
        ({"dim": 4, "k": 2, "zeta": 0.5}, "k must be a non-empty list, got 2"),
        ({"dim": 4, "k": [], "zeta": 0.5}, "k must be a non-empty list, got []"),
        ({"dim": 4, "k": [1], "zeta": math.nan}, "zeta must be in [0, 1]: nan is not finite"),
        ({"dim": 4, "k": [1], "zeta": "0.5"}, "zeta must be in [0, 1]: '0.5' is not a number"),
    ],
)
def test_each_kind_of_bad_value(section, message):
    assert problems(section, FIELDS) == [message]


def test_a_bound_by_a_field_that_is_itself_bad_bounds_nothing_more():
    # dim is not a number: its own problem is named; k is not also judged against it
    assert problems({"dim": "x", "k": [9], "zeta": 0.5}, FIELDS) == [
        "dim must be in [2, inf]: 'x' is not an integer"
    ]


def test_check_section_raises_with_the_sections_name_and_passes_an_unknown_section():
    with pytest.raises(ValueError, match=r"^section metric_validation: dim must be in \[2, inf\]"):
        check_section("metric_validation", {**stage_params(PARAMS, "metric_validation"), "dim": 1})
    check_section("no_schema_here", {"anything": object()})
    with pytest.raises(ValueError, match="kind must be int or float"):
        Field("x", str)
