"""geolib.theory.collapse (A1): Zipf counts, the SGD recursion, the variance-collapse simulation."""

import math

import numpy as np
import pytest

from geolib.measure.stats import fit_loglog
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
    running_mean = th.sgd_dispersion_theory(n, th.StepSchedule(1.0, 1.0), noise=2.0, init_var=5.0)
    np.testing.assert_allclose(running_mean, 4.0 / n, rtol=1e-12)
    constant = th.sgd_dispersion_theory(n, th.StepSchedule(0.1), noise=1.0, init_var=1.0)
    assert constant[-1] == pytest.approx(th.sgd_floor(0.1), rel=1e-9)
    assert constant[0] == pytest.approx(0.81 + 0.01)
    tail = th.sgd_dispersion_theory(n, th.StepSchedule(0.5, 0.5), noise=1.0, init_var=1.0)
    assert fit_loglog(n[500:], tail[500:]).slope == pytest.approx(-0.5, abs=0.02)
    per_type = th.sgd_dispersion_theory([1, 2], th.StepSchedule(0.5), init_var=[1.0, 2.0])
    np.testing.assert_allclose(per_type, [0.25 + 0.25, 0.0625 * 2 + 0.25 * 0.25 + 0.25])
    with pytest.raises(ValueError, match="integers"):
        th.sgd_dispersion_theory([1.5, 2.0], th.StepSchedule(0.1))
    with pytest.raises(ValueError, match="init_var"):
        th.sgd_dispersion_theory([1, 2], th.StepSchedule(0.1), init_var=-1.0)
    with pytest.raises(ValueError, match="init_var"):
        th.sgd_dispersion_theory([1, 2], th.StepSchedule(0.1), init_var=[1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    ("args", "match"), [((1.5,), "lr must be in"), ((0.0,), "lr"), ((0.1, -0.5), "lr_power")]
)
def test_step_schedule_validates(args, match):
    with pytest.raises(ValueError, match=match):
        th.StepSchedule(*args)


def test_sgd_floor():
    assert th.sgd_floor(0.1) == pytest.approx(0.1 / 1.9)
    assert th.sgd_floor(1.0, noise=3.0) == pytest.approx(9.0)  # e_n = y_n: variance σ²
    with pytest.raises(ValueError, match="lr"):
        th.sgd_floor(0.0)
    with pytest.raises(ValueError, match="noise"):
        th.sgd_floor(0.1, noise=-1.0)


def test_transient_end_known_answers():
    # constant step: a_n² = (1 − η)^(2n), σ² v_n = F (1 − (1 − η)^(2n)), F = σ²η/(2 − η), so the
    # cut a_n² · init_var <= tol · σ² v_n is (1 − η)^(2n) <= tol F / (init_var + tol F).
    lr, init_var, tol, sigma = 0.1, 2.0, 0.01, 1.5
    floor = th.sgd_floor(lr, sigma)
    expected = math.ceil(math.log(tol * floor / (init_var + tol * floor)) / (2 * math.log(1 - lr)))
    schedule = th.StepSchedule(lr)
    n_min = th.transient_end(1000, schedule, noise=sigma, init_var=init_var, tol=tol)
    assert n_min == expected
    # beyond it the initial-condition term stays below tol of the noise term, before it not
    n = np.arange(1, 1001)
    full = th.sgd_dispersion_theory(n, schedule, noise=sigma, init_var=init_var)
    noise_only = th.sgd_dispersion_theory(n, schedule, noise=sigma, init_var=0.0)
    ratio = (full - noise_only) / noise_only
    assert np.all(ratio[n >= n_min] <= tol) and ratio[n_min - 2] > tol
    # decaying step: same criterion, later; a step of 1 forgets the start at once
    assert th.transient_end(10_000, th.StepSchedule(0.5, 0.5), init_var=2.0) > 10
    assert th.transient_end(5, th.StepSchedule(1.0), init_var=100.0) == 1
    late = th.transient_end(expected - 1, schedule, noise=sigma, init_var=init_var, tol=tol)
    assert late is None
    for kwargs, match in [
        ({"tol": 0.0}, "tol"),
        ({"init_var": -1.0}, "init_var"),
        ({"noise": 0.0}, "noise"),
    ]:
        with pytest.raises(ValueError, match=match):
            th.transient_end(100, th.StepSchedule(0.1), **kwargs)
    with pytest.raises(ValueError, match="n_max"):
        th.transient_end(0, th.StepSchedule(0.1))


def test_variance_collapse_sample_mean_slope_and_sgd_plateau():
    counts = th.zipf_counts(800, 8000, 1.0, seed=0)
    vc = th.variance_collapse(counts, dim=4, n_replicates=32, lr=0.5, seed=0)
    assert _inside(vc.fit_sample_mean, -1.0, 0.03)  # tolerance ± 0.03 at this size
    np.testing.assert_array_equal(vc.sample_mean_theory, 1.0 / counts)
    # per-type dispersion has 128 degrees of freedom: mean relative error ~ 0
    assert np.mean(vc.sample_mean / vc.sample_mean_theory) == pytest.approx(1.0, abs=0.02)
    assert np.mean(vc.sgd / vc.sgd_theory) == pytest.approx(1.0, abs=0.03)
    # constant step: the tail starts where the largest initial distance is forgotten to 1%,
    # and its mean dispersion is the floor σ²η/(2 − η) = 1/3, with no slope left
    assert vc.floor == pytest.approx(1 / 3)
    assert vc.n_min is not None and 2 <= vc.n_min <= 10
    np.testing.assert_array_equal(vc.tail, counts >= vc.n_min)
    assert vc.plateau.n == vc.tail.sum() > 50
    assert vc.plateau.low <= vc.floor <= vc.plateau.high
    assert vc.plateau.high - vc.plateau.low < 0.05 * vc.floor
    assert vc.fit_tail.contains(0.0) and abs(vc.fit_tail_theory.slope) < 0.01
    # same seed, other step: identical sample-mean estimates (the occurrences are the same)
    other = th.variance_collapse(counts, dim=4, n_replicates=32, lr=0.1, seed=0)
    np.testing.assert_array_equal(vc.sample_mean, other.sample_mean)
    assert other.n_min > vc.n_min  # a smaller step forgets its start later
    again = th.variance_collapse(counts, dim=4, n_replicates=32, lr=0.5, seed=0)
    np.testing.assert_array_equal(vc.sgd, again.sgd)


def test_variance_collapse_decaying_step_tail_slope():
    counts = th.zipf_counts(2000, 20000, 1.0, seed=0)
    vc = th.variance_collapse(counts, n_replicates=32, lr=0.5, lr_power=0.5, seed=1)
    assert vc.floor is None and vc.plateau is None
    assert vc.n_min is not None and vc.tail.sum() >= 50
    # the simulation matches the exact expectation over the same counts (to sampling error) ...
    diff = vc.fit_tail.slope - vc.fit_tail_theory.slope
    assert abs(diff) < 3 * vc.fit_tail.stderr
    # ... which approaches −p from below: corrections ~ n^(−p) and n^(−(1 − p))
    assert -0.6 < vc.fit_tail_theory.slope < -0.5


def test_variance_collapse_tail_not_reached():
    counts = np.array([1, 2, 3, 5, 8])
    vc = th.variance_collapse(counts, n_replicates=4, lr=0.02, seed=0)
    assert vc.n_min is None and not vc.tail.any()
    assert vc.plateau is None and vc.fit_tail is None and vc.fit_tail_theory is None
    assert vc.floor == pytest.approx(0.02 / 1.98)


def test_variance_collapse_running_mean_sgd_equals_sample_mean():
    counts = np.array([1, 2, 3, 5, 8, 13, 21])
    vc = th.variance_collapse(counts, n_replicates=8, lr=1.0, lr_power=1.0, seed=1)
    np.testing.assert_allclose(vc.sgd, vc.sample_mean, rtol=1e-10)
    assert vc.n_min == 1 and vc.tail.all()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"counts": [0, 1, 2]}, "strictly positive"),
        ({"counts": [1.5, 2, 3]}, "integers"),
        ({"counts": [2, 2, 2]}, "distinct"),
        ({"counts": [1, 2]}, "3 types"),
        ({"n_replicates": 1}, "n_replicates"),
        ({"lr": 1.2}, "lr"),
        ({"lr": 0.0}, "lr"),
        ({"lr_power": -1.0}, "lr_power"),
        ({"noise": 0.0}, "noise"),
        ({"dim": 0}, "dim"),
        ({"transient_tol": 0.0}, "transient_tol"),
        ({"level": 1.0}, "level"),
        ({"seed": -1}, "seed"),
    ],
)
def test_variance_collapse_bad_inputs(kwargs, match):
    args = {"counts": [1, 2, 3], "n_replicates": 4} | kwargs
    with pytest.raises(ValueError, match=match):
        th.variance_collapse(**args)


