import math

import numpy as np
import pytest
from scipy import stats

from geolib.measure import stats as stats_module
from geolib.measure.stats import fit_loglog, mean_ci, proportion_ci, t_quantile


def test_mean_ci_matches_scipy_interval():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    est = mean_ci(x, level=0.9)
    low, high = stats.t.interval(0.9, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert (est.value, est.low, est.high) == pytest.approx((3.5, low, high))
    assert est.half_width == pytest.approx((high - low) / 2)


def test_mean_ci_coverage():
    """About 95% of intervals from N(0,1) samples of size 10 contain 0."""
    rng = np.random.default_rng(0)
    hits = []
    for _ in range(2000):
        est = mean_ci(rng.standard_normal(10))
        hits.append(est.low <= 0.0 <= est.high)
    assert np.mean(hits) == pytest.approx(0.95, abs=0.015)


@pytest.mark.parametrize("bad", [[1.0], [1.0, np.nan], []])
def test_mean_ci_bad_input(bad):
    with pytest.raises(ValueError):
        mean_ci(bad)


# ------------------------------------------------------------------------------------------
# t quantile, log–log slopes, proportions
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "dof", "expected"),
    [(0.95, 1, 12.7062047), (0.95, 10, 2.2281389), (0.99, 5, 4.0321430), (0.9, 30, 1.6972609)],
)
def test_t_quantile_table_values(level, dof, expected):
    assert t_quantile(level, dof) == pytest.approx(expected, rel=1e-7)


def test_t_quantile_tends_to_normal():
    assert t_quantile(0.95, 10**7) == pytest.approx(1.959964, rel=1e-6)


@pytest.mark.parametrize(
    ("level", "dof"), [(1.0, 5), (0.0, 5), (0.95, 0), (0.95, 2.5), (0.95, True)]
)
def test_t_quantile_bad_input(level, dof):
    with pytest.raises(ValueError):
        t_quantile(level, dof)


def test_fit_loglog_exact_power_law():
    x = np.logspace(-2, 2, 9)
    fit = fit_loglog(x, 3.0 * x**-1.5)
    assert fit.slope == pytest.approx(-1.5, abs=1e-12)
    assert math.exp(fit.intercept) == pytest.approx(3.0, rel=1e-12)
    assert fit.stderr == pytest.approx(0.0, abs=1e-12)
    assert fit.r_squared == pytest.approx(1.0)
    assert fit.n_points == 9
    np.testing.assert_allclose(fit.predict(x), 3.0 * x**-1.5, rtol=1e-10)


def test_fit_loglog_ci_matches_scipy_linregress():
    rng = np.random.default_rng(0)
    x = np.logspace(0, 3, 40)
    y = x**2 * np.exp(rng.normal(0, 0.3, size=x.size))
    fit = fit_loglog(x, y, level=0.9)
    ref = stats.linregress(np.log(x), np.log(y))
    q = stats.t.ppf(0.95, x.size - 2)
    assert fit.slope == pytest.approx(ref.slope, rel=1e-12)
    assert fit.stderr == pytest.approx(ref.stderr, rel=1e-10)
    assert fit.ci_low == pytest.approx(ref.slope - q * ref.stderr, rel=1e-10)
    assert fit.contains(2.0) and not fit.contains(2.5)
    assert fit.label() == f"slope {fit.slope:.2f} [{fit.ci_low:.2f}, {fit.ci_high:.2f}] (90% CI)"


@pytest.mark.parametrize(
    ("x", "y", "match"),
    [
        ([1, 2], [1, 2], "at least 3"),
        ([1, 2, 3], [1, 2, 3, 4], "same length"),
        ([1, 2, -3], [1, 2, 3], "strictly positive"),
        ([1, 2, 3], [1, 0, 3], "strictly positive"),
        ([1, 2, np.nan], [1, 2, 3], "non-finite"),
        ([2, 2, 2], [1, 2, 3], "distinct"),
        ([[1, 2, 3]], [[1, 2, 3]], "one-dimensional"),
    ],
)
def test_fit_loglog_bad_inputs(x, y, match):
    with pytest.raises(ValueError, match=match):
        fit_loglog(x, y)


def test_proportion_ci_matches_beta_quantiles_and_edges():
    p = proportion_ci(36, 40)
    assert p.fraction == 0.9
    assert p.low == pytest.approx(stats.beta.ppf(0.025, 36, 5))
    assert p.high == pytest.approx(stats.beta.ppf(0.975, 37, 4))
    assert p.low < 0.95 < p.high  # 36 of 40 cannot tell 90% coverage from 95%
    assert proportion_ci(0, 10).low == 0.0 and proportion_ci(10, 10).high == 1.0


