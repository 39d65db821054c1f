"""geolib.theory.curvature (A2) against its closed forms: chord–arc, densities, neighbourhoods,
variance ratios and scans. Tolerances on simulated slopes hold at the fixed seeds used."""

import math

import numpy as np
import pytest

from geolib.measure.stats import fit_loglog
from geolib.theory import curvature as th
from geolib.theory import curvature_limits as lim
from geolib.theory import curvature_scans as scans


def _inside(fit, target, tol):
    """The whole confidence interval of ``fit`` lies in target ± tol."""
    return target - tol <= fit.ci_low and fit.ci_high <= target + tol


def test_chord_arc_matches_circle_geometry():
    kappa, t = 0.7, np.linspace(-5, 5, 41)
    ca = th.chord_arc(kappa, t)
    np.testing.assert_allclose(ca.tangent, np.sin(kappa * t) / kappa, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(ca.normal, (1 - np.cos(kappa * t)) / kappa, rtol=1e-13, atol=1e-15)
    # on the circle of radius 1/κ centred at (0, 1/κ), and the chord is the distance to 0
    np.testing.assert_allclose(np.hypot(ca.tangent, ca.normal - 1 / kappa), 1 / kappa, rtol=1e-14)
    np.testing.assert_allclose(ca.chord, np.hypot(ca.tangent, ca.normal), rtol=1e-13, atol=1e-15)


def test_chord_arc_line_limit():
    t = np.array([-2.0, 0.0, 0.5, 3.0])
    ca = th.chord_arc(0.0, t)
    np.testing.assert_array_equal(ca.tangent, t)
    np.testing.assert_array_equal(ca.normal, np.zeros(4))
    np.testing.assert_array_equal(ca.chord, np.abs(t))


def test_chord_arc_small_t_is_stable():
    t = np.array([0.0, 1e-300, 1e-150, 1e-20, 1e-9])
    ca = th.chord_arc(2.0, t)
    assert np.all(np.isfinite(ca.tangent) & np.isfinite(ca.normal) & np.isfinite(ca.chord))
    np.testing.assert_array_equal(ca.tangent, t)  # sin(κt)/κ = t to double precision
    np.testing.assert_allclose(ca.normal[2:], t[2:] ** 2, rtol=1e-15)  # κt²/2 with κ = 2
    # no catastrophic cancellation in 1 − cos κt: relative accuracy where the naive form is 0
    assert (1 - np.cos(2.0 * 1e-9)) / 2.0 == 0.0 and ca.normal[-1] > 0


def test_chord_arc_series_errors_have_the_stated_order():
    kappa, t = 1.3, np.logspace(-2.5, -1, 7)
    s = th.chord_arc_series(kappa, t)
    np.testing.assert_array_equal(s.tangent, t)
    np.testing.assert_allclose(s.normal, kappa * t**2 / 2)
    np.testing.assert_allclose(s.chord, t - kappa**2 * t**3 / 24)
    # leading terms predict the truncation error: ratio → 1 with a correction O((κt)²)
    for err, lead in [
        (s.tangent_error, s.tangent_leading),
        (s.normal_error, s.normal_leading),
        (s.chord_error, s.chord_leading),
    ]:
        np.testing.assert_allclose(err / lead, 1.0, atol=0.02)
    orders = [fit_loglog(t, np.abs(e)).slope for e in (s.tangent_error, s.normal_error)]
    assert orders == pytest.approx([3, 4], abs=0.01)
    assert fit_loglog(t[2:], np.abs(s.chord_error[2:])).slope == pytest.approx(5, abs=0.05)


def test_chord_arc_series_exact_on_a_line():
    s = th.chord_arc_series(0.0, [-1.0, 2.0])
    for err in (s.tangent_error, s.normal_error, s.chord_error):
        np.testing.assert_array_equal(err, 0.0)


@pytest.mark.parametrize(
    ("kappa", "t", "match"),
    [
        (-0.1, [1.0], "kappa"),
        (np.nan, [1.0], "kappa"),
        (np.inf, [1.0], "kappa"),
        (1.0, [], "at least 1"),
        (1.0, [0.1, np.inf], "non-finite"),
        (1.0, [0.1, np.nan], "non-finite"),
        (1.0, [[0.1, 0.2]], "one-dimensional"),
        ("a", [1.0], "real number"),
    ],
)
def test_chord_arc_bad_inputs(kappa, t, match):
    with pytest.raises(ValueError, match=match):
        th.chord_arc(kappa, t)


# ------------------------------------------------------------------------------------------
# Radial densities and samplers
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "shape", "m2", "m4"),
    [("half_normal", 1.0, 1.0, 3.0), ("exponential", 1.0, 2.0, 24.0), ("gamma", 3.0, 12.0, 360.0)],
)
def test_density_moments_and_characteristic_function(kind, shape, m2, m4):
    g = th.RadialDensity(kind, 0.5, shape)
    assert g.moment(2) == pytest.approx(m2 * 0.5**2)
    assert g.moment(4) == pytest.approx(m4 * 0.5**4)
    assert g.effective_radius == pytest.approx(math.sqrt(m4 / m2) * 0.5)
    r = g.sample(400_000, seed=1)
    assert np.all(r >= 0)
    assert np.mean(r**2) == pytest.approx(g.moment(2), rel=0.02)
    assert np.mean(np.cos(1.7 * r)) == pytest.approx(float(g.mean_cos(1.7)), abs=0.005)


