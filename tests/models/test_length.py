"""geolib.models.length: the training-length design (names, step counts at doublings,
configurations that differ only in size and seed), and the repository's declared design."""

from __future__ import annotations

from pathlib import Path

import pytest

from geolib.config import load_params
from geolib.models import length
from geolib.models.families import build_model, count_params
from geolib.models.train_config import checkpoint_steps
from tests.models.test_train import V, token_files  # noqa: F401  (the synthetic corpus fixture)
from tests.tiny import tiny_train_section

ROOT = Path(__file__).resolve().parents[2]


def spec(**kw) -> dict:
    s = {
        "run_root": "runs/length",
        "sizes": {
            "a": {"family": "olmo", "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32},
            "b": {"family": "olmo", "d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64},
        },
        "seeds": [0, 1],
        "names": ["a-s0", "a-s1", "b-s0", "b-s1"],
        "min_tokens_per_param": 3,
        "train": {"seq_len": 16, "batch_size": 4, "schedule": "constant", "warmup_steps": 2},
    }
    return {**s, **kw}


def params_for(token_files, **kw) -> dict:  # noqa: F811
    train, val = map(str, token_files)
    return {
        "common": {"seed": 0, "device": "cpu"},
        "train": {**tiny_train_section(train, val), "model": {"family": "olmo"}},
        "training_length": spec(**kw),
    }


@pytest.mark.parametrize(
    "n, per_step, tpp, steps",
    [(1000, 10, 3, 512), (1000, 10, 2.56, 256), (1000, 10, 2.57, 512), (10, 100, 1, 1)],
)
def test_steps_for_is_the_smallest_power_of_two_reaching_the_tokens(n, per_step, tpp, steps):
    got = length.steps_for(n, per_step, tpp)
    assert got == steps and got * per_step >= tpp * n
    assert got == 1 or (got // 2) * per_step < tpp * n


def test_steps_for_bad_input():
    with pytest.raises(ValueError, match="positive"):
        length.steps_for(0, 10, 1)
    with pytest.raises(ValueError, match="positive"):
        length.steps_for(10, 10, 0)


def test_names_round_trip_and_must_be_listed():
    assert [r.name for r in length.length_runs(spec())] == spec()["names"]
    assert length.LengthRun.from_name("d64-s2") == length.LengthRun("d64", 2)
    for bad in ("d64", "d64-2", "-s1", "d64-s"):
        with pytest.raises(ValueError, match="not a training-length run"):
            length.LengthRun.from_name(bad)
    with pytest.raises(ValueError, match="must equal the design"):
        length.check_names_listed(spec(names=["a-s0", "b-s0"]))


def test_configs_differ_in_size_and_seed_only_and_checkpoint_every_doubling(token_files):  # noqa: F811
    params = params_for(token_files)
    cfgs = {n: length.length_run(params, n)[0] for n in params["training_length"]["names"]}
    a0, a1 = cfgs["a-s0"].to_dict(), cfgs["a-s1"].to_dict()
    assert {k for k in a0 if a0[k] != a1[k]} == {"seed"}
    for cfg in cfgs.values():
        n = count_params(build_model(cfg.model, V, seed=0))
        assert length.n_params(cfg) == n
        assert cfg.total_steps == length.steps_for(n, 4 * 16, 3)
        assert cfg.schedule == "constant" and cfg.model.family == "olmo"
        steps = checkpoint_steps(cfg.total_steps, cfg.checkpoint_every, cfg.log_max)
        assert steps == [0] + [2**j for j in range(cfg.total_steps.bit_length())]
    assert cfgs["b-s0"].total_steps > cfgs["a-s0"].total_steps  # more parameters, more steps
    with pytest.raises(KeyError, match="not a training-length run"):
        length.length_run(params, "c-s0")


def test_the_repository_design_is_listed_and_reaches_its_tokens():
    p = load_params(ROOT / "params.yaml")
    s = p["training_length"]
    assert length.check_names_listed(s) == [f"{z}-s{k}" for z in s["sizes"] for k in s["seeds"]]
    assert len(s["seeds"]) >= 2  # the rule compares moves with the seeds' sd
    assert s["train"]["schedule"] == "constant"
    assert 0.01 <= s["train"]["weight_decay"] <= 0.1  # Paper B's range


def test_min_tokens_per_param_per_size(token_files):  # noqa: F811
    params = params_for(token_files, min_tokens_per_param={"a": 12, "b": 3})
    a = length.length_run(params, "a-s0")[0]
    b = length.length_run(params, "b-s0")[0]
    assert a.total_steps == length.steps_for(length.n_params(a), 4 * 16, 12)
    assert b.total_steps == length.steps_for(length.n_params(b), 4 * 16, 3)
    assert length.min_tokens_per_param(spec(min_tokens_per_param=5), "b") == 5.0
    with pytest.raises(ValueError, match="must name every size"):
        length.min_tokens_per_param(spec(min_tokens_per_param={"a": 3}), "a")
    with pytest.raises(ValueError, match=r"min_tokens_per_param\.b"):
        length.min_tokens_per_param(spec(min_tokens_per_param={"a": 3, "b": -1}), "b")


def test_the_smaller_width_reaches_256_tokens_per_parameter():
    """The study must reach past where the sweep's larger budget sits at the smaller size."""
    s = load_params(ROOT / "params.yaml")["training_length"]
    smaller = min(s["sizes"], key=lambda z: s["sizes"][z]["d_model"])
    assert length.min_tokens_per_param(s, smaller) >= 256
