"""Claim A3, tangent gradient dominance: tangent and normal parts of the gradients of a linear
readout of points on a circle, by autograd, against their closed forms. The only torch user of
``geolib.theory`` (imported lazily, so the other theory modules load without it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from geolib.stats import SlopeFit, fit_loglog
from geolib.theory import validate as check
from geolib.theory.curvature import RadialDensity, chord_arc
from geolib.theory.validate import Seed

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
        fit_weight=fit_loglog(tt, w_nor / w_tan, level),
        fit_rep=fit_loglog(tt, r_nor / r_tan, level),
    )
