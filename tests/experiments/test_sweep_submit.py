"""A miniature sweep end to end: DVC-stage entry point, resume, and submitit's local executor."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from geolib.experiments.sweep import measure_point
from geolib.models.grid import check_points_listed, expand, point_dir, train_point
from tests.models.test_train import V, token_files  # noqa: F401  (the synthetic corpus fixture)
from tests.tiny import tiny_train_section, tree_hashes


@pytest.fixture
def tiny_params(tmp_path, token_files):  # noqa: F811
    train, val = map(str, token_files)
    sweep = {
        "run_root": str(tmp_path / "runs"),
        "measures_root": str(tmp_path / "measures"),
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
        "train": tiny_train_section(train, val),
        "sweep": sweep,
    }
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path, sweep


def test_train_then_measure_a_point_each_writing_its_own_folder(tiny_params):
    path, sweep = tiny_params
    name = check_points_listed(sweep)[0]
    with pytest.raises(FileNotFoundError):
        measure_point(path, name)  # nothing trained yet: an error, not an empty measure
    train_point(path, name)
    run = point_dir(sweep, name)
    trained = tree_hashes(Path(run))
    m = measure_point(path, name)
    assert tree_hashes(Path(run)) == trained, "measuring wrote into the run folder"
    out = f"{sweep['measures_root']}/{name}"
    saved = json.loads(open(f"{out}/measures.json").read())
    assert saved["name"] == name and saved["steps"] == 4096 // (8 * 16)
    assert set(saved["loss"]) == {"id_validation", "id_test"}
    assert saved["loss"]["id_test"]["ci_low"] <= saved["loss"]["id_test"]["mean"]
    assert np.load(f"{out}/sequence_losses.npz")["id_test"].shape == (8,)
    assert np.isfinite(m["w"]["erank"]) and np.isfinite(m["h"]["isoscore_star"])
    # W at step 0, independently: the same rows of the untrained unembedding
    from geolib.measure.geometry import unused_rows
    from geolib.measure.metrics import effective_rank
    from geolib.measure.probes import unembedding
    from geolib.models.checkpoints import load

    w0 = unembedding(load(run, 0, tokenizer=False)[0]).detach().double()
    train_tokens = yaml.safe_load(path.read_text())["train"]["train_tokens"]
    keep = ~unused_rows(np.load(train_tokens), w0.shape[0])
    assert m["init_w"]["erank"] == pytest.approx(effective_rank(w0[keep].numpy()), rel=1e-9)
    assert m["init_w"]["erank"] != m["w"]["erank"]
    weights = f"{run}/step-{saved['steps']}/model.safetensors"
    before = open(weights, "rb").read()
    train_point(path, name)  # finished: trains nothing
    assert open(weights, "rb").read() == before
    first = open(f"{out}/measures.json", "rb").read()
    measure_point(path, name)  # measures again identically, in a process of its own or not
    # byte for byte (no wall-clock time in the file): nothing downstream reruns for a re-measure
    assert open(f"{out}/measures.json", "rb").read() == first
    for stage in (train_point, measure_point):
        with pytest.raises(KeyError, match="not a point"):
            stage(path, "S-b4-wd0-lr0.003-f0.1-s0")


@pytest.mark.slow
def test_local_executor_runs_the_points_like_the_stage(tiny_params, tmp_path):
    from geolib.experiments.sweep_submit import submit

    path, sweep = tiny_params
    jobs = submit(path, executor="local", folder=tmp_path / "jobs" / "%j", timeout_min=10)
    results = [j.result() for j in jobs]
    assert sorted(r["name"] for r in results) == sorted(sweep["points"])
    for name in sweep["points"]:
        assert (tmp_path / "measures" / name / "measures.json").is_file()