@pytest.mark.parametrize(("k", "n"), [(-1, 10), (11, 10), (1, 0), (1.5, 10)])
def test_proportion_ci_bad_input(k, n):
    with pytest.raises(ValueError):
        proportion_ci(k, n)


def test_zipf_fit_recovers_a_power_law_and_bootstrap_brackets_it():
    ranks = np.arange(1, 1001)
    counts = np.round(1e6 * ranks**-1.0).astype(np.int64)
    fit = stats_module.zipf_fit(counts, rank_min=1, rank_max=500)
    assert fit["slope"] == pytest.approx(-1.0, abs=0.01) and fit["r2"] > 0.999
    rng = np.random.default_rng(0)
    p = ranks**-1.1 / (ranks**-1.1).sum()
    docs = np.stack([rng.multinomial(20000, p) for _ in range(30)])
    boot = stats_module.zipf_bootstrap(docs, n_boot=50, seed=0, rank_min=1, rank_max=100)
    assert boot["ci_low"] <= boot["slope"] <= boot["ci_high"]
    assert boot["ci_low"] < -1.1 < boot["ci_high"]
    pct = stats_module.zipf_bootstrap(
        docs, n_boot=50, seed=0, rank_min=1, rank_max=100, method="percentile"
    )
    assert pct["ci_high"] - pct["ci_low"] == pytest.approx(boot["ci_high"] - boot["ci_low"])
    assert boot == stats_module.zipf_bootstrap(docs, n_boot=50, seed=0, rank_min=1, rank_max=100)
    with pytest.raises(ValueError, match="method"):
        stats_module.zipf_bootstrap(docs, method="bca")
    with pytest.raises(ValueError, match="ranks"):
        stats_module.zipf_fit(np.array([5, 0, 0]))
    with pytest.raises(ValueError, match="documents"):
        stats_module.zipf_bootstrap(np.ones((1, 5)))


# ------------------------------------------------------------------------------------------
# association over models
# ------------------------------------------------------------------------------------------


def test_spearman_against_scipy_and_invariances():
    from geolib.measure.stats import spearman

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=40), rng.normal(size=40)
    y = x + 0.5 * y
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert spearman(x, np.exp(x)) == pytest.approx(1.0)  # any increasing transform
    assert spearman(x, -(x**3)) == pytest.approx(-1.0)
    ties = [1, 1, 2, 3, 3, 3]
    assert spearman(ties, [1, 2, 3, 4, 5, 6]) == pytest.approx(
        stats.spearmanr(ties, [1, 2, 3, 4, 5, 6]).statistic, abs=1e-12
    )


def test_r_squared_is_the_ols_share_of_variance():
    from geolib.measure.stats import r_squared

    rng = np.random.default_rng(1)
    x = rng.normal(size=50)
    y = 2 - 3 * x + rng.normal(size=50)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    expected = 1 - resid @ resid / ((y - y.mean()) @ (y - y.mean()))
    assert r_squared(x, y) == pytest.approx(expected, rel=1e-12)
    assert r_squared(x, 5 * x + 1) == pytest.approx(1.0)


def test_partial_spearman_matches_the_closed_form_on_ranks():
    """r_xy·z = (r_xy − r_xz r_yz) / √((1 − r_xz²)(1 − r_yz²)) on the ranks."""
    from geolib.measure.stats import partial_spearman

    rng = np.random.default_rng(2)
    z = rng.normal(size=60)
    x, y = z + rng.normal(size=60), z + rng.normal(size=60) + 0.3 * rng.normal(size=60)
    rx, ry, rz = (stats.rankdata(v) for v in (x, y, z))
    r = lambda a, b: np.corrcoef(a, b)[0, 1]  # noqa: E731
    expected = (r(rx, ry) - r(rx, rz) * r(ry, rz)) / np.sqrt(
        (1 - r(rx, rz) ** 2) * (1 - r(ry, rz) ** 2)
    )
    assert partial_spearman(x, y, z) == pytest.approx(expected, rel=1e-10)


def test_a_noisy_copy_of_loss_adds_nothing_beyond_loss():
    """Geometry that is loss plus noise predicts OOD loss (which follows ID loss) marginally,
    but its partial correlation given ID loss is ≈ 0; a real extra signal is not ≈ 0."""
    from geolib.measure.stats import interval, partial_spearman, spearman

    rng = np.random.default_rng(3)
    n = 400
    loss = rng.normal(size=n)
    ood = loss + 0.3 * rng.normal(size=n)
    geometry = loss + 0.5 * rng.normal(size=n)
    assert spearman(geometry, ood) > 0.7
    partial = interval(partial_spearman, geometry, ood, loss, n_boot=300, seed=0)
    assert partial.low < 0 < partial.high and partial.half_width < 0.15
    extra = rng.normal(size=n)
    ood2 = loss + extra
    informative = interval(
        partial_spearman, extra + 0.2 * rng.normal(size=n), ood2, loss, n_boot=300, seed=0
    )
    assert informative.low > 0.5


