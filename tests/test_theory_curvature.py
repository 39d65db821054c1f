"""geolib.theory.curvature (A2) against its closed forms: chord–arc, densities, neighbourhoods,
variance ratios and scans. Tolerances on simulated slopes hold at the fixed seeds used."""

import math

import numpy as np
import pytest

from geolib.stats import fit_loglog
from geolib.theory import curvature as th


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


def test_frequency_density_scale():
    assert th.frequency_density(100, 2.0).scale == pytest.approx(0.2)
    assert th.frequency_density(1, 2.0, "gamma", 3.0) == th.RadialDensity("gamma", 2.0, 3.0)
    with pytest.raises(ValueError, match="count"):
        th.frequency_density(0.5)


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

SCALES = np.logspace(-2, 0.5, 8)


@pytest.mark.parametrize(("kind", "shape"), [("half_normal", 1), ("exponential", 1), ("gamma", 3)])
def test_sphere_scan_slope_two(kind, shape):
    scan = th.sphere_curvature_scan(1.0, kind, SCALES, shape=shape, n_points=8000, seed=0)
    assert _inside(scan.fit, 2.0, 0.15)  # tolerance: ± 0.15 at 8000 points per scale
    m = scan.fit_mask
    np.testing.assert_allclose(scan.simulated_pca[m] / scan.closed_form[m], 1, atol=0.15)
    np.testing.assert_allclose(scan.simulated_subspace[m], scan.simulated_pca[m], rtol=0.02)
    # beyond the fit range the closed form overshoots the exact ratio
    assert scan.exact[-1] < scan.closed_form[-1]


def test_scan_is_deterministic_and_validates():
    a = th.sphere_curvature_scan(1.0, "half_normal", SCALES, n_points=500, seed=5)
    b = th.sphere_curvature_scan(1.0, "half_normal", SCALES, n_points=500, seed=5)
    np.testing.assert_array_equal(a.simulated_pca, b.simulated_pca)
    with pytest.raises(ValueError, match=">= 3 scales"):
        th.sphere_curvature_scan(1.0, "half_normal", [1.0, 2.0, 3.0], n_points=500)
    with pytest.raises(ValueError, match="kappa"):
        th.sphere_curvature_scan(0.0, "half_normal", SCALES, n_points=500)


def test_graph_scan_curved_and_flat_directions():
    scan = th.graph_curvature_scan([1.0, 0.25, 0.0], "half_normal", SCALES, n_points=8000, seed=0)
    assert scan.simulated.shape == (SCALES.size, 2)  # the flat direction adds no normal axis
    assert _inside(scan.fit, 2.0, 0.15)
    np.testing.assert_allclose(scan.simulated / scan.closed_form, 1, atol=0.15)
    # curvature 1 vs 0.25: variance ratio 16 at every scale
    np.testing.assert_allclose(scan.closed_form[:, 0] / scan.closed_form[:, 1], 16.0)
    with pytest.raises(ValueError, match="no curved"):
        th.graph_curvature_scan([0.0, 0.0], "half_normal", SCALES)


def test_frequency_scan_slope_minus_one():
    counts = np.logspace(0, 4, 9)
    scan = th.frequency_curvature_scan(1.0, counts, base_scale=1.0, n_points=8000, seed=0)
    assert _inside(scan.fit, -1.0, 0.08)
    with pytest.raises(ValueError, match="counts"):
        th.frequency_curvature_scan(1.0, [0.5, 1, 2, 3])


# ------------------------------------------------------------------------------------------
