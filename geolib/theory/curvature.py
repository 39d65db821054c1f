"""Claim A2, chord–arc curvature bias: the chord–arc expansion, radial densities, curved
neighbourhoods and the normal share of their local variance, each closed form next to a seeded
simulation. Where the paper's closed form departs from the exact ratio and where that ratio
saturates, neighbourhoods chosen by chord distance, and one-sided neighbours are in
:mod:`geolib.theory.curvature_limits`.

Conventions: a curve of constant curvature κ ≥ 0 is the circle of radius 1/κ through the
origin, with unit tangent ``e_T = (1, 0)`` and unit normal ``e_N = (0, 1)`` (pointing to the
centre) at the base point; κ = 0 is the tangent line. The point at signed arclength t is
``x(t) = (sin(κt)/κ, (1 − cos κt)/κ)``. Every log–log slope comes from
:func:`geolib.measure.stats.fit_loglog`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from geolib.measure import validate as check
from geolib.measure.validate import Seed


@dataclass(frozen=True)
class ChordArc:
    """Exact displacement of the point at signed arclength ``t`` on a circle of curvature κ.

    ``tangent = sin(κt)/κ``, ``normal = (1 − cos κt)/κ`` (towards the centre) and
    ``chord = 2|sin(κt/2)|/κ`` (the straight-line distance to the base point); κ = 0 gives
    ``(t, 0, |t|)``.
    """

    kappa: float
    t: np.ndarray
    tangent: np.ndarray
    normal: np.ndarray
    chord: np.ndarray


def chord_arc(kappa: float, t: Any) -> ChordArc:
    """Exact tangent and normal displacement and chord length at arclengths ``t`` (vectorised).

    Written with ``np.sinc`` so there is no 0/0 at κt → 0: sin(κt)/κ = t·sinc(κt/π),
    (1 − cos κt)/κ = 2 sin²(κt/2)/κ = (κt²/2)·sinc²(κt/2π) and 2 sin(κt/2)/κ = t·sinc(κt/2π).
    The normal form avoids the cancellation in 1 − cos κt, so relative accuracy holds at any t.
    """
    k = check.kappa_value(kappa)
    t = check.array("t", t)
    half = np.sinc(k * t / (2.0 * np.pi))
    return ChordArc(
        kappa=k,
        t=t,
        tangent=t * np.sinc(k * t / np.pi),
        normal=0.5 * k * t**2 * half**2,
        chord=np.abs(t * half),
    )


@dataclass(frozen=True)
class ChordArcSeries:
    """Small-t series of :class:`ChordArc` and their truncation errors.

    Series: tangent ≈ t, normal ≈ κt²/2, chord ≈ |t| − κ²|t|³/24. ``*_error`` is exact minus
    series (computed by subtraction, so it loses relative accuracy once it falls below ~1e-16·|t|);
    ``*_leading`` is the first omitted term: −κ²t³/6, −κ³t⁴/24 and +κ⁴|t|⁵/1920. Note the chord
    series is accurate to O(t⁵), one order better than the O(t⁴) often quoted, because the chord
    is an odd function of t.
    """

    exact: ChordArc
    tangent: np.ndarray
    normal: np.ndarray
    chord: np.ndarray
    tangent_error: np.ndarray
    normal_error: np.ndarray
    chord_error: np.ndarray
    tangent_leading: np.ndarray
    normal_leading: np.ndarray
    chord_leading: np.ndarray


def chord_arc_series(kappa: float, t: Any) -> ChordArcSeries:
    """The series t, κt²/2, t − κ²t³/24 at ``t``, with actual and leading truncation errors."""
    exact = chord_arc(kappa, t)
    k, t = exact.kappa, exact.t
    a = np.abs(t)
    tangent, normal, chord = t.copy(), 0.5 * k * t**2, a - k**2 * a**3 / 24.0
    return ChordArcSeries(
        exact=exact,
        tangent=tangent,
        normal=normal,
        chord=chord,
        tangent_error=exact.tangent - tangent,
        normal_error=exact.normal - normal,
        chord_error=exact.chord - chord,
        tangent_leading=-(k**2) * t**3 / 6.0,
        normal_leading=-(k**3) * t**4 / 24.0,
        chord_leading=k**4 * a**5 / 1920.0,
    )


# ---------------------------------------------------------------------------------------------
# Radial densities g(t)
# ---------------------------------------------------------------------------------------------

DENSITY_KINDS = ("half_normal", "exponential", "gamma")


@dataclass(frozen=True)
class RadialDensity:
    """A density g(r) of radial (geodesic) distances r >= 0 from the base point.

    ``half_normal``: |N(0, scale²)|; ``exponential``: mean ``scale``; ``gamma``: shape
    ``shape``, scale ``scale`` (``shape`` is ignored by the other two). Every kind is a scale
    family, E[r^k] = scale^k · m_k, which is what makes the curvature share scale like scale².
    """

    kind: str
    scale: float
    shape: float = 1.0

    def __post_init__(self) -> None:
        check.one_of("kind", self.kind, DENSITY_KINDS)
        object.__setattr__(self, "scale", check.scalar("scale", self.scale, low=0.0, strict=True))
        object.__setattr__(self, "shape", check.scalar("shape", self.shape, low=0.0, strict=True))

    def sample(self, n: int, seed: Seed = 0) -> np.ndarray:
        """``n`` radial distances."""
        n, rng = check.integer("n", n), check.rng(seed)
        if self.kind == "half_normal":
            return np.abs(rng.normal(0.0, self.scale, size=n))
        if self.kind == "exponential":
            return rng.exponential(self.scale, size=n)
        return rng.gamma(self.shape, self.scale, size=n)

    def moment(self, k: float) -> float:
        """E[r^k] in closed form (k >= 0)."""
        k = check.scalar("k", k, low=0.0)
        if self.kind == "half_normal":
            log_m = 0.5 * k * math.log(2.0) + math.lgamma((k + 1) / 2) - 0.5 * math.log(math.pi)
        elif self.kind == "exponential":
            log_m = math.lgamma(k + 1)
        else:
            log_m = math.lgamma(self.shape + k) - math.lgamma(self.shape)
        return math.exp(log_m + k * math.log(self.scale))

    @classmethod
    def with_effective_radius(cls, kind: str, radius: float, shape: float = 1.0) -> RadialDensity:
        """The density of ``kind`` (and ``shape``) whose :attr:`effective_radius` is ``radius``."""
        rho = check.scalar("radius", radius, low=0.0, strict=True)
        return cls(kind, rho / cls(kind, 1.0, shape).effective_radius, shape)

    @property
    def effective_radius(self) -> float:
        """ρ = √(E[r⁴]/E[r²]): the radius that dominates the curvature (normal) variance.

        The small-κt closed forms hold while κρ is small; how small, per density, is measured by
        :func:`departure_kappa_rho` (2% departure at κρ ≈ 1.22 / 0.39 / 0.52 for half-normal /
        exponential / gamma(3)).
        """
        return math.sqrt(self.moment(4) / self.moment(2))

    def mean_cos(self, omega: Any) -> np.ndarray:
        """E[cos(ω r)], the real part of the characteristic function (vectorised over ω)."""
        w = np.asarray(omega, dtype=np.float64) * self.scale
        if self.kind == "half_normal":
            return np.exp(-0.5 * w**2)
        if self.kind == "exponential":
            return 1.0 / (1.0 + w**2)
        return (1.0 + w**2) ** (-self.shape / 2) * np.cos(self.shape * np.arctan(w))


def frequency_density(
    dispersion: float, kind: str = "half_normal", shape: float = 1.0
) -> RadialDensity:
    """The radial density of a token whose A1 estimate has dispersion ``dispersion``: scale
    √dispersion.

    This is the paper's link from A1 to A2, and it is an **assumption**, not a consequence of
    A1: in A1's model a token's occurrences spread with the same σ for every count n; what
    shrinks like σ²/n is the dispersion of the *estimate* of its centroid
    (:func:`geolib.theory.collapse.sample_mean_dispersion`). Taking that dispersion as the
    squared scale of the token's neighbourhood is the paper's step, not A1's result.
    """
    d = check.scalar("dispersion", dispersion, low=0.0, strict=True)
    return RadialDensity(kind, math.sqrt(d), shape)


# ---------------------------------------------------------------------------------------------
# Curved neighbourhoods
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Neighbourhood:
    """Points sampled around a base point at the origin of R^D.

    ``coords`` are the intrinsic coordinates (geodesic normal coordinates on circle/sphere, the
    graph parameter u on a quadratic graph), ``radii = |coords|``; ``tangent_dims`` and
    ``normal_dims`` are the coordinate axes spanning the tangent and normal space at the base.
    """

    points: np.ndarray
    coords: np.ndarray
    radii: np.ndarray
    tangent_dims: tuple[int, ...]
    normal_dims: tuple[int, ...]


def _directions(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` directions uniform on the unit sphere S^{dim−1} (random signs when dim = 1)."""
    if dim == 1:
        return rng.choice(np.array([-1.0, 1.0]), size=(n, 1))
    g = rng.normal(size=(n, dim))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def sample_sphere(
    kappa: float, dim: int, density: RadialDensity, n: int, seed: Seed = 0
) -> Neighbourhood:
    """A geodesic neighbourhood on the ``dim``-sphere of curvature κ (radius 1/κ) in R^{dim+1}.

    Exponential map at the base point: a uniform direction ω in the tangent space and a geodesic
    distance r ~ ``density``; the point is ``(sin(κr)/κ · ω, (1 − cos κr)/κ)``. κ = 0 is a flat
    ``dim``-plane. ``dim = 1`` is the circle with t = ±r, signs equally likely.
    """
    k, dim, n = check.kappa_value(kappa), check.integer("dim", dim), check.integer("n", n)
    rng = check.rng(seed)
    r = density.sample(n, rng)
    omega = _directions(n, dim, rng)
    ca = chord_arc(k, r)
    points = np.concatenate([ca.tangent[:, None] * omega, ca.normal[:, None]], axis=1)
    return Neighbourhood(points, r[:, None] * omega, r, tuple(range(dim)), (dim,))


