import numpy as np
import pytest
from scipy import stats

from geolib.stats import mean_ci


def test_mean_ci_matches_scipy_interval():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    est = mean_ci(x, level=0.9)
    low, high = stats.t.interval(0.9, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert (est.mean, est.low, est.high) == pytest.approx((3.5, low, high))
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
