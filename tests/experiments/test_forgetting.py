"""geolib.experiments.forgetting: the domain split, paired changes, and fine-tuning that never
touches the source run."""

from __future__ import annotations

import numpy as np
import pytest

from geolib.experiments import forgetting as fg
from tests.models.test_checkpoints import V
from tests.tiny import tiny_corpus, train_tiny, tree_hashes


def test_split_domain_is_disjoint_and_ordered():
    t = np.arange(100)
    tune, held = fg.split_domain(t, 0.8)
    assert tune.tolist() == list(range(80)) and held.tolist() == list(range(80, 100))
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="tune_fraction"):
            fg.split_domain(t, bad)


def test_paired_change_removes_window_difficulty():
    rng = np.random.default_rng(0)
    difficulty = rng.normal(5.0, 2.0, 200)  # windows differ a lot ...
    before = difficulty + rng.normal(0, 0.01, 200)
    after = difficulty + 0.1 + rng.normal(0, 0.01, 200)  # ... but every one rises by 0.1
    c = fg.paired_change(before, after, n_boot=300, level=0.95, seed=0)
    assert c.value == pytest.approx(0.1, abs=0.005)
    assert c.low > 0.09 and c.high < 0.11  # an unpaired interval would be ~±0.4


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("fg")
    tok = tiny_corpus(root, train=(V, 6000), domain=(20, 4000))  # domain: another distribution
    train_tiny(
        root / "runs" / "point",
        tokenizer=tok,
        train_tokens=root / "train.npy",
        family="olmo",
        n_layers=1,
        total_steps=20,
        checkpoint_every=20,
        log_max=1,
    )
    return root


def test_forget_point_learns_the_domain_and_leaves_the_run_alone(tiny_run):
    run = tiny_run / "runs" / "point"
    before = tree_hashes(run)
    p = {
        "device": "cpu",
        "domain": str(tiny_run / "domain.npy"),
        "tune_fraction": 0.8,
        "id_tokens": str(tiny_run / "train.npy"),
        "token_budget": 4096,
        "batch_size": 8,
        "seq_len": 16,
        "lr": 3e-3,
        "n_eval_seqs": 32,
        "n_boot": 200,
        "ci_level": 0.9,
    }
    row, windows = fg.forget_point(run, p, seed=0)
    assert tree_hashes(run) == before  # fine-tuning touched no file of the source run
    assert row["tune_steps"] == 4096 // (8 * 16)
    assert row["gain"] > 0 and row["gain_ci_low"] > 0  # it learned the new domain
    assert row["domain_after"] < row["domain_before"]
    assert row["forgetting"] == pytest.approx(row["id_after"] - row["id_before"], abs=1e-9)
    assert set(windows) == {"domain_before", "domain_after", "id_before", "id_after"}
    assert all(v.shape == (32,) for v in windows.values())
    again, _ = fg.forget_point(run, p, seed=0)  # deterministic, and no timing in the row
    assert again == row


def test_fine_tune_rejects_a_budget_below_one_batch(tiny_run):
    from geolib.models.checkpoints import load

    model, _ = load(tiny_run / "runs" / "point")
    with pytest.raises(ValueError, match="less than one batch"):
        fg.fine_tune(
            model, np.arange(100), token_budget=10, batch_size=8, seq_len=16, lr=1e-3, seed=0
        )
