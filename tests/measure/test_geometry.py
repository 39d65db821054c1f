"""Paper B's per-model geometry: unused rows, the metrics of a known cloud, the table row."""

import numpy as np
import pytest
import torch

from geolib.measure import metrics as M
from geolib.measure.geometry import GEOMETRY, flatten_measures, geometry, unused_rows


def test_unused_rows_are_the_absent_tokens():
    mask = unused_rows(np.array([0, 2, 2, 5], dtype=np.uint16), 7)
    assert mask.tolist() == [False, True, False, True, True, False, True]
    with pytest.raises(ValueError, match="exceed the vocabulary"):
        unused_rows(np.array([9]), 7)


def test_geometry_of_a_known_cloud():
    x = np.random.default_rng(1).standard_normal((400, 8))
    g = geometry(x, 0.25)
    assert set(g) == set(GEOMETRY) | {"isoscore_star"}
    assert g["erank"] == pytest.approx(M.effective_rank(x))
    assert np.isnan(g["isoscore_star"]), "no larger sample, no IsoScore*"
    c0 = torch.from_numpy(np.cov(x.T))
    assert geometry(x, 0.25, c0)["isoscore_star"] == pytest.approx(M.isoscore_star(x, c0, 0.25))


def test_flatten_measures_makes_one_row():
    measures = {
        "name": "S-b8-wd0-lr0.001-f0.1-s0",
        "point": {"size": "S", "batch_size": 8, "lr": 0.001},
        "steps": 512,
        "tokens": 1,
        "params": 2,
        "decay_exponent": 0.0,
        "vocab_size": 10,
        "n_unused_rows": 3,
        "w": {"erank": 5.0},
        "w_all": {"erank": 4.0},
        "h": {"erank": 3.0},
        "loss": {"id_test": {"mean": 5.0, "ci_low": 4.9, "ci_high": 5.1}},
        "timing": {"train_seconds": 12.0},
    }
    row = flatten_measures(measures)
    assert row["w_erank"] == 5.0 and row["w_all_erank"] == 4.0 and row["h_erank"] == 3.0
    assert row["loss_id_test"] == 5.0 and row["loss_id_test_ci_high"] == 5.1
    assert row["size"] == "S" and row["train_seconds"] == 12.0
    # tokens per parameter (all parameters); the named lr where no scaled one was recorded
    assert row["tokens_per_param"] == 0.5 and row["peak_lr"] == 0.001
    assert flatten_measures({**measures, "peak_lr": 0.002})["peak_lr"] == 0.002
    assert not any(k.startswith("init_w") for k in row)  # measured before init_w existed
    row = flatten_measures({**measures, "init_w": {"erank": 9.0}})
    assert row["init_w_erank"] == 9.0 and not any(k.startswith("w_init") for k in row)
