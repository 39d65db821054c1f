"""geolib.verdicts.chapters.common: what the Paper A chapters share, on a hand-made section,
stage folder and loss table."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pytest

from geolib.verdicts import markup
from geolib.verdicts.chapters import common
from geolib.verdicts.claims import AFTER_DATA
from geolib.verdicts.learners import Learners
from geolib.verdicts.rules import PARTLY, REPRODUCED, Verdict
from geolib.verdicts.schema import Field


@dataclass(frozen=True, kw_only=True)
class Section(common.V3Section):
    """A chapter with one own field (``bar``, in its v3 mapping, declared in its schema) and
    one own check that no schema states (``bar`` an integer when above 10)."""

    CHAPTER = "demo"
    V3 = "demo_v3"

    bar: float

    @classmethod
    def schema(cls) -> tuple[Field, ...]:
        return (
            Field("ci_level", float, low=0.0, high=1.0, open_low=True, open_high=True),
            Field("demo_rule", "rule"),
            Field("demo_v3.revision", "text"),
            Field("demo_v3.alternatives", "mapping"),
            Field("demo_v3.bar", float, low=0.0),
        )

    @classmethod
    def check_v3(cls, v3: dict[str, Any]) -> None:
        if v3["bar"] > 10 and v3["bar"] != int(v3["bar"]):
            raise ValueError("demo_v3.bar above 10 must be whole")

    @classmethod
    def own_fields(cls, section: dict[str, Any], v3: dict[str, Any]) -> dict[str, Any]:
        return {"bar": float(v3["bar"])}


RULE = {"rule": "threshold", "threshold": 0.5, "reason": "a test rule"}
SECTION = {
    "ci_level": 0.9,
    "demo_rule": RULE,
    "demo_v3": {"bar": 2, "revision": "  why\n v3  ", "alternatives": {"low": {"bar": 1}}},
}
HISTORY = {"demo": {"A5": {"v1": [{"rule": "demo_rule", "kind": "interval", "at": "a5"}]}}}
VERDICTS = {"learned_margin": 0.25, "history": HISTORY}


def test_a_section_reads_the_shared_fields_then_its_own():
    s = Section.from_params(SECTION, VERDICTS)
    assert (s.ci_level, s.learned_margin, s.bar) == (0.9, 0.25, 2.0)
    assert s.alternatives == {"low": {"bar": 1}} and s.revision == "why v3"
    assert s.raw is SECTION
    assert s.history.statuses({"a5": {"value": 0.7, "low": 0.6, "high": 0.8}}) == {
        "A5": {"v1": REPRODUCED}
    }
    with pytest.raises(ValueError, match="verdicts.history.demo: declare"):
        Section.from_params(SECTION, {"learned_margin": 0.25})
    with pytest.raises(ValueError, match="learned_margin"):
        Section.from_params(SECTION, None)
    with pytest.raises(ValueError, match=r"^section demo: demo_v3.revision is missing$"):
        Section.from_params({**SECTION, "demo_v3": {"bar": 2, "alternatives": {}}}, VERDICTS)
    # every field the schema declares is judged at once, before the chapter's own check
    bad = {**SECTION, "ci_level": 1, "demo_v3": {"bar": -1, "revision": " ", "alternatives": {}}}
    with pytest.raises(ValueError) as raised:
        Section.from_params(bad, VERDICTS)
    assert str(raised.value) == (
        "section demo: ci_level must be in (0, 1): 1; demo_v3.revision must be non-empty text, "
        "got ' '; demo_v3.bar must be in [0, inf]: -1"
    )
    odd = {**SECTION, "demo_v3": {**SECTION["demo_v3"], "bar": 10.5}}
    with pytest.raises(ValueError, match="above 10 must be whole"):
        Section.from_params(odd, VERDICTS)


@dataclass(frozen=True)
class Tables:
    first: pd.DataFrame
    second: pd.DataFrame
    summary: dict[str, Any]
    losses: pd.DataFrame


def test_tables_come_in_order_with_the_summary_and_the_losses(tmp_path):
    out = tmp_path / "stage"
    out.mkdir()
    pd.DataFrame({"a": [1, 2]}).to_csv(out / "a.csv", index=False)
    pd.DataFrame({"b": [3]}).to_csv(out / "b.csv", index=False)
    (out / "summary.json").write_text(json.dumps({"runs": {"r": {"family": "f", "seed": 0}}}))
    pd.DataFrame({"run": ["r"], "eval_loss": [4.0]}).to_csv(tmp_path / "loss.csv", index=False)
    t = common.read_tables(Tables, out, tmp_path / "loss.csv", "a.csv", "b.csv")
    assert t.first["a"].tolist() == [1, 2] and t.second["b"].tolist() == [3]
    assert t.summary == {"runs": {"r": {"family": "f", "seed": 0}}}
    assert t.losses["eval_loss"].tolist() == [4.0]
    with pytest.raises(FileNotFoundError):
        common.read_tables(Tables, out, tmp_path / "loss.csv", "a.csv", "c.csv")


def test_a_run_opens_its_row_and_a_claim_row_carries_v3_v1_and_v2():
    summary = {
        "runs": {
            "runs/pythia-s0": {"family": 7, "seed": 0, "params": 1000, "tokens": 5000},
            "runs/pythia-s1": {"family": 7, "seed": 1, "params": 1000, "tokens": 5000},
        }
    }
    who = Learners(("runs/pythia-s0",), {"runs/pythia-s1": 0.1}, 0.25)
    assert common.run_columns(summary, "runs/pythia-s1", who) == {
        "run": "runs/pythia-s1",
        "model": "pythia-s1",
        "family": "7",
        "seed": 1,
        "learned": False,
    }
    s = Section.from_params(SECTION, VERDICTS)
    v = Verdict(REPRODUCED, "above a half", "0.8 [0.6, 0.9]")
    row = common.v3_claim(
        "A5",
        s,
        v,
        "share 0.8 [0.6, 0.9]",
        markup.sentence("every model learned."),
        anchor="verdict-a5",
        unit="trained model (n = 2)",
        seeds={"0": REPRODUCED, "1": PARTLY},
        alternatives={"low": REPRODUCED},
        rule_v1=PARTLY,
        rule_v2=REPRODUCED,
        runs=summary["runs"],
        post_hoc=markup.words(" after\n data "),
    )
    assert (row.claim_id, row.status, row.key_number, row.chapter) == (
        "A5",
        REPRODUCED,
        "share 0.8 [0.6, 0.9]",
        "demo",
    )
    assert row.detail == "Every model learned." and row.rule == "above a half"
    assert (row.seeds_agreeing, row.robust) == ("1 of 2", "yes")
    assert (row.rule_v1, row.rule_v2, row.revision, row.post_hoc) == (
        PARTLY,
        REPRODUCED,
        "why v3",
        "after data",
    )
    assert (
        row.decided == AFTER_DATA
        and row.scale
        == "2 models (2 seeds each), 1k parameters, 5k tokens each, 5 tokens per parameter"
    )