def test_density_with_effective_radius():
    g = th.RadialDensity.with_effective_radius("gamma", 0.7, 2.5)
    assert g.kind == "gamma" and g.shape == 2.5 and g.effective_radius == pytest.approx(0.7)
    with pytest.raises(ValueError, match="radius"):
        th.RadialDensity.with_effective_radius("half_normal", 0.0)


def test_frequency_density_scale_is_the_root_dispersion():
    assert th.frequency_density(0.04).scale == pytest.approx(0.2)
    assert th.frequency_density(4.0, "gamma", 3.0) == th.RadialDensity("gamma", 2.0, 3.0)
    with pytest.raises(ValueError, match="dispersion"):
        th.frequency_density(0.0)


def test_density_bad_parameters():
    with pytest.raises(ValueError, match="kind"):
        th.RadialDensity("cauchy", 1.0)
    with pytest.raises(ValueError, match="scale"):
        th.RadialDensity("half_normal", 0.0)
    with pytest.raises(ValueError, match="shape"):
        th.RadialDensity("gamma", 1.0, -1.0)
    with pytest.raises(ValueError, match="n"):
        th.RadialDensity("gamma", 1.0).sample(0)


def test_sphere_points_lie_on_the_sphere():
    kappa, g = 2.0, th.RadialDensity("exponential", 0.4)
    nb = th.sample_sphere(kappa, 3, g, 500, seed=3)
    assert nb.points.shape == (500, 4) and nb.tangent_dims == (0, 1, 2) and nb.normal_dims == (3,)
    centre = np.array([0, 0, 0, 1 / kappa])
    np.testing.assert_allclose(np.linalg.norm(nb.points - centre, axis=1), 1 / kappa, rtol=1e-12)
    # geodesic distance to the base point is r
    cos_angle = 1 - kappa * nb.points[:, 3]
    geo = np.arccos(np.clip(cos_angle, -1, 1)) / kappa
    inside = nb.radii < np.pi / kappa  # beyond the antipode the geodesic wraps around
    np.testing.assert_allclose(geo[inside], nb.radii[inside], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(nb.coords, axis=1), nb.radii)


def test_sampling_is_deterministic_in_the_seed():
    g = th.RadialDensity("half_normal", 0.3)
    a = th.sample_sphere(1.0, 2, g, 50, seed=7).points
    np.testing.assert_array_equal(a, th.sample_sphere(1.0, 2, g, 50, seed=7).points)
    assert not np.array_equal(a, th.sample_sphere(1.0, 2, g, 50, seed=8).points)
    gen = np.random.default_rng(7)
    assert th.sample_sphere(1.0, 2, g, 50, seed=gen).points.shape == (50, 3)