def test_bootstrap_interval_covers_a_known_correlation_at_about_its_level():
    from geolib.measure.stats import interval, spearman

    rho = 0.6  # Spearman's rho of a bivariate normal with Pearson correlation r
    r = 2 * np.sin(np.pi * rho / 6)
    cov = [[1, r], [r, 1]]
    hits = 0
    for seed in range(60):
        xy = np.random.default_rng(100 + seed).multivariate_normal([0, 0], cov, size=80)
        a = interval(spearman, xy[:, 0], xy[:, 1], n_boot=300, seed=seed)
        assert a.low <= a.value <= a.high and a.n == 80 and a.n_boot == 300
        hits += a.low <= rho <= a.high
    assert 48 <= hits <= 60  # nominal 95% of 60 = 57; percentile intervals run a bit short


def test_association_bad_input():
    from geolib.measure.stats import interval, partial_spearman, spearman

    with pytest.raises(ValueError, match="differ in length"):
        spearman([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least 3"):
        spearman([1, 2], [1, 2])
    with pytest.raises(ValueError, match="NaN"):
        partial_spearman([1, 2, 3, np.nan], [1, 2, 3, 4], [1, 2, 3, 4])
    with pytest.raises(ValueError, match="n_boot"):
        interval(spearman, [1, 2, 3, 4], [1, 2, 3, 4], n_boot=10)
    with pytest.raises(ValueError, match="undefined"):
        interval(spearman, [1, 1, 1, 2], [1, 2, 3, 4], n_boot=200, seed=0)


def test_mean_ci_refuses_two_dimensional_input():
    from geolib.measure.stats import mean_ci

    with pytest.raises(ValueError, match="one-dimensional"):
        mean_ci(np.ones((3, 2)))


def test_interval_of_a_mean_is_students_t_for_few_units_and_bca_for_many():
    from geolib.measure.stats import SMALL_N, interval, mean_ci

    few = np.array([1.0, 2.0, 4.0, 7.0])
    got = interval(None, few, unit="seed")
    ref = mean_ci(few)
    assert (got.method, got.unit, got.n) == ("t", "seed", 4)
    assert (got.low, got.high) == pytest.approx((ref.low, ref.high))
    many = np.random.default_rng(0).exponential(size=SMALL_N + 30)
    got = interval(None, many, n_boot=999, seed=1)
    ref = stats.bootstrap(
        (many,), np.mean, n_resamples=999, method="BCa", rng=np.random.default_rng(1)
    ).confidence_interval
    assert got.method == "bca" and got.value == pytest.approx(many.mean())
    assert (got.low, got.high) == pytest.approx((ref.low, ref.high), rel=1e-9)


def test_an_interval_that_excludes_its_estimate_is_kept_as_drawn():
    """R² of two exactly uncorrelated samples is 0 and every resample's R² is above it, so a
    percentile interval [q2.5, q97.5] excludes the estimate; the interval function keeps it as
    drawn and says so (never widened)."""
    from geolib.measure.stats import Interval, interval, r_squared

    rng = np.random.default_rng(5)
    x, y = rng.normal(size=40), rng.normal(size=40)
    xc = x - x.mean()
    y = y - xc * (xc @ y) / (xc @ xc)  # sample correlation exactly 0
    est = r_squared(x, y)
    draws = []
    for _ in range(2000):
        i = rng.integers(0, 40, 40)
        draws.append(r_squared(x[i], y[i]))
    assert np.quantile(draws, 0.025) > est  # the percentile interval would exclude it
    got = interval(r_squared, x, y, n_boot=2000, seed=0)
    assert got.value == pytest.approx(est, abs=1e-12)
    # kept as drawn: the interval excludes its estimate and says so, never widened to it
    assert got.method in ("bca", "percentile") and got.excludes_estimate and got.low > got.value
    assert Interval(1.0, 2.0, 3.0, 0.95, 5).excludes_estimate
    assert not Interval(2.0, 1.0, 3.0, 0.95, 5).excludes_estimate
    with pytest.raises(ValueError, match="ordered"):
        Interval(1.0, 3.0, 2.0, 0.95, 5)


def test_interval_falls_back_to_percentile_where_bca_is_undefined():
    from geolib.measure.stats import interval

    # a median of mostly tied values: the jackknife has no spread, BCa is undefined
    x = np.array([0.0] * 30 + [1.0])
    got = interval(np.median, x, n_boot=500, seed=0)
    assert got.method.startswith("percentile") and got.low <= 0.0 <= got.high


def test_within_group_r_squared_sees_through_simpsons_paradox():
    """Two sizes: within each, y falls with x (r = -1); between them, the size that has the
    larger x also has the larger y. Pooled R² is small, within-size R² is 1."""
    from geolib.measure.stats import r_squared, within_groups

    x = np.array([1.0, 2, 3, 4, 11, 12, 13, 14])
    y = np.array([4.0, 3, 2, 1, 14, 13, 12, 11])
    g = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    assert r_squared(x, y) > 0.7  # dominated by the size step
    assert r_squared(x, y, g) == pytest.approx(1.0)
    np.testing.assert_allclose(within_groups(x, g), [-1.5, -0.5, 0.5, 1.5] * 2)
    rng = np.random.default_rng(0)
    y2 = y + np.where(g == 1, 0.0, 100.0)  # shifting a group's level changes nothing within
    assert r_squared(x, y2, g) == pytest.approx(r_squared(x, y, g))
    noise = rng.normal(size=8)
    assert r_squared(x, noise, g) == pytest.approx(
        np.corrcoef(within_groups(x, g), within_groups(noise, g))[0, 1] ** 2
    )


def test_partial_spearman_within_holds_the_groups_fixed():
    from geolib.measure.stats import partial_spearman, partial_spearman_within

    rng = np.random.default_rng(4)
    n = 300
    g = rng.integers(0, 2, n).astype(float)
    loss = rng.normal(size=n)
    x = 3 * g + rng.normal(size=n)  # geometry that differs by size only
    y = loss + 3 * g + 0.3 * rng.normal(size=n)  # an outcome that follows loss and size
    assert partial_spearman(x, y, loss) > 0.5  # size leaks through
    assert abs(partial_spearman_within(x, y, loss, g)) < 0.15
    # one group: no indicator to add, an error rather than a silent pooled answer
    with pytest.raises(ValueError, match="two groups"):
        partial_spearman_within(x, y, loss, np.zeros(n))


@pytest.mark.parametrize("n", [1, 2, 7, 37, 64])
def test_bootstrap_weights_are_the_draws_of_a_loop_of_resamples(n):
    """One draw of all indices is the same stream as one draw per resample (the loop it
    replaced): the same seed gives the same resamples."""
    rng = np.random.default_rng(5)
    loop = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(50)])
    w = stats_module.bootstrap_weights(n, 50, seed=5)
    np.testing.assert_array_equal(w, loop)
    assert w.dtype == np.float64 and np.all(w.sum(axis=1) == n)
    with pytest.raises(ValueError, match="n_sequences"):
        stats_module.bootstrap_weights(0, 10, seed=0)


