"""geolib.theory.gradients (A3): autograd gradients against their closed forms."""

import numpy as np
import pytest

from geolib.theory import gradients as th

T = np.logspace(-3, -0.5, 11)


def _inside(fit, target, tol):
    """The whole confidence interval of ``fit`` lies in target ± tol."""
    return target - tol <= fit.ci_low and fit.ci_high <= target + tol


@pytest.mark.parametrize("loss", ["mse", "cross_entropy"])
@pytest.mark.parametrize("readout", ["random", "trained"])
def test_gradient_ratios_equal_their_closed_forms(loss, readout):
    g = th.gradient_scaling(0.8, T, loss=loss, readout=readout, train_steps=50, seed=3)
    np.testing.assert_allclose(g.weight_ratio, np.tan(0.8 * T / 2), rtol=1e-10)
    np.testing.assert_allclose(g.rep_ratio, g.rep_ratio_theory, rtol=1e-8)
    assert _inside(g.fit_weight, 1.0, 0.02)


def test_representation_gradient_slope_depends_on_the_readout():
    generic = th.gradient_scaling(1.0, T, readout="random", seed=0)
    assert abs(generic.readout_angle) > 0.1
    assert abs(generic.fit_rep.slope) < 0.2  # → |tan φ| as t → 0: no O(t) suppression
    aligned = th.gradient_scaling(1.0, T, readout="trained", init_scale=1e-6, seed=0)
    assert abs(aligned.readout_angle) < 1e-5
    assert _inside(aligned.fit_rep, 1.0, 0.05)  # tangent-aligned readout: tan(κt)
    np.testing.assert_array_equal(generic.readout_init, generic.readout_final)


def test_readout_retention_matches_training():
    for s in [0.05, 0.2]:
        g = th.gradient_scaling(1.0, T, readout="trained", train_scale=s, train_steps=400, seed=1)
        _, normal = th.readout_retention(1.0, s, lr=0.5, steps=400)
        assert g.readout_final[1] / g.readout_init[1] == pytest.approx(normal, abs=0.03)
    assert th.readout_retention(1.0, 0.1, lr=0.5, steps=0) == (1.0, 1.0)
    tangent, normal = th.readout_retention(1.0, 0.1, lr=0.5, steps=100, weight_decay=0.1)
    assert tangent < normal < 1.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kappa": 0.0}, "kappa"),
        ({"t": [0.0, 0.1, 0.2]}, "strictly positive"),
        ({"t": [0.1, 0.2]}, "at least 3"),
        ({"loss": "hinge"}, "loss"),
        ({"readout": "frozen"}, "readout"),
        ({"readout": "trained", "lr": -1.0}, "lr"),
        ({"init_scale": 0.0}, "init_scale"),
    ],
)
def test_gradient_scaling_bad_inputs(kwargs, match):
    args = {"kappa": 1.0, "t": T} | kwargs
    with pytest.raises(ValueError, match=match):
        th.gradient_scaling(**args)