def test_circle_sides_and_flat_limit():
    g = th.RadialDensity("half_normal", 0.5)
    two = th.sample_circle(1.0, g, 1000, seed=0)
    one = th.sample_circle(1.0, g, 1000, seed=0, one_sided=True)
    assert (two.coords < 0).any() and (two.coords > 0).any()
    assert (one.coords >= 0).all()
    flat = th.sample_sphere(0.0, 2, g, 100, seed=0)
    np.testing.assert_array_equal(flat.points[:, 2], 0.0)


def test_quadratic_graph_heights_and_second_form():
    form = th.diagonal_second_form([1.0, 0.0, 0.25])
    assert form.shape == (2, 3, 3)
    assert form[0, 0, 0] == 1.0 and form[1, 2, 2] == 0.25 and form.sum() == 1.25
    nb = th.sample_quadratic_graph(form, th.RadialDensity("gamma", 0.2, 2.0), 300, seed=1)
    u = nb.points[:, :3]
    np.testing.assert_allclose(nb.points[:, 3], 0.5 * u[:, 0] ** 2)
    np.testing.assert_allclose(nb.points[:, 4], 0.125 * u[:, 2] ** 2)
    with pytest.raises(ValueError, match="symmetric"):
        th.sample_quadratic_graph([[[0.0, 1.0], [0.0, 0.0]]], th.RadialDensity("gamma", 1.0), 5)
    with pytest.raises(ValueError, match="shape"):
        th.sample_quadratic_graph(np.eye(2), th.RadialDensity("gamma", 1.0), 5)
    with pytest.raises(ValueError, match=">= 0"):
        th.diagonal_second_form([1.0, -1.0])


def test_local_pca_split():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20000, 3)) * np.array([3.0, 1.0, 0.1])
    pca = th.local_pca(x, 2)
    np.testing.assert_allclose(pca.eigenvalues, [9.0, 1.0, 0.01], rtol=0.05)
    assert pca.ratio == pytest.approx(0.01 / 10, rel=0.05)
    assert pca.share == pytest.approx(pca.normal_variance / pca.eigenvalues.sum())
    with pytest.raises(ValueError, match="exceeds"):
        th.local_pca(x, 4)
    with pytest.raises(ValueError, match="n >= 2"):
        th.local_pca(x[:1], 1)
    with pytest.raises(ValueError, match="no variance"):
        th.local_pca(np.ones((5, 2)), 1)


# ------------------------------------------------------------------------------------------
# A2: normal variance ratio, closed forms
# ------------------------------------------------------------------------------------------


def test_normal_variance_ratio_symmetric_matches_closed_form():
    rng = np.random.default_rng(0)
    t = rng.normal(0.0, 0.05, size=100_000)
    sim = th.normal_variance_ratio(1.0, t)
    # same sample: only the truncation of the series separates them, O((κ s)²)
    assert sim == pytest.approx(th.predicted_normal_variance_ratio(1.0, t), rel=0.01)
    assert th.predicted_normal_variance_ratio(1.0, t) == pytest.approx(0.05**2 / 2, rel=0.02)


def test_one_sided_t_needs_var_t_in_the_denominator():
    t = th.RadialDensity("half_normal", 0.05).sample(100_000, seed=0)
    sim = th.normal_variance_ratio(1.0, t)
    assert sim == pytest.approx(th.predicted_normal_variance_ratio(1.0, t, "mean"), rel=0.01)
    paper = th.predicted_normal_variance_ratio(1.0, t, "origin")
    assert paper / sim == pytest.approx(1 - 2 / np.pi, rel=0.02)
    with pytest.raises(ValueError, match="centre"):
        th.predicted_normal_variance_ratio(1.0, t, "median")


def test_normal_variance_ratio_limits_and_errors():
    assert th.normal_variance_ratio(0.0, [-1.0, 0.5, 2.0]) == 0.0
    with pytest.raises(ValueError, match="at least 2"):
        th.normal_variance_ratio(1.0, [0.5])
    with pytest.raises(ValueError, match="no spread"):
        th.normal_variance_ratio(1.0, [0.5, 0.5])
    with pytest.raises(ValueError, match="kappa"):
        th.predicted_normal_variance_ratio(-1.0, [0.1, 0.2])


