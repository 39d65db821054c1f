"""Claim A2's closed form at its limits: where it departs from the exact normal/tangent variance
ratio and where that ratio saturates (measured by root finding, not set), neighbourhoods chosen
by chord vs geodesic distance on the 2-sphere, and the factor one-sided neighbours introduce, per
density and per frame (true axes, local PCA). The curves, densities and ratios themselves are in
:mod:`geolib.theory.curvature`, with its conventions."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from geolib.measure import validate as check
from geolib.measure.validate import Seed
from geolib.theory.curvature import (
    RadialDensity,
    exact_sphere_normal_variance_ratio,
    local_pca,
    predicted_normal_variance_ratio,
    predicted_sphere_normal_variance_ratio,
    sample_circle,
    subspace_variance_ratio,
)

#: Grid of κρ on which the first crossing is bracketed before root finding (κρ below 1e-2 is
#: deep in the small-scale regime: the departure there is < 1e-4 for every density here).
_KR_GRID = np.logspace(-2.0, 4.0, 1201)


def closed_form_departure(kappa: float, density: RadialDensity) -> float:
    """Relative shortfall of the exact ratio below the paper's closed form: 1 − exact/closed.

    0 in the small-scale limit, → 1 as the scale grows (the exact ratio stays O(1) while the
    closed form grows as κ²·scale²). A departure δ means closed/exact = 1/(1 − δ).
    """
    k = check.scalar("kappa", kappa, low=0.0, strict=True)
    return 1.0 - exact_sphere_normal_variance_ratio(k, density) / (
        predicted_sphere_normal_variance_ratio(k, density)
    )


def exact_ratio_log_slope(kappa: float, density: RadialDensity, step: float = 1e-4) -> float:
    """Local log–log slope d log R_exact / d log scale (central difference in log scale).

    2 at small scale (the closed form's exponent), → 0 once the exact ratio saturates.
    """
    k = check.scalar("kappa", kappa, low=0.0, strict=True)
    h = check.scalar("step", step, low=0.0, strict=True)
    up = RadialDensity(density.kind, density.scale * math.exp(h), density.shape)
    down = RadialDensity(density.kind, density.scale * math.exp(-h), density.shape)
    return (
        math.log(exact_sphere_normal_variance_ratio(k, up))
        - math.log(exact_sphere_normal_variance_ratio(k, down))
    ) / (2.0 * h)


def _first_crossing(f: Any, level: float, what: str) -> float:
    """Smallest κρ on :data:`_KR_GRID` where ``f`` reaches ``level``, refined by Brent's method."""
    values = np.array([f(x) for x in _KR_GRID]) - level
    above = np.flatnonzero(values >= 0.0)
    if above.size == 0 or above[0] == 0:
        raise ValueError(f"{what} is not crossed inside kappa*rho in [1e-2, 1e4]")
    i = above[0]
    lo, hi = math.log(_KR_GRID[i - 1]), math.log(_KR_GRID[i])
    return math.exp(brentq(lambda x: f(math.exp(x)) - level, lo, hi, xtol=1e-12, rtol=1e-12))


def departure_kappa_rho(kind: str, departure: float, *, shape: float = 1.0) -> float:
    """κρ at which the closed form first departs from the exact ratio by ``departure``.

    Solves 1 − R_exact/R_closed = ``departure`` (:func:`closed_form_departure`) on the exact
    characteristic-function ratio: deterministic, no sampling. Both ratios depend on κ and
    the scale only through κ·scale, so the answer is a number per density, in units of κρ
    with ρ the :attr:`RadialDensity.effective_radius`. ``departure`` in [1e-3, 1).
    """
    d = check.scalar("departure", departure, low=1e-3)
    if d >= 1.0:
        raise ValueError(f"departure must be < 1, got {d}")
    RadialDensity(kind, 1.0, shape)  # validates kind and shape
    return _first_crossing(
        lambda kr: closed_form_departure(1.0, RadialDensity.with_effective_radius(kind, kr, shape)),
        d,
        f"departure {d:g}",
    )


@dataclass(frozen=True)
class Saturation:
    """Where the exact ratio stops following the closed form's s² law, for one density.

    ``kappa_rho_half_slope``: κρ at which the local log–log slope of the exact ratio against
    the scale (:func:`exact_ratio_log_slope`) falls to 1, half its small-scale value 2.
    ``sup_ratio``: the supremum of the exact ratio over all scales; ``kappa_rho_at_sup`` the κρ
    where it is attained, ``inf`` when it is only approached as the scale grows (the limit is 1
    for every density here: both E[cos κr] and E[cos 2κr] vanish). ``limit`` = 1.
    """

    kind: str
    shape: float
    kappa_rho_half_slope: float
    sup_ratio: float
    kappa_rho_at_sup: float
    limit: float = 1.0


def exact_ratio_saturation(kind: str, *, shape: float = 1.0) -> Saturation:
    """Measure :class:`Saturation` for a density kind (deterministic root finding)."""
    RadialDensity(kind, 1.0, shape)
    half = _first_crossing(
        lambda kr: (
            -exact_ratio_log_slope(1.0, RadialDensity.with_effective_radius(kind, kr, shape))
        ),
        -1.0,
        "log-log slope 1",
    )

    def ratio(kr: float) -> float:
        return exact_sphere_normal_variance_ratio(
            1.0, RadialDensity.with_effective_radius(kind, kr, shape)
        )

    values = np.array([ratio(x) for x in _KR_GRID])
    i = int(np.argmax(values))
    if 0 < i < _KR_GRID.size - 1 and values[i] > 1.0 + 1e-9:
        lo, hi = math.log(_KR_GRID[i - 1]), math.log(_KR_GRID[i + 1])
        opt = minimize_scalar(
            lambda x: -ratio(math.exp(x)),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-10},
        )
        return Saturation(kind, float(shape), half, float(-opt.fun), math.exp(float(opt.x)))
    return Saturation(kind, float(shape), half, 1.0, math.inf)