def test_statistics_along_an_axis_equal_the_one_sample_ones():
    rng = np.random.default_rng(2)
    x = np.exp(rng.normal(size=(6, 40)))
    y = x**-0.5 * np.exp(rng.normal(scale=0.3, size=(6, 40)))
    y[2, :5] = y[2, 0]  # ties
    for i in range(6):
        assert stats_module.spearman_along(x, y)[i] == pytest.approx(
            stats_module.spearman(x[i], y[i])
        )
        assert stats_module.loglog_slope_along(x, y)[i] == pytest.approx(
            stats_module.fit_loglog(x[i], y[i]).slope
        )
        assert stats_module.pearson_along(x, y)[i] == pytest.approx(np.corrcoef(x[i], y[i])[0, 1])
    const = np.ones((2, 5))
    assert np.isnan(stats_module.spearman_along(const, x[:2, :5])).all()
    assert np.isnan(stats_module.loglog_slope_along(const, x[:2, :5])).all()


def test_a_vectorized_statistic_gives_the_interval_of_the_looped_one():
    """Same draws, same BCa interval: the vectorized route only removes the Python loop."""
    rng = np.random.default_rng(3)
    x = np.exp(rng.normal(size=300))
    y = x**-0.4 * np.exp(rng.normal(size=300))
    looped = stats_module.interval(
        lambda a, b: stats_module.fit_loglog(a, b).slope, x, y, n_boot=300, seed=1
    )
    vec = stats_module.interval(
        stats_module.loglog_slope_along, x, y, n_boot=300, seed=1, vectorized=True
    )
    assert vec.method == looped.method == "bca"
    for a, b in ((vec.value, looped.value), (vec.low, looped.low), (vec.high, looped.high)):
        assert a == pytest.approx(b, rel=1e-9)
    looped = stats_module.interval(stats_module.spearman, x, y, n_boot=300, seed=1)
    vec = stats_module.interval(
        stats_module.spearman_along, x, y, n_boot=300, seed=1, vectorized=True
    )
    assert (vec.low, vec.high) == pytest.approx((looped.low, looped.high), rel=1e-9)