@pytest.mark.parametrize(("kind", "shape"), [("half_normal", 1), ("exponential", 1), ("gamma", 3)])
def test_exact_sphere_ratio(kind, shape):
    small, large = th.RadialDensity(kind, 1e-2, shape), th.RadialDensity(kind, 3.0, shape)
    closed = th.predicted_sphere_normal_variance_ratio(1.0, small)
    assert th.exact_sphere_normal_variance_ratio(1.0, small) == pytest.approx(closed, rel=1e-3)
    # below the cut-over to the series the two coincide; κ = 0 is flat
    tiny = th.RadialDensity(kind, 1e-5, shape)
    assert th.exact_sphere_normal_variance_ratio(1.0, tiny) == pytest.approx(
        th.predicted_sphere_normal_variance_ratio(1.0, tiny)
    )
    assert th.exact_sphere_normal_variance_ratio(0.0, small) == 0.0
    # at large scale the exact ratio stays O(1) while the closed form keeps growing as scale²
    exact = th.exact_sphere_normal_variance_ratio(1.0, large)
    assert exact < 1.1 < 2.0 < th.predicted_sphere_normal_variance_ratio(1.0, large)
    nb = th.sample_sphere(1.0, 2, large, 200_000, seed=2)
    assert th.subspace_variance_ratio(nb) == pytest.approx(exact, rel=0.03)


def test_half_normal_exact_ratio_is_tanh():
    for s in [0.1, 0.5, 1.0, 2.0]:
        g = th.RadialDensity("half_normal", s)
        assert th.exact_sphere_normal_variance_ratio(0.8, g) == pytest.approx(
            np.tanh(0.8**2 * s**2 / 2), rel=1e-12
        )


def test_graph_closed_form_reduces_to_the_paper_and_matches_sampling():
    g = th.RadialDensity("exponential", 0.3)
    paper = th.predicted_sphere_normal_variance_ratio(0.7, g)
    assert th.graph_normal_variance_ratios([[[0.7]]], g) == pytest.approx([paper])
    iso = 0.7 * np.eye(3)[None]
    assert th.graph_normal_variance_ratios(iso, g) == pytest.approx([paper])
    form = np.array([[[1.0, 0.3], [0.3, -0.5]], [[0.0, 0.0], [0.0, 2.0]]])
    nb = th.sample_quadratic_graph(form, g, 300_000, seed=4)
    var = np.var(nb.points, axis=0)
    np.testing.assert_allclose(
        var[2:] / var[:2].sum(), th.graph_normal_variance_ratios(form, g), rtol=0.05
    )


# ------------------------------------------------------------------------------------------
# A2: scans (slopes at fixed seeds)
# ------------------------------------------------------------------------------------------

SCALES = np.logspace(-3, 0.5, 12)


@pytest.mark.parametrize(("kind", "shape"), [("half_normal", 1), ("exponential", 1), ("gamma", 3)])
def test_sphere_scan_slope_two(kind, shape):
    scan = scans.sphere_curvature_scan(
        1.0, SCALES, scans.Sampling(kind, shape, n_points=8000, seed=0)
    )
    assert _inside(scan.fit, 2.0, 0.15)  # tolerance: ± 0.15 at 8000 points per scale
    m = scan.fit_mask
    np.testing.assert_allclose(scan.simulated_pca[m] / scan.closed_form[m], 1, atol=0.15)
    np.testing.assert_allclose(scan.simulated_subspace[m], scan.simulated_pca[m], rtol=0.02)
    # beyond the fit range the closed form overshoots the exact ratio
    assert scan.exact[-1] < scan.closed_form[-1]


def test_scan_is_deterministic_and_validates():
    sampling = scans.Sampling("half_normal", n_points=500, seed=5)
    a = scans.sphere_curvature_scan(1.0, SCALES, sampling)
    b = scans.sphere_curvature_scan(1.0, SCALES, sampling)
    np.testing.assert_array_equal(a.simulated_pca, b.simulated_pca)
    with pytest.raises(ValueError, match=">= 3 scales"):
        scans.sphere_curvature_scan(1.0, [1.0, 2.0, 3.0], sampling)
    with pytest.raises(ValueError, match="kappa"):
        scans.sphere_curvature_scan(0.0, SCALES, sampling)


