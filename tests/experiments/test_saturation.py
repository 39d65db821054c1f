"""geolib.experiments.saturation: the degradation and rank measures on synthetic curves, the
replayed training windows, and train → measure → tables on a tiny design."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from geolib.experiments import saturation as sat
from geolib.models import designs, runs
from tests.models.test_train import V, token_files  # noqa: F401  (the synthetic corpus fixture)


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
    assert best == 600 and d.value == pytest.approx(0.1, abs=0.01) and d.low > 0.08
    steps, sel, ev = _curves(rise=0.0)
    best, d = sat.late_degradation(
        steps, sel, ev, from_fraction=0.5, n_boot=300, level=0.95, seed=0
    )
    assert d.low <= 0.0 <= d.high or abs(d.value) < 0.01


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
    assert other.low <= 0.0 <= other.high


def test_rank_drop_and_bad_input():
    steps = np.array([0, 10, 20, 30])
    assert sat.rank_drop(steps, np.array([50.0, 40.0, 35.0, 20.0]), 20) == pytest.approx(15.0)
    with pytest.raises(ValueError, match="not a checkpoint"):
        sat.rank_drop(steps, np.ones(4), 15)
    kw = dict(from_fraction=0.5, n_boot=100, level=0.95, seed=0)
    with pytest.raises(ValueError, match="increasing"):
        sat.late_degradation(np.array([0, 2, 1]), np.ones((3, 4)), np.ones((3, 4)), **kw)
    with pytest.raises(ValueError, match="one row"):
        sat.late_degradation(steps, np.ones((3, 4)), np.ones((4, 4)), **kw)
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
    from geolib.models.train_config import TrainConfig
    from tests.models.test_checkpoints import V as V_TOKENIZER
    from tests.tiny import tiny_corpus, train_tiny

    tok = tiny_corpus(tmp_path, train=(V_TOKENIZER, 4000))
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


def test_train_then_measure_then_tables_on_a_tiny_design(tmp_path, token_files):  # noqa: F811
    """The two stages of a run write their own folders (measuring leaves the run untouched and
    refuses an unfinished run); the tables read the measures folders."""
    import json

    import yaml

    from geolib.models import grid
    from tests.tiny import tiny_train_section, tree_hashes

    train_tokens, val = map(str, token_files)
    ood = tmp_path / "ood_x" / "test.npy"
    ood.parent.mkdir()
    np.save(ood, np.load(val)[::-1].copy())
    spec = {
        "run_root": str(tmp_path / "runs"),
        "measures_root": str(tmp_path / "measures"),
        "layouts": {"parallel": True, "sequential": False},
        "widths": {"d8": {"d_model": 8, "n_heads": 2, "d_ff": 16}},
        "n_layers": 1,
        "seeds": [0],
        "train": {
            "batch_size": 4,
            "seq_len": 16,
            "total_steps": 12,
            "warmup_steps": 2,
            "checkpoint_every": 4,
            "log_max": 2,
            "eval_interval": 6,
            "eval_batches": 1,
        },
        "measure": {"n_select_seqs": 4, "n_eval_seqs": 6, "n_h_seqs": 3, "ood": [str(ood)]},
        "second_half_from": 0.5,
        "n_boot": 50,
        "ci_level": 0.9,
        "out_dir": str(tmp_path / "tables"),
    }
    spec["names"] = [r.name for r in grid.saturation_runs(spec)]
    params = {
        "common": {"seed": 0, "device": "cpu"},
        "train": {**tiny_train_section(train_tokens, val), "model": {"family": "pythia"}},
        "saturation": spec,
    }
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    name = spec["names"][0]
    with pytest.raises(FileNotFoundError, match="has not finished"):
        sat.measure_run(path, name)
    for n in spec["names"]:
        assert designs.main(["saturation", "--params", str(path), "train", n]) == 0
    run = tmp_path / "runs" / name
    before = tree_hashes(run)
    with pytest.raises(SystemExit):  # the stage's command names the runs or says --all
        sat.main(["measure", "--params", str(path)])
    with pytest.raises(SystemExit):
        sat.main(["measure", name, "--all", "--params", str(path)])
    assert sat.main(["measure", "--all", "--params", str(path)]) == 0  # the stage's command
    assert sorted(p.name for p in (tmp_path / "measures").iterdir()) == sorted(spec["names"])
    assert tree_hashes(run) == before, "measuring wrote into the run folder"
    first = (tmp_path / "measures" / name / sat.CURVE).read_bytes()
    sat.measure_run(path, name)  # again: the same bytes (no wall-clock time in the file)
    assert (tmp_path / "measures" / name / sat.CURVE).read_bytes() == first
    curve = json.loads(first)["curve"]
    assert [c["step"] for c in curve][-1] == 12 and all(np.isfinite(c["erank_w"]) for c in curve)
    summary = sat.tables(path)
    assert summary["n_units"] == 1
    assert summary["point"]["n_units"] == 1 and "n_parallel_degrades" in summary
    table = pd.read_csv(tmp_path / "tables" / "runs.csv")
    trained = runs.read_run_info(run)
    row = table.set_index("name").loc[name]
    assert (row["params"], row["tokens"]) == (trained["params"], trained["tokens"])


def test_contrast_counts_pairs_where_only_the_parallel_run_degrades():
    import pandas as pd

    table = pd.DataFrame(
        {
            "layout": ["parallel", "sequential"] * 3,
            "width": ["d32", "d32", "d32", "d32", "d64", "d64"],
            "seed": [0, 0, 1, 1, 0, 0],
            "degradation": [0.05, 0.01, 0.02, 0.0, 0.03, 0.04],
            "degradation_ci_low": [0.02, -0.01, -0.01, -0.02, 0.01, 0.02],
        }
    )
    got = sat.contrast(table, ["parallel", "sequential"], "degradation_ci_low")
    assert (got["successes"], got["n_units"], got["n_parallel_degrades"]) == (1, 3, 2)
    point = sat.contrast(table, ["parallel", "sequential"], "degradation")
    assert (point["successes"], point["n_parallel_degrades"]) == (1, 3)
    flat = table.assign(degradation_ci_low=-0.1)
    assert (
        sat.contrast(flat, ["parallel", "sequential"], "degradation_ci_low")["n_parallel_degrades"]
        == 0
    )
