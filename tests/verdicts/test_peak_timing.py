"""A7's peak: the warm-up alternative's reading."""

import math

import pandas as pd
import pytest

from geolib.verdicts.peak_timing import (
    CANNOT_TELL,
    LEARNING,
    SCHEDULE,
    follows,
    warmup_alternative,
)


@pytest.mark.parametrize(
    ("peak", "warmup", "learning", "want"),
    [
        (48, 50, 0, SCHEDULE),  # moved with the warm-up, learning did not move
        (64, 50, 16, SCHEDULE),  # 14 from the warm-up's shift, 48 from learning's
        (16, 50, 16, LEARNING),  # moved with learning only
        (0, 50, 0, LEARNING),  # neither learning nor peak moved
        (48, 50, 48, CANNOT_TELL),  # learning moved as the warm-up did: both
        (160, 50, 0, CANNOT_TELL),  # neither
    ],
)
def test_follows_reads_the_shift_against_both(peak, warmup, learning, want):
    assert follows(peak, warmup, learning, tolerance=16) == want


def test_follows_refuses_a_negative_tolerance():
    with pytest.raises(ValueError, match="tolerance"):
        follows(0, 50, 0, tolerance=-1)


def _models(rows):
    return pd.DataFrame(rows, columns=["seed", "peak_step", "learned_step"])


def test_pairs_that_agree_decide_and_one_that_differs_does_not():
    default = _models([(3, 64, 96), (4, 64, 80), (5, 48, 96)])
    longer = _models([(3, 112, 96), (4, 112, 96)])
    out = warmup_alternative(default, longer, warmup_shift=50, tolerance=16, min_pairs=2)
    assert out.outcome == SCHEDULE
    assert list(out.pairs["seed"]) == [3, 4]  # seed 5 has no longer-warm-up model
    assert list(out.pairs["peak_shift"]) == [48, 48]
    assert list(out.pairs["learning_shift"]) == [0, 16]
    assert "seed 3: peak 64 → 112 (shift +48)" in out.words and "follows the schedule" in out.words

    split = _models([(3, 112, 96), (4, 80, 96)])  # seed 4's peak moved by 16 with learning
    out = warmup_alternative(default, split, warmup_shift=50, tolerance=16, min_pairs=2)
    assert list(out.pairs["follows"]) == [SCHEDULE, LEARNING]
    assert out.outcome == CANNOT_TELL and "cannot tell" in out.words


def test_too_few_learned_pairs_cannot_tell():
    default = _models([(3, 64, 96), (4, 64, math.nan)])  # seed 4 never learned
    longer = _models([(3, 112, 96), (4, 112, 112)])
    out = warmup_alternative(default, longer, warmup_shift=50, tolerance=16, min_pairs=2)
    assert len(out.pairs) == 1 and out.pairs["follows"][0] == SCHEDULE
    assert out.outcome == CANNOT_TELL
    one = warmup_alternative(default, longer, warmup_shift=50, tolerance=16, min_pairs=1)
    assert one.outcome == SCHEDULE


@pytest.mark.parametrize(
    ("default", "longer", "match"),
    [
        (_models([(3, 64, 96)]).drop(columns="learned_step"), _models([]), "lacks columns"),
        (_models([(3, 64, 96), (3, 48, 96)]), _models([]), "repeats a seed"),
    ],
)
def test_bad_tables_are_refused(default, longer, match):
    with pytest.raises(ValueError, match=match):
        warmup_alternative(default, longer, warmup_shift=50, tolerance=16, min_pairs=2)


def test_min_pairs_must_be_positive():
    m = _models([(3, 64, 96)])
    with pytest.raises(ValueError, match="min_pairs"):
        warmup_alternative(m, m, warmup_shift=50, tolerance=16, min_pairs=0)