# ------------------------------------------------------------------------------------------
# Coverage of the sample-mean slope interval


def test_slope_coverage_fixed_counts_reaches_nominal_level():
    counts = th.zipf_counts(300, 3000, 1.0, seed=0)
    cov = th.slope_coverage(counts, n_seeds=300, dim=2, n_replicates=8, seed=1)
    assert not cov.counts_redrawn and cov.coverage.n == 300
    np.testing.assert_array_equal(cov.n_types, counts.size)
    assert cov.coverage.successes == cov.covered.sum()
    assert cov.coverage.low <= 0.95 <= cov.coverage.high
    # the causes of a miss are absent: no bias, a standard error of the right size, independent
    # and homoscedastic residuals
    assert cov.bias.low <= 0.0 <= cov.bias.high
    assert cov.z2.low <= 1.0 <= cov.z2.high
    assert abs(cov.lag1.value) < 0.02 and abs(cov.het.value) < 0.02
    # the coverage follows the level, and a wrong target is (almost) never covered
    half = th.slope_coverage(counts, n_seeds=300, dim=2, n_replicates=8, level=0.5, seed=1)
    assert half.coverage.fraction == pytest.approx(0.5, abs=0.08)  # 3 binomial SDs
    assert half.coverage.level == 0.5
    np.testing.assert_array_equal(half.slopes, cov.slopes)  # same seed, same corpora
    wrong = th.slope_coverage(counts, n_seeds=50, dim=2, n_replicates=8, target=-0.9, seed=1)
    assert wrong.coverage.successes == 0
    assert wrong.bias.value == pytest.approx(cov.bias.value - 0.1, abs=0.01)


