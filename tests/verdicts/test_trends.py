"""geolib.verdicts.trends: the trend rule with size and its table rows."""

import json

import numpy as np
import pytest

from geolib.verdicts.claims import Claim, claims_markdown, main, read_claims, write_claims


def test_trend_with_size_reads_the_slope_per_decade_and_its_t_interval():
    from scipy import stats as st

    from geolib.verdicts.trends import GROWS, NO_TREND, SHRINKS, trend_with_size

    rng = np.random.default_rng(0)
    params = np.repeat([1e5, 1e6, 1e7, 1e8], 3)  # 4 sizes x 3 seeds, 1000x span
    up = 2.0 + 0.5 * np.log10(params) + 0.05 * rng.standard_normal(params.size)
    t = trend_with_size(params, up)
    fit = st.linregress(np.log10(params), up)
    half = st.t.ppf(0.975, params.size - 2) * fit.stderr
    assert t.words == GROWS and t.slope == pytest.approx(fit.slope)
    assert (t.low, t.high) == pytest.approx((fit.slope - half, fit.slope + half))
    assert t.low <= t.slope <= t.high and t.n_models == 12 and t.n_sizes == 4
    assert trend_with_size(params, -up).words == SHRINKS
    flat = 1.0 + np.tile([0.05, -0.05, 0.0], 4)  # seed scatter, equal means: slope exactly 0
    t0 = trend_with_size(params, flat)
    assert t0.words == NO_TREND and t0.low < 0 < t0.high and t0.slope == pytest.approx(0.0)


@pytest.mark.parametrize(
    "params, why",
    [
        ([1e5, 1e6, 1e7], "3 sizes"),  # too few sizes
        ([1e5, 2e5, 4e5, 8e5], "spanning 8x"),  # too short a ladder
    ],
)
def test_trend_with_size_needs_a_long_enough_ladder(params, why):
    from geolib.verdicts.trends import NO_TREND, trend_with_size

    values = np.log10(params) * 10.0  # a perfect trend: the ladder, not the data, says no
    t = trend_with_size(params, values)
    assert t.words == NO_TREND and why in t.reason and np.isnan(t.slope)