def test_zipf_bootstrap_resamples_documents_as_a_loop_of_draws_would():
    """The one bootstrap (bootstrap_weights) gives the slopes a loop of per-resample draws
    from the same seed gives."""
    rng = np.random.default_rng(3)
    docs = rng.poisson(rng.zipf(1.5, 300) % 40 + 0.5, (60, 300))
    got = stats_module.zipf_bootstrap(docs, n_boot=40, seed=7, rank_min=1, rank_max=200)
    draw, slopes = np.random.default_rng(7), []
    for _ in range(40):
        w = np.bincount(draw.integers(0, 60, 60), minlength=60)
        slopes.append(stats_module.zipf_fit(w @ docs, 1, 200)["slope"])
    assert got["boot_mean"] == float(np.mean(slopes))
    assert got["boot_sd"] == float(np.std(slopes, ddof=1))


def test_share_over_models_is_bounded_and_matches_its_closed_form():
    """Logit scale, t over models: the closed form by hand; bounded in (0, 1) where a t interval
    on the raw shares leaves it; agreeing models get the counts' own sampling error, not zero."""
    from geolib.measure.stats import share_over_models, t_quantile

    k, n = np.array([2, 3, 9]), np.array([10, 10, 10])
    lg = np.log((k + 0.5) / (n - k + 0.5))
    half = t_quantile(0.95, 2) * lg.std(ddof=1) / np.sqrt(3)
    got = share_over_models(k, n)
    expit = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    assert got.method == "logit-t" and got.n == 3 and got.unit == "model"
    assert got.value == pytest.approx(expit(lg.mean()))
    assert (got.low, got.high) == pytest.approx((expit(lg.mean() - half), expit(lg.mean() + half)))
    assert 0 < got.low < got.value < got.high < 1
    same = share_over_models([24, 24, 24], [24, 24, 24])
    v = 1 / 24.5 + 1 / 0.5
    assert same.method == "logit-z" and same.high < 1 and same.low < same.value
    assert same.high - same.low > 0
    assert np.log(same.value / (1 - same.value)) - np.log(same.low / (1 - same.low)) == (
        pytest.approx(1.959964 * np.sqrt(v / 3), rel=1e-5)
    )
    one = share_over_models([5], [8])
    assert one.method == "logit-z" and one.low < 5.5 / 9 < one.high
    for bad in (([3], [2]), ([1, 2], [3]), ([1], [0]), ([0.5], [2]), ([], [])):
        with pytest.raises(ValueError):
            share_over_models(*bad)


def test_a_raw_t_interval_over_three_shares_leaves_the_unit_interval_and_the_share_one_does_not():
    """The case that made shares need their own interval: A1's per-seed shares 0.194
    [−0.236, 0.625] with a t interval over 3 seeds."""
    from geolib.measure.stats import share_over_models

    k, n = np.array([0, 0, 7]), np.array([12, 12, 12])
    raw = mean_ci(k / n)
    assert raw.low < 0
    got = share_over_models(k, n)
    assert 0 < got.low < got.high < 1


def test_count_excluding_counts_estimates_outside_finite_intervals():
    from geolib.measure.stats import count_excluding

    est = [1.0, 5.0, 2.0, np.nan, 0.0]
    low = [0.0, 1.0, 2.5, 0.0, np.nan]
    high = [2.0, 4.0, 3.0, 1.0, 1.0]
    assert count_excluding(est, low, high) == (2, 3)
    with pytest.raises(ValueError):
        count_excluding([1.0], [0.0, 1.0], [2.0])


def test_entropy_of_counts_in_nats():
    from geolib.measure.stats import entropy_of_counts

    assert entropy_of_counts([5, 5, 5, 5]) == pytest.approx(math.log(4))
    assert entropy_of_counts([0, 3, 0]) == 0.0  # 0 log 0 = 0
    assert entropy_of_counts([1, 3]) == pytest.approx(
        -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    )
    for bad in ([], [0, 0], [1, -1], [1, np.nan]):
        with pytest.raises(ValueError):
            entropy_of_counts(bad)
