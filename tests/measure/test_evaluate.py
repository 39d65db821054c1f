"""The one cross-entropy: per-window losses against a direct log-softmax, and the encoder's
sparse head against the full logits."""

import numpy as np
import pytest
import torch

from geolib.measure.evaluate import IGNORE_INDEX, loss_sum, window_losses
from geolib.models.families import ModelConfig, build_model
from geolib.models.train import evaluate, lm_loss_sum


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


def test_the_measured_loss_equals_the_training_objective():
    """The probes' loss (full logits) and training's (the encoder's head on masked positions
    only) are one quantity; the validation loss is their mean per target."""
    cfg = ModelConfig(family="bert", d_model=16, n_layers=1, n_heads=2, d_ff=32, context=12)
    model = build_model(cfg, 50, seed=0).eval()
    rng = np.random.default_rng(0)
    inputs = rng.integers(0, 50, size=(3, 10))
    targets = np.full_like(inputs, IGNORE_INDEX)
    targets[:, ::3] = inputs[:, ::3]
    x, y = torch.from_numpy(inputs), torch.from_numpy(targets)
    with torch.no_grad():
        sparse = lm_loss_sum(model, x, y, False)
        full = loss_sum(model, x, y, False)
    assert torch.allclose(sparse, full, atol=1e-4)
    n = int((y != IGNORE_INDEX).sum())
    assert evaluate(model, [(inputs, targets)], False, "cpu") == pytest.approx(float(full) / n)
