"""geolib.experiments.residual_isotropy: the Gaussian control and the whole stage on two tiny
trained runs (a decoder and the encoder)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from geolib.experiments import residual_isotropy as ri
from geolib.experiments.residual_isotropy import Replicates
from tests.tiny import probe_section, run_quietly


def test_gaussian_samples_have_the_given_covariance():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 6))
    cov = a @ a.T + np.eye(6)
    c_eval, c_src = ri.gaussian_samples(cov, 40_000, 30_000, rng)
    for c in (c_eval, c_src):
        assert np.allclose(c, cov, atol=0.05 * np.abs(cov).max())
        assert np.array_equal(c, c.T)
    assert not np.allclose(c_eval, c_src, atol=1e-6)  # independent samples


def test_pooled_fraction_is_the_median_over_units_with_a_joint_interval():
    units = [Replicates(np.full(100, f), np.zeros(100), np.ones(100)) for f in (0.2, 0.5, 0.9)]
    got = ri.pooled_fraction(units, [0.2, 0.5, 0.9], 0.95)
    assert got["value"] == pytest.approx(0.5)
    assert got["low"] == pytest.approx(0.5) and got["high"] == pytest.approx(0.5)
    nothing = Replicates(np.zeros(100), np.zeros(100), np.zeros(100))  # nothing to explain
    got = ri.pooled_fraction([*units, nothing], [0.2, 0.5, 0.9, np.nan], 0.95)
    assert got["n_undefined"] == 1 and got["value"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="no units"):
        ri.pooled_fraction([], [], 0.95)
    undefined = ri.pooled_fraction([nothing], [np.nan], 0.95)
    assert np.isnan(undefined["value"]) and np.isnan(undefined["low"])
    # the declared alternative: an undefined share counts as none of the gain delivered
    zero = ri.pooled_fraction([*units, nothing], [0.2, 0.5, 0.9, np.nan], 0.95, "zero")
    assert zero["value"] == pytest.approx(0.35) and zero["n_undefined"] == 1
    assert ri.pooled_fraction([nothing], [np.nan], 0.95, "zero")["value"] == 0.0
    with pytest.raises(ValueError, match="undefined must be"):
        ri.pooled_fraction(units, [0.2, 0.5, 0.9], 0.95, "ignore")


def test_stage_on_decoder_and_encoder_runs(decoder_and_encoder_runs, tmp_path):
    root = decoder_and_encoder_runs
    p = probe_section(
        root,
        tmp_path / "out",
        n_source=10,
        n_reference=20,
        frozen_sources=[0, 2],
        zeta=0.2,
        zetas=[0.0, 0.5],
        n_boot=30,
        ci_level=0.9,
        key_rank=2,
        a5_source=2,
    )
    summary = run_quietly(ri, p)
    t = pd.read_csv(tmp_path / "out" / "residual_isotropy.csv")
    steps = [0, 1, 2, 4, 8]
    # run x step x layer (3) x k (2) x zeta (3) x source: refit everywhere, step-0 after 0,
    # step-2 after 2
    n_sources = sum(1 + (s > 0) + (s > 2) for s in steps)
    assert len(t) == 2 * n_sources * 3 * 2 * 3
    assert set(t["source"]) == {"refit", "step-0", "step-2"}
    # the share is defined exactly where H's own top-k removal beats the controls
    assert (t["fraction"].isna() == (t["d_max"] - t["d_n"] <= 1e-6)).all()
    assert (t["d_n_p05"] <= t["d_n"]).all() and (t["d_n"] <= t["d_n_p95"]).all()
    # intervals exactly where the bootstrap ran: key rank, main zeta (or the verdict's source)
    has_ci = t["d_t_low"].notna()
    want = (t["k"] == 2) & ((t["zeta"] == 0.2) | (t["source"] == "step-2"))
    assert (has_ci == want).all()
    ok = t[has_ci]
    assert ((ok["d_max_low"] <= ok["d_max"]) & (ok["d_max"] <= ok["d_max_high"])).all()
    assert ok["d_max_boot_bias"].notna().all() and t.loc[~has_ci, "d_max_boot_bias"].isna().all()
    assert t.loc[t["source"] == "refit", "gaussian_fraction"].notna().any()
    assert t.loc[t["source"] != "refit", "gaussian_fraction"].isna().all()
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(saved["a5_by_zeta"]) == {"0.0", "0.2", "0.5"}
    # verdict units: 2 runs x 2 block layers x steps after 2 (4, 8)
    assert saved["a5"]["n_units"] == 8
    assert saved["refit_step0"]["n_units"] == 4
    assert summary["a5"] == saved["a5"]
    assert set(summary["a5_v2"]) == {
        f"{z:g}/{how}" for z in (0.0, 0.2, 0.5) for how in ("drop", "zero")
    }
    assert set(summary["a5_v2"]["0.2/drop"]) == set(p["runs"])
    assert summary["a5_v2"]["0.2/drop"][p["runs"][0]] == summary["a5_by_run"][p["runs"][0]]


def test_steps_subset_of_a_run(decoder_and_encoder_runs):
    run = str(decoder_and_encoder_runs / "pythia")
    assert ri._checkpoints(run, {"steps": None}) == [0, 1, 2, 4, 8]
    assert ri._checkpoints(run, {"steps": [8, 0, 2]}) == [0, 2, 8]
    with pytest.raises(ValueError, match=r"no checkpoints at steps \[3\]"):
        ri._checkpoints(run, {"steps": [0, 3]})
