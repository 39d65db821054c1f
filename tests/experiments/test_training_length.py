"""geolib.experiments.training_length: train → measure → settle on a tiny design; the
measured ranks and losses against independent computations."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from geolib.data.windows import fixed_windows
from geolib.experiments import training_length as tl
from geolib.models import designs, length
from geolib.models.checkpoints import load
from tests.models.test_length import params_for
from tests.models.test_train import token_files  # noqa: F401  (the synthetic corpus fixture)


def test_train_measure_settle_on_a_tiny_design(tmp_path, token_files):  # noqa: F811
    params = params_for(token_files, run_root=str(tmp_path / "runs"))
    params["training_length"] |= {
        "out_dir": str(tmp_path / "out"),
        "measure": {"n_eval_seqs": 6, "min_doublings": 2},
    }
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    names = params["training_length"]["names"]
    with pytest.raises(FileNotFoundError, match="must reach step"):
        tl.measure_run(*length.length_run(params, names[0]), names[0], 6)
    for name in names:
        assert designs.main(["length", "--params", str(path), "train", name]) == 0
    assert tl.main(["--params", str(path)]) == 0

    table = pd.read_csv(tmp_path / "out" / "checkpoints.csv")
    cfg, run_dir = length.length_run(params, "a-s1")
    rows = table[table["run"] == "a-s1"].set_index("step")
    assert list(rows.index) == [0] + [2**j for j in range(cfg.total_steps.bit_length())]
    # the last checkpoint, measured again independently: loss by hand, erank from the spectrum
    model, _ = load(run_dir, cfg.total_steps, tokenizer=False)
    w = model.get_output_embeddings().weight.detach().double().numpy()
    used = np.bincount(np.load(cfg.train_tokens).astype(np.int64), minlength=w.shape[0]) > 0
    s = np.linalg.svd(w[used], compute_uv=False)
    p = s / s.sum()
    last = rows.loc[cfg.total_steps]  # the table holds 6 significant digits
    assert last["w_erank"] == pytest.approx(np.exp(-(p * np.log(p)).sum()), rel=1e-5)
    win = torch.from_numpy(fixed_windows(np.load(cfg.val_tokens), 6, cfg.seq_len + 1))
    with torch.no_grad():
        logits = model(input_ids=win[:, :-1]).logits
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), win[:, 1:], reduction="none")
    assert last["loss"] == pytest.approx(float(nll.mean()), rel=1e-5)
    assert last["tokens_per_param"] >= 3 > rows.loc[cfg.total_steps // 2, "tokens_per_param"]
    seen = cfg.total_steps * cfg.tokens_per_step
    assert last["epochs"] == pytest.approx(seen / len(np.load(cfg.train_tokens)), rel=1e-5)

    settled = pd.read_csv(tmp_path / "out" / "settling.csv")
    assert sorted(settled["size"].unique()) == ["a", "b"]
    assert set(settled["quantity"]) == set(tl.QUANTITIES) and (settled["n_seeds"] == 2).all()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(summary["runs"]) == set(names) and summary["unigram_entropy"] > 0
    for key, s in summary["settling"].items():
        assert (s["settled_at"] is None) == (not s["settled"]), key
    assert summary["runs"]["a-s0"]["lr_wd_sum"] == pytest.approx(
        cfg.weight_decay * sum(min(t / 2, 1.0) * cfg.lr for t in range(1, cfg.total_steps + 1))
    )


def test_settling_rows_refuse_runs_with_different_checkpoints():
    rows = pd.DataFrame(
        {
            "size": ["a"] * 5,
            "seed": [0, 0, 0, 1, 1],
            "step": [1, 2, 4, 1, 2],
            "tokens_per_param": [1.0, 2.0, 4.0, 1.0, 2.0],
            **{q: [1.0, 2.0, 3.0, 1.0, 2.0] for q in tl.QUANTITIES},
        }
    )
    with pytest.raises(ValueError, match="different checkpoints"):
        tl.settling_rows(rows, 2)
