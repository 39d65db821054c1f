"""Per-type frequency measurements on synthetic data with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from geolib.measure import frequency as fq


def test_type_counts_and_bad_ids():
    assert fq.type_counts(np.array([0, 2, 2, 3]), 5).tolist() == [1, 0, 2, 1, 0]
    with pytest.raises(ValueError, match="outside a vocabulary"):
        fq.type_counts(np.array([0, 7]), 5)


def test_within_variance_matches_direct_computation():
    rng = np.random.default_rng(0)
    v, d = 6, 4
    ids = rng.integers(0, v, 3000)
    centroids = rng.standard_normal((v, d)) * 5 + 100.0  # large mean: no cancellation allowed
    spread = np.array([0.1, 0.2, 0.5, 1.0, 2.0, 0.05])
    states = centroids[ids] + rng.standard_normal((ids.size, d)) * spread[ids, None]
    ts = fq.TypeStates(v, d)
    for chunk in np.array_split(np.arange(ids.size), 7):
        ts.update(ids[chunk], states[chunk])
    total = np.trace(np.cov(states, rowvar=False))
    assert ts.total_variance() == pytest.approx(total, rel=1e-9)
    got = ts.within_variance(min_occurrences=2)
    for t in range(v):
        x = states[ids == t]
        direct = ((x - x.mean(0)) ** 2).sum() / (len(x) - 1) / total
        assert got[t] == pytest.approx(direct, rel=1e-8)
    few = fq.TypeStates(v, d)
    few.update(np.array([0, 0, 1]), states[:3])
    w = few.within_variance(min_occurrences=2)
    assert np.isfinite(w[0]) and np.isnan(w[1]) and np.isnan(w[2])


def test_zipf_sample_recovers_a_known_slope():
    """Types with Zipf frequencies whose within-type variance is sampling noise of a centroid
    estimated from n draws: variance ∝ 1/n, slope -1 on log–log."""
    rng = np.random.default_rng(1)
    n_types = 400
    counts = np.maximum(1, (1e5 / np.arange(1, n_types + 1) ** 1.1)).astype(int)
    values = 3.0 / counts * np.exp(rng.normal(0, 0.3, n_types))
    fit = fq.loglog_slope(counts, values, n_boot=300, level=0.95, seed=0)
    assert fit.low < -1.0 < fit.high
    assert fit.high - fit.low < 0.1
    bins = fq.frequency_bins(counts.astype(float), values, 8)
    ok = bins.n > 0
    assert bins.n.sum() == n_types
    slope = np.polyfit(np.log10(bins.centre[ok]), np.log10(bins.median[ok]), 1)[0]
    assert slope == pytest.approx(-1.0, abs=0.15)
    assert np.all(np.diff(bins.median[ok]) < 0)


def test_no_frequency_law_gives_an_interval_around_zero():
    rng = np.random.default_rng(2)
    counts = rng.integers(1, 10_000, 500)
    values = np.exp(rng.normal(0, 0.5, 500))
    fit = fq.loglog_slope(counts, values, n_boot=300, level=0.95, seed=0)
    assert fit.low < 0.0 < fit.high


def test_settle_steps_on_a_synthetic_trajectory():
    steps = np.array([0, 1, 2, 4, 8, 16])
    final = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    traj = np.empty((6, 3, 2))
    # row 0 reaches its final direction at step 2 and stays
    traj[:, 0] = [[0, 1], [0.5, 1], [1, 0.01], [1, 0], [2, 0], [1, 0]]
    # row 1 is there early, leaves at step 4, returns at step 8
    traj[:, 1] = [[0.01, 1], [0, 1], [0, 1], [1, 0], [0, 3], [0, 1]]
    # row 2 only gets there at the end
    traj[:, 2] = [[1, -1]] * 5 + [[1, 1]]
    traj[-1] = final
    assert fq.settle_steps(steps, traj, 0.9).tolist() == [2, 8, 16]
    assert fq.settle_steps(steps, traj, -0.99).tolist() == [0, 0, 0]
    freq = np.array([10.0, 5.0, 1.0])
    with pytest.raises(ValueError):
        fq.settle_spearman(freq, np.array([2.0, 8.0, 16.0]), n_boot=100, level=0.95, seed=0)


def test_row_jitter_is_relative_to_the_median_move():
    rows = np.zeros((3, 3, 2))
    rows[1] = [[1, 0], [2, 0], [4, 0]]  # moves 1, 2, 4: median 2
    rows[2] = rows[1] + [[0, 10], [0, 20], [0, 40]]  # moves 10, 20, 40: median 20
    assert np.allclose(fq.row_jitter(rows), [0.5, 1.0, 2.0])
    assert np.allclose(fq.row_jitter(rows * 7.0), fq.row_jitter(rows))


def test_bad_input():
    with pytest.raises(ValueError, match="increasing"):
        fq.settle_steps(np.array([0, 2, 1]), np.ones((3, 2, 2)), 0.9)
    with pytest.raises(ValueError, match="n_checkpoints"):
        fq.settle_steps(np.array([0, 1]), np.ones((3, 2, 2)), 0.9)
    with pytest.raises(ValueError, match="threshold"):
        fq.settle_steps(np.array([0, 1]), np.ones((2, 2, 2)), 1.5)
    with pytest.raises(ValueError, match="does not move"):
        fq.row_jitter(np.ones((3, 4, 2)))
    with pytest.raises(ValueError, match="non-finite"):
        fq.row_jitter(np.full((3, 4, 2), np.nan))
    with pytest.raises(ValueError, match="positive"):
        fq.frequency_bins(np.array([0.0, 1.0]), np.array([1.0, 2.0]), 3)
    with pytest.raises(ValueError, match="strictly positive"):
        fq.loglog_slope(
            np.arange(1, 6), np.array([1.0, 0.0, 1.0, 2.0, 3.0]), n_boot=100, level=0.95, seed=0
        )
    ts = fq.TypeStates(3, 2)
    with pytest.raises(ValueError, match="ids outside"):
        ts.update(np.array([5]), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="ids for"):
        ts.update(np.array([0, 1]), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="min_occurrences"):
        ts.within_variance(1)
