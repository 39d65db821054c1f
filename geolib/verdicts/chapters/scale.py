"""The scale chapter: which way each Paper A claim's key number goes with model size.

Every trained model of the ladder (its rungs and the centre, with their seeds) is one point: its
key number is read from the per-model tables the analysis stages wrote (``per_model.csv`` of
the gradient-energy and frequency-collapse stages, the per-model A5 entry of the residual-
isotropy summary), the centre's from the chapters' own stages and the rungs' from their
``scale_*`` copies. The slope on log10 of non-embedding parameters and its interval come from
:func:`~geolib.verdicts.trends.trend_with_size` with the constants of ``scale.trend_rule``.

    SECTION, TABLES = chapter.read(params_path, overrides)
    rows = chapter.verdicts(TABLES, SECTION)   # the claims table's "trend with size" cells
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from geolib.config import stage_params
from geolib.verdicts.trends import Trend, TrendRow, trend_with_size

CHAPTER = "scale"
#: the chapters whose stages measure the ladder (each again as ``scale_<chapter>``)
SECTIONS = ("gradient_energy", "residual_isotropy", "frequency_collapse")
#: keys only hub models read (their revisions and text) or that choose checkpoints for a
#: verdict, not how they are measured: the rungs are our runs either way
HUB_ONLY = ("revisions", "text", "unigram_text", "max_text_tokens", "verdict_steps")
#: each trend's key-number column, its words on the axis, and the chapter's bar for it
CLAIMS = {
    "A1": ("A1", "share of block layers whose state variance falls with frequency", 0.75),
    "A1 (alternative)": ("A1 median slope", "median slope of state variance on frequency", 0.0),
    "A4": ("A4", "share of learned early units with R_energy above 10", 0.5),
    "A5": ("A5", "median share f of the achievable IsoScore* gain", 0.5),
    "A7": ("A7", "share of block layers imprinted early and maintained", 0.75),
}
#: the claims with a cell in the claims table (the alternative is named in A1's detail)
TABLE_CLAIMS = ("A1", "A4", "A5", "A7")


@dataclass(frozen=True)
class Section:
    """What the chapter decides with: the trend rule (``scale.trend_rule``: ``test``,
    ``level``, ``min_sizes``, ``min_span`` and its words), the centre's runs and the rungs'
    (run folders), A5's shrinkage ``zeta``, and each measuring section's ``out_dir`` for the
    centre (``chapter_dirs``) and for the rungs (``ladder_dirs``)."""

    rule: Mapping[str, Any]
    centre: tuple[str, ...]
    rungs: tuple[str, ...]
    zeta: float
    chapter_dirs: Mapping[str, str]
    ladder_dirs: Mapping[str, str]

    @property
    def runs(self) -> tuple[str, ...]:
        return self.centre + self.rungs

    @classmethod
    def from_params(
        cls,
        p: Mapping[str, Any],
        chapters: Mapping[str, Mapping[str, Any]],
        ladders: Mapping[str, Mapping[str, Any]],
    ) -> Section:
        """From section ``scale`` (``p``) and, per name of :data:`SECTIONS`, the chapter's
        section and its ``scale_`` copy. Each rung must be measured exactly as the chapters
        measure the centre (the sections differ only in ``runs``, ``out_dir`` and
        :data:`HUB_ONLY`), and every run must be in the tables that should hold it."""
        for s in SECTIONS:
            differ = sorted(
                k
                for k in set(chapters[s]) | set(ladders[s])
                if k not in ("runs", "out_dir", *HUB_ONLY)
                and chapters[s].get(k) != ladders[s].get(k)
            )
            if differ:
                raise ValueError(f"scale_{s} measures differently from {s}: keys {differ}")
        centre = tuple(str(r) for r in p["centre_runs"])
        rungs = tuple(str(Path(p["run_root"]) / n) for n in p["names"])
        for s in SECTIONS:
            missing = sorted(set(centre) - set(chapters[s]["runs"])) + sorted(
                set(rungs) - set(ladders[s]["runs"])
            )
            if missing:
                raise ValueError(f"runs not measured by {s} (or scale_{s}): {missing}")
        for key in ("test", "level", "min_sizes", "min_span"):
            if key not in p["trend_rule"]:
                raise ValueError(f"scale.trend_rule has no {key!r}")
        return cls(
            rule=dict(p["trend_rule"]),
            centre=centre,
            rungs=rungs,
            zeta=float(chapters["residual_isotropy"]["zeta"]),
            chapter_dirs={s: str(chapters[s]["out_dir"]) for s in SECTIONS},
            ladder_dirs={s: str(ladders[s]["out_dir"]) for s in SECTIONS},
        )


@dataclass(frozen=True)
class Tables:
    """The analysis stages' per-model tables, the centre's and the rungs' stacked:
    ``energy`` (gradient energy: seed, non-embedding parameters, A4's and A7's units),
    ``frequency`` (A1's units and median slope per run and optimizer), and ``a5`` (each run's
    A5 entry of the residual-isotropy summary at the section's ``zeta``: value, low, high; an
    empty mapping where the stage has none)."""

    energy: pd.DataFrame
    frequency: pd.DataFrame
    a5: Mapping[str, Mapping[str, float]]


def load_tables(section: Section) -> Tables:
    """The tables of the stages named in ``section`` (centre, then rungs)."""
    dirs = (section.chapter_dirs, section.ladder_dirs)

    def stacked(s: str) -> pd.DataFrame:
        return pd.concat([pd.read_csv(Path(d[s]) / "per_model.csv") for d in dirs])

    a5: dict[str, Mapping[str, float]] = {}
    for d, runs in zip(dirs, (section.centre, section.rungs), strict=True):
        summary = json.loads((Path(d["residual_isotropy"]) / "summary.json").read_text())
        at_zeta = summary["a5_v2"][f"{section.zeta:g}/drop"]
        a5 |= {run: at_zeta.get(run) or {} for run in runs}
    return Tables(stacked("gradient_energy"), stacked("frequency_collapse"), a5)


def read_section(params_path: str | Path, overrides: Mapping[str, Any] | None = None) -> Section:
    """Section ``scale`` (with ``overrides``) checked against the chapters' sections."""
    return Section.from_params(
        stage_params(params_path, CHAPTER, overrides),
        {s: stage_params(params_path, s) for s in SECTIONS},
        {s: stage_params(params_path, f"scale_{s}") for s in SECTIONS},
    )


