"""geolib.verdicts.chapters.scale: the section checked against the chapters' sections, each
model's key numbers read from the stages' per-model tables, and the trend rows."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from geolib.verdicts.chapters import scale
from geolib.verdicts.trends import trend_with_size

RULE = {"test": "theil_sen", "level": 0.95, "min_sizes": 4, "min_span": 30.0, "reason": "r"}
#: four rungs spanning 1000x, two models each; the centre is the largest size
SIZES = {"xxs": 1_000, "xs": 10_000, "s": 100_000}
CENTRE_SIZE = 1_000_000


def measuring(out_dir, runs, **extra):
    return {"runs": list(runs), "out_dir": str(out_dir), "zeta": 0.25, "k": 4, **extra}


def build(tmp_path, a4=lambda size, seed: (int(math.log10(size)) + seed, 8)):
    """Per-model tables for the centre (seeds 0, 1) and three rungs (seeds 0, 1): A4's
    successes of 8 units by ``a4(size, seed)`` (log10 of the size, one more for seed 1), A1
    half of 4 layers with a slope falling with size, A5 growing with size, A7 no unit."""
    rungs = [f"ladder/{n}" + ("" if s == 0 else f"-s{s}") for n in SIZES for s in (0, 1)]
    centre = ["runs/pythia", "runs/pythia-s1"]
    size = {r: SIZES[r.split("/")[1].split("-")[0]] for r in rungs} | dict.fromkeys(
        centre, CENTRE_SIZE
    )
    seed = {r: (1 if r.endswith("-s1") else 0) for r in [*rungs, *centre]}
    for where, runs in (("chapter", centre), ("ladder", rungs)):
        for s in scale.SECTIONS:
            (tmp_path / where / s).mkdir(parents=True)
        pd.DataFrame(
            [
                {
                    "run": r,
                    "seed": seed[r],
                    "non_embedding": size[r],
                    "a4_successes": a4(size[r], seed[r])[0],
                    "a4_units": a4(size[r], seed[r])[1],
                    "a7_successes": 0,
                    "a7_units": 0,
                }
                for r in runs
            ]
        ).to_csv(tmp_path / where / "gradient_energy" / "per_model.csv", index=False)
        pd.DataFrame(
            [
                {
                    "run": r,
                    "optimizer": "adamw",
                    "states_successes": 2,
                    "states_units": 4,
                    "rows_successes": 1,
                    "rows_units": 1,
                    "median_state_slope": -0.1 * math.log10(size[r]),
                }
                for r in runs
            ]
        ).to_csv(tmp_path / where / "frequency_collapse" / "per_model.csv", index=False)
        a5 = {r: {"value": 0.1 * math.log10(size[r]), "low": 0.0, "high": 1.0} for r in runs}
        summary = {"a5_v2": {"0.25/drop": a5}}
        (tmp_path / where / "residual_isotropy" / "summary.json").write_text(json.dumps(summary))
    chapters = {s: measuring(tmp_path / "chapter" / s, centre) for s in scale.SECTIONS}
    ladders = {s: measuring(tmp_path / "ladder" / s, rungs) for s in scale.SECTIONS}
    p = {
        "trend_rule": RULE,
        "centre_runs": centre,
        "run_root": "ladder",
        "names": [r.split("/")[1] for r in rungs],
    }
    return p, chapters, ladders


def test_key_numbers_are_the_stages_per_model_counts(tmp_path):
    section = scale.Section.from_params(*build(tmp_path))
    keys = scale.key_numbers(scale.load_tables(section), section)
    assert keys["non_embedding"].is_monotonic_increasing and len(keys) == 8
    row = keys[keys["run"] == "ladder/xs-s1"].iloc[0]
    assert (row["seed"], row["non_embedding"]) == (1, 10_000)
    assert row["A4"] == pytest.approx(5 / 8) and row["A4 units"] == "5/8"
    assert row["A1"] == 0.5 and row["A1 units"] == "2/4"
    assert row["A1 median slope"] == pytest.approx(-0.4)
    assert row["A5"] == pytest.approx(0.4) and (row["A5 low"], row["A5 high"]) == (0.0, 1.0)
    assert np.isnan(row["A7"]) and row["A7 units"] == "0/0"  # no unit: undefined, not 0


def test_verdicts_are_the_rules_trends_on_those_numbers(tmp_path):
    section = scale.Section.from_params(*build(tmp_path))
    tables = scale.load_tables(section)
    keys = scale.key_numbers(tables, section)
    rows = {r.claim_id: r for r in scale.verdicts(tables, section)}
    assert set(rows) == {"A1", "A4", "A5", "A7"}
    # A4 = (log10(size) + seed) / 8 grows with size: the fit, computed here independently
    want = trend_with_size(
        keys["non_embedding"].to_numpy(), keys["A4"].to_numpy(), **scale_rule(), test="theil_sen"
    )
    assert rows["A4"].words == want.words == "grows with size"
    assert rows["A4"].detail.startswith(f"slope {want.slope:.2g} ") and rows["A4"].anchor == (
        "scale-a4"
    )
    assert "median slope: shrinks with size" in rows["A1"].detail  # A1's declared alternative
    fits = scale.fit(keys, section.rule)
    assert fits.left_out["A7"] == sorted(keys["run"])  # every A7 share undefined
    assert rows["A7"].words == fits.trends["A7"].words != "grows with size"
    table = scale.trend_table(fits)
    assert table["claim"].tolist() == list(scale.CLAIMS)


def scale_rule():
    return {k: RULE[k] for k in ("level", "min_sizes", "min_span")}


def test_a_rung_measured_otherwise_or_missing_is_refused(tmp_path):
    p, chapters, ladders = build(tmp_path)
    other = {**ladders, "gradient_energy": {**ladders["gradient_energy"], "k": 8}}
    with pytest.raises(ValueError, match=r"scale_gradient_energy measures differently.*\['k'\]"):
        scale.Section.from_params(p, chapters, other)
    hub_only = {**ladders, "gradient_energy": {**ladders["gradient_energy"], "text": "x"}}
    scale.Section.from_params(p, chapters, hub_only)  # hub models' text: not how rungs measure
    short = {**ladders, "frequency_collapse": {**ladders["frequency_collapse"], "runs": []}}
    with pytest.raises(ValueError, match="runs not measured by frequency_collapse"):
        scale.Section.from_params(p, chapters, short)
    with pytest.raises(ValueError, match="has no 'min_span'"):
        scale.Section.from_params(
            {**p, "trend_rule": {k: v for k, v in RULE.items() if k != "min_span"}},
            chapters,
            ladders,
        )


def test_a_model_missing_from_a_table_or_listed_twice_is_named(tmp_path):
    section = scale.Section.from_params(*build(tmp_path))
    tables = scale.load_tables(section)
    energy = tables.energy[tables.energy["run"] != "ladder/s"]
    with pytest.raises(ValueError, match="0 rows for run ladder/s"):
        scale.key_numbers(scale.Tables(energy, tables.frequency, tables.a5), section)
    twice = pd.concat([tables.frequency, tables.frequency.iloc[:1]])
    with pytest.raises(ValueError, match="2 rows for run runs/pythia"):
        scale.key_numbers(scale.Tables(tables.energy, twice, tables.a5), section)
