"""geolib.verdicts.schema: every field of a section against its kind and bounds, all at once."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from geolib.config import apply_profiles, load_params, stage_params
from geolib.verdicts.schema import SCHEMAS, Field, check_section, learned_margin, problems

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
FIELDS = (
    Field("dim", int, low=2),
    Field("k", int, low=1, high="dim", many=True),
    Field("zeta", float, low=0.0, high=1.0),
)


def test_the_repositorys_sections_pass_their_schemas_in_every_profile():
    for name in SCHEMAS:
        check_section(name, stage_params(PARAMS, name))
    base = load_params(PARAMS)
    for profile in sorted((PARAMS.parent / "profiles").glob("*.yaml")):
        merged = apply_profiles(base, profile)
        for name in SCHEMAS:
            check_section(name, {**merged["common"], **merged[name]})


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
    with pytest.raises(ValueError, match="kind must be one of"):
        Field("x", str)


RULE = {"rule": "threshold", "threshold": 0.5, "reason": "the paper"}
NESTED = (
    Field("level", float, low=0.0, high=1.0, open_low=True, open_high=True),
    Field("v3.revision", "text"),
    Field("v3.alternatives", "mapping"),
    Field("v3.decide", "rule"),
    Field("v3.bar", float, low="v3.floor"),
    Field("v3.floor", float, low=0.0),
    Field("warmup.steps", int, low=1, optional=True),
)
GOOD = {
    "level": 0.9,
    "v3": {"revision": "why", "alternatives": {}, "decide": RULE, "bar": 2.0, "floor": 1.0},
}


def test_nested_fields_of_every_kind_and_open_bounds():
    assert problems(GOOD, NESTED) == []
    bad = {
        "level": 1.0,
        "v3": {"revision": "  ", "alternatives": [], "decide": {"rule": "no"}, "bar": 0.5,
               "floor": 1.0},
    }  # fmt: skip
    level, revision, alternatives, rule, bar = problems(bad, NESTED)
    assert level == "level must be in (0, 1): 1.0"
    assert revision == "v3.revision must be non-empty text, got '  '"
    assert alternatives == "v3.alternatives must be a mapping, got []"
    assert rule.startswith("v3.decide: unknown rule 'no'")  # the rule's own message, named
    assert bar == "v3.bar must be in [v3.floor=1.0, inf]: 0.5"
    assert problems({"level": 0.0, "v3": GOOD["v3"]}, NESTED) == ["level must be in (0, 1): 0.0"]


def test_null_is_named_as_null_and_allowed_only_where_declared():
    fields = (Field("steps", int, many=True, null=True), Field("seed", int, optional=True))
    assert problems({"steps": None}, fields) == []  # null: every step; seed absent: default
    assert problems({"steps": None, "seed": None}, fields) == ["seed is null"]
    assert problems({"steps": [1], "seed": 3}, fields) == []


def test_a_value_that_should_hold_keys_and_does_not_is_named_once():
    assert problems({"level": 0.5, "v3": 5}, NESTED) == ["v3 must be a mapping, got 5"]


def test_an_optional_field_may_be_absent_with_its_mapping_but_not_from_it():
    assert problems({**GOOD, "warmup": None}, NESTED) == []
    assert problems({**GOOD, "warmup": {"steps": 5}}, NESTED) == []
    assert problems({**GOOD, "warmup": {"steps": 0}}, NESTED) == [
        "warmup.steps must be in [1, inf]: 0"
    ]
    assert problems({**GOOD, "warmup": {"other": 1}}, NESTED) == ["warmup.steps is missing"]
    assert problems({**GOOD, "warmup": {"steps": None}}, NESTED) == ["warmup.steps is null"]
    assert problems({"level": 0.5}, NESTED)[:2] == [
        "v3.revision is missing",
        "v3.alternatives is missing",
    ]


def test_the_learned_margin_is_read_from_the_verdicts_section_checked():
    assert learned_margin({"learned_margin": 0.25}) == 0.25
    with pytest.raises(ValueError, match="verdicts section"):
        learned_margin(None)
    with pytest.raises(ValueError, match=r"learned_margin must be in \[0, inf\]: -1"):
        learned_margin({"learned_margin": -1})
