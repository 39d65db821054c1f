"""geolib.measure.prediction: correlations, partial correlations and R² gaps across models,
on synthetic tables with a planted relation; the join of per-model tables."""

import numpy as np
import pandas as pd
import pytest

from geolib.measure.prediction import join_per_model, prediction, r2_gap


def test_prediction_partial_and_gap_on_a_noisy_copy_of_loss():
    rng = np.random.default_rng(5)
    n = 200
    loss = rng.normal(size=n)
    t = pd.DataFrame(
        {
            "loss_id_test": loss,
            "loss_ood_x": loss + 0.2 * rng.normal(size=n),
            "w_erank": loss + 1.0 * rng.normal(size=n),
        }
    )
    p = prediction(t, ["loss_ood_x"], ["loss_id_test", "w_erank"], n_boot=200)
    rank = p[p.predictor == "w_erank"].iloc[0]
    assert rank.partial_spearman_ci_low < 0 < rank.partial_spearman_ci_high
    assert np.isnan(p[p.predictor == "loss_id_test"].iloc[0].get("partial_spearman", np.nan))
    g = r2_gap(t, "loss_ood_x", n_boot=200)
    assert g["ci_low"] > 0.3


def test_a_constant_predictor_is_noted_not_correlated():
    rng = np.random.default_rng(7)
    t = pd.DataFrame({"loss_id_test": rng.normal(size=30), "loss_ood_x": rng.normal(size=30)})
    t["h_flat"] = 0.0
    p = prediction(t, ["loss_ood_x"], ["h_flat"], n_boot=200)
    assert p.iloc[0]["note"] == "constant across models" and np.isnan(p.iloc[0].get("r2", np.nan))


def test_join_per_model_is_one_to_one_and_names_what_is_missing():
    models = pd.DataFrame({"name": ["a", "b", "c"], "x": [1, 2, 3]})
    rows = pd.DataFrame({"name": ["c", "a", "b"], "y": [30, 10, 20]})
    joined = join_per_model(models, rows, ["a", "b", "c"], "models.csv")
    assert joined["y"].tolist() == [10, 20, 30]
    with pytest.raises(ValueError, match=r"models.csv: 2 rows for 3 sweep points; missing \['c'\]"):
        join_per_model(models.iloc[:2], rows, ["a", "b", "c"], "models.csv")
    with pytest.raises(ValueError, match=r"beside models.csv: 4 rows.*repeated \['c'\]"):
        join_per_model(models, pd.concat([rows, rows.iloc[:1]]), ["a", "b", "c"], "models.csv")


def test_prediction_by_size_removes_what_runs_between_sizes():
    """Rank follows width (size) and loss within each size; across all models the size step
    hides it. Within size, R² is high; a predictor that is only the size has nothing left."""
    from geolib.measure.stats import r_squared

    rng = np.random.default_rng(2)
    n = 40
    size = np.repeat(["S", "M"], n // 2)
    loss = rng.normal(size=n) + np.where(size == "M", -1.0, 0.0)
    rank = -2 * (loss - np.where(size == "M", -1.0, 0.0)) + np.where(size == "M", 60.0, 30.0)
    rank = rank + 0.3 * rng.normal(size=n)
    table = pd.DataFrame(
        {
            "size": size,
            "loss_id_test": loss,
            "w_erank": rank,
            "size_only": np.where(size == "M", 1.0, 0.0),
        }
    )
    got = prediction(table, ["loss_id_test"], ["w_erank", "size_only"], by="size", n_boot=200)
    r = got.set_index("predictor")
    assert r.loc["w_erank", "r2"] > 0.9 and r_squared(rank, loss) < r.loc["w_erank", "r2"]
    assert r.loc["w_erank", "r2_ci_low"] <= r.loc["w_erank", "r2"] <= r.loc["w_erank", "r2_ci_high"]
    assert r.loc["size_only", "note"] == "constant within each size"
    assert "partial_spearman" not in r.columns or np.isnan(r.loc["w_erank", "partial_spearman"])


def test_a_row_whose_statistic_is_mostly_undefined_says_so_instead_of_failing():
    """A predictor with one distinct unit among ties: most resamples have no spread, Spearman is
    undefined there; the row keeps its estimate, NaN bounds and a note (the table goes on)."""
    from geolib.measure.stats import interval, spearman

    n = 12
    table = pd.DataFrame(
        {
            "loss_id_test": np.linspace(4.0, 5.0, n),
            "ood": np.linspace(5.0, 6.5, n) + np.random.default_rng(0).normal(0, 0.01, n),
            "tied": [0.0] * (n - 1) + [1.0],
        }
    )
    with pytest.raises(ValueError, match="undefined in"):
        interval(spearman, table["tied"], table["ood"], n_boot=200)
    got = prediction(table, ["ood"], ["tied"], n_boot=200).iloc[0]
    assert np.isfinite(got["spearman"]) and np.isnan(got["spearman_ci_low"])
    assert "spearman: statistic undefined in" in got["note"]
    with pytest.raises(ValueError, match="undefined must be"):
        interval(spearman, table["tied"], table["ood"], n_boot=200, undefined="drop")


def test_one_row_per_point_refuses_a_cut_or_foreign_table():
    from geolib.measure.prediction import one_row_per_point

    names = ["a", "b", "c"]
    full = pd.DataFrame({"name": names, "x": [1, 2, 3]})
    assert one_row_per_point(full, names, "models.csv") is full
    with pytest.raises(ValueError, match=r"models.csv: 2 rows for 3 sweep points; missing \['c'\]"):
        one_row_per_point(full.iloc[:2], names, "models.csv")
    with pytest.raises(ValueError, match=r"repeated \['a'\]"):
        one_row_per_point(pd.concat([full, full.iloc[:1]]), names, "models.csv")
    with pytest.raises(ValueError, match=r"not in the sweep \['z'\]"):
        one_row_per_point(full.assign(name=["a", "b", "z"]), names, "models.csv")
