"""Windows cut from token arrays: deterministic, disjoint where promised, masked like BERT."""

import inspect

import numpy as np
import pytest
import torch.nn.functional as F

from geolib.data import windows
from geolib.data.windows import fixed_windows
from geolib.measure import evaluate


def test_fixed_windows_are_deterministic_and_span_the_split():
    tokens = np.arange(1000, dtype=np.uint16)
    w = fixed_windows(tokens, 5, 10)
    assert w.shape == (5, 10) and w.dtype == np.int64
    assert w[0, 0] == 0 and w[-1, -1] == 999
    assert np.all(np.diff(w, axis=1) == 1)
    assert np.array_equal(w, fixed_windows(tokens, 5, 10))
    with pytest.raises(ValueError, match="fewer than one window"):
        fixed_windows(tokens[:5], 2, 10)


def test_the_label_without_a_target_is_the_losss_and_torchs():
    """``data.windows`` writes the label ``measure.evaluate`` skips; both are torch's default."""
    default = inspect.signature(F.cross_entropy).parameters["ignore_index"].default
    assert windows.IGNORE_INDEX == evaluate.IGNORE_INDEX == default