def test_graph_scan_curved_and_flat_directions():
    scan = scans.graph_curvature_scan(
        [1.0, 0.25, 0.0], SCALES, scans.Sampling("half_normal", n_points=8000, seed=0)
    )
    assert scan.simulated.shape == (SCALES.size, 2)  # the flat direction adds no normal axis
    assert _inside(scan.fit, 2.0, 0.15)
    np.testing.assert_allclose(scan.simulated / scan.closed_form, 1, atol=0.15)
    # curvature 1 vs 0.25: variance ratio 16 at every scale
    np.testing.assert_allclose(scan.closed_form[:, 0] / scan.closed_form[:, 1], 16.0)
    with pytest.raises(ValueError, match="no curved"):
        scans.graph_curvature_scan([0.0, 0.0], SCALES, scans.Sampling("half_normal"))


def test_frequency_scan_takes_its_scale_from_the_a1_estimator():
    counts = np.logspace(0, 4, 9).round()
    scan = scans.frequency_curvature_scan(
        1.0,
        counts,
        scans.Sampling("half_normal", n_points=8000, seed=0),
        noise=0.5,
        n_replicates=256,
    )
    # the scale is sqrt of the estimator's dispersion, whose expectation is noise²/n
    np.testing.assert_allclose(scan.scan.scales, np.sqrt(scan.dispersion))
    np.testing.assert_allclose(scan.dispersion * counts / 0.25, 1.0, atol=0.25)
    # slope -1 in n: by construction (s² ∝ 1/n and slope 2 in s), not evidence
    assert _inside(scan.fit, -1.0, 0.1)
    with pytest.raises(ValueError, match="counts"):
        scans.frequency_curvature_scan(1.0, [0.5, 1, 2, 3])


def test_scan_fit_range_is_the_measured_departure():
    scan = scans.sphere_curvature_scan(1.0, SCALES, scans.Sampling("exponential", n_points=500))
    kr = lim.departure_kappa_rho("exponential", 0.02)
    assert scan.fit_kappa_rho == kr and scan.fit_departure == 0.02
    np.testing.assert_array_equal(scan.fit_mask, scan.kappa_rho <= kr)
    # inside the range the closed form is within 2% of the exact ratio, just outside it is not
    m = scan.fit_mask
    assert np.all(1 - scan.exact[m] / scan.closed_form[m] <= 0.02 + 1e-12)
    assert 1 - scan.exact[~m][0] / scan.closed_form[~m][0] > 0.02
    graph = scans.graph_curvature_scan(
        [2.0, 0.5], SCALES, scans.Sampling("half_normal", n_points=500)
    )
    rho = np.array([th.RadialDensity("half_normal", s).effective_radius for s in SCALES])
    kr_hn = lim.departure_kappa_rho("half_normal", 0.02)
    np.testing.assert_array_equal(graph.fit_mask, 2.0 * rho <= kr_hn)
    with pytest.raises(ValueError, match="departure"):
        scans.sphere_curvature_scan(1.0, SCALES, scans.Sampling("half_normal", fit_departure=0.0))


# ------------------------------------------------------------------------------------------
# A2: where the closed form departs, where the exact ratio saturates
# ------------------------------------------------------------------------------------------


def _brent(f, lo, hi):
    from scipy.optimize import brentq

    return brentq(f, lo, hi, xtol=1e-14)


@pytest.mark.parametrize("delta", [0.02, 0.1, 0.5])
def test_departure_roots_match_independent_closed_forms(delta):
    # half-normal: exact/closed = tanh(x)/x with x = κ²s²/2 and ρ = √3 s
    x = _brent(lambda x: 1 - np.tanh(x) / x - delta, 1e-6, 50)
    assert lim.departure_kappa_rho("half_normal", delta) == pytest.approx(
        math.sqrt(3 * 2 * x), rel=1e-8
    )
    # exponential: exact = u(5 + 2u)/(2(1 + u)²), closed = 5u/2 with u = κ²s² and ρ = √12 s
    u = _brent(lambda u: 1 - (5 + 2 * u) / (5 * (1 + u) ** 2) - delta, 1e-9, 1e3)
    assert lim.departure_kappa_rho("exponential", delta) == pytest.approx(
        math.sqrt(12 * u), rel=1e-8
    )
    kr = lim.departure_kappa_rho("gamma", delta, shape=3.0)
    g = th.RadialDensity.with_effective_radius("gamma", kr, 3.0)
    assert lim.closed_form_departure(1.0, g) == pytest.approx(delta, abs=1e-10)


