"""geolib.report.sweep_chapters: the sweep tables loaded for the three chapters, the lookups
their verdicts read, and v1's checks kept per claim."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from geolib.report.outputs import section_of
from geolib.report.rules import combine_statuses
from geolib.report.sweep_chapters import (
    Checks,
    SweepTables,
    interval_text,
    row_where,
    seed_sd_interval,
)

POINTS = ["S-b8-s0", "S-b128-s0", "S-b8-s1"]


def _tables(folder):
    """The files of geometry_performance_tables, a few rows each (the models out of order)."""
    folder.mkdir()
    models = pd.DataFrame(
        {
            "name": POINTS[::-1],
            "params": [1000, 1000, 1000],
            "tokens": [5000, 5000, 5000],
            "loss_id_test": [4.0, 4.1, 4.2],
            "loss_ood_bible": [5.0, 5.1, 5.2],
            "loss_ood_bible_ci_low": [4.9, 5.0, 5.1],
            "loss_ood_bible_ci_high": [5.1, 5.2, 5.3],
        }
    )
    models.to_csv(folder / "models.csv", index=False)
    effects = pd.DataFrame(
        {
            "factor": ["batch_size", "lr"],
            "quantity": ["w_erank", "w_erank"],
            "effect_sd": [2.0, -1.5],
            "ci_low": [1.2, -2.0],
            "ci_high": [2.8, -1.0],
            "ci_low_sd": [0.5, -4.0],
            "ci_high_sd": [6.0, -0.2],
        }
    )
    effects.to_csv(folder / "effects.csv", index=False)
    pred = pd.DataFrame(
        {"outcome": ["loss_id_test", "loss_id_test"], "predictor": ["w_erank", "h_erank"]}
    ).assign(r2=[0.3, 0.1])
    pred.to_csv(folder / "prediction.csv", index=False)
    pred.assign(r2=[0.2, 0.05]).to_csv(folder / "prediction_within_size.csv", index=False)
    spread = pd.DataFrame({"outcome": ["loss_id_test", "loss_ood_bible"], "ratio": [3.0, 0.5]})
    spread.to_csv(folder / "spread.csv", index=False)
    for name in (
        "interactions",
        "effects_by_size",
        "u_shape",
        "r2_gap",
        "r2_gap_alternatives",
        "agreement",
        "init_moves",
    ):
        pd.DataFrame({"x": [1]}).to_csv(folder / f"{name}.csv", index=False)
    return folder


def test_tables_load_in_point_order_and_answer_the_lookups(tmp_path):
    t = SweepTables.load(_tables(tmp_path / "gp"), POINTS)
    assert sorted(t.models["name"]) == sorted(POINTS)
    assert t.ood == ["loss_ood_bible"]  # interval columns are not domains
    assert t.effect("lr", "w_erank").effect_sd == -1.5
    assert t.predicts("loss_id_test", "w_erank").r2 == 0.3
    assert t.predicts("loss_id_test", "w_erank", within=True).r2 == 0.2
    assert t.varies("loss_id_test", 2.0)[0] and t.varies("loss_id_test", 3.0)[0]  # 3x: holds
    holds, why = t.varies("loss_ood_bible", 2.0)
    assert not holds and "only 0.5x its seed-to-seed sd (premise: at least 2x)" in why
    runs = t.scale_runs()
    assert runs["S-b8-s1"] == {"family": "S-b8", "seed": "1", "params": 1000, "tokens": 5000}
    with pytest.raises(KeyError, match=r"0 rows for \{'factor': 'wd'"):
        t.effect("wd", "w_erank")


def test_a_missing_point_or_a_duplicated_row_is_an_error(tmp_path):
    folder = _tables(tmp_path / "gp")
    with pytest.raises(ValueError, match="S-b32-s0"):
        SweepTables.load(folder, [*POINTS, "S-b32-s0"])
    table = pd.DataFrame({"outcome": ["a", "a"], "predictor": ["p", "p"]})
    with pytest.raises(KeyError, match="2 rows"):
        row_where(table, outcome="a", predictor="p")


def test_the_seed_sd_interval_and_its_declared_alternative():
    row = pd.Series({"ci_low": 1.2, "ci_high": 2.8, "ci_low_sd": 0.5, "ci_high_sd": 6.0})
    assert seed_sd_interval(row) == (0.5, 6.0)  # carrying the sd's own uncertainty
    assert seed_sd_interval(row, {"seed_sd": "known"}) == (1.2, 2.8)
    assert interval_text("x", 2.0, 1.23456, 3.0) == "x: 2 [1.23, 3]"


def test_checks_keep_v1_per_claim_and_an_undefined_interval_is_inconclusive():
    rules = {
        "big": {"rule": "threshold", "threshold": 1.0, "reason": "B3: more than one sd"},
    }
    said = []
    checks = Checks(rules, log=said.append)
    v = checks.decide("B3", "big", 2.0, 1.5, 2.5, "erank W")
    assert v.status == "reproduced" and said == [f"B3 · big · {v}"]
    undefined = checks.decide("B3", "big", 2.0, np.nan, np.nan, "erank H")
    assert undefined.status == "inconclusive" and "undefined" in undefined.reason
    status, key, detail = checks.summary("B3")
    assert status == checks.status("B3") == combine_statuses(["reproduced", "inconclusive"])
    assert key == "erank W: 2 [1.5, 2.5]"
    assert detail.startswith("erank W: 2 [1.5, 2.5] → reproduced; erank H: 2 [nan, nan]")
    checks.add("B4", v, "a count")
    assert checks["B4"] == [(v, "a count")]
    with pytest.raises(KeyError):
        checks.decide("B5", "no such rule", 1.0, 0.0, 2.0, "x")


def test_the_sweep_chapters_share_one_section():
    assert section_of("training_knobs") == section_of("forgetting_quantization")
    assert section_of("training_knobs") == "geometry_performance"
    assert section_of("scale") == "scale"  # every other chapter reads its own
