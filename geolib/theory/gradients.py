"""Claim A3, tangent gradient dominance: tangent and normal parts of the gradients of a linear
readout of points on a circle, by autograd, against their closed forms. The only torch user of
``geolib.theory`` (imported lazily, so the other theory modules load without it).

Two gradients, two kinds of result:

* the **weight** (input-side) gradient ∂L/∂W = (∂ℓ/∂z) xᵀ carries the displacement x as a
  factor, so its normal/tangent ratio is tan(κt/2) by the chain rule: an identity, checked
  against autograd (:attr:`GradientScaling.weight_deviation`), whose log–log slope is the
  closed form κt/sin κt (:func:`weight_ratio_local_slope`), not an estimate;
* the **representation** gradient ∂L/∂x = Wᵀ(∂ℓ/∂z) of a scalar readout points along the
  readout row at every t; in the curve's moving frame its ratio is |tan(φ − κt)|, so its slope
  over a t grid is a function of the readout angle φ (:func:`rep_slope_closed_form`), shown as
  a distribution over readout draws (:func:`representation_slopes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from geolib.measure import validate as check
from geolib.measure.validate import Seed
from geolib.theory.curvature import RadialDensity, chord_arc

if TYPE_CHECKING:
    import torch


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
    ``rep_slope``: the plain least-squares slope of log(rep ratio) on log t over this t grid, a
    descriptive number (no interval: the ratio is a deterministic curve, not noisy data); it
    equals :func:`rep_slope_closed_form` at ``readout_angle``. The weight ratio needs no fit:
    its local slope is :func:`weight_ratio_local_slope`.
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
    rep_slope: float

    @property
    def weight_ratio(self) -> np.ndarray:
        return self.weight_normal / self.weight_tangent

    @property
    def rep_ratio(self) -> np.ndarray:
        return self.rep_normal / self.rep_tangent

    @property
    def weight_deviation(self) -> float:
        """max over t of |autograd weight ratio / tan(κt/2) − 1| (round-off for an identity)."""
        return float(np.max(np.abs(self.weight_ratio / self.weight_ratio_theory - 1.0)))

    @property
    def rep_deviation(self) -> float:
        """max over t of |autograd representation ratio / |tan(φ − κt)| − 1|."""
        return float(np.max(np.abs(self.rep_ratio / self.rep_ratio_theory - 1.0)))


def _kappa_t(kappa: float, t: Any) -> tuple[float, np.ndarray]:
    k = check.scalar("kappa", kappa, low=0.0, strict=True)
    tt = check.array("t", t, positive=True)
    if np.any(k * tt >= np.pi):
        raise ValueError(f"need 0 < kappa*t < pi (within half a turn), got max {np.max(k * tt):g}")
    return k, tt


def weight_ratio_local_slope(kappa: float, t: Any) -> np.ndarray:
    """The local log–log slope of the weight-gradient ratio: d log tan(κt/2) / d log t.

    d/dt log tan(κt/2) = κ / sin κt, so the slope is κt / sin κt = 1 + (κt)²/6 + O(t⁴): 1 as
    t → 0, above 1 at finite κt. A closed form, not a fit. Needs 0 < κt < π.
    """
    k, tt = _kappa_t(kappa, t)
    return 1.0 / np.sinc(k * tt / np.pi)  # sinc(x/π) = sin(x)/x


def _ls_slopes(log_t: np.ndarray, log_y: np.ndarray) -> np.ndarray:
    """Least-squares slopes of each row of ``log_y`` on ``log_t`` (last axis)."""
    lx = log_t - log_t.mean()
    return ((log_y - log_y.mean(axis=-1, keepdims=True)) * lx).sum(axis=-1) / (lx @ lx)


def rep_slope_closed_form(phi: Any, kappa: float, t: Any) -> np.ndarray:
    """Least-squares slope of log|tan(φ − κt)| on log t over the grid ``t``, for each φ.

    What :attr:`GradientScaling.rep_slope` is for a readout at angle φ (vectorised over φ; the
    result has φ's shape). Period π in φ. Limits: φ = 0 gives tan κt, slope ≈ 1 for small κt
    (1 + O((κt)²)); |φ| ≫ κt gives ≈ |tan φ| + O(t), slope ≈ 0; φ = ±π/2 gives cot κt, slope ≈ −1.
    Where φ ≡ κt (mod π) for some t of the grid, the ratio is 0 there and the slope is NaN;
    for φ between κ·min(t) and κ·max(t) (mod π) the ratio crosses zero inside the grid, and
    for φ between those bounds − π/2 the tangent part does (the ratio crosses ∞): there the
    slope is no power law (it jumps with φ).
    """
    k, tt = _kappa_t(kappa, t)
    if tt.size < 3 or np.ptp(tt) == 0:
        raise ValueError("t needs at least 3 values, not all equal, for a slope")
    p = np.asarray(phi, dtype=np.float64)
    if not np.all(np.isfinite(p)):
        raise ValueError("phi contains non-finite values")
    ratio = np.abs(np.tan(p[..., None] - k * tt))
    with np.errstate(divide="ignore", invalid="ignore"):
        slopes = _ls_slopes(np.log(tt), np.log(ratio))
    return np.where(np.all(ratio > 0, axis=-1), slopes, np.nan)


def fold_angle(phi: Any) -> np.ndarray:
    """A readout angle folded into (−π/2, π/2]: |tan(φ − κt)| has period π in φ."""
    p = np.asarray(phi, dtype=np.float64)
    return np.pi / 2 - np.mod(np.pi / 2 - p, np.pi)


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
    k = check.kappa_value(kappa)
    s = check.scalar("train_scale", train_scale, low=0.0, strict=True)
    step = check.scalar("lr", lr, low=0.0, strict=True)
    n = check.integer("steps", steps, low=0)
    decay = check.scalar("weight_decay", weight_decay, low=0.0)
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
      (1 − cos κt)/sin κt = tan(κt/2) ≈ κt/2 exactly, whatever W, b or the loss: an identity.
      Its local log–log slope is κt/sin κt → 1 (:func:`weight_ratio_local_slope`): the normal
      input weights receive O(t) less gradient than the tangent ones.
    * Representation gradient. ∂L/∂x = Wᵀ(∂L/∂z) is the readout row (a direction fixed by W)
      times a scalar, so in the curve's frame at x(t) its normal/tangent ratio is
      |tan(φ − κt)|, φ the readout angle. It is O(t) only when the readout is tangent-aligned
      (φ ≈ 0, slope 1 for κt ≫ |φ|); for a generic readout it tends to |tan φ| (slope 0). A
      trained readout's normal weight is learned at a rate ∝ Var(x_N) = O(κ²s⁴) versus
      O(s²) for the tangent one (the first bullet, aggregated), so it stays near its initial
      value without weight decay: the representation-gradient slope depends on init and decay.

    ``t`` must be strictly positive arclengths (the other side mirrors with φ → −φ), at least 3.
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
    seed: Seed,
) -> GradientScaling:
    import torch

    k = check.scalar("kappa", kappa, low=0.0, strict=True)
    tt = check.array("t", t, positive=True, min_size=3)
    if readout not in ("random", "trained"):
        raise ValueError(f"readout must be 'random' or 'trained', got {readout!r}")
    loss_fn = _readout_loss(loss)
    init_scale = check.scalar("init_scale", init_scale, low=0.0, strict=True)
    rng = check.rng(seed)
    out = 1 if loss == "mse" else 2
    gen = torch.Generator().manual_seed(int(rng.integers(0, 2**62)))
    w = init_scale * torch.randn(out, 2, generator=gen, dtype=torch.float64)
    b = torch.zeros(out, dtype=torch.float64)
    w_init = (w[0] if out == 1 else w[1] - w[0]).numpy().copy()

    if readout == "trained":
        train_scale = check.scalar("train_scale", train_scale, low=0.0, strict=True)
        n_train = check.integer("n_train", n_train, low=2)
        steps = check.integer("train_steps", train_steps, low=0)
        step = check.scalar("lr", lr, low=0.0, strict=True)
        decay = check.scalar("weight_decay", weight_decay, low=0.0)
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
        rep_slope=float(_ls_slopes(np.log(tt), np.log(r_nor / r_tan))),
    )


@dataclass(frozen=True)
class RepresentationSlopes:
    """The representation-gradient slope over independent readout draws (one readout setting).

    Per draw i (``seed`` → child seeds): ``readout_angle[i]``, the readout angle φ folded into
    (−π/2, π/2] (:func:`fold_angle`); ``slope[i]``, the least-squares log–log slope of the
    autograd normal/tangent ratio over ``t`` (:attr:`GradientScaling.rep_slope`, descriptive);
    ``slope_closed_form[i]``, :func:`rep_slope_closed_form` at that φ; ``readout_init`` /
    ``readout_final`` (n × 2), the readout row before and after training. ``rep_deviation`` /
    ``weight_deviation``: the largest |autograd / closed form − 1| of either ratio over all
    draws and t, and ``n_points`` the number of (draw, t) pairs they cover.
    """

    kappa: float
    t: np.ndarray
    readout_angle: np.ndarray
    slope: np.ndarray
    slope_closed_form: np.ndarray
    readout_init: np.ndarray
    readout_final: np.ndarray
    rep_deviation: float
    weight_deviation: float
    n_points: int

    @property
    def n(self) -> int:
        return int(self.slope.size)


def representation_slopes(
    kappa: float, t: Any, n_seeds: int, *, seed: Seed = 0, **settings: Any
) -> RepresentationSlopes:
    """Run :func:`gradient_scaling` for ``n_seeds`` independent readout draws of one setting.

    ``settings`` are :func:`gradient_scaling`'s keyword arguments (``loss``, ``readout``,
    ``init_scale``, ``weight_decay``, training sizes); draw i uses the i-th child seed of
    ``seed``, which sets both the readout initialisation and the training sample.
    """
    n = check.integer("n_seeds", n_seeds, low=1)
    runs = [gradient_scaling(kappa, t, seed=s, **settings) for s in check.child_seeds(seed, n)]
    angles = fold_angle([g.readout_angle for g in runs])
    return RepresentationSlopes(
        kappa=runs[0].kappa,
        t=runs[0].t,
        readout_angle=angles,
        slope=np.array([g.rep_slope for g in runs]),
        slope_closed_form=rep_slope_closed_form(angles, runs[0].kappa, runs[0].t),
        readout_init=np.stack([g.readout_init for g in runs]),
        readout_final=np.stack([g.readout_final for g in runs]),
        rep_deviation=max(g.rep_deviation for g in runs),
        weight_deviation=max(g.weight_deviation for g in runs),
        n_points=n * runs[0].t.size,
    )
