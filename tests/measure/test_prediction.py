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


def _config_table(n: int = 36, seed: int = 0) -> pd.DataFrame:
    """A sweep of ``n`` models over size × batch × lr (every level held by several models)."""
    rng = np.random.default_rng(seed)
    size = np.tile(["S", "M", "L"], n // 3)
    batch = np.repeat([32, 64], n // 2)
    lr = np.tile([1e-3, 1e-3, 3e-3, 3e-3], n // 4)
    t = pd.DataFrame({"size": size, "batch_size": batch, "lr": lr})
    effects = pd.Series(size).map({"S": 4.0, "M": 3.5, "L": 3.2}).to_numpy() + 0.1 * (batch == 64)
    t["w_erank"] = rng.normal(size=n)
    t["loss_id_test"] = effects - 0.3 * (lr > 2e-3) + 0.2 * t["w_erank"] + 0.1 * rng.normal(size=n)
    return t


def _dummies(t: pd.DataFrame, factors: list[str]) -> np.ndarray:
    """The base design built independently: pandas' drop-first one-hot and an intercept."""
    d = pd.get_dummies(t[factors].astype(str), drop_first=True).to_numpy(float)
    return np.column_stack([np.ones(len(t)), d])


def _brute_loo_r2(x: np.ndarray, y: np.ndarray) -> float:
    press = 0.0
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        beta, *_ = np.linalg.lstsq(x[keep], y[keep], rcond=None)
        press += float(y[i] - x[i] @ beta) ** 2
    return 1 - press / float(np.sum((y - y.mean()) ** 2))


@pytest.mark.parametrize("confounded", [False, True])
def test_added_power_loo_r2_matches_refitting_without_each_model(confounded):
    """Closed-form leave-one-out (hat matrix) against n refits; with a factor that repeats
    another under other labels, the design is rank-deficient and the fits still agree."""
    from geolib.measure.prediction import added_power

    t = _config_table()
    factors = ["size", "batch_size", "lr"]
    if confounded:
        t["weight_decay"] = t["batch_size"].map({32: 0.1, 64: 0.0})
        factors.append("weight_decay")
    got = added_power(t, "loss_id_test", "w_erank", factors)
    base = _dummies(t, factors)
    full = np.column_stack([base, t["w_erank"]])
    y = t["loss_id_test"].to_numpy()
    assert got["k"] == base.shape[1] == 5 + confounded and got["n"] == 36
    assert got["r2_base_cv"] == pytest.approx(_brute_loo_r2(base, y), abs=1e-10)
    assert got["r2_full_cv"] == pytest.approx(_brute_loo_r2(full, y), abs=1e-10)
    assert got["delta_r2_cv"] == pytest.approx(got["r2_full_cv"] - got["r2_base_cv"], abs=1e-12)
    assert got["factors"] == "+".join(factors) and got["note"] == ""


def test_added_power_of_a_function_of_the_factors_is_zero_and_of_a_signal_is_large():
    """A predictor fixed by the configuration adds nothing (no error: ΔR² = 0 exactly, no partial
    correlation, a note); one carrying what the factors lack adds most of the variance."""
    from geolib.measure.prediction import added_power

    rng = np.random.default_rng(3)
    t = _config_table()
    factors = ["size", "batch_size", "lr"]
    t["fixed"] = t["size"].map({"S": 30.0, "M": 55.0, "L": 80.0}) + 2.5 * (t["batch_size"] == 64)
    got = added_power(t, "loss_id_test", "fixed", factors)
    assert got["delta_r2_in"] == 0 and got["delta_r2_cv"] == 0 <= 0
    assert got["delta_r2_cv_ci_low"] == got["delta_r2_cv_ci_high"] == 0
    assert np.isnan(got["partial_r"]) and "function of the factors" in got["note"]

    x = rng.normal(size=len(t))
    effects = t["size"].map({"S": 4.0, "M": 3.5, "L": 3.2}) + 0.1 * (t["batch_size"] == 64)
    t["loss_id_test"] = effects + 2 * x + 0.05 * rng.normal(size=len(t))
    t["signal"] = x
    got = added_power(t, "loss_id_test", "signal", factors)
    assert got["delta_r2_cv"] > 0.5 and got["delta_r2_cv_ci_low"] > 0
    assert got["delta_r2_cv_ci_low"] <= got["delta_r2_cv"] <= got["delta_r2_cv_ci_high"]
    assert got["delta_r2_in"] > 0.5 and got["partial_r"] > 0.99


@pytest.mark.parametrize("level, z", [(0.95, 1.959963984540054), (0.9, 1.6448536269514722)])
def test_added_power_partial_r_and_its_fisher_interval(level, z):
    from geolib.measure.prediction import added_power

    t = _config_table(seed=4)
    factors = ["size", "batch_size", "lr"]
    got = added_power(t, "loss_id_test", "w_erank", factors, level=level)
    base = _dummies(t, factors)

    def resid(v: np.ndarray) -> np.ndarray:
        return v - base @ np.linalg.lstsq(base, v, rcond=None)[0]

    r = np.corrcoef(resid(t["w_erank"].to_numpy()), resid(t["loss_id_test"].to_numpy()))[0, 1]
    se = 1 / np.sqrt(len(t) - (base.shape[1] - 1) - 3)
    assert got["partial_r"] == pytest.approx(r, abs=1e-12)
    assert got["partial_r_ci_low"] == pytest.approx(np.tanh(np.arctanh(r) - z * se), abs=1e-12)
    assert got["partial_r_ci_high"] == pytest.approx(np.tanh(np.arctanh(r) + z * se), abs=1e-12)


def test_added_power_refuses_bad_input():
    from geolib.measure.prediction import added_power

    t = _config_table()
    f = ["size", "batch_size", "lr"]
    with pytest.raises(ValueError, match=r"not in the table: \['wd'\]"):
        added_power(t, "loss_id_test", "w_erank", [*f, "wd"])
    with pytest.raises(ValueError, match="'w_erank' has 1 non-finite"):
        added_power(
            t.assign(w_erank=t["w_erank"].where(t.index != 3)), "loss_id_test", "w_erank", f
        )
    with pytest.raises(ValueError, match="7 models for a full model of 6 columns.*at least 8"):
        added_power(t.iloc[[0, 1, 2, 18, 19, 20, 2]], "loss_id_test", "w_erank", f)
    with pytest.raises(ValueError, match="predictor 'w_erank' is constant"):
        added_power(t.assign(w_erank=1.0), "loss_id_test", "w_erank", f)
    with pytest.raises(ValueError, match=r"level must be in \(0, 1\), got 1.5"):
        added_power(t, "loss_id_test", "w_erank", f, level=1.5)
    lone = t.assign(lr=np.where(t.index == 0, 1e-2, t["lr"]))  # one model at lr = 1e-2
    with pytest.raises(ValueError, match="undefined for 1 of 36 models.*base design of 6 columns"):
        added_power(lone, "loss_id_test", "w_erank", f)


def test_added_power_is_invariant_to_affine_predictor_and_row_order():
    from geolib.measure.prediction import added_power

    t = _config_table(seed=9)
    f = ["size", "batch_size", "lr"]
    got = added_power(t, "loss_id_test", "w_erank", f)
    flipped = added_power(t.assign(w_erank=-3.0 * t["w_erank"] + 7.0), "loss_id_test", "w_erank", f)
    for key in ("delta_r2_cv", "delta_r2_cv_ci_low", "delta_r2_cv_ci_high", "delta_r2_in"):
        assert flipped[key] == pytest.approx(got[key], abs=1e-12)
    assert flipped["partial_r"] == pytest.approx(-got["partial_r"], abs=1e-12)
    shuffled = t.sample(frac=1.0, random_state=1).reset_index(drop=True)
    again = added_power(shuffled, "loss_id_test", "w_erank", f)
    assert again.keys() == got.keys()
    for key, value in got.items():
        assert again[key] == (
            pytest.approx(value, abs=1e-12) if isinstance(value, float) else value
        )


def test_per_model_tables_by_budget_never_pool_budgets():
    """Each budget's tables equal per_model_tables on that budget's models alone."""
    from geolib.measure.prediction import per_model_tables, per_model_tables_by_budget

    rng = np.random.default_rng(5)
    n = 16
    table = pd.DataFrame(
        {
            "budget": ["D"] * n + ["2D"] * n,
            "size": (["S", "M"] * n),
            "loss_id_test": rng.normal(4, 0.2, 2 * n),
            "w_erank": rng.normal(20, 2, 2 * n),
            "h_erank": rng.normal(10, 1, 2 * n),
            "forgetting": rng.normal(0.1, 0.02, 2 * n),
        }
    )
    kw = {"n_boot": 200, "seed": 0}
    got = per_model_tables_by_budget(table, ["forgetting"], **kw)
    assert list(got) == ["D", "2D"]
    for b in got:
        want = per_model_tables(table[table.budget == b], ["forgetting"], **kw)
        for stem, frame in want.items():
            pd.testing.assert_frame_equal(got[b][stem], frame)
    with pytest.raises(KeyError, match="no budget column"):
        per_model_tables_by_budget(table.drop(columns="budget"), ["forgetting"])
