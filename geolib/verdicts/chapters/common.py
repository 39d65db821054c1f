"""What the Paper A chapters on our trained models share (``frequency_collapse``: A1,
``residual_isotropy``: A5): their section's common fields and checks (:class:`V3Section`), the
stage's tables read from its folder (:func:`read_tables`), the columns that open a per-model
table (:func:`run_columns`), and the claim row (:func:`v3_claim`). One place, so that the two
chapters cannot drift apart in how they read a section, say who learned or fill a row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

import pandas as pd

from geolib.verdicts.claims import AFTER_DATA, Claim, Confirmation, scale_of_runs
from geolib.verdicts.history import History
from geolib.verdicts.learners import Learners
from geolib.verdicts.markup import words
from geolib.verdicts.rules import Verdict, robustness, seeds_agreeing
from geolib.verdicts.schema import SCHEMAS, Field, learned_margin, require

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class V3Section:
    """What a Paper A chapter's verdicts read of its section beside its own fields: the
    interval level, ``verdicts.learned_margin`` (who learned), the v3 rule's declared
    alternatives and its revision in words, the whole mapping (``raw``) and the chapter's
    earlier rules (``verdicts.history``, :class:`~geolib.verdicts.history.History`).

    A chapter's subclass names its section (``CHAPTER``, whose fields and bounds its schema
    declares: :data:`~geolib.verdicts.schema.SCHEMAS`) and its v3 mapping (``V3``), and adds the
    checks no schema states (:meth:`check_v3`) and its own fields (:meth:`own_fields`)."""

    ci_level: float
    learned_margin: float
    alternatives: Mapping[str, Mapping[str, Any]]
    revision: str
    raw: Mapping[str, Any] = field(repr=False)
    history: History = field(repr=False)
    confirmation: Confirmation = field(default_factory=Confirmation, repr=False)

    CHAPTER: ClassVar[str]
    V3: ClassVar[str]

    @classmethod
    def schema(cls) -> tuple[Field, ...]:
        """The section's fields, declared once (:data:`~geolib.verdicts.schema.SCHEMAS`)."""
        return tuple(SCHEMAS[cls.CHAPTER])

    @classmethod
    def from_params(
        cls, section: Mapping[str, Any], verdicts: Mapping[str, Any] | None = None
    ) -> Self:
        """From the chapter's section and the top-level ``verdicts`` section; an error names
        every field that breaks the schema at once, then what else is wrong."""
        require(cls.CHAPTER, section, cls.schema())
        margin = learned_margin(verdicts)
        v3 = section[cls.V3]
        cls.check_v3(v3)
        return cls(
            ci_level=float(section["ci_level"]),
            learned_margin=margin,
            alternatives=dict(v3["alternatives"]),
            revision=words(v3["revision"]),
            raw=section,
            history=History.from_params(verdicts, cls.CHAPTER, section),
            confirmation=Confirmation.from_params(verdicts),
            **cls.own_fields(section, v3),
        )

    @classmethod
    def check_v3(cls, v3: Mapping[str, Any]) -> None:
        """The chapter's own checks of its v3 mapping that no schema states (none)."""

    @classmethod
    def own_fields(cls, section: Mapping[str, Any], v3: Mapping[str, Any]) -> dict[str, Any]:
        """The chapter's own fields, as its schema checked them (none)."""
        return {}


def read_tables(cls: type[T], out_dir: str | Path, losses: str | Path, *csvs: str) -> T:
    """``cls`` from the tables an analysis stage wrote in ``out_dir``: the CSV files ``csvs``
    in order, its ``summary.json``, then the loss table at ``losses`` (who learned)."""
    out = Path(out_dir)
    frames = [pd.read_csv(out / name) for name in csvs]
    return cls(*frames, json.loads((out / "summary.json").read_text()), pd.read_csv(losses))


def run_columns(summary: Mapping[str, Any], run: str, learned: Learners) -> dict[str, Any]:
    """The columns a per-model table opens with: the run, its model's name, its family and seed
    (from the stage's summary) and whether it learned."""
    info = summary["runs"][run]
    return {
        "run": run,
        "model": Path(run).name,
        "family": str(info["family"]),
        "seed": info["seed"],
        "learned": run in learned.kept,
    }


def v3_claim(
    claim: str,
    section: V3Section,
    verdict: Verdict,
    key_number: str,
    detail: str,
    *,
    anchor: str,
    unit: str,
    seeds: Mapping[str, str],
    alternatives: Mapping[str, str],
    rule_v1: str,
    rule_v2: str,
    runs: Mapping[str, Any],
    post_hoc: str = "",
) -> Claim:
    """A chapter's row for our trained models: v3's ``verdict`` with how many ``seeds`` agree
    with it and whether it survives each declared alternative, v1's and v2's statuses beside
    it, on the ``runs`` of the stage's summary, decided after seeing data unless every run is of
    a confirmatory seed (:class:`~geolib.verdicts.claims.Confirmation`)."""
    row = Claim(
        claim,
        verdict.status,
        key_number,
        section.CHAPTER,
        detail,
        anchor=anchor,
        rule=verdict.rule,
        unit=unit,
        seeds_agreeing=seeds_agreeing(seeds.values(), verdict.status) if seeds else "",
        robust=robustness(verdict.status, alternatives),
        rule_v1=rule_v1,
        rule_v2=rule_v2,
        revision=section.revision,
        post_hoc=post_hoc,
        scale=scale_of_runs(runs),
        decided=AFTER_DATA,
        numbers=verdict.numbers,
    )
    return section.confirmation.apply(row, runs)
