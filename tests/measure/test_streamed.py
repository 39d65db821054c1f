import numpy as np
import pytest
import torch

from geolib.measure.metrics import effective_rank, mean_cosine_similarity
from geolib.measure.streamed import CosineSum, centred_effective_rank, release_freed_memory


def test_cosine_sum_and_centred_effective_rank_match_the_whole_matrix_functions():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((300, 6)) * [5, 3, 1, 1, 0.5, 0.1] + 2.0
    acc = CosineSum(6)
    for part in np.array_split(x, 7):
        acc.update(torch.from_numpy(part))
    assert np.isclose(acc.mean(), mean_cosine_similarity(x), rtol=1e-12)
    assert np.isclose(centred_effective_rank(np.cov(x.T)), effective_rank(x, center=True))


def test_a_zero_state_has_no_cosine_and_freeing_memory_changes_nothing():
    acc = CosineSum(3)
    with pytest.raises(ValueError, match="a state vector is zero"):
        acc.update(torch.zeros(2, 3))
    acc.update(torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    release_freed_memory()
    assert acc.mean() == pytest.approx(1.0)  # two equal directions