def test_departure_roots_match_the_independent_check():
    # 10% departure at κρ ≈ 1.9 / 0.9 / 1.2 (half-normal / exponential / gamma(3)), an
    # independent estimate quoted to one decimal
    got = [
        lim.departure_kappa_rho("half_normal", 0.1),
        lim.departure_kappa_rho("exponential", 0.1),
        lim.departure_kappa_rho("gamma", 0.1, shape=3.0),
    ]
    np.testing.assert_allclose(got, [1.9, 0.9, 1.2], atol=0.06)
    # the departure grows with κρ: the 2% fit range lies inside the 10% one
    assert lim.departure_kappa_rho("gamma", 0.02, shape=3.0) < got[2]


def test_departure_bad_input():
    for bad in (0.0, 1.0, -0.1, np.nan):
        with pytest.raises(ValueError, match="departure"):
            lim.departure_kappa_rho("half_normal", bad)
    with pytest.raises(ValueError, match="kind"):
        lim.departure_kappa_rho("cauchy", 0.1)
    with pytest.raises(ValueError, match="shape"):
        lim.departure_kappa_rho("gamma", 0.1, shape=0.0)


def test_exact_ratio_log_slope():
    for s in (0.05, 0.7, 2.0):
        x = s**2 / 2  # half-normal: R = tanh(x), d log R / d log s = 4x / sinh(2x)
        g = th.RadialDensity("half_normal", s)
        assert lim.exact_ratio_log_slope(1.0, g) == pytest.approx(4 * x / np.sinh(2 * x), rel=1e-6)
    with pytest.raises(ValueError, match="step"):
        lim.exact_ratio_log_slope(1.0, th.RadialDensity("half_normal", 1.0), step=0.0)


def test_saturation_matches_closed_forms():
    # half-normal: slope 4x/sinh(2x) = 1; supremum 1 = tanh(∞), approached only in the limit
    x = _brent(lambda x: np.sinh(2 * x) - 4 * x, 0.5, 5)
    hn = lim.exact_ratio_saturation("half_normal")
    assert hn.kappa_rho_half_slope == pytest.approx(math.sqrt(6 * x), rel=1e-6)
    assert hn.sup_ratio == 1.0 and hn.kappa_rho_at_sup == math.inf
    # exponential: slope 2[1 + 2u/(5 + 2u) − 2u/(1 + u)] = 1 at u = 1/2, i.e. κρ = √6;
    # R = u(5 + 2u)/(2(1 + u)²) peaks at u = 5 with 25/24, i.e. κρ = √60: it overshoots 1
    ex = lim.exact_ratio_saturation("exponential")
    assert ex.kappa_rho_half_slope == pytest.approx(math.sqrt(6), rel=1e-6)
    assert ex.sup_ratio == pytest.approx(25 / 24, rel=1e-9)
    assert ex.kappa_rho_at_sup == pytest.approx(math.sqrt(60), rel=1e-4)
    ga = lim.exact_ratio_saturation("gamma", shape=3.0)
    g = th.RadialDensity.with_effective_radius("gamma", ga.kappa_rho_half_slope, 3.0)
    assert lim.exact_ratio_log_slope(1.0, g) == pytest.approx(1.0, abs=1e-6)
    # saturation lies beyond the 10% departure for every density
    for sat, kind, a in ((hn, "half_normal", 1), (ex, "exponential", 1), (ga, "gamma", 3)):
        assert sat.kappa_rho_half_slope > lim.departure_kappa_rho(kind, 0.1, shape=a)


# ------------------------------------------------------------------------------------------
# A2: one-sided neighbours, per density and frame
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "shape", "paper", "pca"),
    [
        ("half_normal", 1.0, 1 - 2 / math.pi, 0.124),
        ("exponential", 1.0, 0.5, 0.2),
        ("gamma", 3.0, 0.25, 1 / 9),
        ("gamma", 1.0, 0.5, 0.2),  # gamma(1) is the exponential
    ],
)
def test_one_sided_factors_closed_forms(kind, shape, paper, pca):
    f = lim.one_sided_factors(kind, shape=shape)
    assert f.paper_over_true == pytest.approx(paper, rel=1e-12)
    assert f.pca_over_true == pytest.approx(pca, abs=5e-4 if kind == "half_normal" else 1e-10)
    assert f.paper_over_pca == pytest.approx(paper / pca, rel=5e-3)