def test_trend_with_size_refuses_bad_input():
    from geolib.verdicts.trends import trend_with_size

    with pytest.raises(ValueError, match="positive"):
        trend_with_size([0.0, 1e6, 1e7, 1e8], [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="finite"):
        trend_with_size([1e5, 1e6, 1e7, 1e8], [1.0, np.nan, 3.0, 4.0])
    with pytest.raises(ValueError, match="one length"):
        trend_with_size([1e5, 1e6, 1e7, 1e8], [1.0, 2.0])


def test_trend_rows_round_trip_and_fill_the_trend_column(tmp_path):
    from geolib.verdicts.trends import GROWS, NO_TREND, TrendRow, read_trends, write_trends

    rows = [
        TrendRow("A4", GROWS, "slope 0.2 [0.1, 0.3]", "scale-a4"),
        TrendRow("A1", NO_TREND, "3 sizes", "scale-a1"),
    ]
    path = write_trends(tmp_path / "t.json", rows)
    assert path.read_bytes() == write_trends(tmp_path / "u.json", rows[::-1]).read_bytes()
    trends = read_trends(path)
    assert trends["A4"] == rows[0]
    claims = write_claims(
        tmp_path / "c.json", [Claim("A4", "partly", "x", "ge", anchor="v", scale="s")]
    )
    md = claims_markdown(read_claims([claims]), trends)
    details = md.split("**Details of each evidence row**")[1]
    a4 = details.split("- **A4**")[1].split("- **")[0]
    assert "  - trend with size: {ref}`grows with size <scale-a4>` (slope 0.2 \\[0.1, 0.3\\])" in a4
    assert "- **A1**\n  - trend with size: {ref}`no trend resolvable <scale-a1>`" in details
    assert "- **B1**" not in details  # neither on the ladder nor tested
    # every row of the table has as many cells as the header
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert {line.count(" | ") for line in [table[0], *table[2:]]} == {3}
    assert main([str(tmp_path / "o.md"), "--trends", str(path), str(claims)]) == 0
    assert "grows with size" in (tmp_path / "o.md").read_text()


def test_bad_trend_rows_are_refused(tmp_path):
    from geolib.verdicts.trends import GROWS, TrendRow, read_trends, write_trends

    with pytest.raises(ValueError, match="unknown claim"):
        TrendRow("C1", GROWS, "", "a")
    with pytest.raises(ValueError, match="trend words"):
        TrendRow("A1", "rises", "", "a")
    with pytest.raises(ValueError, match="anchor"):
        TrendRow("A1", GROWS, "", "")
    with pytest.raises(ValueError, match="one trend row per claim"):
        write_trends(tmp_path / "t.json", [TrendRow("A1", GROWS, "", "a")] * 2)
    (tmp_path / "bad.json").write_text(json.dumps([{"claim_id": "A1", "words": "up"}]))
    with pytest.raises(ValueError, match="bad.json"):
        read_trends(tmp_path / "bad.json")


def test_trend_with_size_of_a_constant_key_number_is_no_trend_with_a_defined_interval():
    from geolib.verdicts.trends import NO_TREND, trend_with_size

    t = trend_with_size([1e4, 1e5, 1e6, 1e7, 1e7], [1.0] * 5)
    assert (t.words, t.slope, t.low, t.high) == (NO_TREND, 0.0, 0.0, 0.0)
    assert "1 on every one of the 5 models" in t.reason
    assert np.allclose(t.at([1e3, 1e9]), 1.0)  # the figures draw its flat line


def test_trend_with_size_of_no_defined_model_is_no_trend():
    from geolib.verdicts.trends import NO_TREND, trend_with_size

    t = trend_with_size([], [])
    assert (t.words, t.n_models) == (NO_TREND, 0) and np.isnan(t.slope)
    assert "no model" in t.reason


def test_theil_sen_trend_is_the_median_pairwise_slope_with_its_rank_interval():
    from scipy import stats as st

    from geolib.verdicts.trends import GROWS, NO_TREND, THEIL_SEN, trend_with_size

    params = np.repeat([1e5, 1e6, 1e7, 1e8], 2)  # 4 sizes x 2 seeds
    shares = np.array([0.0, 0.0, 0.25, 0.0, 0.5, 0.75, 1.0, 1.0])  # piled at both bounds
    t = trend_with_size(params, shares, test=THEIL_SEN)
    x = np.log10(params)
    pairs = [
        (shares[j] - shares[i]) / (x[j] - x[i])
        for i in range(len(x))
        for j in range(i + 1, len(x))
        if x[j] != x[i]  # seeds of one size give no slope
    ]
    assert t.slope == pytest.approx(np.median(pairs)) and t.test == THEIL_SEN
    ref = st.theilslopes(shares, x, alpha=0.95)
    assert (t.low, t.high) == pytest.approx((ref.low_slope, ref.high_slope))
    assert t.low <= t.slope <= t.high and t.words == GROWS
    assert "Theil-Sen interval" in t.reason
    # its line passes through the medians (Theil-Sen's intercept); OLS's through the means
    assert t.at(10 ** np.median(x)) == pytest.approx(np.median(shares))
    ols = trend_with_size(params, shares)
    assert ols.at(10 ** x.mean()) == pytest.approx(shares.mean())
    # one outlying model swings the least-squares slope, not the median of pairwise slopes
    flat = np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]) + np.tile([0.01, -0.01], 4)
    outlier = flat.copy()
    outlier[-1] = 40.0
    assert trend_with_size(params, outlier, test=THEIL_SEN).slope == pytest.approx(
        trend_with_size(params, flat, test=THEIL_SEN).slope, abs=0.02
    )
    assert abs(trend_with_size(params, outlier).slope) > 5
    assert trend_with_size(params, flat, test=THEIL_SEN).words == NO_TREND


def test_trend_with_size_refuses_an_unknown_test_or_level():
    from geolib.verdicts.trends import trend_with_size

    params, values = [1e5, 1e6, 1e7, 1e8], [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="trend test must be one of"):
        trend_with_size(params, values, test="spearman")
    with pytest.raises(ValueError, match="level must be below 1"):
        trend_with_size(params, values, level=1.0)
