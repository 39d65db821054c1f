"""Residual isotropy algebra against direct computations on projected points."""

from __future__ import annotations

import numpy as np
import pytest

from geolib.measure import residual
from geolib.measure.metrics import isoscore, isoscore_star
from geolib.measure.probes import complement_subspaces, top_subspace
from geolib.measure.stats import bootstrap_weights


def _orthonormal(rng, d, k):
    q, _ = np.linalg.qr(rng.standard_normal((d, k)))
    return q


def _complement(u):
    q, _ = np.linalg.qr(u, mode="complete")
    return q[:, u.shape[1] :]


def _cloud(rng, n=2000, d=12):
    scales = np.geomspace(5.0, 0.3, d)
    return rng.standard_normal((n, d)) * scales @ _orthonormal(rng, d, d).T + 3.0


@pytest.mark.parametrize("zeta", [0.0, 0.3, 1.0])
def test_residual_equals_isoscore_star_of_projected_points(zeta):
    rng = np.random.default_rng(0)
    x = _cloud(rng)
    c0 = np.cov(_cloud(rng, n=5000), rowvar=False)
    u = _orthonormal(rng, 12, 3)
    q = _complement(u)
    direct = isoscore_star(x @ q, C0=q.T @ c0 @ q, zeta=zeta)
    s = residual.shrink(np.cov(x, rowvar=False), c0, zeta)
    assert residual.residual_isoscore(s, u)[0] == pytest.approx(direct, rel=1e-10, abs=1e-12)


def test_stack_of_covariances_and_bases_match_one_by_one():
    rng = np.random.default_rng(1)
    covs = np.stack([np.cov(_cloud(rng, n=300), rowvar=False) for _ in range(4)])
    bases = complement_subspaces(_orthonormal(rng, 12, 2), 5, rng)
    out = residual.residual_isoscore(covs, bases)
    assert out.shape == (4, 5)
    for b in range(4):
        for m in range(5):
            q = _complement(bases[m])
            assert out[b, m] == pytest.approx(isoscore_star_from(q.T @ covs[b] @ q), rel=1e-10)


def isoscore_star_from(cov):
    from geolib.measure.metrics import isoscore_from_cov

    return isoscore_from_cov(cov)


def test_top_removal_equals_removing_the_top_eigenvectors():
    rng = np.random.default_rng(2)
    c = np.cov(_cloud(rng), rowvar=False)
    for k in (1, 3, 6):
        t = top_subspace(c, k)
        assert residual.top_removal_isoscore(c, k) == pytest.approx(
            residual.residual_isoscore(c, t)[0], rel=1e-10
        )
    stack = np.stack([c, 2.0 * c])
    assert np.allclose(residual.top_removal_isoscore(stack, 2), residual.top_removal_isoscore(c, 2))


def test_warm_started_top_removal_matches_the_exact_one_on_resamples():
    from geolib.measure.residual import top_removal_isoscore_near

    rng = np.random.default_rng(9)
    mom = residual.SequenceMoments(np.zeros(12))
    scales = np.geomspace(6.0, 0.2, 12)
    for _ in range(40):
        mom.update(rng.standard_normal((30, 12)) * scales)
    point = mom.covariance()
    boot = mom.covariance(rng.multinomial(40, np.full(40, 1 / 40), size=25).astype(float))
    for k in (1, 3):
        near = top_removal_isoscore_near(boot, top_subspace(point, k))
        exact = residual.top_removal_isoscore(boot, k)
        assert np.allclose(near, exact, atol=1e-9)
    with pytest.raises(ValueError, match="stack"):
        top_removal_isoscore_near(point, top_subspace(point, 1))


def test_removing_the_top_subspace_raises_isoscore_by_construction():
    """The tautology: an isotropic cloud plus a spike; removing its top direction (fitted on the
    same points) raises IsoScore, whatever produced the spike."""
    rng = np.random.default_rng(3)
    d = 20
    x = rng.standard_normal((4000, d))
    x[:, 0] *= 6.0
    c = np.cov(x, rowvar=False)
    before = isoscore(x)
    assert residual.top_removal_isoscore(c, 1) > before + 0.3
    # and it beats every random normal control
    t = top_subspace(c, 1)
    controls = residual.residual_isoscore(c, complement_subspaces(t, 20, rng))
    assert residual.residual_isoscore(c, t)[0] > controls.max() + 0.3