def test_one_sided_factor_half_normal_exact_expression():
    # corr(t, t²)² = (E t³ − E t E t²)² / (Var t Var t²) with E t = √(2/π), E t³ = 2√(2/π)
    c2 = (2 / math.pi) / ((1 - 2 / math.pi) * 2)
    assert lim.one_sided_factors("half_normal").pca_over_true == pytest.approx(1 - c2, rel=1e-12)


@pytest.mark.parametrize(("kind", "shape"), [("half_normal", 1), ("exponential", 1), ("gamma", 3)])
def test_one_sided_simulation_matches_factors(kind, shape):
    g = th.RadialDensity.with_effective_radius(
        kind, 0.05, shape
    )  # small κρ: leading order holds to ~0.1%
    f = lim.one_sided_factors(kind, shape=shape)
    one = lim.one_sided_ratios(1.0, g, 200_000, seed=1)
    assert one.one_sided
    assert one.paper_form / one.true_axes == pytest.approx(f.paper_over_true, rel=0.01)
    assert one.local_pca / one.true_axes == pytest.approx(f.pca_over_true, rel=0.03)
    assert one.var_t_form / one.true_axes == pytest.approx(1.0, rel=0.01)
    two = lim.one_sided_ratios(1.0, g, 200_000, seed=1, one_sided=False)
    assert not two.one_sided
    for v in (two.paper_form, two.local_pca):
        assert v / two.true_axes == pytest.approx(1.0, rel=0.02)
    with pytest.raises(ValueError, match="kappa"):
        lim.one_sided_ratios(0.0, g, 100)


# ------------------------------------------------------------------------------------------
# A2: neighbourhoods chosen by geodesic vs chord distance
# ------------------------------------------------------------------------------------------


def test_sphere_cap_is_uniform_in_area():
    kappa, big_r = 2.0, 1.2
    nb = th.sample_sphere_cap(kappa, 2, big_r, 200_000, seed=0)
    assert nb.points.shape == (200_000, 3) and nb.radii.max() <= big_r
    centre = np.array([0, 0, 1 / kappa])
    np.testing.assert_allclose(np.linalg.norm(nb.points - centre, axis=1), 1 / kappa, rtol=1e-12)
    # Archimedes: the height is uniform on [0, (1 − cos κR)/κ]
    h = nb.points[:, 2] / ((1 - np.cos(kappa * big_r)) / kappa)
    np.testing.assert_allclose(np.quantile(h, [0.1, 0.5, 0.9]), [0.1, 0.5, 0.9], atol=0.005)
    # circle: arclength uniform; 3-sphere: density ∝ sin²(κr)
    c = th.sample_sphere_cap(1.0, 1, 1.0, 100_000, seed=1)
    assert np.mean(c.radii) == pytest.approx(0.5, abs=0.005)
    s3 = th.sample_sphere_cap(1.0, 3, 2.0, 200_000, seed=2)
    r = np.linspace(0, 2.0, 20001)
    w = np.sin(r) ** 2
    assert np.mean(s3.radii) == pytest.approx(np.sum(r * w) / np.sum(w), abs=0.005)
    a = th.sample_sphere_cap(2.0, 2, 1.2, 50, seed=4).points
    np.testing.assert_array_equal(a, th.sample_sphere_cap(2.0, 2, 1.2, 50, seed=4).points)


