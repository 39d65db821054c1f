"""Paper A's theory in code: chord–arc curvature bias (A2), frequency variance collapse (A1)
and the gradient scaling check (A3), each with its closed form next to a seeded simulation.

The math layer: plain numbers and arrays in, small frozen dataclasses out. Nothing here knows
about models, files or notebooks. Every random draw comes from a ``seed`` argument (an int, a
``numpy.random.SeedSequence`` or a ``numpy.random.Generator``); bad parameters raise
``ValueError`` with the offending name.

Conventions
-----------
* A curve of constant curvature κ ≥ 0 is the circle of radius 1/κ through the origin, with unit
  tangent ``e_T = (1, 0)`` and unit normal ``e_N = (0, 1)`` (pointing to the centre) at the base
  point; κ = 0 is the tangent line. The point at signed arclength t is
  ``x(t) = (sin(κt)/κ, (1 − cos κt)/κ)``.
* Every log–log slope in this module comes from :func:`fit_loglog` (ordinary least squares on
  ``log y`` against ``log x``, two-sided Student-t confidence interval on the slope).

Public API
----------
slopes       :class:`SlopeFit`, :func:`fit_loglog`, :func:`student_t_quantile`
A2 geometry  :class:`ChordArc`, :func:`chord_arc`, :class:`ChordArcSeries`, :func:`chord_arc_series`
densities    :class:`RadialDensity`, :func:`frequency_density`
samplers     :class:`Neighbourhood`, :func:`sample_circle`, :func:`sample_sphere`,
             :func:`diagonal_second_form`, :func:`sample_quadratic_graph`
variance     :class:`LocalPCA`, :func:`local_pca`, :func:`subspace_variance_ratio`,
             :func:`normal_variance_ratio`, :func:`predicted_normal_variance_ratio`,
             :func:`predicted_ratio_from_moments`, :func:`predicted_sphere_normal_variance_ratio`,
             :func:`exact_sphere_normal_variance_ratio`, :func:`graph_normal_variance_ratios`
scans        :class:`CurvatureScan`, :func:`sphere_curvature_scan`, :class:`GraphCurvatureScan`,
             :func:`graph_curvature_scan`, :class:`FrequencyCurvatureScan`,
             :func:`frequency_curvature_scan`
A1           :func:`zipf_counts`, :func:`sgd_dispersion_theory`, :class:`VarianceCollapse`,
             :func:`variance_collapse`
A3           :class:`GradientScaling`, :func:`gradient_scaling`, :func:`readout_retention`
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # torch is imported lazily: only the A3 functions need it (saves ~2 s)
    import torch

__all__ = [
    "DENSITY_KINDS",
    "ChordArc",
    "ChordArcSeries",
    "CurvatureScan",
    "FrequencyCurvatureScan",
    "GradientScaling",
    "GraphCurvatureScan",
    "LocalPCA",
    "Neighbourhood",
    "RadialDensity",
    "SlopeFit",
    "VarianceCollapse",
    "chord_arc",
    "chord_arc_series",
    "diagonal_second_form",
    "exact_sphere_normal_variance_ratio",
    "fit_loglog",
    "frequency_curvature_scan",
    "frequency_density",
    "gradient_scaling",
    "graph_curvature_scan",
    "graph_normal_variance_ratios",
    "local_pca",
    "normal_variance_ratio",
    "predicted_normal_variance_ratio",
    "predicted_ratio_from_moments",
    "predicted_sphere_normal_variance_ratio",
    "readout_retention",
    "sample_circle",
    "sample_quadratic_graph",
    "sample_sphere",
    "sgd_dispersion_theory",
    "sphere_curvature_scan",
    "student_t_quantile",
    "subspace_variance_ratio",
    "variance_collapse",
    "zipf_counts",
]

Seed = int | np.random.SeedSequence | np.random.Generator


# ---------------------------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------------------------


def _scalar(name: str, value: Any, *, low: float | None = None, strict: bool = False) -> float:
    """A finite real number, optionally ``>= low`` (``> low`` if ``strict``)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x}")
    if low is not None and (x <= low if strict else x < low):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low}, got {x}")
    return x


def _kappa(kappa: Any) -> float:
    return _scalar("kappa", kappa, low=0.0)


def _integer(name: str, value: Any, *, low: int = 1) -> int:
    if isinstance(value, bool) or not float(value).is_integer():
        raise ValueError(f"{name} must be an integer, got {value!r}")
    n = int(value)
    if n < low:
        raise ValueError(f"{name} must be >= {low}, got {n}")
    return n


def _array(name: str, values: Any, *, positive: bool = False, min_size: int = 1) -> np.ndarray:
    """A non-empty 1-D float64 array of finite values (strictly positive if asked)."""
    a = np.asarray(values, dtype=np.float64)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.size < min_size:
        raise ValueError(f"{name} needs at least {min_size} value(s), got {a.size}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains non-finite values")
    if positive and np.any(a <= 0):
        raise ValueError(f"{name} must be strictly positive")
    return a