def cap_normal_variance_ratio(kappa: float, radius: Any) -> np.ndarray:
    """Normal / total tangent variance of points uniform on the 2-sphere of curvature κ within
    geodesic radius R of the base point (exact, vectorised over R).

    With z = cos κr uniform on [cos κR, 1] (Archimedes), the height (1 − z)/κ is uniform on
    [0, (1 − cos κR)/κ], so Var(normal) = (1 − cos κR)²/(12κ²), and the tangent part has mean
    zero and total variance E[1 − z²]/κ² = (1 − cos κR)(2 + cos κR)/(3κ²). Hence

        ratio = (1 − cos κR) / (4 (2 + cos κR)) = κ²R²/24 · (1 + κ²R²/12 + O(κ⁴R⁴)),

    the paper's closed form with the flat-disc moments E r² = R²/2, E r⁴ = R⁴/3 to leading
    order. κ = 0 gives 0. R must satisfy κR <= π.
    """
    k = check.kappa_value(kappa)
    big_r = check.array("radius", radius, positive=True)
    if np.any(k * big_r > math.pi):
        raise ValueError("radius must be <= pi/kappa")
    one_minus_cos = 2.0 * np.sin(0.5 * k * big_r) ** 2
    return one_minus_cos / (4.0 * (3.0 - one_minus_cos))


def chord_ball_geodesic_radius(kappa: float, radius: Any) -> np.ndarray:
    """Geodesic radius of the chord ball {x : |x| <= ε} on a sphere of curvature κ:
    (2/κ)·asin(κε/2) = ε + κ²ε³/24 + … (the chord–arc expansion inverted). Needs κε < 2."""
    k = check.kappa_value(kappa)
    eps = check.array("radius", radius, positive=True)
    if np.any(k * eps >= 2.0):
        raise ValueError("chord radius must be < 2/kappa (the sphere's diameter)")
    if k == 0.0:
        return eps.copy()
    return 2.0 / k * np.arcsin(0.5 * k * eps)


