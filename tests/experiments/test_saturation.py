"""geolib.experiments.saturation: the design, the run configuration and checkpoint schedule, and the
degradation and rank measures on synthetic curves."""

from __future__ import annotations

import numpy as np
import pytest

from geolib.experiments import saturation as sat
from geolib.config import load_params
from geolib.models.train import checkpoint_steps

SPEC = {
    "layouts": {"parallel": True, "sequential": False},
    "widths": {"d8": {"d_model": 8, "n_heads": 2, "d_ff": 16}},
    "seeds": [0, 1],
}


def test_names_round_trip_and_listed():
    runs = sat.expand(SPEC)
    assert [r.name for r in runs] == [
        "parallel-d8-s0",
        "sequential-d8-s0",
        "parallel-d8-s1",
        "sequential-d8-s1",
    ]
    assert all(sat.Run.from_name(r.name) == r for r in runs)
    assert sat.check_names_listed({**SPEC, "names": [r.name for r in runs]})
    with pytest.raises(ValueError, match="must equal"):
        sat.check_names_listed({**SPEC, "names": ["parallel-d8-s0"]})
    with pytest.raises(ValueError, match="not a saturation run"):
        sat.Run.from_name("parallel-d8")


def test_params_design_and_configs():
    params = load_params("params.yaml")
    spec = params["saturation"]
    names = sat.check_names_listed(spec)
    cfgs = {n: sat.run_config(params, sat.Run.from_name(n)) for n in names}
    for name, cfg in cfgs.items():
        layout = sat.Run.from_name(name).layout
        assert cfg.model.family == "pythia"
        assert cfg.model.parallel_residual is spec["layouts"][layout]
    # the two layouts of one width and seed differ in the block layout only
    a, b = cfgs["parallel-d32-s0"].to_dict(), cfgs["sequential-d32-s0"].to_dict()
    diff = {k for k in a["model"] if a["model"][k] != b["model"][k]}
    assert diff == {"parallel_residual"} and {k for k in a if a[k] != b[k]} == {"model"}
    steps = checkpoint_steps(
        spec["train"]["total_steps"], spec["train"]["checkpoint_every"], spec["train"]["log_max"]
    )
    late = [s for s in steps if s >= spec["second_half_from"] * steps[-1]]
    assert steps[:3] == [0, 1, 2] and len(late) >= 5  # log-spaced early, dense late
    with pytest.raises(KeyError, match="unknown layout"):
        sat.run_config(params, sat.Run("other", "d32", 0))


def _curves(rise: float, n_ckpt=9, n_win=60, seed=0):
    rng = np.random.default_rng(seed)
    steps = np.arange(n_ckpt) * 100
    trend = 5.0 - np.minimum(steps, 600) / 300 + rise * np.maximum(steps - 600, 0) / 200
    difficulty = rng.normal(0, 1.0, n_win)

    def windows(n):
        return trend[:, None] + difficulty[None, :n] + rng.normal(0, 0.01, (n_ckpt, n))

    return steps, windows(n_win), windows(n_win)


def test_late_degradation_finds_a_late_rise_and_no_rise():
    steps, sel, ev = _curves(rise=0.1)
    best, d = sat.late_degradation(
        steps, sel, ev, from_fraction=0.5, n_boot=300, level=0.95, seed=0
    )
    assert best == 600 and d.value == pytest.approx(0.1, abs=0.01) and d.ci_low > 0.08
    steps, sel, ev = _curves(rise=0.0)
    best, d = sat.late_degradation(
        steps, sel, ev, from_fraction=0.5, n_boot=300, level=0.95, seed=0
    )
    assert d.ci_low <= 0.0 <= d.ci_high or abs(d.value) < 0.01


def test_choosing_and_measuring_on_other_windows_avoids_the_winners_curse():
    """A flat late curve with window noise: choosing the best on the same windows would make the
    final checkpoint look worse by construction; with separate windows it does not."""
    rng = np.random.default_rng(3)
    steps = np.arange(10) * 100
    flat = lambda n: 4.0 + rng.normal(0, 0.05, (10, n))  # noqa: E731
    sel, ev = flat(40), flat(40)
    _, same = sat.late_degradation(steps, ev, ev, from_fraction=0.5, n_boot=300, level=0.95, seed=0)
    _, other = sat.late_degradation(
        steps, sel, ev, from_fraction=0.5, n_boot=300, level=0.95, seed=0
    )
    assert same.value >= 0.0
    assert other.ci_low <= 0.0 <= other.ci_high


def test_rank_drop_and_bad_input():
    steps = np.array([0, 10, 20, 30])
    assert sat.rank_drop(steps, np.array([50.0, 40.0, 35.0, 20.0]), 20) == pytest.approx(15.0)
    with pytest.raises(ValueError, match="not a checkpoint"):
        sat.rank_drop(steps, np.ones(4), 15)
    with pytest.raises(ValueError, match="increasing"):
        sat.late_degradation(
            np.array([0, 2, 1]),
            np.ones((3, 4)),
            np.ones((3, 4)),
            from_fraction=0.5,
            n_boot=100,
            level=0.95,
            seed=0,
        )
    with pytest.raises(ValueError, match="one row"):
        sat.late_degradation(
            steps,
            np.ones((3, 4)),
            np.ones((4, 4)),
            from_fraction=0.5,
            n_boot=100,
            level=0.95,
            seed=0,
        )
    best, d = sat.late_degradation(
        steps,
        np.tile([4.0, 3.0, 2.0, 1.0], (4, 1)).T,
        np.tile([4.0, 3.0, 2.0, 1.0], (4, 1)).T,
        from_fraction=0.5,
        n_boot=100,
        level=0.95,
        seed=0,
    )
    assert best == 30 and d.value == 0.0  # the final checkpoint is the best: no degradation


def test_seen_windows_replay_the_training_sampler(tmp_path):
    """The replayed first batch is the one the run trained on: its loss under the step-0
    weights equals the training loss the run logged at step 1."""
    import pandas as pd
    import torch
    import torch.nn.functional as F

    from geolib.models.checkpoints import load
    from geolib.models.runs import read_run_info
    from geolib.models.train import TrainConfig
    from tests.models.test_checkpoints import V, make_tokenizer
    from tests.tiny import train_tiny

    tok = make_tokenizer(tmp_path / "tokenizer")
    np.save(tmp_path / "train.npy", np.random.default_rng(0).integers(3, V, 4000).astype(np.uint16))
    run = train_tiny(tmp_path / "run", tokenizer=tok, train_tokens=tmp_path / "train.npy")
    cfg = TrainConfig.from_params(read_run_info(run)["config"])
    tokens = np.load(tmp_path / "train.npy")
    first = sat.seen_windows(cfg, tokens, steps=1, n=cfg.batch_size)
    model, _ = load(run, 0)
    with torch.no_grad():
        w = torch.from_numpy(first)
        loss = float(F.cross_entropy(model(input_ids=w[:, :-1]).logits.transpose(1, 2), w[:, 1:]))
    logged = pd.read_csv(run / "metrics.csv").set_index("step").loc[1, "loss"]
    assert loss == pytest.approx(logged, rel=1e-5)
    later = sat.seen_windows(cfg, tokens, steps=4, n=8)
    assert later.shape == (8, cfg.seq_len + 1)
    with pytest.raises(ValueError, match="cannot take"):
        sat.seen_windows(cfg, tokens, steps=1, n=cfg.batch_size + 1)