def read(
    params_path: str | Path, overrides: Mapping[str, Any] | None = None
) -> tuple[Section, Tables]:
    """:func:`read_section` and the tables it decides on."""
    section = read_section(params_path, overrides)
    return section, load_tables(section)


def _share(successes: int, units: int) -> float:
    return successes / units if units else float("nan")


def _one(frame: pd.DataFrame, run: str, what: str) -> pd.Series:
    rows = frame[frame["run"] == run]
    if len(rows) != 1:
        raise ValueError(f"{what}: {len(rows)} rows for run {run}, expected 1")
    return rows.iloc[0]


def key_numbers(tables: Tables, section: Section) -> pd.DataFrame:
    """One row per trained model, smallest first (seeds in order): its non-embedding
    parameters, seed, and the key number of each claim with the units it counts (A1 the share
    of block layers whose state-variance slope lies below 0, and their median slope; A4 the
    share of learned early units above the bar; A5 the median share f with its interval; A7 the
    share of block layers imprinted early and maintained). A share with no unit is NaN."""
    rows = []
    adamw = tables.frequency[tables.frequency["optimizer"] == "adamw"]
    for run in section.runs:
        ge = _one(tables.energy, run, "the gradient-energy per-model table")
        a1 = _one(adamw, run, "the frequency-collapse per-model table (adamw)")
        a5 = tables.a5.get(run) or {}
        a1_ok, a1_n = int(a1["states_successes"]), int(a1["states_units"])
        a4_ok, a4_n = int(ge["a4_successes"]), int(ge["a4_units"])
        a7_ok, a7_n = int(ge["a7_successes"]), int(ge["a7_units"])
        rows.append(
            {
                "run": run,
                "non_embedding": int(ge["non_embedding"]),
                "seed": int(ge["seed"]),
                "A1": _share(a1_ok, a1_n),
                "A1 units": f"{a1_ok}/{a1_n}",
                "A1 median slope": float(a1["median_state_slope"]),
                "A4": _share(a4_ok, a4_n),
                "A4 units": f"{a4_ok}/{a4_n}",
                "A5": a5.get("value", np.nan),
                "A5 low": a5.get("low", np.nan),
                "A5 high": a5.get("high", np.nan),
                "A7": _share(a7_ok, a7_n),
                "A7 units": f"{a7_ok}/{a7_n}",
            }
        )
    return pd.DataFrame(rows).sort_values(["non_embedding", "seed"], kind="stable")