def test_planted_subspace_helps_only_when_it_carries_variance():
    """A subspace chosen a priori (not fitted to the points): removing it raises IsoScore beyond
    the normal controls when the cloud's extra variance lies in it, and not when it only holds
    the isotropic bulk's share."""
    rng = np.random.default_rng(4)
    d = 20
    spike = _orthonormal(rng, d, 1)
    cov = np.eye(d) + 35.0 * spike @ spike.T  # isotropic bulk plus a spike along `spike`
    q = _complement(spike)
    bulk_only = q @ _orthonormal(rng, d - 1, 1)  # a planted direction orthogonal to the spike
    for planted, helps in ((spike, True), (bulk_only, False)):
        ctrl = complement_subspaces(planted, 50, rng)
        gain = residual.residual_isoscore(cov, planted)[0] - isoscore_star_from(cov)
        gain_n = np.median(residual.residual_isoscore(cov, ctrl)) - isoscore_star_from(cov)
        assert bool(gain > gain_n + 0.05) == helps
    # the spike direction is also what the top-1 removal finds: the maximum
    assert residual.residual_isoscore(cov, spike)[0] == pytest.approx(
        residual.top_removal_isoscore(cov, 1)
    )


def test_top_removal_lowers_isoscore_of_nearly_isotropic_points():
    """The top-k reference is no maximum for nearly isotropic states: isotropic but for one dead
    direction, removing the top-k lowers IsoScore, random removals do better, and the share is
    undefined."""
    lam = np.ones(20)
    lam[-1] = 0.0
    cov = np.diag(lam)
    before = isoscore_star_from(cov)
    assert residual.top_removal_isoscore(cov, 2) < before
    ctrl = complement_subspaces(top_subspace(cov, 2), 20, np.random.default_rng(8))
    d_n = np.median(residual.residual_isoscore(cov, ctrl)) - before
    assert np.isnan(
        residual.gain_fraction(0.0, d_n, residual.top_removal_isoscore(cov, 2) - before)
    )


def test_sequence_moments_reweighting_is_exact():
    rng = np.random.default_rng(5)
    seqs = [rng.standard_normal((n, 6)) * 0.01 + 1e3 for n in (7, 9, 5, 8)]
    mom = residual.SequenceMoments(shift=np.full(6, 1e3))
    for s in seqs:
        mom.update(s)
    assert mom.n_sequences == 4
    all_rows = np.concatenate(seqs)
    assert np.allclose(mom.covariance(), np.cov(all_rows, rowvar=False, ddof=0), rtol=1e-9)
    w = np.array([[2, 0, 1, 1], [1, 1, 1, 1]])
    resampled = np.concatenate([seqs[0], seqs[0], seqs[2], seqs[3]])
    got = mom.covariance(w)
    assert got.shape == (2, 6, 6)
    assert np.allclose(got[0], np.cov(resampled, rowvar=False, ddof=0), rtol=1e-9)
    assert np.allclose(got[1], mom.covariance())


def test_gain_fraction():
    d_t, d_n, d_max = np.array([0.5, 0.2, 0.3]), np.array([0.0, 0.1, 0.3]), np.array([1, 0.3, 0.3])
    f = residual.gain_fraction(d_t, d_n, d_max)
    assert f[0] == pytest.approx(0.5)
    assert f[1] == pytest.approx(0.5)
    assert np.isnan(f[2])


def test_bad_input():
    rng = np.random.default_rng(6)
    c = np.cov(_cloud(rng), rowvar=False)
    with pytest.raises(ValueError, match="orthonormal"):
        residual.residual_isoscore(c, rng.standard_normal((12, 2)))
    with pytest.raises(ValueError, match="1 <= k"):
        residual.residual_isoscore(c, _orthonormal(rng, 12, 11))
    with pytest.raises(ValueError, match="symmetric"):
        residual.residual_isoscore(c + np.triu(np.ones((12, 12)), 1), _orthonormal(rng, 12, 2))
    with pytest.raises(ValueError, match="non-finite"):
        residual.residual_isoscore(np.full((12, 12), np.nan), _orthonormal(rng, 12, 2))
    with pytest.raises(ValueError, match="zeta"):
        residual.shrink(c, None, 1.5)
    with pytest.raises(ValueError, match="k must be"):
        residual.top_removal_isoscore(c, 11)
    with pytest.raises(ValueError, match="positive semidefinite"):
        residual.top_removal_isoscore(-c, 2)
    with pytest.raises(ValueError, match="zero"):
        residual.residual_isoscore(np.zeros((12, 12)), _orthonormal(rng, 12, 2))
    mom = residual.SequenceMoments(np.zeros(3))
    with pytest.raises(ValueError, match="no sequences"):
        mom.covariance()
    with pytest.raises(ValueError, match="states must be"):
        mom.update(np.zeros((4, 2)))
    mom.update(np.ones((2, 3)))
    with pytest.raises(ValueError, match="weights"):
        mom.covariance(np.array([-1.0]))


def test_isoscore_of_covariance_matches_metrics():
    from geolib.measure.metrics import isoscore_from_cov

    rng = np.random.default_rng(7)
    c = np.cov(_cloud(rng), rowvar=False)
    assert residual.isoscore_of_covariance(c) == pytest.approx(isoscore_from_cov(c), rel=1e-10)
    assert np.allclose(residual.isoscore_of_covariance(np.stack([c, 3 * c])), isoscore_from_cov(c))


