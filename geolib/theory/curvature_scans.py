"""Claim A2 in simulation: sampled neighbourhoods (spheres, a direction-dependent quadratic
graph, geodesic vs chord balls, token-frequency scales) against the closed forms of
:mod:`geolib.theory.curvature`, each scan a seeded simulation with its log–log slope.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from geolib.measure import validate as check
from geolib.measure.stats import SlopeFit, fit_loglog
from geolib.measure.validate import Seed
from geolib.theory.collapse import sample_mean_dispersion
from geolib.theory.curvature import (
    RadialDensity,
    diagonal_second_form,
    exact_sphere_normal_variance_ratio,
    frequency_density,
    graph_normal_variance_ratios,
    local_pca,
    predicted_sphere_normal_variance_ratio,
    sample_quadratic_graph,
    sample_sphere,
    sample_sphere_cap,
    select_ball,
    subspace_variance_ratio,
)
from geolib.theory.curvature_limits import (
    cap_normal_variance_ratio,
    chord_ball_geodesic_radius,
    chord_ball_normal_variance_ratio,
    departure_kappa_rho,
)


@dataclass(frozen=True)
class Sampling:
    """How a scan samples each scale, shared by the sphere, graph and frequency scans.

    The radial density g of ``kind`` (and ``shape``) at each scale, ``n_points`` points per
    scale from one child of ``seed`` per scale (in scale order), the fit range's
    ``fit_departure`` (:func:`departure_kappa_rho`) and the slope interval's ``level``.
    """

    kind: str
    shape: float = 1.0
    n_points: int = 20000
    fit_departure: float = 0.02
    level: float = 0.95
    seed: Seed = 0


def _fit_range(
    sampling: Sampling, scales: np.ndarray, kappa: float, kappa_name: str
) -> tuple[list[RadialDensity], float, np.ndarray, np.ndarray]:
    """The density per scale and the scales where the closed form still holds.

    Returns ``(densities, kr_max, kappa_rho, mask)``: ``mask`` keeps κρ <= ``kr_max``, the κρ
    at which the sphere's closed form departs from the exact ratio by ``fit_departure``; a
    slope needs 3 such scales. ``kappa_name`` names κ in the error (``max(kappa)`` for a graph).
    """
    kind, shape, departure = sampling.kind, sampling.shape, sampling.fit_departure
    kr_max = departure_kappa_rho(kind, departure, shape=shape)
    densities = [RadialDensity(kind, s, shape) for s in scales]
    kr = kappa * np.array([g.effective_radius for g in densities])
    mask = kr <= kr_max
    if mask.sum() < 3:
        raise ValueError(
            f"need >= 3 scales with {kappa_name}*rho <= {kr_max:.3g} (departure {departure:g}), "
            f"got {mask.sum()}"
        )
    return densities, kr_max, kr, mask


@dataclass(frozen=True)
class CurvatureScan:
    """Normal/tangent variance ratio of sphere neighbourhoods against the scale of g.

    ``simulated_pca`` is the local-PCA ratio (:class:`LocalPCA`), ``simulated_subspace`` the
    ratio in the true normal/tangent axes, ``closed_form`` the paper's small-scale formula
    (:func:`predicted_sphere_normal_variance_ratio`), ``exact`` the exact population value
    (:func:`exact_sphere_normal_variance_ratio`), ``kappa_rho`` = κ·effective radius per scale.
    ``fit`` is the log–log slope of ``simulated_pca`` against ``scales`` over the fit range
    ``fit_mask``: κρ <= ``fit_kappa_rho``, the κρ at which the closed form departs from the exact
    ratio by ``fit_departure`` for this density (:func:`departure_kappa_rho`, measured).
    """

    kappa: float
    kind: str
    shape: float
    dim: int
    scales: np.ndarray
    kappa_rho: np.ndarray
    simulated_pca: np.ndarray
    simulated_subspace: np.ndarray
    closed_form: np.ndarray
    exact: np.ndarray
    fit_departure: float
    fit_kappa_rho: float
    fit_mask: np.ndarray
    fit: SlopeFit


def sphere_curvature_scan(
    kappa: float, scales: Any, sampling: Sampling, *, dim: int = 2
) -> CurvatureScan:
    """Sample one sphere neighbourhood per scale and compare its local PCA with the closed forms."""
    k = check.scalar("kappa", kappa, low=0.0, strict=True)
    scales = check.array("scales", scales, positive=True)
    dim = check.integer("dim", dim)
    n_points = check.integer("n_points", sampling.n_points, low=dim + 2)
    densities, kr_max, kr, mask = _fit_range(sampling, scales, k, "kappa")
    pca, sub, closed, exact = (np.empty(scales.size) for _ in range(4))
    children = check.child_seeds(sampling.seed, scales.size)
    for i, (g, child) in enumerate(zip(densities, children, strict=True)):
        nb = sample_sphere(k, dim, g, n_points, child)
        pca[i] = local_pca(nb.points, dim).ratio
        sub[i] = subspace_variance_ratio(nb)
        closed[i] = predicted_sphere_normal_variance_ratio(k, g)
        exact[i] = exact_sphere_normal_variance_ratio(k, g)
    fit = fit_loglog(scales[mask], pca[mask], sampling.level)
    return CurvatureScan(
        k,
        sampling.kind,
        float(sampling.shape),
        dim,
        scales,
        kr,
        pca,
        sub,
        closed,
        exact,
        float(sampling.fit_departure),
        kr_max,
        mask,
        fit,
    )


@dataclass(frozen=True)
class GraphCurvatureScan:
    """Per-normal-direction variance on a quadratic graph against the scale of g.

    ``simulated`` and ``closed_form`` have shape (n_scales, m): variance of each normal axis
    over the total tangent variance; ``simulated_pca`` is the local-PCA total ratio. The closed
    form is exact for the graph at every scale, so the fit range is borrowed from the manifold
    the graph osculates: ``fit`` is the slope of ``simulated_pca`` over the scales with
    max(κ)·ρ <= ``fit_kappa_rho``, the κρ at which the sphere of the largest curvature departs
    from its closed form by ``fit_departure`` (:func:`departure_kappa_rho` for the same
    density). Beyond it a real manifold with these curvatures is no longer quadratic to that
    accuracy, and local PCA starts to mistake normal for tangent axes.
    """

    curvatures: np.ndarray
    kind: str
    shape: float
    scales: np.ndarray
    simulated: np.ndarray
    closed_form: np.ndarray
    simulated_pca: np.ndarray
    fit_departure: float
    fit_kappa_rho: float
    fit_mask: np.ndarray
    fit: SlopeFit


def graph_curvature_scan(curvatures: Any, scales: Any, sampling: Sampling) -> GraphCurvatureScan:
    """Quadratic-graph neighbourhoods with principal curvatures ``curvatures`` (some may be 0)."""
    c = check.array("curvatures", curvatures)
    form = diagonal_second_form(c)
    if form.shape[0] == 0:
        raise ValueError("curvatures has no curved (nonzero) direction")
    scales = check.array("scales", scales, positive=True)
    n_points = check.integer("n_points", sampling.n_points, low=c.size + 2)
    densities, kr_max, _, mask = _fit_range(sampling, scales, c.max(), "max(kappa)")
    d, m = c.size, form.shape[0]
    sim, closed = np.empty((scales.size, m)), np.empty((scales.size, m))
    pca = np.empty(scales.size)
    children = check.child_seeds(sampling.seed, scales.size)
    for i, (g, child) in enumerate(zip(densities, children, strict=True)):
        nb = sample_quadratic_graph(form, g, n_points, child)
        var = np.var(nb.points, axis=0, ddof=1)
        sim[i] = var[d:] / var[:d].sum()
        closed[i] = graph_normal_variance_ratios(form, g)
        pca[i] = local_pca(nb.points, d).ratio
    fit = fit_loglog(scales[mask], pca[mask], sampling.level)
    shape, departure = float(sampling.shape), float(sampling.fit_departure)
    return GraphCurvatureScan(
        c, sampling.kind, shape, scales, sim, closed, pca, departure, kr_max, mask, fit
    )


@dataclass(frozen=True)
class BallSelectionScan:
    """Geodesic- vs chord-distance neighbourhoods on the 2-sphere, against the ball radius ε.

    For each ε, ``n_points`` points uniform on the sphere within the chord ball's geodesic
    radius ``chord_geodesic_radius`` (:func:`chord_ball_geodesic_radius`, >= ε) are drawn once;
    the geodesic ball keeps those with geodesic distance <= ε, the chord ball those with
    |x| <= ε (all of them). ``*_pca`` are local-PCA ratios, ``*_subspace`` true-axis ratios,
    ``*_closed`` the exact closed forms (:func:`cap_normal_variance_ratio`,
    :func:`chord_ball_normal_variance_ratio`), ``n_*`` the points in each ball. ``fit_*`` are
    log–log slopes of the local-PCA ratios against ε over all radii; ``fit_*_closed`` the same
    fit of the closed forms (no sampling noise: the curvature of the law over the range).
    """

    kappa: float
    radii: np.ndarray
    chord_geodesic_radius: np.ndarray
    geodesic_pca: np.ndarray
    chord_pca: np.ndarray
    geodesic_subspace: np.ndarray
    chord_subspace: np.ndarray
    geodesic_closed: np.ndarray
    chord_closed: np.ndarray
    n_geodesic: np.ndarray
    n_chord: np.ndarray
    fit_geodesic: SlopeFit
    fit_chord: SlopeFit
    fit_geodesic_closed: SlopeFit
    fit_chord_closed: SlopeFit


def ball_selection_scan(
    kappa: float, radii: Any, *, n_points: int = 20000, level: float = 0.95, seed: Seed = 0
) -> BallSelectionScan:
    """The geodesic- vs chord-ball comparison on the 2-sphere (:class:`BallSelectionScan`)."""
    k = check.scalar("kappa", kappa, low=0.0, strict=True)
    eps = check.array("radii", radii, positive=True, min_size=3)
    n_points = check.integer("n_points", n_points, low=8)
    big_r = chord_ball_geodesic_radius(k, eps)
    out = {key: np.empty(eps.size) for key in ("gp", "cp", "gs", "cs", "ng", "nc")}
    for i, (e, child) in enumerate(zip(eps, check.child_seeds(seed, eps.size), strict=True)):
        nb = sample_sphere_cap(k, 2, big_r[i], n_points, child)
        for tag, by in (("g", "geodesic"), ("c", "chord")):
            ball = select_ball(nb, e, by)
            out[f"{tag}p"][i] = local_pca(ball.points, 2).ratio
            out[f"{tag}s"][i] = subspace_variance_ratio(ball)
            out[f"n{tag}"][i] = ball.radii.size
    geo_closed = cap_normal_variance_ratio(k, eps)
    chord_closed = chord_ball_normal_variance_ratio(k, eps)
    return BallSelectionScan(
        k,
        eps,
        big_r,
        out["gp"],
        out["cp"],
        out["gs"],
        out["cs"],
        geo_closed,
        chord_closed,
        out["ng"].astype(int),
        out["nc"].astype(int),
        fit_loglog(eps, out["gp"], level),
        fit_loglog(eps, out["cp"], level),
        fit_loglog(eps, geo_closed, level),
        fit_loglog(eps, chord_closed, level),
    )


@dataclass(frozen=True)
class FrequencyCurvatureScan:
    """Normal/tangent variance ratio against token count n under the paper's assumption that a
    token's neighbourhood scale is the spread of A1's estimate of its centroid.

    ``dispersion`` is :func:`geolib.theory.collapse.sample_mean_dispersion` (simulated,
    expectation noise²/n) and the scan's scales are √dispersion (:func:`frequency_density`).
    ``fit`` is the slope of the local-PCA ratio against ``counts`` over the scan's fit range.
    It is −1 **by construction** (slope 2 in the scale, scale² ∝ 1/n): an illustration of the
    assumption, not evidence for it.
    """

    counts: np.ndarray
    dispersion: np.ndarray
    scan: CurvatureScan
    fit: SlopeFit


def frequency_curvature_scan(
    kappa: float,
    counts: Any,
    sampling: Sampling | None = None,
    *,
    noise: float = 1.0,
    dim: int = 2,
    n_replicates: int = 64,
) -> FrequencyCurvatureScan:
    """:func:`sphere_curvature_scan` at the scales √(A1 estimator dispersion) for ``counts``.

    The dispersion is simulated in ``dim`` coordinates with ``n_replicates`` replicate corpora
    and per-occurrence spread ``noise`` (A1's σ). ``sampling`` defaults to the half-normal
    density; its seed is split between the dispersion and the scan.
    """
    sampling = Sampling("half_normal") if sampling is None else sampling
    counts = check.array("counts", counts, positive=True)
    if np.any(counts < 1):
        raise ValueError("counts must be >= 1")
    disp_seed, scan_seed = check.child_seeds(sampling.seed, 2)
    dispersion = sample_mean_dispersion(
        counts, dim=dim, noise=noise, n_replicates=n_replicates, seed=disp_seed
    )
    scales = np.array(
        [frequency_density(v, sampling.kind, sampling.shape).scale for v in dispersion]
    )
    scan = sphere_curvature_scan(kappa, scales, replace(sampling, seed=scan_seed), dim=dim)
    mask = scan.fit_mask
    return FrequencyCurvatureScan(
        counts, dispersion, scan, fit_loglog(counts[mask], scan.simulated_pca[mask], sampling.level)
    )