@dataclass(frozen=True)
class Fits:
    """Each claim's trend by the rule's test (``trends``) and by v1's OLS (``v1``), and the
    models left out of it because their key number is undefined (``left_out``)."""

    trends: Mapping[str, Trend]
    v1: Mapping[str, Trend]
    left_out: Mapping[str, list[str]]


def fit(keys: pd.DataFrame, rule: Mapping[str, Any]) -> Fits:
    """The trend of every claim of :data:`CLAIMS` over the models of ``keys`` whose key number
    is defined, by the rule's ``test`` and by OLS (v1, committed before any rung trained)."""
    trends, v1, left_out = {}, {}, {}
    for claim, (column, _, _) in CLAIMS.items():
        ok = keys[np.isfinite(keys[column].astype(float))]
        left_out[claim] = sorted(set(keys["run"]) - set(ok["run"]))
        for test, into in ((rule["test"], trends), ("ols", v1)):
            into[claim] = trend_with_size(
                ok["non_embedding"].to_numpy(),
                ok[column].to_numpy(dtype=float),
                level=float(rule["level"]),
                min_sizes=int(rule["min_sizes"]),
                min_span=float(rule["min_span"]),
                test=test,
            )
    return Fits(trends, v1, left_out)


def trend_table(fits: Fits) -> pd.DataFrame:
    """One row per claim: the rule's trend with its slope and interval, v1's beside it."""
    return pd.DataFrame(
        [
            {
                "claim": claim,
                "key number": CLAIMS[claim][1],
                "trend with size": t.words,
                "slope per decade": t.slope,
                "low": t.low,
                "high": t.high,
                "models": t.n_models,
                "sizes": t.n_sizes,
                "span (x)": t.span,
                "v1 (OLS, t interval)": fits.v1[claim].words,
                "v1 slope": fits.v1[claim].slope,
                "v1 low": fits.v1[claim].low,
                "v1 high": fits.v1[claim].high,
                "left out (undefined)": ", ".join(fits.left_out[claim]) or "none",
            }
            for claim, t in fits.trends.items()
        ]
    )


def detail(t: Trend) -> str:
    """A trend's cell text: its slope and interval, or why there is none."""
    if not np.isfinite(t.slope) or t.low == t.high:  # too short a ladder, or nothing varies
        return t.reason
    return (
        f"slope {t.slope:.2g} [{t.low:.2g}, {t.high:.2g}] per decade, {t.n_models} models, "
        f"{t.n_sizes} sizes"
    )


def verdicts(tables: Tables, section: Section) -> list[TrendRow]:
    """The claims table's "trend with size" cells of A1, A4, A5 and A7: the rule's words and
    detail, v1's words, and for A1 its declared alternative (the median slope itself)."""
    fits = fit(key_numbers(tables, section), section.rule)
    alt = fits.trends["A1 (alternative)"]
    return [
        TrendRow(
            claim,
            t.words,
            detail(t)
            + f"; v1 (OLS): {fits.v1[claim].words}"
            + (f"; median slope: {alt.words}" if claim == "A1" else ""),
            f"scale-{claim.lower()}",
        )
        for claim, t in fits.trends.items()
        if claim in TABLE_CLAIMS
    ]