def test_a_collapsed_representation_is_undefined_not_an_error():
    """States spanning only k directions leave rounding after the top-k removal: every route
    says NaN (undefined) there, and stays finite when the residual still has variance."""
    from geolib.measure.residual import (
        top_removal_isoscore_near,
        top_removal_isoscores,
    )

    rng = np.random.default_rng(3)
    u = _orthonormal(rng, 10, 3)
    x = rng.standard_normal((500, 3)) * [3.0, 2.0, 1.0] @ u.T  # rank 3 in d = 10
    s = np.cov(x, rowvar=False)
    stack = np.stack([s, s * 1.01])
    assert np.isnan(residual.top_removal_isoscore(s, 3))
    assert np.isnan(residual.residual_isoscore(s, u)).all()
    assert np.isnan(top_removal_isoscore_near(stack, u)).all()
    assert np.isfinite(top_removal_isoscores(s, [1, 2])[2])  # one direction still left
    with pytest.raises(ValueError, match="covariance is zero"):
        residual.isoscore_of_covariance(np.zeros((4, 4)))  # no variance at all: bad input
    full = np.cov(_cloud(rng), rowvar=False)
    assert np.isfinite(residual.top_removal_isoscore(full, 3))


def test_unchecked_scores_equal_checked_ones_and_checks_stay_the_default():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, 50, 6))
    s = np.einsum("bni,bnj->bij", x, x) / 50
    u = np.linalg.qr(rng.normal(size=(6, 2)))[0]
    np.testing.assert_array_equal(
        residual.residual_isoscore(s, u, check_input=False), residual.residual_isoscore(s, u)
    )
    bad = s.copy()
    bad[0, 0, 1] += 1.0
    with pytest.raises(ValueError, match="symmetric"):
        residual.residual_isoscore(bad, u)


def test_centred_replicates_move_by_the_mean_bias_and_skip_undefined_draws():
    draws = np.array([1.0, 2.0, np.nan, 6.0])
    moved, bias = residual.centred_replicates(draws, 5.0)
    assert bias == pytest.approx(3.0 - 5.0)  # mean of the finite draws (3) minus the estimate
    assert np.allclose(moved[[0, 1, 3]], [3.0, 4.0, 8.0]) and np.isnan(moved[2])
    same, nothing = residual.centred_replicates(np.full(3, np.nan), 1.0)
    assert np.isnan(nothing) and np.isnan(same).all()
    assert np.isnan(residual.centred_replicates(draws, np.nan)[1])


def _sequence_moments(rng, root, n_seq=32, n_tok=16):
    """Sequences whose tokens share a sequence-level offset (half the variance), as an LM's
    states within a context do: few effective samples against the dimension."""
    d = root.shape[0]
    m = residual.SequenceMoments(np.zeros(d))
    for _ in range(n_seq):
        z = rng.standard_normal(d) + rng.standard_normal((n_tok, d))
        m.update(z @ root.T / np.sqrt(2.0))
    return m


def test_top_removal_gain_replicates_are_biased_low_and_centring_fixes_the_interval():
    """The stage's d_max (IsoScore gain of removing the sample's own top-k) on sequences drawn
    from a known population: the plug-in is biased low by sampling noise, a resample adds that
    noise again, so raw replicates sit below the estimate; centred ones cover the estimate and
    the mean of the plug-in over independent samples (the quantity it measures)."""
    d, k = 24, 2
    lam = np.r_[40.0, 15.0, np.linspace(3.0, 1.0, d - 2)]
    root = _orthonormal(np.random.default_rng(0), d, d) * np.sqrt(lam)

    def gain(c):
        return residual.top_removal_isoscore(c, k) - residual.isoscore_of_covariance(c)

    population = gain(root @ root.T)
    # independent samples of the same size: the plug-in's mean and spread (Monte Carlo)
    plug_ins = np.array(
        [
            gain(_sequence_moments(np.random.default_rng(100 + i), root).covariance())
            for i in range(300)
        ]
    )
    sampling_bias = plug_ins.mean() - population
    assert sampling_bias < -3 * plug_ins.std()  # the cause: noise lowers the bulk's IsoScore
    m = _sequence_moments(np.random.default_rng(1), root)
    estimate = gain(m.covariance())
    raw = gain(m.covariance(bootstrap_weights(m.n_sequences, 400, 2)))
    lo, hi = np.quantile(raw, [0.025, 0.975])
    assert hi < estimate  # the symptom: the raw interval excludes its estimate
    centred, bias = residual.centred_replicates(raw, estimate)
    # the bootstrap bias estimates the sampling bias (same sign, same order)
    assert 0.5 < bias / sampling_bias < 2.0
    lo, hi = np.quantile(centred, [0.025, 0.975])
    assert lo < estimate < hi
    assert np.median(centred) == pytest.approx(estimate, abs=0.25 * (hi - lo))
    assert lo < plug_ins.mean() < hi  # covers what the plug-in measures at this size
    assert 0.6 < centred.std() / plug_ins.std() < 1.7  # the spread is the sampling spread