def test_slope_coverage_redrawn_counts():
    cov = th.slope_coverage(zipf=(300, 3000, 1.0), n_seeds=200, dim=2, n_replicates=8, seed=2)
    assert cov.counts_redrawn and np.unique(cov.n_types).size > 1
    assert cov.coverage.low <= 0.95 <= cov.coverage.high
    again = th.slope_coverage(zipf=(300, 3000, 1.0), n_seeds=200, dim=2, n_replicates=8, seed=2)
    np.testing.assert_array_equal(cov.slopes, again.slopes)


def test_lag1_autocorrelation():
    assert th._lag1(np.array([1.0, -1.0] * 50)) == pytest.approx(-0.99)  # 99 pairs of −1 / 100
    assert th._lag1(np.repeat([1.0, -1.0], 50)) == pytest.approx(0.97)  # 98 of +1, one −1


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((), {}, "exactly one"),
        (([1, 2, 3],), {"zipf": (10, 100, 1.0)}, "exactly one"),
        ((), {"zipf": (10, 100)}, "zipf"),
        ((), {"zipf": (2, 100, 1.0)}, "n_types"),
        ((), {"zipf": (10, 100, -1.0)}, "exponent"),
        (([1, 1, 1],), {}, "distinct"),
        (([1, 2, 3],), {"n_seeds": 1}, "n_seeds"),
        (([1, 2, 3],), {"target": float("nan")}, "target"),
        (([1, 2, 3],), {"noise": 0.0}, "noise"),
    ],
)
def test_slope_coverage_bad_inputs(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        th.slope_coverage(*args, **({"n_seeds": 3} | kwargs))


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