def sample_circle(
    kappa: float, density: RadialDensity, n: int, seed: Seed = 0, one_sided: bool = False
) -> Neighbourhood:
    """Points on the circle of curvature κ at signed arclength t = ±r, r ~ ``density``.

    ``one_sided=True`` keeps t = r >= 0 (neighbours on one side only), the case in which the
    closed form's E[t²] must be replaced by Var(t) (see :func:`predicted_normal_variance_ratio`).
    """
    if not one_sided:
        return sample_sphere(kappa, 1, density, n, seed)
    k, n = check.kappa_value(kappa), check.integer("n", n)
    t = density.sample(n, check.rng(seed))
    ca = chord_arc(k, t)
    return Neighbourhood(np.stack([ca.tangent, ca.normal], axis=1), t[:, None], t, (0,), (1,))


def sample_sphere_cap(
    kappa: float, dim: int, radius: float, n: int, seed: Seed = 0
) -> Neighbourhood:
    """``n`` points uniform (area measure) on the ``dim``-sphere of curvature κ > 0 within
    geodesic distance ``radius`` (<= π/κ) of the base point.

    Unlike :func:`sample_sphere`, whose radial distances follow a chosen density, here the
    radial law is the sphere's own: density ∝ sin^{dim−1}(κr) on [0, radius] (drawn by
    rejection from the flat law ∝ r^{dim−1}, acceptance (sin κr / κr)^{dim−1} >= 0). On the
    2-sphere the height (1 − cos κr)/κ is then uniform (Archimedes).
    """
    k = check.scalar("kappa", kappa, low=0.0, strict=True)
    dim, n = check.integer("dim", dim), check.integer("n", n)
    big_r = check.scalar("radius", radius, low=0.0, strict=True)
    if k * big_r > math.pi:
        raise ValueError(f"radius must be <= pi/kappa = {math.pi / k:.6g}, got {big_r}")
    rng = check.rng(seed)
    r = np.empty(0)
    while r.size < n:
        m = 2 * (n - r.size) + 16
        prop = big_r * rng.random(m) ** (1.0 / dim)
        keep = rng.random(m) < np.sinc(k * prop / np.pi) ** (dim - 1)
        r = np.concatenate([r, prop[keep]])
    r = r[:n]
    omega = _directions(n, dim, rng)
    ca = chord_arc(k, r)
    points = np.concatenate([ca.tangent[:, None] * omega, ca.normal[:, None]], axis=1)
    return Neighbourhood(points, r[:, None] * omega, r, tuple(range(dim)), (dim,))


