"""geolib.theory.gradients (A3): autograd gradients against their closed forms."""

import numpy as np
import pytest

from geolib.theory import gradients as th

T = np.logspace(-3, -0.5, 11)


@pytest.mark.parametrize("loss", ["mse", "cross_entropy"])
@pytest.mark.parametrize("readout", ["random", "trained"])
def test_gradient_ratios_equal_their_closed_forms(loss, readout):
    g = th.gradient_scaling(0.8, T, loss=loss, readout=readout, train_steps=50, seed=3)
    np.testing.assert_allclose(g.weight_ratio, np.tan(0.8 * T / 2), rtol=1e-12)
    assert g.weight_deviation < 1e-12  # an identity: round-off only
    np.testing.assert_allclose(g.rep_ratio, g.rep_ratio_theory, rtol=1e-8)
    assert g.rep_deviation < 1e-8
    assert g.rep_slope == pytest.approx(th.rep_slope_closed_form(g.readout_angle, 0.8, T), abs=1e-9)


def test_weight_ratio_local_slope_is_the_derivative_of_log_tan():
    t = np.array([1e-4, 0.01, 0.3, 1.0, 2.5])
    for kappa in (0.5, 1.0):
        slope = th.weight_ratio_local_slope(kappa, t)
        np.testing.assert_allclose(slope, kappa * t / np.sin(kappa * t), rtol=1e-14)
        h = 1e-6  # central difference of log tan(κt/2) in log t
        num = (
            np.log(np.tan(kappa * t * np.exp(h) / 2)) - np.log(np.tan(kappa * t * np.exp(-h) / 2))
        ) / (2 * h)
        np.testing.assert_allclose(slope, num, rtol=1e-8)
    assert th.weight_ratio_local_slope(1.0, 1e-8)[0] == 1.0  # → 1 as t → 0, no 0/0
    assert th.weight_ratio_local_slope(2.0, 0.05)[0] == pytest.approx(1 + 0.1**2 / 6, rel=1e-4)
    assert np.all(np.diff(th.weight_ratio_local_slope(1.0, t)) > 0)  # above 1, growing with κt


def test_rep_slope_closed_form_limits_and_period():
    small = np.logspace(-4, -2, 9)  # κt ≪ 1
    assert th.rep_slope_closed_form(0.0, 1.0, small) == pytest.approx(1.0, abs=1e-4)
    assert th.rep_slope_closed_form(np.pi / 2, 1.0, small) == pytest.approx(-1.0, abs=1e-4)
    for phi in (0.4, 1.0, -0.7):  # generic readout, |φ| ≫ κt: → |tan φ|, slope ≈ 0
        assert abs(th.rep_slope_closed_form(phi, 1.0, small)) < 0.02
    phis = np.array([[0.3, -1.2], [1.4, 0.0]])
    out = th.rep_slope_closed_form(phis, 1.0, T)
    assert out.shape == phis.shape
    np.testing.assert_allclose(out, th.rep_slope_closed_form(phis + np.pi, 1.0, T), atol=1e-9)
    assert np.isnan(th.rep_slope_closed_form(1.0 * T[4], 1.0, T))  # ratio 0 at a grid point


def test_fold_angle():
    phi = np.array([0.1, np.pi / 2, np.pi - 0.1, -np.pi / 2 - 0.2, -np.pi])
    folded = th.fold_angle(phi)
    assert np.all((folded > -np.pi / 2) & (folded <= np.pi / 2))
    np.testing.assert_allclose(np.tan(folded), np.tan(phi), atol=1e-12)
    np.testing.assert_allclose(folded[:3], [0.1, np.pi / 2, -0.1], atol=1e-12)


def test_representation_slopes_over_seeds():
    r = th.representation_slopes(1.0, T, 6, readout="random", seed=2)
    assert r.n == 6 and r.n_points == 6 * T.size and r.readout_angle.shape == (6,)
    assert r.readout_init.shape == r.readout_final.shape == (6, 2)
    assert len(set(np.round(r.readout_angle, 12))) == 6  # independent draws
    np.testing.assert_allclose(r.slope, r.slope_closed_form, atol=1e-9)
    assert r.weight_deviation < 1e-12 and r.rep_deviation < 1e-8
    again = th.representation_slopes(1.0, T, 6, readout="random", seed=2)
    np.testing.assert_array_equal(r.slope, again.slope)  # reproducible
    # a trained readout from a tiny init is tangent-aligned: φ ≈ 0, slope ≈ 1 at small κt
    small = np.logspace(-2, -1, 7)
    a = th.representation_slopes(
        1.0, small, 3, readout="trained", init_scale=1e-8, train_steps=100, seed=0
    )
    assert np.all(np.abs(a.readout_angle) < 1e-6)
    np.testing.assert_allclose(a.slope, 1.0, atol=0.01)


def test_representation_gradient_slope_depends_on_the_readout():
    generic = th.gradient_scaling(1.0, T, readout="random", seed=0)
    assert abs(generic.readout_angle) > 0.1
    assert abs(generic.rep_slope) < 0.2  # → |tan φ| as t → 0: no O(t) suppression
    aligned = th.gradient_scaling(1.0, T, readout="trained", init_scale=1e-6, seed=0)
    assert abs(aligned.readout_angle) < 1e-5
    assert aligned.rep_slope == pytest.approx(1.0, abs=0.05)  # tangent-aligned readout: tan(κt)
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


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: th.weight_ratio_local_slope(0.0, T), "kappa"),
        (lambda: th.weight_ratio_local_slope(1.0, [0.0, 0.1]), "strictly positive"),
        (lambda: th.weight_ratio_local_slope(1.0, [1.0, 3.5]), "pi"),
        (lambda: th.rep_slope_closed_form(0.3, 1.0, [0.1, 0.2]), "at least 3"),
        (lambda: th.rep_slope_closed_form(0.3, 1.0, [0.1, 0.1, 0.1]), "not all equal"),
        (lambda: th.rep_slope_closed_form(np.nan, 1.0, T), "phi"),
        (lambda: th.rep_slope_closed_form(0.3, -1.0, T), "kappa"),
        (lambda: th.representation_slopes(1.0, T, 0), "n_seeds"),
        (lambda: th.representation_slopes(1.0, T, 2, loss="hinge"), "loss"),
    ],
)
def test_closed_forms_and_seed_runs_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()
