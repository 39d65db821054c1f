"""geolib.theory.collapse (A1): Zipf counts, the SGD recursion, the variance-collapse simulation."""

import numpy as np
import pytest

from geolib.stats import fit_loglog
from geolib.theory import collapse as th


def test_zipf_counts():
    c = th.zipf_counts(500, 5000, 1.0, seed=0)
    assert c.sum() == 5000 and np.all(c >= 1) and np.all(np.diff(c) <= 0)
    np.testing.assert_array_equal(c, th.zipf_counts(500, 5000, 1.0, seed=0))
    with pytest.raises(ValueError, match="n_tokens"):
        th.zipf_counts(10, 0)
    with pytest.raises(ValueError, match="exponent"):
        th.zipf_counts(10, 10, -1.0)


def _inside(fit, target, tol):
    """The whole confidence interval of ``fit`` lies in target ± tol."""
    return target - tol <= fit.ci_low and fit.ci_high <= target + tol


def test_sgd_dispersion_theory_limits():
    n = np.arange(1, 2001)
    running_mean = th.sgd_dispersion_theory(n, lr=1.0, lr_power=1.0, noise=2.0, init_var=5.0)
    np.testing.assert_allclose(running_mean, 4.0 / n, rtol=1e-12)
    constant = th.sgd_dispersion_theory(n, lr=0.1, noise=1.0, init_var=1.0)
    assert constant[-1] == pytest.approx(0.1 / 1.9, rel=1e-9)  # floor σ²η/(2 − η)
    assert constant[0] == pytest.approx(0.81 + 0.01)
    tail = th.sgd_dispersion_theory(n, lr=0.5, lr_power=0.5, noise=1.0, init_var=1.0)
    assert fit_loglog(n[500:], tail[500:]).slope == pytest.approx(-0.5, abs=0.02)
    with pytest.raises(ValueError, match="lr"):
        th.sgd_dispersion_theory(n, lr=1.5)
    with pytest.raises(ValueError, match="integers"):
        th.sgd_dispersion_theory([1.5, 2.0], lr=0.1)


def test_variance_collapse_sample_mean_slope_and_sgd_theory():
    counts = th.zipf_counts(800, 8000, 1.0, seed=0)
    vc = th.variance_collapse(counts, dim=4, n_replicates=32, lr=0.1, seed=0)
    assert _inside(vc.fit_sample_mean, -1.0, 0.03)  # tolerance ± 0.03 at this size
    np.testing.assert_array_equal(vc.sample_mean_theory, 1.0 / counts)
    # per-type dispersion has 128 degrees of freedom: mean relative error ~ 0
    assert np.mean(vc.sample_mean / vc.sample_mean_theory) == pytest.approx(1.0, abs=0.02)
    assert np.mean(vc.sgd / vc.sgd_theory) == pytest.approx(1.0, abs=0.03)
    # constant-step SGD is not a 1/n law: slope well above −1
    assert vc.fit_sgd.ci_high < -0.3 and vc.fit_sgd.ci_low > -0.95
    again = th.variance_collapse(counts, dim=4, n_replicates=32, lr=0.1, seed=0)
    np.testing.assert_array_equal(vc.sgd, again.sgd)


def test_variance_collapse_running_mean_sgd_equals_sample_mean():
    counts = np.array([1, 2, 3, 5, 8, 13, 21])
    vc = th.variance_collapse(counts, n_replicates=8, lr=1.0, lr_power=1.0, seed=1)
    np.testing.assert_allclose(vc.sgd, vc.sample_mean, rtol=1e-10)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"counts": [0, 1, 2]}, "strictly positive"),
        ({"counts": [1.5, 2, 3]}, "integers"),
        ({"n_replicates": 1}, "n_replicates"),
        ({"lr": 1.2}, "lr"),
        ({"lr": 0.0}, "lr"),
        ({"noise": 0.0}, "noise"),
        ({"dim": 0}, "dim"),
        ({"seed": -1}, "seed"),
    ],
)
def test_variance_collapse_bad_inputs(kwargs, match):
    args = {"counts": [1, 2, 3], "n_replicates": 4} | kwargs
    with pytest.raises(ValueError, match=match):
        th.variance_collapse(**args)


# ------------------------------------------------------------------------------------------
# A3: gradient scaling


def test_sample_mean_dispersion_is_sigma2_over_n():
    counts = np.array([1, 2, 5, 50, 400])
    d = th.sample_mean_dispersion(counts, dim=8, noise=2.0, n_replicates=2000, seed=3)
    # each entry is sigma²/n · chi²_16000/16000: relative SD sqrt(2/16000) ≈ 1.1%
    np.testing.assert_allclose(d * counts / 4.0, 1.0, atol=0.05)
    again = th.sample_mean_dispersion(counts, dim=8, noise=2.0, n_replicates=2000, seed=3)
    np.testing.assert_array_equal(d, again)
    with pytest.raises(ValueError, match="integers"):
        th.sample_mean_dispersion([1.5, 2])
    with pytest.raises(ValueError, match="noise"):
        th.sample_mean_dispersion([1, 2], noise=0.0)
