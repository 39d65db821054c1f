"""geolib.verdicts.history: earlier rules declared as data and applied by one engine, on
hand-made summaries; and the declarations of ``params.yaml`` against the chapters' sections."""

from __future__ import annotations

from pathlib import Path

import pytest

from geolib.config import load_params
from geolib.verdicts.chapters.interface import CHAPTERS, section_of
from geolib.verdicts.history import Check, History, combine
from geolib.verdicts.rules import (
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
PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


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
    # an undefined interval is inconclusive; a number the summary lacks is an error
    summary["x"]["pooled"] = {"value": None, "low": 0.4, "high": 0.7}
    assert h.statuses(summary)["X"]["v1"] == INCONCLUSIVE
    del summary["x"]["pooled"]
    with pytest.raises(ValueError, match=r"summary lacks x.pooled \(half's number\)"):
        h.statuses(summary)


def test_a_number_the_stage_leaves_out_or_runs_not_made_are_declared():
    h = history(
        {
            "X": {
                "v1": [{"rule": "half", "kind": "interval", "at": "x", "absent": "undefined"}],
                "v2": [{"rule": "most", "kind": "count", "at": "a.rows", "ran": "a"}],
            }
        }
    )
    v = h.verdicts({"a": {}})["X"]
    assert v["v1"].status == INCONCLUSIVE and v["v1"].reason == (
        "undefined: x not in the stage's summary"
    )
    assert v["v2"].status == NOT_RUN  # no run of `a` was made
    # `a` ran: its missing half is an error, not a check dropped from the combination
    with pytest.raises(ValueError, match="lacks a.rows"):
        h.verdicts({"a": {"states": {"successes": 1, "n_units": 4}}})
    with pytest.raises(ValueError, match="a count the stage left out cannot be undefined"):
        history(
            {"X": {"v1": [{"rule": "most", "kind": "count", "at": "c", "absent": "undefined"}]}}
        )


def test_a_clipped_interval_keeps_the_rules_reason_and_its_words_when_undefined():
    check = {"rule": "half", "kind": "clipped", "at": "x", "undefined": "no gain"}
    h = history({"X": {"v1": [check]}})
    v = h.verdicts({"x": {"value": 0.95, "low": 0.6, "high": 0.9}})["X"]["v1"]
    assert v.status == REPRODUCED and "outside" not in v.reason
    assert v.numbers[0].estimate == 0.9  # decided on the interval
    assert h.verdicts({"x": {"value": None, "low": 0.6, "high": 0.9}})["X"]["v1"].reason == (
        "undefined: no gain"
    )
    left_out = history({"X": {"v1": [{**check, "absent": "undefined"}]}})
    assert left_out.verdicts({})["X"]["v1"].reason == "undefined: no gain"


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
        "premise_above": 0,
        "fails": "none of {n_units} moved",
    }
    h = history({"X": {"v2": [check]}})
    assert h.statuses({"successes": 4, "n_units": 4, "n_moved": 2})["X"]["v2"] == REPRODUCED
    for none in (0, float("nan")):
        v = h.verdicts({"successes": 4, "n_units": 4, "n_moved": none})["X"]["v2"]
        assert v.status == INCONCLUSIVE and v.reason == "premise fails: none of 4 moved"
    flag = {**check, "premise": "ok"}
    del flag["premise_above"]
    h = history({"X": {"v2": [flag]}})
    assert h.statuses({"successes": 4, "n_units": 4, "ok": True})["X"]["v2"] == REPRODUCED
    assert h.statuses({"successes": 4, "n_units": 4, "ok": False})["X"]["v2"] == INCONCLUSIVE
    with pytest.raises(ValueError, match="a premise must be True or False"):
        h.statuses({"successes": 4, "n_units": 4, "ok": "false"})


def test_a_version_combines_its_checks_and_an_empty_set_of_models_is_not_run():
    checks = [
        {"rule": "most", "kind": "count", "at": "a.states"},
        {"rule": "most", "kind": "count", "at": "a.rows"},
    ]
    h = history({"X": {"v1": checks}})
    summary = {
        "a": {"states": {"successes": 4, "n_units": 4}, "rows": {"successes": 0, "n_units": 4}}
    }
    v = h.verdicts(summary)["X"]["v1"]
    assert v.status == PARTLY and v.reason.count("units") == 2
    one = Verdict(REPRODUCED, "r", "why")
    assert combine([one]) is one
    each = history({"X": {"v2": [{"rule": "half", "kind": "clipped", "at": "m", "each": True}]}})
    assert each.verdicts({"m": {}})["X"]["v2"].status == NOT_RUN


def test_a_malformed_declaration_is_named_before_any_data_is_read():
    ok = {"rule": "half", "kind": "interval", "at": "x"}
    with pytest.raises(ValueError, match="verdicts.history.demo: declare"):
        History.from_params({"history": {}}, "demo", SECTION)
    with pytest.raises(ValueError, match="the section lacks rule 'gone'"):
        history({"X": {"v1": [{**ok, "rule": "gone"}]}})
    with pytest.raises(ValueError, match=r"unknown keys \['colour'\], lacking \[\]"):
        history({"X": {"v1": [{**ok, "colour": "red"}]}})
    with pytest.raises(ValueError, match=r"lacking \['kind'\]"):
        history({"X": {"v1": [{"rule": "half", "at": "x"}]}})
    with pytest.raises(ValueError, match="a check is a mapping"):
        history({"X": {"v1": ["half"]}})
    with pytest.raises(ValueError, match="premise_above needs a premise"):
        history({"X": {"v1": [{**ok, "premise_above": 0}]}})
    with pytest.raises(ValueError, match="kind must be one of"):
        history({"X": {"v1": [{**ok, "kind": "median"}]}})
    with pytest.raises(ValueError, match="a premise needs `fails`"):
        history({"X": {"v1": [{**ok, "premise": "p"}]}})
    with pytest.raises(ValueError, match="absent must be one of"):
        Check("half", "interval", "x", absent="gone")
    with pytest.raises(ValueError, match="a non-empty list of checks"):
        history({"X": {"v1": []}})
    with pytest.raises(ValueError, match="min_fraction"):
        history({"X": {"v1": [ok]}}, {**SECTION, "half": {**THREE_IN_FOUR, "min_fraction": 2}})


def test_every_declared_history_builds_against_its_chapters_section():
    params = load_params(PARAMS)
    declared = params["verdicts"]["history"]
    assert set(declared) <= set(CHAPTERS)
    for chapter, spec in declared.items():
        section = {**params["common"], **params[section_of(chapter)]}
        h = History.from_params(params["verdicts"], chapter, section)
        assert set(h.versions) == set(spec) and all(
            set(v) == {"v1", "v2"} for v in h.versions.values()
        )


def test_the_words_the_declarations_share_with_the_chapters_are_the_same():
    """Text and names a chapter also writes itself: the declarations must say the same."""
    from geolib.verdicts.chapters import frequency_collapse, residual_isotropy

    declared = load_params(PARAMS)["verdicts"]["history"]
    for version in declared["residual_isotropy"]["A5"].values():
        assert all(c["undefined"] == residual_isotropy.UNDEFINED for c in version)
    for version in declared["frequency_collapse"]["A1"].values():
        assert all(c["ran"] == frequency_collapse.MAIN_OPTIMIZER for c in version)
        assert all(c["at"].startswith(f"{frequency_collapse.MAIN_OPTIMIZER}.") for c in version)
