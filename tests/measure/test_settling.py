"""geolib.measure.settling: the settling point against hand-worked trajectories, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from geolib.measure.settling import settling, turn_at

X = 0.25 * 2.0 ** np.arange(8)  # 0.25 … 32 tokens per parameter


def seeds(curve: np.ndarray, offsets=(-1.0, 0.0, 1.0)) -> np.ndarray:
    """Three seeds around ``curve``: sd exactly 1 at every checkpoint, mean = curve."""
    return np.stack([curve + o for o in offsets])


def test_a_curve_that_flattens_settles_where_the_moves_drop_below_the_sd():
    # moves 10, 8, 6, 4, 0.9, 0.5, 0.2 against sd 1: quiet from the 5th doubling on
    curve = np.cumsum([0, 10, 8, 6, 4, 0.9, 0.5, 0.2])
    s = settling(X, seeds(curve))
    assert s.settled and s.doublings == 3 and s.n_seeds == 3
    assert s.settled_at == X[4] == 4.0
    np.testing.assert_allclose(s.moves, [10, 8, 6, 4, 0.9, 0.5, 0.2])
    np.testing.assert_allclose(s.sd, 1.0)
    np.testing.assert_allclose(s.mean, curve)


def test_a_curve_still_moving_at_the_end_has_not_settled():
    curve = np.cumsum([0, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 3.0])  # quiet, then a late move
    s = settling(X, seeds(curve))
    assert not s.settled and np.isnan(s.settled_at) and s.doublings == 0
    assert "not settled by 32" in s.reason and "3 against a seed sd of 1" in s.reason


def test_min_doublings_refuses_a_single_quiet_step():
    curve = np.cumsum([0, 5, 5, 5, 5, 5, 5, 0.1])
    assert not settling(X, seeds(curve)).settled
    one = settling(X, seeds(curve), min_doublings=1)
    assert one.settled and one.settled_at == X[-2]


def test_a_constant_quantity_with_seed_noise_settles_from_the_start():
    s = settling(X, seeds(np.full(8, 5.0)))
    assert s.settled and s.settled_at == X[0] and s.doublings == 7


def test_seed_noise_of_zero_never_settles_a_moving_quantity():
    s = settling(X, np.stack([np.arange(8.0)] * 2))  # identical seeds: sd 0
    assert not s.settled


def test_the_result_does_not_depend_on_the_seeds_order_or_a_shift():
    curve = np.cumsum([0, 10, 8, 6, 4, 0.9, 0.5, 0.2])
    a = settling(X, seeds(curve))
    b = settling(X, seeds(curve)[::-1] + 100.0)
    assert a.settled_at == b.settled_at and a.doublings == b.doublings
    np.testing.assert_allclose(a.moves, b.moves)


@pytest.mark.parametrize(
    "x, values, match",
    [
        (X, np.ones((1, 8)), "two seeds"),
        (X, np.ones((3, 7)), "must be"),
        (X[:1], np.ones((3, 1)), "at least two checkpoints"),
        (X * np.r_[1, 1, 1, 1.2, 1, 1, 1, 1], np.ones((3, 8)), "doublings"),
        (np.r_[0.0, X[1:]], np.ones((3, 8)), "doublings"),
        (X, np.r_[[np.ones(8)] * 2, [np.r_[np.ones(7), np.nan]]], "finite"),
    ],
)
def test_bad_input(x, values, match):
    with pytest.raises(ValueError, match=match):
        settling(x, values)


def test_min_doublings_must_be_positive():
    with pytest.raises(ValueError, match="min_doublings"):
        settling(X, np.ones((2, 8)), min_doublings=0)


def test_the_turn_is_the_lowest_mean_once_it_has_risen_beyond_the_seed_sd():
    # W's rank: falls from 30 to its lowest at the 4th checkpoint, then climbs 3 seed sds
    curve = np.array([30.0, 24, 19, 17, 18, 19, 19.5, 20])
    assert turn_at(settling(X, seeds(curve))) == X[3] == 2.0
    # still falling at the end: no turn within the run
    falling = np.array([30.0, 25, 21, 18, 16, 15, 14.5, 14])
    assert np.isnan(turn_at(settling(X, seeds(falling))))
    # a rise within the seed noise is no turn
    flat = np.array([30.0, 24, 19, 17, 17.2, 17.5, 17.6, 17.9])
    assert np.isnan(turn_at(settling(X, seeds(flat))))
    # invariant to the seeds' order and to a shift of the quantity
    s = seeds(curve)[::-1] + 100.0
    assert turn_at(settling(X, s)) == 2.0
