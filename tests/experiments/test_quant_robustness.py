"""geolib.experiments.quant_robustness: one model under every setting (paired increases, the source
run untouched, deterministic), and the whole stage on tiny runs standing in for a sweep."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geolib.experiments import quant_robustness as qr
from geolib.models.checkpoints import vocab_size_of
from tests.models.test_checkpoints import V
from tests.tiny import tiny_corpus, train_tiny, tree_hashes

NAMES = list("abcdefghijkl")


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("qr")
    tok = tiny_corpus(root, train=(V, 6000), test=(V, 3000), ood=(20, 3000))
    for i, name in enumerate(NAMES):  # models that differ: more or fewer steps, another lr
        train_tiny(
            root / "runs" / name,
            tokenizer=tok,
            train_tokens=root / "train.npy",
            family="olmo",
            n_layers=1,
            total_steps=4 + 2 * i,
            checkpoint_every=100,
            log_max=0,
            lr=1e-3 * (1 + i % 3),
        )
    return root


def _params(root, out=None):
    return {
        "methods": ["rtn", "gptq"],
        "bits": [4, 3],
        "group_size": -1,
        "symmetric": True,
        "lm_head": [False, True],
        "calib_tokens": str(root / "train.npy"),
        "n_calib_seqs": 16,
        "damp_percent": 0.05,
        "eval_tokens": {"id_test": str(root / "test.npy"), "ood_x": str(root / "ood.npy")},
        "n_eval_seqs": 24,
        "seq_len": 16,
        "n_boot": 100,
        "ci_level": 0.9,
        "seed": 0,
        "device": "cpu",
        "out_dir": str(out or root / "out"),
    }


def test_quantize_point_is_paired_and_leaves_the_run_alone(tiny_sweep):
    p = _params(tiny_sweep)
    run = tiny_sweep / "runs" / "l"
    before = tree_hashes(run)
    vocab = vocab_size_of(run)
    windows, calib = qr.eval_windows(p, vocab), qr.calibration(p, vocab)
    rows, layers, per_window = qr.quantize_point(run, p, windows, calib)
    assert tree_hashes(run) == before  # quantization touched no file of the source run
    assert len(rows) == 2 * 2 * 2 * 2  # methods × bits × (blocks, + head) × splits
    t = pd.DataFrame(rows)
    assert set(t.setting) == {"rtn4", "rtn3", "gptq4", "gptq3"} | {
        f"{m}{b}_head" for m in ("rtn", "gptq") for b in (4, 3)
    }
    for r in t.itertuples():  # the increase is the paired mean of the same windows
        after, base = per_window[f"{r.setting}_{r.split}"], per_window[f"float_{r.split}"]
        assert r.increase == pytest.approx(float(np.mean(after - base)), abs=1e-12)
        assert r.ci_low <= r.increase <= r.ci_high
    idt = t[t.split == "id_test"].set_index("setting")["increase"]
    assert idt["rtn3"] > idt["rtn4"]  # fewer bits, a larger loss increase
    gl = pd.DataFrame(layers)
    assert set(gl.setting) == set(t.setting)
    g = gl[gl.setting.str.startswith("gptq")]
    assert len(g) == 2 * (7 + 1) and (g.error <= g.rtn_error).all()
    again, _, _ = qr.quantize_point(run, p, windows, calib)  # deterministic
    drop = set(qr.TIMING)
    assert [{k: v for k, v in r.items() if k not in drop} for r in again] == [
        {k: v for k, v in r.items() if k not in drop} for r in rows
    ]


def test_stage_joins_the_per_model_table(tiny_sweep, tmp_path, monkeypatch):
    monkeypatch.setattr(qr, "check_points_listed", lambda spec: list(NAMES))
    monkeypatch.setattr(qr, "point_dir", lambda spec, name: Path(spec["run_root"]) / name)
    table = tmp_path / "models.csv"
    rng = np.random.default_rng(3)
    pd.DataFrame(
        {
            "name": NAMES,
            "budget": "D",
            "size": ["S" if i % 2 else "M" for i in range(len(NAMES))],
            "loss_id_test": np.linspace(4.5, 3.9, len(NAMES)) + rng.normal(0, 0.05, len(NAMES)),
            "w_erank": rng.uniform(10, 20, len(NAMES)),
            "h_erank": rng.uniform(5, 10, len(NAMES)),
        }
    ).to_csv(table, index=False)
    p = _params(tiny_sweep, tmp_path / "out")
    p["methods"], p["bits"] = ["rtn", "gptq"], [3]
    summary = qr.run_stage(p, {"run_root": str(tiny_sweep / "runs")}, str(table), log=lambda s: 0)
    out = tmp_path / "out"
    models = pd.read_csv(out / "models.csv")
    assert list(models.name) == NAMES
    for setting in ("rtn3", "gptq3", "rtn3_head", "gptq3_head"):
        for split in ("id_test", "ood_x"):
            col = f"q_{setting}_{split}"
            assert {col, f"{col}_ci_low", f"{col}_ci_high"} <= set(models.columns)
    st = pd.read_csv(out / "settings.csv")
    assert len(st) == 4 * 2 and (st.models == len(NAMES)).all()
    head = st[(st.setting == "rtn3") & (st.split == "id_test")].iloc[0]
    assert head.median_increase == pytest.approx(models["q_rtn3_id_test"].median(), rel=1e-4)
    assert not (out / "prediction.csv").exists()  # one set of tables per token budget
    pred = pd.read_csv(out / "D" / "prediction.csv")
    assert set(pred.outcome) == {
        f"q_{s}_id_test" for s in ("rtn3", "gptq3", "rtn3_head", "gptq3_head")
    }
    assert len(pd.read_csv(out / "D" / "r2_gap.csv")) == 4
    within = pd.read_csv(out / "D" / "prediction_within_size.csv")
    assert set(within.outcome) == set(pred.outcome) and set(within["by"]) == {"size"}
    assert summary["n_models"] == len(NAMES) and summary["gptq_worse_than_rtn_layers"] == 0
    assert json.loads((out / "summary.json").read_text())["settings"] == summary["settings"]
    assert set(np.load(out / "window_losses.npz").files) >= {
        "a/float_id_test",
        "l/gptq3_head_ood_x",
    }
    # the timings reach the log, never a file: a rerun writes every file's bytes again
    assert summary["gptq_layer_seconds_per_model"] > 0 and summary["seconds"] > 0
    assert "seconds" not in (out / "summary.json").read_text()
    assert not set(qr.TIMING) & set(pd.read_csv(out / "layers.csv").columns)
    assert not set(qr.TIMING) & set(pd.read_csv(out / "quantization.csv").columns)
    qr.run_stage(
        p | {"out_dir": str(tmp_path / "again")},
        {"run_root": str(tiny_sweep / "runs")},
        str(table),
        log=lambda s: 0,
    )
    assert tree_hashes(tmp_path / "again") == tree_hashes(out)


def test_bad_settings_are_refused(tiny_sweep):
    p = _params(tiny_sweep)
    with pytest.raises(ValueError, match="must include false"):
        qr.settings({**p, "lm_head": [True]})
    with pytest.raises(ValueError, match="bits"):
        qr.settings({**p, "bits": [1]})