BALL_METRICS = ("geodesic", "chord")


def select_ball(neighbourhood: Neighbourhood, radius: float, by: str) -> Neighbourhood:
    """The points of a sphere or circle neighbourhood within ``radius`` of the base point.

    ``by="geodesic"``: geodesic distance (the radial coordinate ``radii``, valid up to the
    antipode); ``by="chord"``: straight-line distance |x| in the ambient space, the only
    distance a method that sees points, not the manifold, can use.
    """
    eps = check.scalar("radius", radius, low=0.0, strict=True)
    if check.one_of("by", by, BALL_METRICS) == "geodesic":
        keep = neighbourhood.radii <= eps
    else:
        keep = np.linalg.norm(neighbourhood.points, axis=1) <= eps
    nb = neighbourhood
    return Neighbourhood(
        nb.points[keep], nb.coords[keep], nb.radii[keep], nb.tangent_dims, nb.normal_dims
    )


def diagonal_second_form(curvatures: Any) -> np.ndarray:
    """Second fundamental form with principal curvatures ``curvatures`` (one per tangent axis).

    Each nonzero κ_j bends tangent axis j into its own normal axis: A_k = κ_j e_j e_jᵀ; zero
    entries are flat directions. Returns shape ``(m, d, d)`` with m = number of nonzero κ_j.
    """
    c = check.array("curvatures", curvatures)
    if np.any(c < 0):
        raise ValueError("curvatures must be >= 0")
    d, curved = c.size, np.flatnonzero(c)
    form = np.zeros((curved.size, d, d))
    for k, j in enumerate(curved):
        form[k, j, j] = c[j]
    return form


