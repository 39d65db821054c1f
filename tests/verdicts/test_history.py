"""geolib.verdicts.history: earlier rules declared as data and applied by one engine, on
hand-made summaries; and the declarations of ``params.yaml`` against the chapters' sections."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geolib.config import load_params
from geolib.verdicts.chapters.interface import CHAPTERS, chapter
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


# ---------------------------------------------------------------------------------------------
# Checks on an analysis stage's tables
# ---------------------------------------------------------------------------------------------

GAPS = pd.DataFrame(
    {
        "outcome": ["ood_a", "ood_b", "ood_mean"],
        "kind": ["w_rank", "w_rank_per_width", "w_rank"],
        "gap": [0.7, 0.2, 0.6],
        "ci_low": [0.6, 0.1, np.nan],
        "ci_high": [0.8, 0.3, np.nan],
    }
)


def test_a_table_check_decides_each_row_it_selects_in_order_with_its_words():
    each = {
        "rule": "half",
        "kind": "interval",
        "table": "gaps",
        "each": True,
        "where": {"outcome": {"not": "ood_mean"}},
        "columns": ["gap", "ci_low", "ci_high"],
        "label": "gap, {outcome}",
    }
    h = history({"X": {"v1": [each]}})
    checked = h.checks(tables={"gaps": GAPS})["X"]["v1"]
    assert [(v.status, w) for v, w in checked] == [
        (REPRODUCED, "gap, ood_a: 0.7 [0.6, 0.8]"),
        (NOT_REPRODUCED, "gap, ood_b: 0.2 [0.1, 0.3]"),
    ]
    assert h.statuses(tables={"gaps": GAPS}) == {"X": {"v1": PARTLY}}
    # several conditions on one column; rows without a value passed over when declared
    both = {**each, "where": {"kind": {"startswith": "w_", "not": "w_rank_per_width"}}}
    v = history({"X": {"v1": [both]}}).checks(tables={"gaps": GAPS})["X"]["v1"]
    assert [w for _, w in v] == ["gap, ood_a: 0.7 [0.6, 0.8]", "gap, ood_mean: 0.6 [nan, nan]"]
    assert v[1][0].status == INCONCLUSIVE  # an undefined interval decides nothing
    skip = history({"X": {"v1": [{**both, "columns": ["ci_low", "ci_low", "ci_high"],
                                  "skip_undefined": True}]}})  # fmt: skip
    assert len(skip.checks(tables={"gaps": GAPS})["X"]["v1"]) == 1
    # a declared selection that finds no row is an error, not a check dropped ...
    none = history({"X": {"v1": [{**each, "where": {"outcome": "ood_c"}}]}})
    with pytest.raises(ValueError, match=r"half: no row of gaps where \{'outcome': 'ood_c'\}"):
        none.checks(tables={"gaps": GAPS})
    # ... but rows passed over for want of a number leave a version that decides nothing
    gone = history({"X": {"v1": [{**each, "columns": ["ci_low"] * 3, "skip_undefined": True,
                                  "where": {"outcome": "ood_mean"}}]}})  # fmt: skip
    assert gone.checks(tables={"gaps": GAPS})["X"]["v1"] == []
    v = gone.verdicts(tables={"gaps": GAPS})["X"]["v1"]
    assert v.status == INCONCLUSIVE and v.reason == "no row of the tables had a number to decide on"
    no_value = history(
        {"X": {"v1": [{**each, "columns": ["r2", "lo", "hi"], "skip_undefined": True}]}}
    )
    with pytest.raises(ValueError, match="table gaps has no column 'r2'"):
        no_value.checks(tables={"gaps": GAPS})


def test_one_row_a_positional_row_and_a_count_of_rows():
    one = {"rule": "half", "kind": "interval", "table": "gaps", "where": {"outcome": "ood_a"},
           "columns": ["gap", "ci_low", "ci_high"], "label": "a"}  # fmt: skip
    tables = {"gaps": GAPS}
    assert history({"X": {"v1": [one]}}).statuses(tables=tables)["X"]["v1"] == REPRODUCED
    second = {**one, "where": {"kind": "w_rank"}, "row": 1}
    assert history({"X": {"v1": [second]}}).statuses(tables=tables)["X"]["v1"] == INCONCLUSIVE
    with pytest.raises(ValueError, match=r"2 rows of gaps where \{'kind': 'w_rank'\}"):
        history({"X": {"v1": [{**one, "where": {"kind": "w_rank"}}]}}).checks(tables=tables)
    with pytest.raises(ValueError, match="gaps has 2 such rows, no row 2"):
        history({"X": {"v1": [{**second, "row": 2}]}}).checks(tables=tables)
    # 3 of 4 rows true: "most" (3/4) holds; 2 of 4 does not
    cells = {"cells": pd.DataFrame({"u": [True, True, True, False]})}
    count = {"rule": "most", "kind": "count", "table": "cells", "count": "u",
             "label": "U-shaped: {k} of {n}"}  # fmt: skip
    h = history({"X": {"v1": [count]}})
    assert [(v.status, w) for v, w in h.checks(tables=cells)["X"]["v1"]] == [
        (REPRODUCED, "U-shaped: 3 of 4")
    ]
    cells["cells"].loc[0, "u"] = False
    assert h.statuses(tables=cells)["X"]["v1"] == NOT_REPRODUCED
    # a flag that is neither true nor false (a missing cell) is an error, not a success
    with pytest.raises(ValueError, match="column u must be true or false"):
        h.checks(tables={"cells": pd.DataFrame({"u": [True, np.nan]})})


def test_a_named_premise_filled_from_the_row_makes_a_failed_check_inconclusive():
    check = {"rule": "half", "kind": "interval", "table": "gaps", "each": True,
             "where": {"outcome": {"not": "ood_mean"}}, "columns": ["gap", "ci_low", "ci_high"],
             "label": "{outcome}", "given": "varies {outcome}"}  # fmt: skip
    asked = []

    def varies(outcome):
        asked.append(outcome)
        return outcome == "ood_a", f"{outcome} does not vary"

    checked = history({"X": {"v2": [check]}}).checks(
        tables={"gaps": GAPS}, premises={"varies": varies}
    )["X"]["v2"]
    assert asked == ["ood_a", "ood_b"]
    assert checked[0][0].status == REPRODUCED
    assert checked[1][0].status == INCONCLUSIVE
    assert checked[1][0].reason == "premise fails: ood_b does not vary"
    with pytest.raises(ValueError, match=r"no premise 'varies'; premises: \[\]"):
        history({"X": {"v2": [check]}}).checks(tables={"gaps": GAPS})
    with pytest.raises(ValueError, match="a premise must be True or False"):
        history({"X": {"v2": [check]}}).checks(
            tables={"gaps": GAPS}, premises={"varies": lambda o: (np.nan, "?")}
        )
    with pytest.raises(ValueError, match=r"half: cannot fill '\{outcome\} \{size\}'"):
        history({"X": {"v2": [{**check, "label": "{outcome} {size}"}]}}).checks(
            tables={"gaps": GAPS}, premises={"varies": varies}
        )


def test_a_rows_check_reads_each_row_in_turn_and_a_note_says_why_a_number_is_undefined():
    outcomes = pd.DataFrame(
        {
            "outcome": ["f", "q"],
            "r2": [0.7, 0.2],
            "r2_lo": [0.6, np.nan],
            "r2_hi": [0.8, np.nan],
            "share": [0.9, 0.4],
            "share_lo": [0.8, 0.3],
            "share_hi": [0.95, 0.45],
            "note": [None, "too few models"],
        }
    )
    rows = {
        "kind": "rows",
        "table": "o",
        "each": True,
        "note": "note",
        "reads": [
            {"rule": "half", "columns": ["r2", "r2_lo", "r2_hi"], "label": "R² {outcome}"},
            {"rule": "half", "columns": ["share", "share_lo", "share_hi"], "label": "s {outcome}"},
        ],
    }
    checked = history({"X": {"v1": [rows]}}).checks(tables={"o": outcomes})["X"]["v1"]
    # row by row, each read in turn: the order a reader meets them in
    assert [(v.status, w) for v, w in checked] == [
        (REPRODUCED, "R² f: 0.7 [0.6, 0.8]"),
        (REPRODUCED, "s f: 0.9 [0.8, 0.95]"),
        (INCONCLUSIVE, "R² q (too few models): 0.2 [nan, nan]"),
        (NOT_REPRODUCED, "s q: 0.4 [0.3, 0.45]"),  # defined: no note
    ]
    assert checked[2][0].reason.startswith("undefined: R² q (too few models): its interval")
    given = {**rows, "given": "big {outcome}"}
    premises = {"big": lambda o: (o == "f", f"{o} is small")}
    v = history({"X": {"v2": [given]}}).checks(tables={"o": outcomes}, premises=premises)
    assert [x.status for x, _ in v["X"]["v2"]] == [REPRODUCED, REPRODUCED] + [INCONCLUSIVE] * 2
    assert v["X"]["v2"][3][0].reason == "premise fails: q is small"
    with pytest.raises(ValueError, match=r"unknown keys \['rule'\], lacking \[\]"):
        history({"X": {"v1": [{**rows, "rule": "half"}]}})
    with pytest.raises(ValueError, match=r"lacking \['reads'\]"):
        history({"X": {"v1": [{k: v for k, v in rows.items() if k != "reads"}]}})
    with pytest.raises(ValueError, match="a read is a mapping of"):
        history({"X": {"v1": [{**rows, "reads": [{"rule": "half"}]}]}})
    with pytest.raises(ValueError, match="columns are"):
        history({"X": {"v1": [{**rows, "reads": [{"rule": "half", "columns": ["r2"]}]}]}})
    with pytest.raises(ValueError, match=r"unknown keys \['label'\]"):
        history({"X": {"v1": [{**rows, "label": "its reads say it"}]}})
    with pytest.raises(ValueError, match="rows of nowhere: no table 'nowhere'"):
        history({"X": {"v1": [{**rows, "table": "nowhere"}]}}).checks(tables={"o": outcomes})
    with pytest.raises(ValueError, match="the section lacks rule 'gone'"):
        history({"X": {"v1": [{**rows, "reads": [{"rule": "gone", "columns": ["r2"] * 3}]}]}})
    with pytest.raises(ValueError, match="a `rows` check, and only it, has `reads`"):
        Check("half", "interval", table="o", reads=(Check("half", "interval"),))


def test_a_malformed_table_check_or_a_missing_table_is_named():
    ok = {"rule": "half", "kind": "interval", "table": "gaps", "each": True}
    with pytest.raises(ValueError, match=r"a table check takes none of \['absent'"):
        history({"X": {"v1": [{**ok, "at": "x"}]}})
    with pytest.raises(ValueError, match=r"\['where'\] need a `table`"):
        history({"X": {"v1": [{"rule": "half", "kind": "interval", "where": {"a": 1}}]}})
    with pytest.raises(ValueError, match="a table check is an interval or a count"):
        history({"X": {"v1": [{**ok, "kind": "clipped"}]}})
    with pytest.raises(ValueError, match="names its `count` column"):
        history({"X": {"v1": [{**ok, "kind": "count"}]}})
    with pytest.raises(ValueError, match="columns are"):
        history({"X": {"v1": [{**ok, "columns": ["gap"]}]}})
    with pytest.raises(ValueError, match="`row` is one row"):
        history({"X": {"v1": [{**ok, "row": 0}]}})
    with pytest.raises(ValueError, match="where.outcome is a value or some of"):
        history({"X": {"v1": [{**ok, "where": {"outcome": {"like": "o"}}}]}})
    with pytest.raises(ValueError, match="where.outcome is a value or some of"):
        history({"X": {"v1": [{**ok, "where": {"outcome": ["a", "b"]}}]}})
    with pytest.raises(ValueError, match="`where` maps columns"):
        history({"X": {"v1": [{**ok, "where": ["outcome"]}]}})
    with pytest.raises(ValueError, match="columns are"):
        history({"X": {"v1": [{**ok, "columns": "vlh"}]}})
    with pytest.raises(ValueError, match="`row` is one row"):
        history({"X": {"v1": [{**ok, "each": False, "row": "0"}]}})
    with pytest.raises(ValueError, match="a count's premise has no row to fill"):
        history({"X": {"v1": [{**ok, "kind": "count", "count": "u", "given": "p {o}"}]}})
    h = history({"X": {"v1": [{**ok, "where": {"colour": "red"}}]}})
    with pytest.raises(ValueError, match="no table 'gaps'; tables: \\['other'\\]"):
        h.checks(tables={"other": GAPS})
    with pytest.raises(ValueError, match="table gaps has no column 'colour'"):
        h.checks(tables={"gaps": GAPS})
    value = history({"X": {"v1": [ok]}})  # default columns: value, ci_low, ci_high
    with pytest.raises(ValueError, match=r"has no columns \['value'\]"):
        value.checks(tables={"gaps": GAPS})
    with pytest.raises(ValueError, match="a check on the summary, and no summary given"):
        history({"X": {"v1": [{"rule": "half", "kind": "interval", "at": "x"}]}}).checks()


def test_a_rule_may_be_a_dotted_key_of_the_section():
    nested = {"verdict": {"half": HALF}, "v2": {"X": {"decide": THREE_IN_FOUR}}}
    h = history(
        {
            "X": {
                "v1": [{"rule": "verdict.half", "kind": "interval", "at": "x"}],
                "v2": [{"rule": "v2.X.decide", "kind": "count", "at": "c"}],
            }
        },  # fmt: skip
        nested,
    )
    summary = {"x": {"value": 0.7, "low": 0.6, "high": 0.9}, "c": {"successes": 1, "n_units": 2}}
    assert h.statuses(summary) == {"X": {"v1": REPRODUCED, "v2": NOT_REPRODUCED}}
    with pytest.raises(ValueError, match="the section lacks rule 'v2.Y.decide'"):
        history({"X": {"v1": [{"rule": "v2.Y.decide", "kind": "count", "at": "c"}]}}, nested)


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
    """Each chapter's section, read as its notebook reads it, holds its declared history (every
    rule a check names found and well formed), v1 and v2 for each claim."""
    declared = load_params(PARAMS)["verdicts"]["history"]
    assert set(declared) <= set(CHAPTERS)
    for name, spec in declared.items():
        h = chapter(name).read_section(PARAMS).history
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
