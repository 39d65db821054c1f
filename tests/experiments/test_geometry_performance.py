"""The sweep analysis on synthetic tables with planted effects (known answers)."""

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geolib.experiments import geometry_performance as gp


def synthetic_table(seed=0, noise=1.0):
    """A 2×3×2×2 factorial plus 3 seed replicates at two centre points; w_erank rises by
    4 with batch 128 (vs 8) and by 2 with weight decay; ID loss is U-shaped in batch."""
    rng = np.random.default_rng(seed)
    rows = []
    grid = itertools.product(["S", "M"], [8, 32, 128], [0.0, 2.0], [0.001, 0.004])
    points = [(s, b, wd, lr, 0.1, 0) for s, b, wd, lr in grid]
    points += [(s, 32, 2.0, 0.004, 0.1, k) for s in ("S", "M") for k in (1, 2)]
    for size, b, wd, lr, f, s in points:
        erank = 20 + 4 * (b == 128) + 2 * (b == 32) + 2 * (wd == 2.0) + noise * rng.normal()
        loss = (
            5 + 0.3 * (b != 32) + (0.2 if size == "M" else -0.2) * (wd == 2.0) + 0.05 * rng.normal()
        )
        rows.append(
            dict(
                size=size,
                batch_size=b,
                weight_decay=wd,
                lr=lr,
                final_lr_ratio=f,
                seed=s,
                w_erank=erank,
                loss_id_test=loss,
            )
        )
    return pd.DataFrame(rows)


def test_seed_sd_is_the_pooled_within_group_sd():
    t = synthetic_table()
    sd, dof = gp.seed_sd(t, "w_erank")
    groups = [
        t[(t["size"] == s) & (t.batch_size == 32) & (t.weight_decay == 2.0) & (t.lr == 0.004)]
        for s in "SM"
    ]
    pooled = np.sqrt(sum(((g.w_erank - g.w_erank.mean()) ** 2).sum() for g in groups) / 4)
    assert dof == 4 and sd == pytest.approx(pooled)


def test_matched_pairs_and_a_planted_effect():
    t = synthetic_table(noise=0.2)
    pairs = gp.matched_differences(t, "batch_size", 8, 128, "w_erank")
    assert len(pairs) == 2 * 2 * 2  # size × wd × lr at seed 0
    e = gp.effect(t, "batch_size", 8, 128, "w_erank")
    assert e["raw_difference"] == pytest.approx(4.0, abs=0.3)
    assert e["ci_low"] <= e["effect_sd"] <= e["ci_high"]
    assert e["effect_sd"] == pytest.approx(e["raw_difference"] / e["seed_sd"])
    null = gp.effect(t, "lr", 0.001, 0.004, "w_erank")
    assert null["ci_low"] < 0 < null["ci_high"]


def test_per_seed_sd_divides_by_the_chi_square_ends_of_sigma():
    from scipy.stats import chi2

    sd, dof, level = 2.0, 4, 0.9
    s_lo = sd * np.sqrt(dof / chi2.ppf(0.95, dof))
    s_hi = sd * np.sqrt(dof / chi2.ppf(0.05, dof))
    assert gp.per_seed_sd(1.0, 3.0, sd, dof, level) == pytest.approx((1.0 / s_hi, 3.0 / s_lo))
    assert gp.per_seed_sd(-3.0, -1.0, sd, dof, level) == pytest.approx((-3.0 / s_lo, -1.0 / s_hi))
    assert gp.per_seed_sd(-1.0, 2.0, sd, dof, level) == pytest.approx((-1.0 / s_lo, 2.0 / s_lo))


def test_effects_carry_the_seed_sds_uncertainty_and_cover():
    """Wider than the known-sd interval, containing the estimate, and covering the true effect
    in sd units at least at the nominal rate (simulation with 4 degrees of freedom)."""
    t = synthetic_table(noise=0.5)
    e = gp.effect(t, "batch_size", 8, 128, "w_erank")
    assert e["ci_low_sd"] < e["ci_low"] <= e["effect_sd"] <= e["ci_high"] < e["ci_high_sd"]
    i = gp.interaction(t, "weight_decay", 0.0, 2.0, "loss_id_test")
    assert i["ci_low_sd"] < i["ci_low"] <= i["interaction_sd"] <= i["ci_high"] < i["ci_high_sd"]
    rng = np.random.default_rng(1)
    hits, known = 0, 0
    for _ in range(2000):  # true effect 1 sigma; 6 pairs; sd from 5 replicates (4 dof)
        diff = 1.0 + rng.normal(size=6) * np.sqrt(2)
        sd = rng.normal(size=5).std(ddof=1)
        raw = gp.mean_ci(diff, np.sqrt(0.95))
        lo, hi = gp.per_seed_sd(raw.low, raw.high, sd, 4, np.sqrt(0.95))
        hits += lo <= 1.0 <= hi
        k = gp.mean_ci(diff / sd, 0.95)
        known += k.low <= 1.0 <= k.high
    assert hits / 2000 >= 0.95 > known / 2000  # treating sd as known under-covers


