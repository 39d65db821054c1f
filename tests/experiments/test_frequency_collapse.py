"""geolib.experiments.frequency_collapse: held-out windows, the rule units, and the stage on a tiny
run trained with AdamW and with SGD."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from geolib.experiments import frequency_collapse as fc
from tests.models.test_checkpoints import V, make_tokenizer
from tests.tiny import run_quietly, train_tiny


def test_held_out_windows(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(10, dtype=np.uint16))
    np.save(tmp_path / "b.npy", np.arange(100, 107, dtype=np.uint16))
    w = fc.held_out_windows([str(tmp_path / "a.npy"), str(tmp_path / "b.npy")], 3)
    assert w.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [100, 101, 102], [103, 104, 105]]
    np.save(tmp_path / "c.npy", np.arange(2, dtype=np.uint16))
    with pytest.raises(ValueError, match="fewer than one window"):
        fc.held_out_windows([str(tmp_path / "c.npy")], 3)


def test_summary_counts_the_rule_units():
    def fit(run, measure, layer, high, opt="adamw"):
        return {
            "run": run,
            "optimizer": opt,
            "measure": measure,
            "layer": layer,
            "estimate": high - 0.1,
            "low": high - 0.2,
            "high": high,
            "n_types": 50,
        }

    fits = [
        fit("a", "states", "embed", -1.0),  # layer 0 is not a unit
        fit("a", "states", "block1", -0.1),
        fit("a", "states", "block2", 0.1),
        fit("a", "jitter", "embed", -0.2),
        fit("a", "settle", "embed", -0.3),
        fit("b", "states", "block1", -0.1),
        fit("b", "jitter", "embed", -0.2),
        fit("b", "settle", "embed", 0.3),
        fit("s", "states", "block1", 0.5, "sgd"),
        fit("s", "jitter", "embed", 0.2, "sgd"),
        fit("s", "settle", "embed", -0.3, "sgd"),
    ]
    s = fc.summarise(fits)
    assert s["adamw"]["states"] == {"successes": 2, "n_units": 3}
    assert s["adamw"]["rows"] == {"successes": 1, "n_units": 2}
    assert s["sgd"]["states"] == {"successes": 0, "n_units": 1}
    assert s["sgd"]["rows"] == {"successes": 0, "n_units": 1}


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("fc")
    tok = make_tokenizer(root / "tokenizer")
    rng = np.random.default_rng(0)
    zipf = np.minimum(rng.zipf(1.3, 20_000) + 2, V - 1).astype(np.uint16)  # a wide frequency range
    np.save(root / "train.npy", zipf[:12_000])
    np.save(root / "val.npy", zipf[12_000:])
    for name, opt, lr in (("adamw", "adamw", 2e-3), ("sgd", "sgd", 0.1)):
        train_tiny(
            root / name,
            tokenizer=tok,
            train_tokens=root / "train.npy",
            family="olmo",
            optimizer=opt,
            lr=lr,
        )
    return root


def test_stage_on_tiny_runs(tiny_runs, tmp_path):
    root = tiny_runs
    p = {
        "seed": 0,
        "device": "cpu",
        "runs": [str(root / "adamw"), str(root / "sgd")],
        "train_tokens": str(root / "train.npy"),
        "state_tokens": [str(root / "val.npy")],
        "seq_len": 16,
        "batch_size": 8,
        "min_occurrences": 5,
        "min_train_count": 1,
        "jitter_from": 2,
        "settle_threshold": 0.5,
        "n_bins": 4,
        "n_boot": 100,
        "ci_level": 0.9,
        "out_dir": str(tmp_path / "out"),
    }
    summary = run_quietly(fc, p)
    out = tmp_path / "out"
    states = pd.read_csv(out / "states.csv")
    assert (states["occurrences"] >= 5).all() and (states["train_count"] >= 1).all()
    # a decoder's layer 0 is the embedding row itself: no within-type variance to fit
    assert set(states["layer"]) == {"block1", "block2"}
    rows = pd.read_csv(out / "rows.csv")
    train_counts = np.bincount(np.load(root / "train.npy"), minlength=V)
    for _, g in rows.groupby("run"):
        assert len(g) == int((train_counts > 0).sum())
        assert set(g["settle_step"]) <= {0, 1, 2, 4, 8}
    fits = pd.read_csv(out / "fits.csv")
    assert set(fits["measure"]) == {"states", "jitter", "settle"}
    ok = fits.dropna(subset=["estimate"])
    assert (ok["low"] <= ok["estimate"]).all() and (ok["estimate"] <= ok["high"]).all()
    assert fits.loc[fits["measure"] != "settle", "estimate"].notna().all()
    assert set(fits["optimizer"]) == {"adamw", "sgd"}
    saved = json.loads((out / "summary.json").read_text())
    assert saved["adamw"]["rows"]["n_units"] == 1 and saved["sgd"]["states"]["n_units"] == 2
    assert summary["n_state_tokens"] == saved["n_state_tokens"] == (8000 // 16) * 16
    # each model's own units, every digit kept: the same counts as the summary of its fits alone
    per_model = pd.read_csv(out / "per_model.csv")
    assert per_model["run"].tolist() == p["runs"]
    for _, row in per_model.iterrows():
        alone = fc.summarise(fits[fits["run"] == row["run"]].to_dict("records"))
        units = alone[row["optimizer"]]
        assert row["states_successes"] == units["states"]["successes"]
        assert row["states_units"] == units["states"]["n_units"]
        assert row["rows_units"] == units["rows"]["n_units"]
        # fits.csv keeps 6 significant digits; the per-model table every digit of the fits
        assert row["median_state_slope"] == pytest.approx(units["median_state_slope"], rel=1e-5)
        assert row["median_state_slope"] != round(row["median_state_slope"], 8)


def test_per_model_units_one_row_per_run_and_optimizer():
    fits = [
        {"run": r, "optimizer": o, "measure": "states", "layer": "block1", "estimate": e}
        | {"low": e - 0.1, "high": e + 0.05}
        for r, o, e in (("b", "adamw", -0.3), ("a", "sgd", 0.2), ("b", "adamw", 0.1))
    ]
    rows = fc.per_model_units(fits)
    assert [(r["run"], r["optimizer"]) for r in rows] == [("b", "adamw"), ("a", "sgd")]
    assert (rows[0]["states_successes"], rows[0]["states_units"]) == (1, 2)
    assert rows[0]["median_state_slope"] == pytest.approx(-0.1)
    assert rows[0]["rows_units"] == 0  # no embedding-row fits