def _rng(seed: Seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    return np.random.default_rng(_integer("seed", seed, low=0))


def _child_seeds(seed: Seed, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent, reproducible child seeds."""
    if isinstance(seed, np.random.Generator):
        return [np.random.SeedSequence(int(s)) for s in seed.integers(0, 2**63, size=n)]
    if isinstance(seed, np.random.SeedSequence):
        return seed.spawn(n)
    return np.random.SeedSequence(_integer("seed", seed, low=0)).spawn(n)


# ---------------------------------------------------------------------------------------------
# Log–log slopes with confidence intervals (the one copy used everywhere)
# ---------------------------------------------------------------------------------------------


def _t_two_sided(t: float, dof: int) -> float:
    """P(|T| <= t) for Student's t with integer ``dof`` (Abramowitz & Stegun 26.7.3–4).

    Finite sums in θ = atan(t/√ν): exact for every integer ν, no special functions needed.
    """
    theta = math.atan(t / math.sqrt(dof))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if dof % 2 == 0:
        k = np.arange(1, dof // 2)
        terms = np.cumprod(c2 * (2 * k - 1) / (2 * k)) if k.size else np.zeros(0)
        return float(s * (1.0 + terms.sum()))
    if dof == 1:
        return 2.0 * theta / math.pi
    k = np.arange(1, (dof - 1) // 2)
    terms = np.cumprod(c2 * (2 * k) / (2 * k + 1)) if k.size else np.zeros(0)
    return float(2.0 / math.pi * (theta + s * math.cos(theta) * (1.0 + terms.sum())))


def _normal_quantile(p: float) -> float:
    """Standard normal quantile by bisection on ``math.erf`` (double precision)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def student_t_quantile(level: float, dof: int) -> float:
    """Half-width multiplier q of a two-sided ``level`` interval: P(|T_dof| <= q) = level.

    Exact (bisection on the closed-form CDF) for dof <= 2000; above that the Cornish–Fisher
    expansion to order 1/ν⁴, whose error there is below 1e-12.
    """
    level = _scalar("level", level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    dof = _integer("dof", dof)
    if dof > 2000:
        z = _normal_quantile(0.5 + level / 2.0)
        v = float(dof)
        return (
            z
            + (z**3 + z) / (4 * v)
            + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
            + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
        )
    lo, hi = 0.0, 1.0
    while _t_two_sided(hi, dof) < level:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_two_sided(mid, dof) < level:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * hi:
            break
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class SlopeFit:
    """OLS fit ``log y = intercept + slope · log x`` with a two-sided Student-t CI on the slope.

    ``stderr`` is the classical OLS standard error (residual variance / Σ(log x − mean)², ν = n − 2
    degrees of freedom); ``ci_low, ci_high = slope ∓ t_{ν}(level) · stderr``. The interval is the
    OLS one, not a bootstrap: it assumes independent, homoscedastic scatter in log y.
    """

    slope: float
    intercept: float
    stderr: float
    ci_low: float
    ci_high: float
    level: float
    n_points: int
    r_squared: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies inside the confidence interval."""
        return self.ci_low <= value <= self.ci_high

    def within(self, target: float, tol: float) -> bool:
        """Whether the whole confidence interval lies inside ``[target − tol, target + tol]``."""
        tol = _scalar("tol", tol, low=0.0)
        return target - tol <= self.ci_low and self.ci_high <= target + tol

    def predict(self, x: Any) -> np.ndarray:
        """The fitted power law ``exp(intercept) · x**slope``."""
        return np.exp(self.intercept) * np.asarray(x, dtype=np.float64) ** self.slope

    def label(self, digits: int = 2) -> str:
        """E.g. ``"slope 2.01 [1.97, 2.05] (95% CI)"``."""
        f = f"{{:.{digits}f}}"
        pct = f"{100 * self.level:g}"
        return (
            f"slope {f.format(self.slope)} [{f.format(self.ci_low)}, {f.format(self.ci_high)}]"
            f" ({pct}% CI)"
        )


def fit_loglog(x: Any, y: Any, level: float = 0.95) -> SlopeFit:
    """Fit the log–log slope of ``y`` against ``x`` (both strictly positive, at least 3 points)."""
    x = _array("x", x, positive=True, min_size=3)
    y = _array("y", y, positive=True, min_size=3)
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length, got {x.size} and {y.size}")
    lx, ly = np.log(x), np.log(y)
    mx, my = lx.mean(), ly.mean()
    sxx = float(np.sum((lx - mx) ** 2))
    if sxx <= 0.0:
        raise ValueError("x must take at least two distinct values")
    slope = float(np.sum((lx - mx) * (ly - my)) / sxx)
    intercept = float(my - slope * mx)
    resid = ly - (intercept + slope * lx)
    ssr, sst = float(resid @ resid), float(np.sum((ly - my) ** 2))
    dof = x.size - 2
    stderr = math.sqrt(ssr / dof / sxx)
    q = student_t_quantile(level, dof)
    r2 = 1.0 if sst == 0.0 else 1.0 - ssr / sst
    return SlopeFit(
        slope,
        intercept,
        stderr,
        slope - q * stderr,
        slope + q * stderr,
        float(level),
        int(x.size),
        r2,
    )


# ---------------------------------------------------------------------------------------------
# A2: chord–arc expansion
# ---------------------------------------------------------------------------------------------


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
    k = _kappa(kappa)
    t = _array("t", t)
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
        if self.kind not in DENSITY_KINDS:
            raise ValueError(f"kind must be one of {DENSITY_KINDS}, got {self.kind!r}")
        object.__setattr__(self, "scale", _scalar("scale", self.scale, low=0.0, strict=True))
        object.__setattr__(self, "shape", _scalar("shape", self.shape, low=0.0, strict=True))

    def sample(self, n: int, seed: Seed = 0) -> np.ndarray:
        """``n`` radial distances."""
        n, rng = _integer("n", n), _rng(seed)
        if self.kind == "half_normal":
            return np.abs(rng.normal(0.0, self.scale, size=n))
        if self.kind == "exponential":
            return rng.exponential(self.scale, size=n)
        return rng.gamma(self.shape, self.scale, size=n)

    def moment(self, k: float) -> float:
        """E[r^k] in closed form (k >= 0)."""
        k = _scalar("k", k, low=0.0)
        if self.kind == "half_normal":
            log_m = 0.5 * k * math.log(2.0) + math.lgamma((k + 1) / 2) - 0.5 * math.log(math.pi)
        elif self.kind == "exponential":
            log_m = math.lgamma(k + 1)
        else:
            log_m = math.lgamma(self.shape + k) - math.lgamma(self.shape)
        return math.exp(log_m + k * math.log(self.scale))

    @property
    def effective_radius(self) -> float:
        """ρ = √(E[r⁴]/E[r²]): the radius that dominates the curvature (normal) variance.

        The small-κt closed forms hold while κρ is small (κρ <= 0.5 keeps them within a few %).
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
    count: float, base_scale: float = 1.0, kind: str = "half_normal", shape: float = 1.0
) -> RadialDensity:
    """The radial density of a token seen ``count`` times: scale ``base_scale/√count``.

    Rationale (A1 feeding A2): the spread of a token's occurrences around its estimated
    centroid has standard deviation ∝ 1/√n, so its neighbourhood is sampled at radial
    distances of that scale.
    """
    n = _scalar("count", count, low=1.0)
    return RadialDensity(
        kind, _scalar("base_scale", base_scale, low=0.0, strict=True) / math.sqrt(n), shape
    )


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
    k, dim, n = _kappa(kappa), _integer("dim", dim), _integer("n", n)
    rng = _rng(seed)
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
    k, n = _kappa(kappa), _integer("n", n)
    t = density.sample(n, _rng(seed))
    ca = chord_arc(k, t)
    return Neighbourhood(np.stack([ca.tangent, ca.normal], axis=1), t[:, None], t, (0,), (1,))


def diagonal_second_form(curvatures: Any) -> np.ndarray:
    """Second fundamental form with principal curvatures ``curvatures`` (one per tangent axis).

    Each nonzero κ_j bends tangent axis j into its own normal axis: A_k = κ_j e_j e_jᵀ; zero
    entries are flat directions. Returns shape ``(m, d, d)`` with m = number of nonzero κ_j.
    """
    c = _array("curvatures", curvatures)
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
    a, n = _second_form(second_form), _integer("n", n)
    d, m = a.shape[1], a.shape[0]
    rng = _rng(seed)
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
    d = _integer("intrinsic_dim", intrinsic_dim)
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
    ca = chord_arc(kappa, _array("t", t, min_size=2))
    vt = float(np.var(ca.tangent))
    if vt <= 0.0:
        raise ValueError("t has no spread: the tangent variance is zero")
    return float(np.var(ca.normal)) / vt


def predicted_ratio_from_moments(kappa: float, m2: float, m4: float) -> float:
    """The closed form κ²(m4 − m2²)/(4 m2) from the moments m2 = E[t²], m4 = E[t⁴]."""
    k = _kappa(kappa)
    m2 = _scalar("m2", m2, low=0.0, strict=True)
    m4 = _scalar("m4", m4, low=0.0)
    return k**2 * (m4 - m2**2) / (4.0 * m2)


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
    the factor Var(t)/E[t²] (= 1 − 2/π ≈ 0.36 for half-normal t).

    Validity: κ·t small for the bulk of the fourth moment, i.e. κρ small with
    ρ = √(E[t⁴]/E[t²]) (:attr:`RadialDensity.effective_radius`); the exact ratio stays of
    order 1 (the points wrap around the circle) while this grows without bound as κ²·scale².
    """
    t = _array("t", t, min_size=2)
    if centre == "origin":
        denom = float(np.mean(t**2))
    elif centre == "mean":
        denom = float(np.var(t))
    else:
        raise ValueError(f"centre must be 'origin' or 'mean', got {centre!r}")
    if denom <= 0.0:
        raise ValueError("t has no spread")
    return _kappa(kappa) ** 2 * float(np.mean(t**4) - np.mean(t**2) ** 2) / (4.0 * denom)


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
    k = _kappa(kappa)
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


@dataclass(frozen=True)
class CurvatureScan:
    """Normal/tangent variance ratio of sphere neighbourhoods against the scale of g.

    ``simulated_pca`` is the local-PCA ratio (:class:`LocalPCA`), ``simulated_subspace`` the
    ratio in the true normal/tangent axes, ``closed_form`` the paper's small-scale formula
    (:func:`predicted_sphere_normal_variance_ratio`), ``exact`` the exact population value
    (:func:`exact_sphere_normal_variance_ratio`). ``fit`` is the log–log slope of
    ``simulated_pca`` against ``scales`` over the scales where κρ <= ``fit_max``, ρ the
    density's :attr:`RadialDensity.effective_radius` (the small-κt regime of the closed form).
    """

    kappa: float
    kind: str
    shape: float
    dim: int
    scales: np.ndarray
    simulated_pca: np.ndarray
    simulated_subspace: np.ndarray
    closed_form: np.ndarray
    exact: np.ndarray
    fit_mask: np.ndarray
    fit: SlopeFit


def sphere_curvature_scan(
    kappa: float,
    kind: str,
    scales: Any,
    *,
    dim: int = 2,
    shape: float = 1.0,
    n_points: int = 20000,
    fit_max: float = 0.5,
    level: float = 0.95,
    seed: Seed = 0,
) -> CurvatureScan:
    """Sample one sphere neighbourhood per scale and compare its local PCA with the closed forms."""
    k = _scalar("kappa", kappa, low=0.0, strict=True)
    scales = _array("scales", scales, positive=True)
    dim, n_points = _integer("dim", dim), _integer("n_points", n_points, low=dim + 2)
    fit_max = _scalar("fit_max", fit_max, low=0.0, strict=True)
    rho = np.array([RadialDensity(kind, s, shape).effective_radius for s in scales])
    mask = k * rho <= fit_max
    if mask.sum() < 3:
        raise ValueError(f"need >= 3 scales with kappa*rho <= fit_max={fit_max}, got {mask.sum()}")
    pca, sub, closed, exact = (np.empty(scales.size) for _ in range(4))
    for i, (s, child) in enumerate(zip(scales, _child_seeds(seed, scales.size), strict=True)):
        g = RadialDensity(kind, s, shape)
        nb = sample_sphere(k, dim, g, n_points, child)
        pca[i] = local_pca(nb.points, dim).ratio
        sub[i] = subspace_variance_ratio(nb)
        closed[i] = predicted_sphere_normal_variance_ratio(k, g)
        exact[i] = exact_sphere_normal_variance_ratio(k, g)
    fit = fit_loglog(scales[mask], pca[mask], level)
    return CurvatureScan(k, kind, float(shape), dim, scales, pca, sub, closed, exact, mask, fit)


@dataclass(frozen=True)
class GraphCurvatureScan:
    """Per-normal-direction variance on a quadratic graph against the scale of g.

    ``simulated`` and ``closed_form`` have shape (n_scales, m): variance of each normal axis
    over the total tangent variance; ``simulated_pca`` is the local-PCA total ratio. ``fit`` is
    the slope of ``simulated_pca`` over the scales with max(κ)·ρ <= ``fit_max`` (ρ: effective
    radius of the density).
    """

    curvatures: np.ndarray
    kind: str
    shape: float
    scales: np.ndarray
    simulated: np.ndarray
    closed_form: np.ndarray
    simulated_pca: np.ndarray
    fit_mask: np.ndarray
    fit: SlopeFit


def graph_curvature_scan(
    curvatures: Any,
    kind: str,
    scales: Any,
    *,
    shape: float = 1.0,
    n_points: int = 20000,
    fit_max: float = 0.5,
    level: float = 0.95,
    seed: Seed = 0,
) -> GraphCurvatureScan:
    """Quadratic-graph neighbourhoods with principal curvatures ``curvatures`` (some may be 0)."""
    c = _array("curvatures", curvatures)
    form = diagonal_second_form(c)
    if form.shape[0] == 0:
        raise ValueError("curvatures has no curved (nonzero) direction")
    scales = _array("scales", scales, positive=True)
    n_points = _integer("n_points", n_points, low=c.size + 2)
    fit_max = _scalar("fit_max", fit_max, low=0.0, strict=True)
    rho = np.array([RadialDensity(kind, s, shape).effective_radius for s in scales])
    mask = c.max() * rho <= fit_max
    if mask.sum() < 3:
        raise ValueError(f"need >= 3 scales with max(kappa)*rho <= fit_max={fit_max}")
    d, m = c.size, form.shape[0]
    sim, closed = np.empty((scales.size, m)), np.empty((scales.size, m))
    pca = np.empty(scales.size)
    for i, (s, child) in enumerate(zip(scales, _child_seeds(seed, scales.size), strict=True)):
        g = RadialDensity(kind, s, shape)
        nb = sample_quadratic_graph(form, g, n_points, child)
        var = np.var(nb.points, axis=0, ddof=1)
        sim[i] = var[d:] / var[:d].sum()
        closed[i] = graph_normal_variance_ratios(form, g)
        pca[i] = local_pca(nb.points, d).ratio
    fit = fit_loglog(scales[mask], pca[mask], level)
    return GraphCurvatureScan(c, kind, float(shape), scales, sim, closed, pca, mask, fit)


@dataclass(frozen=True)
class FrequencyCurvatureScan:
    """Normal/tangent variance ratio against token count n when the scale is base/√n.

    ``fit`` is the slope against ``counts`` (closed form: −1, twice the −½ of the scale).
    """

    counts: np.ndarray
    scan: CurvatureScan
    fit: SlopeFit


def frequency_curvature_scan(
    kappa: float,
    counts: Any,
    *,
    base_scale: float = 1.0,
    kind: str = "half_normal",
    shape: float = 1.0,
    dim: int = 2,
    n_points: int = 20000,
    fit_max: float = 0.5,
    level: float = 0.95,
    seed: Seed = 0,
) -> FrequencyCurvatureScan:
    """:func:`sphere_curvature_scan` at the scales of :func:`frequency_density` for ``counts``."""
    counts = _array("counts", counts, positive=True)
    if np.any(counts < 1):
        raise ValueError("counts must be >= 1")
    scales = np.array([frequency_density(n, base_scale, kind, shape).scale for n in counts])
    scan = sphere_curvature_scan(
        kappa,
        kind,
        scales,
        dim=dim,
        shape=shape,
        n_points=n_points,
        fit_max=fit_max,
        level=level,
        seed=seed,
    )
    mask = scan.fit_mask
    return FrequencyCurvatureScan(
        counts, scan, fit_loglog(counts[mask], scan.simulated_pca[mask], level)
    )


# ---------------------------------------------------------------------------------------------
# A1: frequency-induced variance collapse
# ---------------------------------------------------------------------------------------------


def zipf_counts(n_types: int, n_tokens: int, exponent: float = 1.0, seed: Seed = 0) -> np.ndarray:
    """Token counts of a corpus of ``n_tokens`` drawn from a Zipf law p_r ∝ r^(−exponent).

    One multinomial draw over ``n_types`` ranks; types never seen are dropped. Returned sorted
    in decreasing order (int64).
    """
    v, n = _integer("n_types", n_types), _integer("n_tokens", n_tokens)
    s = _scalar("exponent", exponent, low=0.0)
    p = np.arange(1, v + 1, dtype=np.float64) ** -s
    counts = _rng(seed).multinomial(n, p / p.sum())
    return np.sort(counts[counts > 0])[::-1].astype(np.int64)


def _lr_schedule(n_max: int, lr: float, lr_power: float) -> np.ndarray:
    """Per-type step sizes η_k = lr · k^(−lr_power), k = 1..n_max."""
    return lr * np.arange(1, n_max + 1, dtype=np.float64) ** -lr_power


def sgd_dispersion_theory(
    counts: Any,
    *,
    lr: float,
    lr_power: float = 0.0,
    noise: float = 1.0,
    init_var: Any = 1.0,
) -> np.ndarray:
    """Exact expected squared error per coordinate of SGD after n updates (quadratic toy).

    Update on each occurrence y = μ + σε of the type: e ← e − η_k (e − y), i.e. SGD on
    ½‖e − y‖². With a_n = Π_{k≤n}(1 − η_k) and v_n = Σ_j η_j² Π_{j<k≤n}(1 − η_k)²
    (recursion v_k = (1 − η_k)² v_{k−1} + η_k²):

        E[(e_n − μ)²] = a_n² · init_var + σ² · v_n,

    where ``init_var`` = E[(e_0 − μ)²] per coordinate (scalar or one value per type). Constant
    η (lr_power 0) gives exponential forgetting down to a floor σ²η/(2 − η): no power law. For
    0 < p < 1 the tail is ≈ σ²η_n/2 ∝ n^(−p); lr = 1, p = 1 is the running mean, σ²/n.
    """
    counts = _array("counts", counts, positive=True)
    if np.any(counts != np.round(counts)):
        raise ValueError("counts must be integers")
    lr = _scalar("lr", lr, low=0.0, strict=True)
    if lr > 1.0:
        raise ValueError(f"lr must be <= 1 (larger steps overshoot the target), got {lr}")
    p = _scalar("lr_power", lr_power, low=0.0)
    sigma = _scalar("noise", noise, low=0.0)
    n = counts.astype(np.int64)
    eta = _lr_schedule(int(n.max()), lr, p)
    a = np.cumprod(1.0 - eta)
    v = np.empty_like(eta)
    acc = 0.0
    for k, e in enumerate(eta):
        acc = (1.0 - e) ** 2 * acc + e**2
        v[k] = acc
    init_var = np.asarray(init_var, dtype=np.float64)
    return a[n - 1] ** 2 * init_var + sigma**2 * v[n - 1]


@dataclass(frozen=True)
class VarianceCollapse:
    """Per-type dispersion around the ideal centroid against the type's count.

    Dispersion = mean over replicates and coordinates of (estimate − μ)²; for the unbiased
    sample mean it is the sampling variance, for SGD it also contains the remaining bias from
    the initialisation. ``*_theory`` are the exact expectations (σ²/n and
    :func:`sgd_dispersion_theory`); ``fit_*`` are log–log slopes against the counts over all
    types (``fit_sgd_theory`` fits the expectation, to separate law from sampling noise).
    """

    counts: np.ndarray
    sample_mean: np.ndarray
    sgd: np.ndarray
    sample_mean_theory: np.ndarray
    sgd_theory: np.ndarray
    fit_sample_mean: SlopeFit
    fit_sgd: SlopeFit
    fit_sgd_theory: SlopeFit
    lr: float
    lr_power: float


def variance_collapse(
    counts: Any,
    *,
    dim: int = 4,
    noise: float = 1.0,
    n_replicates: int = 64,
    lr: float = 0.1,
    lr_power: float = 0.0,
    init_scale: float = 1.0,
    centroid_scale: float = 1.0,
    level: float = 0.95,
    seed: Seed = 0,
) -> VarianceCollapse:
    """Simulate A1: estimate each type's representation from its ``counts[i]`` occurrences.

    Each type i has an ideal centroid μ_i ~ N(0, centroid_scale² I_dim) (fixed). In each of
    ``n_replicates`` independent replicate corpora, its n_i occurrences are y = μ_i + noise·ε.
    Two estimators see the same occurrences: (1) the sample mean; (2) SGD on ½‖e − y‖², one step
    per occurrence with step η_k = lr·k^(−lr_power) at the type's k-th update, from
    e_0 ~ N(0, init_scale² I) drawn per replicate. Types are independent (separate parameters),
    so the interleaving of types in the corpus does not change either estimator.
    """
    counts = _array("counts", counts, positive=True)
    if np.any(counts != np.round(counts)):
        raise ValueError("counts must be integers >= 1")
    n = counts.astype(np.int64)
    dim, reps = _integer("dim", dim), _integer("n_replicates", n_replicates, low=2)
    sigma = _scalar("noise", noise, low=0.0, strict=True)
    init_scale = _scalar("init_scale", init_scale, low=0.0)
    centroid_scale = _scalar("centroid_scale", centroid_scale, low=0.0)
    lr = _scalar("lr", lr, low=0.0, strict=True)
    if lr > 1.0:
        raise ValueError(f"lr must be <= 1, got {lr}")
    p = _scalar("lr_power", lr_power, low=0.0)
    rng = _rng(seed)

    order = np.argsort(-n, kind="stable")  # types by decreasing count: updates act on a prefix
    ns = n[order]
    n_types, total = ns.size, int(ns.sum())
    starts = np.concatenate([[0], np.cumsum(ns)[:-1]])
    owner = np.repeat(np.arange(n_types), ns)
    mu = rng.normal(0.0, centroid_scale, size=(n_types, dim))
    eta = _lr_schedule(int(ns[0]), lr, p)
    active = np.searchsorted(-ns, -np.arange(1, ns[0] + 1), side="right")  # #types with n >= k

    chunk = max(1, 4_000_000 // (total * dim))
    sq_mean, sq_sgd = np.zeros(n_types), np.zeros(n_types)
    for first in range(0, reps, chunk):
        c = min(chunk, reps - first)
        y = mu[owner][None] + sigma * rng.normal(size=(c, total, dim))
        means = np.add.reduceat(y, starts, axis=1) / ns[None, :, None]
        sq_mean += ((means - mu[None]) ** 2).sum(axis=(0, 2))
        e = init_scale * rng.normal(size=(c, n_types, dim))
        for k in range(ns[0]):
            m = active[k]
            e[:, :m] -= eta[k] * (e[:, :m] - y[:, starts[:m] + k])
        sq_sgd += ((e - mu[None]) ** 2).sum(axis=(0, 2))

    inv = np.empty_like(order)
    inv[order] = np.arange(n_types)
    disp_mean = (sq_mean / (reps * dim))[inv]
    disp_sgd = (sq_sgd / (reps * dim))[inv]
    mean_theory = sigma**2 / n
    init_var = init_scale**2 + (mu**2).mean(axis=1)[inv]
    sgd_theory = sgd_dispersion_theory(n, lr=lr, lr_power=p, noise=sigma, init_var=init_var)
    return VarianceCollapse(
        counts=n,
        sample_mean=disp_mean,
        sgd=disp_sgd,
        sample_mean_theory=mean_theory,
        sgd_theory=sgd_theory,
        fit_sample_mean=fit_loglog(n, disp_mean, level),
        fit_sgd=fit_loglog(n, disp_sgd, level),
        fit_sgd_theory=fit_loglog(n, sgd_theory, level),
        lr=lr,
        lr_power=p,
    )


# ---------------------------------------------------------------------------------------------
# A3: gradient scaling
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GradientScaling:
    """Tangent and normal parts of per-point gradients at x(t) on a circle of curvature κ.

    Weight gradient G = ∂L/∂W (shape out × 2), split by the input directions of the base point:
    ``weight_tangent = ‖G e_T‖``, ``weight_normal = ‖G e_N‖``. Representation gradient
    g = ∂L/∂x at x(t), split in the frame of the curve at x(t): ``rep_tangent = |g·T(t)|``,
    ``rep_normal = |g·N(t)|``. Closed forms: ``weight_ratio_theory = tan(κt/2)`` and
    ``rep_ratio_theory = |tan(φ − κt)|`` with φ = ``readout_angle``, the angle of the effective
    readout row (MSE: w; cross-entropy: w_1 − w_0) from the base tangent.
    ``readout_init`` / ``readout_final``: the effective readout row (tangent, normal components)
    before and after training (equal for a random readout).
    ``fit_weight`` / ``fit_rep``: log–log slopes of the ratios against t.
    """

    kappa: float
    t: np.ndarray
    weight_tangent: np.ndarray
    weight_normal: np.ndarray
    rep_tangent: np.ndarray
    rep_normal: np.ndarray
    weight_ratio_theory: np.ndarray
    rep_ratio_theory: np.ndarray
    readout_angle: float
    readout_init: np.ndarray
    readout_final: np.ndarray
    fit_weight: SlopeFit
    fit_rep: SlopeFit

    @property
    def weight_ratio(self) -> np.ndarray:
        return self.weight_normal / self.weight_tangent

    @property
    def rep_ratio(self) -> np.ndarray:
        return self.rep_normal / self.rep_tangent


def readout_retention(
    kappa: float, train_scale: float, *, lr: float, steps: int, weight_decay: float = 0.0
) -> tuple[float, float]:
    """Predicted fraction of the initial distance to the optimum that survives training.

    For the MSE readout of :func:`gradient_scaling` trained by full-batch gradient descent on
    points t = ±r, r half-normal of scale s: the tangent input has variance E[u²] ≈ s² and the
    normal input Var(v) ≈ κ² Var(t²)/4 = κ²s⁴/2 (uncorrelated by symmetry, the bias absorbs
    E[v]), so each readout weight relaxes geometrically:

        tangent: (1 − lr(s² + λ))^steps,   normal: (1 − lr(κ²s⁴/2 + λ))^steps.

    Returns ``(tangent, normal)``. Small-κs approximation. This is A3's loop in numbers: the
    normal weight is frozen at its initial value once κ²s⁴ ≪ 1/(lr · steps).
    """
    k = _kappa(kappa)
    s = _scalar("train_scale", train_scale, low=0.0, strict=True)
    step = _scalar("lr", lr, low=0.0, strict=True)
    n = _integer("steps", steps, low=0)
    decay = _scalar("weight_decay", weight_decay, low=0.0)
    return (1.0 - step * (s**2 + decay)) ** n, (1.0 - step * (k**2 * s**4 / 2.0 + decay)) ** n


def _circle_points(kappa: float, t: torch.Tensor) -> torch.Tensor:
    import torch

    ca = chord_arc(kappa, t.numpy())
    return torch.from_numpy(np.stack([ca.tangent, ca.normal], axis=1))


def _readout_loss(loss: str):
    """Loss per point of a linear readout z = W x + b, for a batch: x (n, 2), y (n, out) → (n,)."""
    import torch

    def mse(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((x @ w.T + b - y) ** 2).sum(dim=-1)

    def cross_entropy(
        w: torch.Tensor, b: torch.Tensor, x: torch.Tensor, y: torch.Tensor
    ) -> torch.Tensor:
        z = x @ w.T + b
        return torch.logsumexp(z, dim=-1) - (z * y).sum(dim=-1)

    if loss == "mse":
        return mse
    if loss == "cross_entropy":
        return cross_entropy
    raise ValueError(f"loss must be 'mse' or 'cross_entropy', got {loss!r}")


def _targets(loss: str, t: torch.Tensor) -> torch.Tensor:
    """MSE: the intrinsic coordinate y = t; cross-entropy: one-hot of the class 1[t >= 0]."""
    import torch

    if loss == "mse":
        return t[:, None].clone()
    positive = (t >= 0).to(torch.float64)
    return torch.stack([1.0 - positive, positive], dim=1)


def gradient_scaling(
    kappa: float,
    t: Any,
    *,
    loss: str = "mse",
    readout: str = "random",
    init_scale: float = 1.0,
    train_scale: float = 0.3,
    n_train: int = 512,
    train_steps: int = 500,
    lr: float = 0.5,
    weight_decay: float = 0.0,
    level: float = 0.95,
    seed: Seed = 0,
) -> GradientScaling:
    """Per-point gradients of a linear readout at points x(t) on a circle, tangent vs normal.

    Setting: the representation is x(t) − x(0) (the base point is the origin), read out by
    z = W x + b. ``loss="mse"``: one output, target y = t (the intrinsic coordinate, a
    "concept" that varies along the manifold); ``loss="cross_entropy"``: two classes, target
    1[t >= 0]. ``readout="random"``: W ~ init_scale · N(0, 1), b = 0. ``readout="trained"``:
    from that init, ``train_steps`` of full-batch gradient descent (step ``lr``, L2 penalty
    ``weight_decay`` on W) on ``n_train`` points t = ±r (both signs of each r, so the sample is
    exactly symmetric and the optimal normal weight is 0), r half-normal of scale
    ``train_scale``. Gradients per point come from ``torch.func`` (autograd, float64).

    What scales how, and why:

    * Weight gradient. For any loss, ∂L/∂W = (∂L/∂z) xᵀ: the input enters as a factor, so its
      parts along the base tangent and normal are in the ratio |x_N|/|x_T| =
      (1 − cos κt)/sin κt = tan(κt/2) ≈ κt/2 exactly, whatever W, b or the loss. Slope 1 on a
      log–log plot: the normal input weights receive O(t) less gradient than the tangent ones.
    * Representation gradient. ∂L/∂x = Wᵀ(∂L/∂z) is the readout row (a direction fixed by W)
      times a scalar, so in the curve's frame at x(t) its normal/tangent ratio is
      |tan(φ − κt)|, φ the readout angle. It is O(t) only when the readout is tangent-aligned
      (φ ≈ 0, slope 1 for κt ≫ |φ|); for a generic readout it tends to |tan φ| (slope 0). A
      trained readout's normal weight is learned at a rate ∝ Var(x_N) = O(κ²s⁴) versus
      O(s²) for the tangent one (the first bullet, aggregated), so it stays near its initial
      value without weight decay: the representation-gradient slope depends on init and decay.

    ``t`` must be strictly positive arclengths (the other side mirrors with φ → −φ).
    """
    import torch

    # The tensors are tiny: intra-op threads only add contention, so run single-threaded.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _gradient_scaling(
            kappa,
            t,
            loss,
            readout,
            init_scale,
            train_scale,
            n_train,
            train_steps,
            lr,
            weight_decay,
            level,
            seed,
        )
    finally:
        torch.set_num_threads(threads)


def _gradient_scaling(
    kappa: float,
    t: Any,
    loss: str,
    readout: str,
    init_scale: float,
    train_scale: float,
    n_train: int,
    train_steps: int,
    lr: float,
    weight_decay: float,
    level: float,
    seed: Seed,
) -> GradientScaling:
    import torch

    k = _scalar("kappa", kappa, low=0.0, strict=True)
    tt = _array("t", t, positive=True, min_size=3)
    if readout not in ("random", "trained"):
        raise ValueError(f"readout must be 'random' or 'trained', got {readout!r}")
    loss_fn = _readout_loss(loss)
    init_scale = _scalar("init_scale", init_scale, low=0.0, strict=True)
    rng = _rng(seed)
    out = 1 if loss == "mse" else 2
    gen = torch.Generator().manual_seed(int(rng.integers(0, 2**62)))
    w = init_scale * torch.randn(out, 2, generator=gen, dtype=torch.float64)
    b = torch.zeros(out, dtype=torch.float64)
    w_init = (w[0] if out == 1 else w[1] - w[0]).numpy().copy()

    if readout == "trained":
        train_scale = _scalar("train_scale", train_scale, low=0.0, strict=True)
        n_train = _integer("n_train", n_train, low=2)
        steps = _integer("train_steps", train_steps, low=0)
        step = _scalar("lr", lr, low=0.0, strict=True)
        decay = _scalar("weight_decay", weight_decay, low=0.0)
        r = RadialDensity("half_normal", train_scale).sample((n_train + 1) // 2, rng)
        t_train = torch.from_numpy(np.concatenate([r, -r]))  # exactly symmetric: E[t] = 0
        x_train, y_train = _circle_points(k, t_train), _targets(loss, t_train)
        w, b = w.clone().requires_grad_(True), b.clone().requires_grad_(True)
        for _ in range(steps):
            objective = loss_fn(w, b, x_train, y_train).mean() + 0.5 * decay * (w**2).sum()
            gw, gb = torch.autograd.grad(objective, (w, b))
            with torch.no_grad():
                w -= step * gw
                b -= step * gb
        w, b = w.detach(), b.detach()

    t_eval = torch.from_numpy(tt)
    x, y = _circle_points(k, t_eval), _targets(loss, t_eval)
    grads = torch.func.vmap(torch.func.grad(loss_fn, argnums=(0, 2)), in_dims=(None, None, 0, 0))
    # per point: loss_fn on a single (2,) point and (out,) target returns a scalar
    gw, gx = grads(w, b, x, y)  # (n, out, 2), (n, 2)
    gw, gx = gw.numpy(), gx.numpy()
    ang = k * tt
    tangent = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    normal = np.stack([-np.sin(ang), np.cos(ang)], axis=1)
    w_eff = (w[0] if out == 1 else w[1] - w[0]).numpy()
    phi = float(math.atan2(w_eff[1], w_eff[0]))
    w_tan, w_nor = np.linalg.norm(gw[:, :, 0], axis=1), np.linalg.norm(gw[:, :, 1], axis=1)
    r_tan, r_nor = np.abs((gx * tangent).sum(1)), np.abs((gx * normal).sum(1))
    if np.any(w_tan == 0) or np.any(r_tan == 0):
        raise ValueError("a gradient vanished at some t (zero residual); ratios are undefined")
    return GradientScaling(
        kappa=k,
        t=tt,
        weight_tangent=w_tan,
        weight_normal=w_nor,
        rep_tangent=r_tan,
        rep_normal=r_nor,
        weight_ratio_theory=np.tan(ang / 2.0),
        rep_ratio_theory=np.abs(np.tan(phi - ang)),
        readout_angle=phi,
        readout_init=w_init,
        readout_final=w_eff,
        fit_weight=fit_loglog(tt, w_nor / w_tan, level),
        fit_rep=fit_loglog(tt, r_nor / r_tan, level),
    )