def test_interaction_recovers_the_size_dependence():
    t = synthetic_table()
    i = gp.interaction(t, "weight_decay", 0.0, 2.0, "loss_id_test")
    sd, _ = gp.seed_sd(t, "loss_id_test")
    assert i["interaction_sd"] == pytest.approx(0.4 / sd, rel=0.25)
    assert i["ci_low"] > 0


def test_u_shape_cells():
    t = synthetic_table()
    u = gp.u_shape(t[t.seed == 0])
    assert len(u) == 2 * 2 * 2 and u["u_shaped"].all()
    flipped = t.assign(loss_id_test=-t["loss_id_test"])
    assert not gp.u_shape(flipped[flipped.seed == 0])["u_shaped"].any()


def test_detrended_removes_the_linear_part_of_loss():
    t = synthetic_table()
    t["q"] = 3.0 * t["loss_id_test"] + 1.0
    assert np.allclose(gp.detrended(t, "q"), 0.0, atol=1e-9)


def test_agreement_and_cv_ratio():
    rng = np.random.default_rng(6)
    base = rng.normal(size=100)
    t = pd.DataFrame(
        {
            "a": base,
            "b": base + 0.1 * rng.normal(size=100),
            "c": -base + 0.1 * rng.normal(size=100),
            "w_erank": 10 + rng.normal(size=100),
            "h_erank": 10 + 0.2 * rng.normal(size=100),
        }
    )
    agree = gp.metric_agreement(t, ["a", "b", "c"], n_boot=200)
    assert agree["value"] > 0.95 and agree["ci_low"] > 0.9
    cv = gp.cv_ratio(t, n_boot=200)
    assert cv["value"] == pytest.approx(0.2, rel=0.3) and cv["ci_high"] < 1


def test_bad_input():
    t = synthetic_table()
    with pytest.raises(KeyError, match="not a factor"):
        gp.matched_differences(t, "depth", 1, 2, "w_erank")
    with pytest.raises(ValueError, match="no pairs"):
        gp.matched_differences(t, "batch_size", 8, 64, "w_erank")
    with pytest.raises(ValueError, match="no seed replicates"):
        gp.seed_sd(t[t.seed == 0], "w_erank")
    with pytest.raises(FileNotFoundError, match="not measured yet"):
        gp.gather("/nonexistent", ["S-b8-wd0-lr0.001-f0.1-s0"])


def test_spread_compares_the_outcome_across_models_with_its_seed_noise():
    t = synthetic_table()
    got = gp.spread(t, ["loss_id_test"]).iloc[0]
    sd, _ = gp.seed_sd(t, "loss_id_test")
    assert got["seed_sd"] == pytest.approx(sd)
    # the pooled within-size sd, independently
    dev = t["loss_id_test"] - t.groupby("size")["loss_id_test"].transform("mean")
    expected = np.sqrt((dev**2).sum() / (len(t) - 2))
    assert got["within_size_sd"] == pytest.approx(expected)
    assert got["ratio"] == pytest.approx(expected / sd) and got["ratio"] > 2  # U-shape + wd


def test_init_moves_measures_how_far_w_left_its_start_per_batch():
    t = synthetic_table().assign(init_w_erank=lambda d: 30.0 + 0 * d["w_erank"])
    got = gp.init_moves(t, [8, 32, 128]).set_index(["size", "batch_size"])
    for size in ("S", "M"):
        for b in (8, 32, 128):
            at = t[(t["size"] == size) & (t["batch_size"] == b)]
            assert got.loc[(size, b), "erank_move"] == pytest.approx((30 - at["w_erank"]).mean())
        share = got.loc[(size, 128), "erank_move"] / got.loc[(size, 8), "erank_move"]
        assert got.loc[(size, 128), "share_of_smallest_batch"] == pytest.approx(share)
        assert got.loc[(size, 8), "share_of_smallest_batch"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="init_w_erank"):
        gp.init_moves(synthetic_table(), [8, 32, 128])


def test_each_budget_is_analysed_apart_and_the_models_table_holds_all(tmp_path, monkeypatch):
    """analyse_budgets hands analyse the models of one budget at a time, into <budget>/, and
    writes every model to the models table (what forgetting and quantization read)."""
    seen = {}

    def fake_analyse(table, spec, factorial, out_dir, widths=None):
        seen[Path(out_dir).name] = sorted(table["name"])
        return {"models": Path(out_dir) / "models.csv"}

    monkeypatch.setattr(gp, "analyse", fake_analyse)
    table = pd.DataFrame(
        {"name": ["a-tD", "b-tD", "a-t2D", "b-t2D"], "budget": ["D", "D", "2D", "2D"]}
    )
    out = gp.analyse_budgets(table, {}, {}, tmp_path / "models.csv")
    assert seen == {"D": ["a-tD", "b-tD"], "2D": ["a-t2D", "b-t2D"]}
    assert set(out) == {"D", "2D"} and out["2D"]["models"] == tmp_path / "2D" / "models.csv"
    assert sorted(pd.read_csv(tmp_path / "models.csv")["name"]) == sorted(table["name"])
    with pytest.raises(KeyError, match="no budget column"):
        gp.analyse_budgets(table.drop(columns="budget"), {}, {}, tmp_path / "m.csv")