def _second_form(second_form: Any) -> np.ndarray:
    a = np.asarray(second_form, dtype=np.float64)
    if a.ndim != 3 or a.shape[1] != a.shape[2] or a.shape[1] < 1:
        raise ValueError(f"second_form must have shape (m, d, d) with d >= 1, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("second_form contains non-finite values")
    if not np.allclose(a, np.swapaxes(a, 1, 2)):
        raise ValueError("second_form must be symmetric in its last two axes")
    return a


def sample_quadratic_graph(
    second_form: Any, density: RadialDensity, n: int, seed: Seed = 0
) -> Neighbourhood:
    """Points on the graph ``u ↦ (u, ½ uᵀA_1u, …, ½ uᵀA_m u)`` in R^{d+m}.

    ``second_form`` (shape ``(m, d, d)``) is the second fundamental form at the base point, so
    curvature can differ by direction: axes with zero rows in every A_k are flat. The graph
    parameter is u = r ω with r ~ ``density`` and ω uniform on S^{d−1}. This is the osculating
    quadric of any surface with that second fundamental form: exact to second order.
    """
    a, n = _second_form(second_form), check.integer("n", n)
    d, m = a.shape[1], a.shape[0]
    rng = check.rng(seed)
    r = density.sample(n, rng)
    u = r[:, None] * _directions(n, d, rng)
    heights = 0.5 * np.einsum("kij,ni,nj->nk", a, u, u)
    return Neighbourhood(
        np.concatenate([u, heights], axis=1), u, r, tuple(range(d)), tuple(range(d, d + m))
    )


# ---------------------------------------------------------------------------------------------
# Variance in curved directions: simulation and closed forms
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalPCA:
    """Local PCA of a neighbourhood: covariance eigenvalues (descending) split at ``intrinsic_dim``.

    The top ``intrinsic_dim`` eigenvalues are taken as tangent variance, the rest as normal
    (curvature) variance — what a PCA that knows only the dimension would report.
    """

    eigenvalues: np.ndarray
    intrinsic_dim: int
    tangent_variance: float
    normal_variance: float

    @property
    def ratio(self) -> float:
        """Normal variance / tangent variance."""
        return self.normal_variance / self.tangent_variance

    @property
    def share(self) -> float:
        """Normal variance / total variance."""
        return self.normal_variance / (self.normal_variance + self.tangent_variance)


def local_pca(points: Any, intrinsic_dim: int) -> LocalPCA:
    """PCA of ``points`` (n × D, centred on their mean, ddof = 1) split at ``intrinsic_dim``."""
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"points must be an (n >= 2, D) array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("points contain non-finite values")
    d = check.integer("intrinsic_dim", intrinsic_dim)
    if d > x.shape[1]:
        raise ValueError(f"intrinsic_dim {d} exceeds the ambient dimension {x.shape[1]}")
    cov = np.cov(x, rowvar=False).reshape(x.shape[1], x.shape[1])
    ev = np.clip(np.linalg.eigvalsh(cov)[::-1], 0.0, None)
    tangent = float(ev[:d].sum())
    if tangent <= 0.0:
        raise ValueError("points have no variance")
    return LocalPCA(ev, d, tangent, float(ev[d:].sum()))


def subspace_variance_ratio(neighbourhood: Neighbourhood) -> float:
    """Total variance in the true normal axes / total variance in the true tangent axes."""
    var = np.var(neighbourhood.points, axis=0, ddof=1)
    return float(
        var[list(neighbourhood.normal_dims)].sum() / var[list(neighbourhood.tangent_dims)].sum()
    )


def normal_variance_ratio(kappa: float, t: Any) -> float:
    """Var(normal) / Var(tangent) of the exact circle points at arclengths ``t`` (≥ 2 values)."""
    ca = chord_arc(kappa, check.array("t", t, min_size=2))
    vt = float(np.var(ca.tangent))
    if vt <= 0.0:
        raise ValueError("t has no spread: the tangent variance is zero")
    return float(np.var(ca.normal)) / vt


def predicted_ratio_from_moments(kappa: float, m2: float, m4: float) -> float:
    """The closed form κ²(m4 − m2²)/(4 m2) from the moments m2 = E[t²], m4 = E[t⁴]."""
    k = check.kappa_value(kappa)
    m2 = check.scalar("m2", m2, low=0.0, strict=True)
    m4 = check.scalar("m4", m4, low=0.0)
    if m4 < m2**2 * (1.0 - 1e-12):  # Jensen: E[t⁴] >= E[t²]²; below it Var(t²) would be < 0
        raise ValueError(f"impossible moments: m4 = {m4:g} < m2² = {m2**2:g} (E[t⁴] >= E[t²]²)")
    return k**2 * max(m4 - m2**2, 0.0) / (4.0 * m2)


def predicted_normal_variance_ratio(kappa: float, t: Any, centre: str = "origin") -> float:
    """Small-κt prediction of :func:`normal_variance_ratio` from the moments of ``t``.

    Derivation: normal = κt²/2 + O(κ³t⁴) and tangent = t + O(κ²t³), hence
    Var(normal) ≈ κ² Var(t²)/4 = κ²(E[t⁴] − E[t²]²)/4 and Var(tangent) ≈ Var(t), so

        ratio ≈ κ² (E[t⁴] − E[t²]²) / (4 Var(t)),   relative error O(κ² E[t⁴]/E[t²]).

    ``centre="origin"`` (default) is the paper's form with E[t²] in place of Var(t): it
    assumes E[t] = 0, i.e. neighbours symmetric about the base point (signed t, or radial r
    with a uniformly random direction on a sphere of any dimension, where the tangent part
    has mean zero and total variance E[r²]). ``centre="mean"`` uses Var(t) and is the right
    form for one-sided t (e.g. t ≥ 0 only), where the paper's form underestimates the ratio by
    the factor Var(t)/E[t²] (= 1 − 2/π ≈ 0.36 for half-normal t; per density and frame:
    :func:`one_sided_factors`).

    Validity: κ·t small for the bulk of the fourth moment, i.e. κρ small with
    ρ = √(E[t⁴]/E[t²]) (:attr:`RadialDensity.effective_radius`); the exact ratio stays of
    order 1 (the points wrap around the circle) while this grows without bound as κ²·scale².
    """
    t = check.array("t", t, min_size=2)
    if centre == "origin":
        denom = float(np.mean(t**2))
    elif centre == "mean":
        denom = float(np.var(t))
    else:
        raise ValueError(f"centre must be 'origin' or 'mean', got {centre!r}")
    if denom <= 0.0:
        raise ValueError("t has no spread")
    return check.kappa_value(kappa) ** 2 * float(np.mean(t**4) - np.mean(t**2) ** 2) / (4.0 * denom)


def predicted_sphere_normal_variance_ratio(kappa: float, density: RadialDensity) -> float:
    """The paper's closed form with the density's exact moments: κ²(E r⁴ − (E r²)²)/(4 E r²).

    For a scale family this is κ² · scale² · (m4 − m2²)/(4 m2): slope exactly 2 in the scale
    (half-normal: κ²s²/2; exponential: 5κ²s²/2; gamma(a): κ²s²(2a + 3)/2).
    """
    return predicted_ratio_from_moments(kappa, density.moment(2), density.moment(4))


def exact_sphere_normal_variance_ratio(kappa: float, density: RadialDensity) -> float:
    """Exact population ratio normal/tangent variance on a sphere (any dimension) or circle ±t.

    With c(ω) = E[cos ωr]: Var(normal) = (E[cos² κr] − c(κ)²)/κ² = ((1 + c(2κ))/2 − c(κ)²)/κ²
    and the total tangent variance is E[sin² κr]/κ² = (1 − c(2κ))/2/κ² (mean zero by symmetry),
    so ratio = ((1 + c(2κ))/2 − c(κ)²) / ((1 − c(2κ))/2). For half-normal r this is
    tanh(κ²s²/2): equal to the closed form κ²s²/2 to first order, saturating at 1 (other
    densities can overshoot 1 slightly before settling; the closed form grows without bound).
    For small κ the first-order expression is used (avoids cancellation); κ = 0 gives 0.
    """
    k = check.kappa_value(kappa)
    if k == 0.0:
        return 0.0
    if k * density.scale < 1e-3:
        return predicted_sphere_normal_variance_ratio(k, density)
    c1, c2 = float(density.mean_cos(k)), float(density.mean_cos(2.0 * k))
    return ((1.0 + c2) / 2.0 - c1**2) / ((1.0 - c2) / 2.0)


def graph_normal_variance_ratios(second_form: Any, density: RadialDensity) -> np.ndarray:
    """Variance of each normal coordinate of :func:`sample_quadratic_graph` / tangent variance.

    With u = rω, ω uniform on S^{d−1}: E[(ωᵀAω)²] = (2 tr A² + (tr A)²)/(d(d+2)) and
    E[ωᵀAω] = tr A/d, so Var(½uᵀA_k u) = ¼[E r⁴ (2 tr A_k² + (tr A_k)²)/(d(d+2))
    − (E r²)² (tr A_k)²/d²], while the total tangent variance is E[r²]. Exact at every scale
    (the graph is exactly quadratic); for d = 1 or A = κI it reduces to the paper's closed form.
    """
    a = _second_form(second_form)
    d = a.shape[1]
    m2, m4 = density.moment(2), density.moment(4)
    tr = np.trace(a, axis1=1, axis2=2)
    tr_sq = np.einsum("kij,kji->k", a, a)
    var = 0.25 * (m4 * (2.0 * tr_sq + tr**2) / (d * (d + 2)) - m2**2 * tr**2 / d**2)
    return var / m2
