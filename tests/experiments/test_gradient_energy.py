"""geolib.experiments.gradient_energy: token sets, pooled statistics with the joint bootstrap, and
the whole stage on two tiny trained runs (a decoder and the encoder)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from geolib.experiments import gradient_energy as ge
from geolib.models.ladder import run_size
from geolib.models.runs import read_run_info
from tests.models.test_checkpoints import V, make_tokenizer
from tests.tiny import probe_section, run_quietly


def test_split_windows_disjoint_and_deterministic():
    tokens = np.arange(1000)
    src, ev = ge.split_windows(tokens, 10, 20, 30, seed=0)
    assert src.shape == (20, 10) and ev.shape == (30, 10)
    starts = np.concatenate([src[:, 0], ev[:, 0]])
    assert len(set(starts)) == 50 and np.all(starts % 10 == 0)  # whole, distinct windows
    np.testing.assert_array_equal(src[:, 1:] - src[:, :-1], 1)  # contiguous
    again = ge.split_windows(tokens, 10, 20, 30, seed=0)
    np.testing.assert_array_equal(again[0], src)
    with pytest.raises(ValueError, match="hold 100 windows"):
        ge.split_windows(tokens, 10, 60, 41, seed=0)
    with pytest.raises(ValueError, match="length"):
        ge.split_windows(tokens, 0, 1, 1, seed=0)


def test_model_batch_decoder_and_encoder():
    w = np.arange(2 * 9).reshape(2, 9) + 3
    x, y = ge.model_batch(
        w, True, mask_token_id=None, vocab_size=40, special_ids=(), mask_prob=0.15, seed=0
    )
    np.testing.assert_array_equal(x, w[:, :-1])
    np.testing.assert_array_equal(y, w[:, 1:])
    x, y = ge.model_batch(
        w, False, mask_token_id=2, vocab_size=40, special_ids=(0, 1, 2), mask_prob=0.5, seed=0
    )
    assert x.shape == (2, 8)
    masked = y != -100
    assert masked.any() and np.all(y[masked] == w[:, :-1][masked])
    with pytest.raises(ValueError, match="mask token"):
        ge.model_batch(
            w, False, mask_token_id=None, vocab_size=40, special_ids=(), mask_prob=0.5, seed=0
        )


def test_unigram_entropy():
    assert ge.unigram_entropy(np.array([0, 1, 2, 3] * 5)) == pytest.approx(np.log(4))
    assert ge.unigram_entropy(np.array([7, 7, 7])) == pytest.approx(0.0)


def test_subspace_overlap():
    e = np.eye(6)
    assert ge.subspace_overlap(e[:, :2], e[:, :2]) == pytest.approx(1.0)
    assert ge.subspace_overlap(e[:, :2], e[:, 2:4]) == pytest.approx(0.0)
    rng = np.random.default_rng(0)
    vals = [
        ge.subspace_overlap(np.linalg.qr(rng.standard_normal((6, 2)))[0], e[:, :2])
        for _ in range(3000)
    ]
    assert np.mean(vals) == pytest.approx(2 / 6, abs=0.02)  # random baseline k/d
    with pytest.raises(ValueError, match="same shape"):
        ge.subspace_overlap(e[:, :2], e[:, :3])


def test_pooled_statistics_on_known_ratios():
    rng = np.random.default_rng(1)
    n = 80

    def unit(r):  # energies whose population ratio is r
        t = rng.gamma(4.0, r, size=(n, 1))
        c = rng.gamma(4.0, 1.0, size=(n, 10))
        return np.concatenate([t, c], axis=1)

    group = [unit(r) for r in (5.0, 10.0, 20.0)]
    w = ge.bootstrap_weights(n, 400, seed=2)
    np.testing.assert_array_equal(w.sum(axis=1), n)
    med = ge.pooled_median(group, w, 0.95)
    assert med.low < 10.0 < med.high and med.n == 3
    ratio = ge.pooled_median_ratio(group, [unit(r) for r in (1.0, 2.0, 4.0)], w, 0.95)
    assert ratio.low < 5.0 < ratio.high
    np.testing.assert_allclose(
        ge.unit_ratios(group)[0], [u[:, 0].sum() / u[:, 1:].sum(0).mean() for u in group]
    )
    with pytest.raises(ValueError, match="no units"):
        ge.unit_ratios([])


def test_stage_on_decoder_and_encoder_runs(decoder_and_encoder_runs, tmp_path):
    root = decoder_and_encoder_runs
    p = probe_section(
        root,
        tmp_path / "out",
        unigram_tokens=str(root / "train.npy"),
        n_source=12,
        frozen_sources=[2],
        n_boot=50,
        ci_level=0.9,
        key_rank=2,
        early_max=4,
        a7_source=2,
        alt_ranks=[1, 2, 8],  # 8 is not measured here: left out, not an error
        a4_v2={
            "threshold": 10.0,
            "no_effect": 1.0,
            "alternatives": {"k = 1": {"k": 1}, "v1 window": {"phase": "early"}, "k = 8": {"k": 8}},
        },
        a7_v2={"no_effect": 1.0, "alternatives": {"a third": {"min_fraction": 0.34}}},
    )
    summary = run_quietly(ge, p)
    assert set(summary["a4_v2"]["alternatives"]) == {"k = 1", "v1 window"}  # k = 8: not measured
    assert summary["a7_v2"]["alternatives"]["a third"] == summary["a7_v2"]["primary"]
    assert set(summary["a6_by_rank"]) == {"1"}  # the key rank is the primary
    table = pd.read_csv(tmp_path / "out" / "r_energy.csv")
    steps = [0, 1, 2, 4, 8]
    # every run x step x layer (embed + 2 blocks) x k, refit; plus frozen step-2 after step 2
    n_refit = 2 * len(steps) * 3 * 2
    n_frozen = 2 * 2 * 3 * 2  # steps 4 and 8
    assert len(table) == n_refit + n_frozen
    assert set(table["source"]) == {"refit", "step-2"}
    assert (table["ci_low"] <= table["r_energy"]).all() and (
        table["r_energy"] <= table["ci_high"]
    ).all()
    assert (table["fraction_of_ceiling"] <= 1.0 + 1e-9).all()  # no subspace beats G's own top-k
    assert (table["p_value"] >= 1 / 6 - 1e-12).all()
    losses = pd.read_csv(tmp_path / "out" / "losses.csv")
    assert len(losses) == 2 * len(steps) and losses["unigram_entropy"].nunique() == 1
    ck = pd.read_csv(tmp_path / "out" / "checkpoints.csv")
    assert ck["weights_sha256"].nunique() == len(ck)  # every step changed the weights
    overlap = pd.read_csv(tmp_path / "out" / "overlap.csv")
    assert ((overlap["overlap"] >= 0) & (overlap["overlap"] <= 1 + 1e-9)).all()
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert saved["a4"]["low"] <= saved["a4"]["value"] <= saved["a4"]["high"]
    assert saved["a6"]["n_units"] > 0 and saved["a7"]["n_units"] == 2  # pythia, 2 blocks
    assert summary["key_rank"] == 2
    # each model's own counts: the same rule on its rows alone, with its seed and size
    per_model = pd.read_csv(tmp_path / "out" / "per_model.csv")
    assert per_model["run"].tolist() == p["runs"]
    for _, row in per_model.iterrows():
        alone = ge.rule_v2_counts(
            table[table["run"] == row["run"]], losses[losses["run"] == row["run"]], p
        )
        assert row["a4_successes"] == alone["a4_v2"]["primary"]["successes"]
        assert row["a4_units"] == alone["a4_v2"]["primary"]["n_units"]
        assert row["a7_successes"] == alone["a7_v2"]["primary"]["successes"]
        assert row["a7_units"] == alone["a7_v2"]["primary"]["n_units"]
        size = run_size(row["run"])
        assert row["non_embedding"] == size["non_embedding"] < size["params"]
        assert row["seed"] == read_run_info(row["run"])["config"]["seed"]
    # the units of one model add up to the pooled count (the decoder's: A7 is decoders only)
    assert per_model["a7_units"].sum() == summary["a7_v2"]["primary"]["n_units"]


def test_duplicate_checkpoints_are_flagged(decoder_and_encoder_runs, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(decoder_and_encoder_runs / "pythia", run)
    from geolib.models.runs import write_manifest

    # byte-identical weights at two steps, recorded as step 4's (a run that did not move)
    shutil.copy(run / "step-2" / "model.safetensors", run / "step-4" / "model.safetensors")
    write_manifest(run / "step-4", 4)
    src, ev = ge.split_windows(np.load(decoder_and_encoder_runs / "val.npy"), 17, 6, 6, seed=0)
    res = ge.analyse_run(
        str(run),
        [2, 4],
        src,
        ev,
        ranks=[1],
        n_controls=3,
        frozen_sources=[],
        batch_size=3,
        mask_prob=0.15,
        seed=0,
        n_boot=20,
        level=0.9,
        log=lambda *_: None,
    )
    assert [c["duplicate_of"] for c in res.checkpoints] == [None, 2]


def test_checkpoints_of_errors(tmp_path):
    with pytest.raises(ValueError, match="revisions"):
        ge.run_checkpoints("org/model", None)
    assert ge.run_checkpoints("org/model", ["step0", "step9"]) == ["step0", "step9"]


def test_training_mask_prob(decoder_and_encoder_runs):
    assert ge.training_mask_prob(str(decoder_and_encoder_runs / "bert"), None) == 0.3
    assert ge.training_mask_prob(str(decoder_and_encoder_runs / "bert"), 0.2) == 0.2
    assert ge.training_mask_prob("org/model", None) == 0.15


def test_hub_revisions_offline_with_a_duplicate(tmp_path, monkeypatch):
    """The paper-scale path: a hub id at revisions, read from a hand-built offline HF cache;
    two revisions with byte-identical weights (as Pythia's step0 and step1) are flagged."""
    from geolib.models.families import ModelConfig, build_model, quiet_progress
    from tests.models.test_checkpoints import make_hub_cache

    cfg = ModelConfig(family="pythia", d_model=16, n_layers=2, n_heads=2, d_ff=32, context=16)
    revs = {}
    for rev, seed in (("step0", 1), ("step1", 1), ("step4", 2)):
        folder = tmp_path / "src" / rev
        with quiet_progress():
            build_model(cfg, V, seed=seed).save_pretrained(folder)
        make_tokenizer(folder)
        revs[rev] = folder
    make_hub_cache(tmp_path / "hub", "testorg/tiny", revs)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    tokens = np.random.default_rng(0).integers(3, V, 2000)
    src, ev = ge.split_windows(tokens, 17, 6, 6, seed=0)
    ckpts = ge.run_checkpoints("testorg/tiny", ["step0", "step1", "step4"])
    res = ge.analyse_run(
        "testorg/tiny",
        ckpts,
        src,
        ev,
        ranks=[1, 2],
        n_controls=3,
        frozen_sources=[1],
        batch_size=3,
        mask_prob=None,
        seed=0,
        n_boot=20,
        level=0.9,
        log=lambda *_: None,
    )
    assert [c["step"] for c in res.checkpoints] == [0, 1, 4]
    assert [c["duplicate_of"] for c in res.checkpoints] == [None, 0, None]
    assert {row["source"] for row in res.rows if row["step"] == 4} == {"refit", "step-1"}
    assert all(row["duplicate_of"] == 0 for row in res.rows if row["step"] == 1)
