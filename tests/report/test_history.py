"""geolib.report.history: earlier rules declared as data and applied by one engine, on
hand-made summaries; and the declarations of ``params.yaml`` against the chapters' sections."""

from __future__ import annotations

import pytest

from geolib.config import load_params
from geolib.report.chapters.interface import CHAPTERS
from geolib.report.history import Check, History, combine
from geolib.report.outputs import section_of
from geolib.report.rules import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_RUN,
    PARTLY,
    REPRODUCED,
    Verdict,
)

HALF = {"rule": "threshold", "threshold": 0.5, "reason": "the paper: above a half"}
THREE_IN_FOUR = {"rule": "fraction", "min_fraction": 0.75, "min_units": 2, "reason": "the paper"}
SECTION = {"half": HALF, "most": THREE_IN_FOUR}


def history(spec, section=SECTION):
    return History.from_params({"history": {"demo": spec}}, "demo", section)


def test_each_kind_reads_its_number_at_its_path():
    h = history(
        {
            "X": {
                "v1": [{"rule": "half", "kind": "interval", "at": "x.pooled"}],
                "v2": [{"rule": "most", "kind": "count", "at": "x.count"}],
            }
        }
    )
    summary = {"x": {"pooled": {"value": 0.7, "low": 0.6, "high": 0.9}}}
    summary["x"]["count"] = {"successes": 1, "n_units": 4}
    assert h.statuses(summary) == {"X": {"v1": REPRODUCED, "v2": NOT_REPRODUCED}}
    # an interval straddling the bar decides nothing
    summary["x"]["pooled"] = {"value": 0.55, "low": 0.4, "high": 0.7}
    assert h.statuses(summary)["X"]["v1"] == INCONCLUSIVE
    # an undefined or absent interval is inconclusive; an absent count is an error
    summary["x"]["pooled"] = {"value": None, "low": 0.4, "high": 0.7}
    assert h.statuses(summary)["X"]["v1"] == INCONCLUSIVE
    del summary["x"]["pooled"]
    assert h.statuses(summary)["X"]["v1"] == INCONCLUSIVE
    with pytest.raises(ValueError, match="lacks the count x.count"):
        h.statuses({"x": {"pooled": {"value": 0.7, "low": 0.6, "high": 0.9}}})


def test_a_clipped_interval_keeps_the_rules_reason_and_its_words_when_undefined():
    h = history(
        {"X": {"v1": [{"rule": "half", "kind": "clipped", "at": "x", "undefined": "no gain"}]}}
    )
    v = h.verdicts({"x": {"value": 0.95, "low": 0.6, "high": 0.9}})["X"]["v1"]
    assert v.status == REPRODUCED and "outside" not in v.reason
    interval = h.verdicts({"x": {"value": 0.95, "low": 0.6, "high": 0.9}})
    assert interval["X"]["v1"].numbers[0].estimate == 0.9  # decided on the interval
    assert h.verdicts({})["X"]["v1"].reason == "undefined: no gain"


def test_each_model_decided_and_combined_with_a_path_the_chapter_fills():
    check = {"rule": "half", "kind": "clipped", "at": "by_zeta.{zeta}", "each": True}
    h = history({"X": {"v2": [check]}})
    summary = {
        "by_zeta": {
            "0.2/drop": {
                "m1": {"value": 0.8, "low": 0.7, "high": 0.9},
                "m2": {"value": 0.2, "low": 0.1, "high": 0.3},
            }
        }
    }
    v = h.verdicts(summary, zeta="0.2/drop")["X"]["v2"]
    assert v.status == PARTLY and v.reason == "m1: reproduced; m2: not reproduced"


def test_a_premise_that_fails_is_inconclusive_saying_why_with_the_counts_fields():
    check = {
        "rule": "most",
        "kind": "count",
        "at": "",
        "premise": "n_moved",
        "fails": "none of {n_units} moved",
    }
    h = history({"X": {"v2": [check]}})
    assert h.statuses({"successes": 4, "n_units": 4, "n_moved": 2})["X"]["v2"] == REPRODUCED
    v = h.verdicts({"successes": 4, "n_units": 4, "n_moved": 0})["X"]["v2"]
    assert v.status == INCONCLUSIVE and v.reason == "premise fails: none of 4 moved"


def test_a_version_combines_its_checks_and_a_missing_number_takes_the_declared_status():
    checks = [
        {"rule": "most", "kind": "count", "at": "a.states", "missing": NOT_RUN},
        {"rule": "most", "kind": "count", "at": "a.rows", "missing": NOT_RUN},
    ]
    h = history({"X": {"v1": checks}})
    summary = {
        "a": {"states": {"successes": 4, "n_units": 4}, "rows": {"successes": 0, "n_units": 4}}
    }
    v = h.verdicts(summary)["X"]["v1"]
    assert v.status == PARTLY and v.reason.count("units") == 2
    assert h.statuses({})["X"]["v1"] == NOT_RUN
    one = Verdict(REPRODUCED, "r", "why")
    assert combine([one]) is one


def test_a_malformed_declaration_is_named_before_any_data_is_read():
    ok = {"rule": "half", "kind": "interval", "at": "x"}
    with pytest.raises(ValueError, match="verdicts.history.demo: declare"):
        History.from_params({"history": {}}, "demo", SECTION)
    with pytest.raises(ValueError, match="the section lacks rule 'gone'"):
        history({"X": {"v1": [{**ok, "rule": "gone"}]}})
    with pytest.raises(ValueError, match=r"unknown keys \['colour'\]"):
        history({"X": {"v1": [{**ok, "colour": "red"}]}})
    with pytest.raises(ValueError, match="kind must be one of"):
        history({"X": {"v1": [{**ok, "kind": "median"}]}})
    with pytest.raises(ValueError, match="a premise needs `fails`"):
        history({"X": {"v1": [{**ok, "premise": "p"}]}})
    with pytest.raises(ValueError, match="missing must be a status"):
        Check("half", "interval", "x", missing="gone")
    with pytest.raises(ValueError, match="a non-empty list of checks"):
        history({"X": {"v1": []}})
    with pytest.raises(ValueError, match="min_fraction"):
        history({"X": {"v1": [ok]}}, {**SECTION, "half": {**THREE_IN_FOUR, "min_fraction": 2}})


def test_every_declared_history_builds_against_its_chapters_section():
    params = load_params("params.yaml")
    declared = params["verdicts"]["history"]
    assert set(declared) <= set(CHAPTERS)
    for chapter, spec in declared.items():
        section = {**params["common"], **params[section_of(chapter)]}
        h = History.from_params(params["verdicts"], chapter, section)
        assert set(h.versions) == set(spec) and all(
            set(v) == {"v1", "v2"} for v in h.versions.values()
        )