def test_cap_and_chord_ball_closed_forms():
    kappa, eps = 1.5, np.array([0.01, 0.3, 1.0, 1.3])
    x = kappa * eps
    geo = lim.cap_normal_variance_ratio(kappa, eps)
    np.testing.assert_allclose(geo, (1 - np.cos(x)) / (4 * (2 + np.cos(x))), rtol=1e-12)
    assert geo[0] == pytest.approx(x[0] ** 2 / 24, rel=1e-4)  # flat limit κ²ε²/24
    big_r = lim.chord_ball_geodesic_radius(kappa, eps)
    np.testing.assert_allclose(2 * np.sin(kappa * big_r / 2) / kappa, eps, rtol=1e-12)
    chord = lim.chord_ball_normal_variance_ratio(kappa, eps)
    np.testing.assert_allclose(chord, lim.cap_normal_variance_ratio(kappa, big_r), rtol=1e-12)
    np.testing.assert_allclose(chord, x**2 / (24 - 4 * x**2), rtol=1e-12)
    # same leading term; corrections +κ²ε²/12 (geodesic) and +κ²ε²/6 (chord)
    assert geo[0] / (x[0] ** 2 / 24) - 1 == pytest.approx(x[0] ** 2 / 12, rel=1e-3)
    assert chord[0] / (x[0] ** 2 / 24) - 1 == pytest.approx(x[0] ** 2 / 6, rel=1e-3)
    assert np.all(chord > geo)
    np.testing.assert_array_equal(lim.chord_ball_geodesic_radius(0.0, eps), eps)
    np.testing.assert_array_equal(lim.cap_normal_variance_ratio(0.0, eps), 0.0)


def test_ball_selection_and_bad_input():
    nb = th.sample_sphere_cap(1.0, 2, 1.2, 5000, seed=3)
    geo, chord = th.select_ball(nb, 1.0, "geodesic"), th.select_ball(nb, 1.0, "chord")
    assert np.all(geo.radii <= 1.0) and np.all(np.linalg.norm(chord.points, axis=1) <= 1.0)
    assert geo.radii.size < chord.radii.size  # the chord ball is the larger cap
    assert chord.radii.max() <= lim.chord_ball_geodesic_radius(1.0, 1.0)[0]
    with pytest.raises(ValueError, match="by"):
        th.select_ball(nb, 1.0, "euclid")
    with pytest.raises(ValueError, match="radius"):
        th.select_ball(nb, 0.0, "chord")
    with pytest.raises(ValueError, match="pi/kappa"):
        th.sample_sphere_cap(1.0, 2, 3.2, 10)
    with pytest.raises(ValueError, match="kappa"):
        th.sample_sphere_cap(0.0, 2, 1.0, 10)
    with pytest.raises(ValueError, match="2/kappa"):
        lim.chord_ball_geodesic_radius(1.0, 2.0)
    with pytest.raises(ValueError, match="2/kappa"):
        lim.chord_ball_normal_variance_ratio(1.0, [0.5, 2.5])
    with pytest.raises(ValueError, match="pi/kappa"):
        lim.cap_normal_variance_ratio(1.0, 3.5)


def test_ball_selection_scan_matches_closed_forms():
    radii = np.logspace(np.log10(0.02), 0, 7)
    scan = scans.ball_selection_scan(1.0, radii, n_points=8000, seed=0)
    for sim, closed in (
        (scan.geodesic_pca, scan.geodesic_closed),
        (scan.chord_pca, scan.chord_closed),
    ):
        np.testing.assert_allclose(sim / closed, 1.0, atol=0.05)
    np.testing.assert_array_equal(scan.n_chord, 8000)
    assert np.all(scan.n_geodesic <= 8000) and scan.n_geodesic[-1] < 0.95 * 8000
    # both slope 2 at leading order; the chord ball bends upward faster (closed forms)
    assert 2.0 < scan.fit_geodesic_closed.slope < scan.fit_chord_closed.slope < 2.1
    assert _inside(scan.fit_geodesic, 2.0, 0.1) and _inside(scan.fit_chord, 2.0, 0.1)
    with pytest.raises(ValueError, match="radii"):
        scans.ball_selection_scan(1.0, [0.1, 0.2])


def test_predicted_ratio_refuses_impossible_moments():
    """E[t⁴] >= E[t²]²: below it the predicted 'variance' would be negative."""
    with pytest.raises(ValueError, match="impossible moments"):
        th.predicted_ratio_from_moments(1.0, 1.0, 0.5)
    assert th.predicted_ratio_from_moments(1.0, 1.0, 1.0) == 0.0  # a fixed radius: no spread