def chord_ball_normal_variance_ratio(kappa: float, radius: Any) -> np.ndarray:
    """:func:`cap_normal_variance_ratio` of the chord ball of radius ε on the 2-sphere.

    The chord ball is the geodesic cap of radius (2/κ)asin(κε/2), where 1 − cos κR = κ²ε²/2
    exactly, so ratio = κ²ε² / (24 − 4κ²ε²) = κ²ε²/24 · (1 + κ²ε²/6 + O(κ⁴ε⁴)): the same
    leading term as the geodesic ball of radius ε, with twice its first correction.
    """
    k = check.kappa_value(kappa)
    eps = check.array("radius", radius, positive=True)
    if np.any(k * eps >= 2.0):
        raise ValueError("chord radius must be < 2/kappa (the sphere's diameter)")
    x2 = (k * eps) ** 2
    return x2 / (24.0 - 4.0 * x2)


@dataclass(frozen=True)
class OneSidedFactors:
    """Leading-order (small κρ) factors for one-sided arclengths t = r >= 0, r ~ ``kind``.

    ``paper_over_true`` = Var(t)/E[t²]: the paper's form (E[t²] in the denominator) over the
    ratio in the true (base-point) axes, whose tangent variance is Var(t).
    ``pca_over_true`` = 1 − corr(t, t²)²: local PCA over true axes. The cloud (t, κt²/2) has
    covariance [[Var t, κ Cov(t,t²)/2], [·, κ² Var(t²)/4]]; to leading order in κ the smaller
    eigenvalue is κ²/4 (Var(t²) − Cov(t,t²)²/Var t) = κ²/4 Var(t²)(1 − corr²) and the larger is
    Var(t): PCA tilts its tangent axis and removes the linear part of the normal coordinate.
    ``paper_over_pca`` = their quotient. Scale-free: each depends only on the kind (and shape).
    Half-normal: 1 − 2/π ≈ 0.363 and 0.124; exponential: 1/2 and 1/5; gamma(a): 1/(a + 1) and
    1/(2a + 3). Two-sided t (E[t] = E[t³] = 0) gives 1 for every factor.
    """

    kind: str
    shape: float
    paper_over_true: float
    pca_over_true: float

    @property
    def paper_over_pca(self) -> float:
        return self.paper_over_true / self.pca_over_true


def one_sided_factors(kind: str, *, shape: float = 1.0) -> OneSidedFactors:
    """:class:`OneSidedFactors` from the density's moments E[t^k], k = 1…4."""
    g = RadialDensity(kind, 1.0, shape)
    m1, m2, m3, m4 = (g.moment(k) for k in (1, 2, 3, 4))
    var_t, var_t2, cov = m2 - m1**2, m4 - m2**2, m3 - m1 * m2
    return OneSidedFactors(kind, float(shape), var_t / m2, 1.0 - cov**2 / (var_t * var_t2))


@dataclass(frozen=True)
class OneSidedRatios:
    """Normal/tangent variance of one sample of circle points, in both frames, next to the
    paper's form (E[t²] in the denominator) and the Var(t) form on the same arclengths."""

    one_sided: bool
    true_axes: float
    local_pca: float
    paper_form: float
    var_t_form: float


def one_sided_ratios(
    kappa: float, density: RadialDensity, n: int, seed: Seed = 0, *, one_sided: bool = True
) -> OneSidedRatios:
    """Sample :func:`sample_circle` (one- or two-sided) and measure the ratio in the true axes
    (:func:`subspace_variance_ratio`) and by local PCA (:func:`local_pca`, 1 tangent axis)."""
    k = check.scalar("kappa", kappa, low=0.0, strict=True)
    nb = sample_circle(k, density, n, seed, one_sided=one_sided)
    t = nb.coords[:, 0]
    return OneSidedRatios(
        bool(one_sided),
        subspace_variance_ratio(nb),
        local_pca(nb.points, 1).ratio,
        predicted_normal_variance_ratio(k, t, "origin"),
        predicted_normal_variance_ratio(k, t, "mean"),
    )
