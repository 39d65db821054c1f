"""A miniature sweep end to end: DVC-stage entry point, resume, and submitit's local executor."""

import json

import numpy as np
import pytest
import yaml

from geolib.experiments.sweep import check_points_listed, expand, run_point
from tests.models.test_train import V, token_files  # noqa: F401  (the synthetic corpus fixture)


@pytest.fixture
def tiny_params(tmp_path, token_files):  # noqa: F811
    train, val = map(str, token_files)
    sweep = {
        "run_root": str(tmp_path / "runs"),
        "base": {
            "seq_len": 16,
            "warmup_fraction": 0.1,
            "schedule": "cosine",
            "token_budget": 4096,
            "eval_batches": 2,
            "checkpoint_log_max": 0,
        },
        "sizes": {"S": {"family": "olmo", "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}},
        "factorial": {
            "size": ["S"],
            "batch_size": [8, 16],
            "weight_decay": [0.0],
            "lr": [0.003],
            "final_lr_ratio": [0.1],
            "seed": [0],
        },
        "center": {},
        "vary": {},
        "vary_sizes": [],
        "replicate_seeds": [],
        "measure": {
            "n_eval_seqs": 8,
            "n_h_seqs": 4,
            "n_c0_seqs": 16,
            "isoscore_zeta": 0.25,
            "n_boot": 100,
            "ci_level": 0.95,
            "splits": {"id_validation": val, "id_test": val},
        },
    }
    sweep["points"] = [p.name for p in expand(sweep)]
    params = {
        "common": {"seed": 0, "device": "cpu"},
        "train": {
            "train_tokens": train,
            "val_tokens": val,
            "tokenizer": None,
            "vocab_size": V,
        },
        "sweep": sweep,
    }
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path, sweep


def test_run_point_trains_measures_and_does_not_repeat(tiny_params):
    path, sweep = tiny_params
    name = check_points_listed(sweep)[0]
    m = run_point(path, name)
    run = f"{sweep['run_root']}/{name}"
    saved = json.loads(open(f"{run}/measures.json").read())
    assert saved["name"] == name and saved["steps"] == 4096 // (8 * 16)
    assert set(saved["loss"]) == {"id_validation", "id_test"}
    assert saved["loss"]["id_test"]["ci_low"] <= saved["loss"]["id_test"]["mean"]
    assert np.load(f"{run}/sequence_losses.npz")["id_test"].shape == (8,)
    assert np.isfinite(m["w"]["erank"]) and np.isfinite(m["h"]["isoscore_star"])
    weights = f"{run}/step-{saved['steps']}/model.safetensors"
    before = open(weights, "rb").read()
    run_point(path, name)  # finished: trains nothing, measures again identically
    assert open(weights, "rb").read() == before
    again = json.loads(open(f"{run}/measures.json").read())
    assert again["w"] == saved["w"] and again["loss"] == saved["loss"]
    with pytest.raises(KeyError, match="not a point"):
        run_point(path, "S-b4-wd0-lr0.003-f0.1-s0")


@pytest.mark.slow
def test_local_executor_runs_the_points_like_the_stage(tiny_params, tmp_path):
    from geolib.experiments.sweep_submit import submit

    path, sweep = tiny_params
    jobs = submit(path, executor="local", folder=tmp_path / "jobs" / "%j", timeout_min=10)
    results = [j.result() for j in jobs]
    assert sorted(r["name"] for r in results) == sorted(sweep["points"])
    for name in sweep["points"]:
        assert (tmp_path / "runs" / name / "measures.json").is_file()
