"""Per-model measurements of the sweep: unused rows, fixed windows, window losses, rows."""

import numpy as np
import pytest
import torch

from geolib.measure import metrics as M
from geolib.models.families import ModelConfig, build_model
from geolib.experiments.sweep_measure import (
    GEOMETRY,
    fixed_windows,
    flatten_measures,
    geometry,
    unused_rows,
    window_losses,
)


def test_unused_rows_are_the_absent_tokens():
    mask = unused_rows(np.array([0, 2, 2, 5], dtype=np.uint16), 7)
    assert mask.tolist() == [False, True, False, True, True, False, True]
    with pytest.raises(ValueError, match="exceed the vocabulary"):
        unused_rows(np.array([9]), 7)


def test_fixed_windows_are_deterministic_and_span_the_split():
    tokens = np.arange(1000, dtype=np.uint16)
    w = fixed_windows(tokens, 5, 10)
    assert w.shape == (5, 10) and w.dtype == np.int64
    assert w[0, 0] == 0 and w[-1, -1] == 999
    assert np.all(np.diff(w, axis=1) == 1)
    assert np.array_equal(w, fixed_windows(tokens, 5, 10))
    with pytest.raises(ValueError, match="fewer than one window"):
        fixed_windows(tokens[:5], 2, 10)


def test_window_losses_match_a_direct_cross_entropy():
    cfg = ModelConfig(family="olmo", d_model=16, n_layers=1, n_heads=2, d_ff=32, context=12)
    model = build_model(cfg, 50, seed=0)
    windows = np.random.default_rng(0).integers(0, 50, size=(5, 9))
    got = window_losses(model, windows, batch=2)
    with torch.no_grad():
        logits = model(input_ids=torch.from_numpy(windows[:, :-1])).logits
        logp = torch.log_softmax(logits.double(), -1)
        target = torch.from_numpy(windows[:, 1:])
        expected = -logp.gather(-1, target[..., None])[..., 0].mean(1).numpy()
    assert got.shape == (5,) and np.allclose(got, expected, atol=1e-5)


def test_geometry_of_a_known_cloud():
    x = np.random.default_rng(1).standard_normal((400, 8))
    g = geometry(x, 0.25)
    assert set(g) == set(GEOMETRY) | {"isoscore_star"}
    assert g["erank"] == pytest.approx(M.effective_rank(x))
    assert np.isnan(g["isoscore_star"]), "no larger sample, no IsoScore*"
    c0 = torch.from_numpy(np.cov(x.T))
    assert geometry(x, 0.25, c0)["isoscore_star"] == pytest.approx(M.isoscore_star(x, c0, 0.25))


def test_flatten_measures_makes_one_row():
    measures = {
        "name": "S-b8-wd0-lr0.001-f0.1-s0",
        "point": {"size": "S", "batch_size": 8},
        "steps": 512,
        "tokens": 1,
        "params": 2,
        "decay_exponent": 0.0,
        "vocab_size": 10,
        "n_unused_rows": 3,
        "w": {"erank": 5.0},
        "w_all": {"erank": 4.0},
        "h": {"erank": 3.0},
        "loss": {"id_test": {"mean": 5.0, "ci_low": 4.9, "ci_high": 5.1}},
        "timing": {"seconds": 12.0},
    }
    row = flatten_measures(measures)
    assert row["w_erank"] == 5.0 and row["w_all_erank"] == 4.0 and row["h_erank"] == 3.0
    assert row["loss_id_test"] == 5.0 and row["loss_id_test_ci_high"] == 5.1
    assert row["size"] == "S" and row["seconds"] == 12.0
