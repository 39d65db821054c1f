"""Residual isotropy: IsoScore* of points after a subspace is removed (Paper A, claim A5).

Removing a rank-k subspace ``U`` (orthonormal ``(d, k)``) from the states H means projecting
them onto its orthogonal complement and reading them in the complement's own coordinates, a
``(d - k)``-dimensional space: there IsoScore* is computed with ``n = d - k`` (the zero
variance the projection leaves along U is not a dimension of the residual).

IsoScore depends on a covariance only through its trace and Frobenius norm (the participation
ratio ``k_PR = tr(S)^2 / ||S||_F^2``, ``IsoScore = (k_PR - 1) / (n - 1)``; see
``geolib.measure.metrics``). For the complement's covariance ``Q^T S Q`` (``Q Q^T = I - U U^T``)
both follow from S and U without building Q:

    tr(Q^T S Q)      = tr(S) - tr(U^T S U)
    ||Q^T S Q||_F^2  = ||S||_F^2 - 2 ||S U||_F^2 + ||U^T S U||_F^2

so many subspaces (T, its normal controls, bootstrap resamples of S) cost one ``S @ U`` each.
Shrinkage commutes with the projection: the IsoScore* of the projected points with the
projected target C0 is the residual IsoScore of ``S = (1 - zeta) C + zeta C0``.

The same algebra gives the *top-k reference*: removing the top-k principal subspace of S leaves
its other eigenvalues, the largest cut of the spread any rank-k removal can make (by Cauchy
interlacing every compression's i-th eigenvalue lies between ``lam_{i+k}`` and ``lam_i``).
For anisotropic states, whose top eigenvalues stand well above the rest, that is also the
largest gain in IsoScore a rank-k removal makes: the issue's "maximum achievable" gain and the
yardstick for A5. It is not a maximum in general: for nearly isotropic states (e.g. isotropic
but for a dead direction) removing the top-k *lowers* IsoScore while random removals, which
also take some of the dead direction, do better; then :func:`gain_fraction` is undefined
(nothing to explain).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = [
    "SequenceMoments",
    "centred_replicates",
    "gain_fraction",
    "isoscore_of_covariance",
    "residual_isoscore",
    "shrink",
    "top_removal_isoscore",
    "top_removal_isoscore_near",
    "top_removal_isoscores",
]


#: a residual holding less than this share of the covariance's trace has nothing left to score
#: (what remains is rounding: a representation collapsed onto the removed subspace)
EMPTY_RESIDUAL = 1e-9


def _participation(total: Any, sum_sq: Any, n: int, trace: Any) -> np.ndarray:
    """IsoScore ``(tr^2 / ||.||_F^2 - 1) / (n - 1)`` of a residual with trace ``total`` and
    squared Frobenius norm ``sum_sq``, clipped to [0, 1], elementwise.

    NaN (undefined) where the residual keeps at most :data:`EMPTY_RESIDUAL` of ``trace`` (the
    covariance's own trace) or its ratio is not finite: the states span at most the removed
    subspace, and what is left is rounding. Callers count such units as undefined."""
    if n < 2:
        raise ValueError(f"IsoScore needs dimension >= 2, the residual has {n}")
    if np.any(np.asarray(trace) <= 0):
        raise ValueError("covariance is zero: no variance to measure")
    total, sum_sq = np.asarray(total, dtype=np.float64), np.asarray(sum_sq, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = total * total / sum_sq
    empty = (total <= EMPTY_RESIDUAL * np.asarray(trace, dtype=np.float64)) | ~np.isfinite(k)
    return np.clip((np.where(empty, np.nan, k) - 1.0) / (n - 1.0), 0.0, 1.0)


def _covariances(s: np.ndarray) -> np.ndarray:
    m = np.asarray(s, dtype=np.float64)
    if m.ndim not in (2, 3) or m.shape[-1] != m.shape[-2]:
        raise ValueError(f"covariance must be (d, d) or (B, d, d), got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError("covariance contains non-finite values")
    scale = np.abs(m).max()
    if np.abs(m - np.swapaxes(m, -1, -2)).max() > 1e-10 * scale:
        raise ValueError("covariance must be symmetric")
    return m


def _bases(u: np.ndarray, d: int) -> np.ndarray:
    b = np.asarray(u, dtype=np.float64)
    if b.ndim == 2:
        b = b[None]
    if b.ndim != 3 or b.shape[1] != d or not 1 <= b.shape[2] <= d - 2:
        raise ValueError(
            f"bases must be (d={d}, k) or (m, d, k) with 1 <= k <= d - 2, got shape {np.shape(u)}"
        )
    gram = np.einsum("mik,mil->mkl", b, b)
    if not np.allclose(gram, np.eye(b.shape[2]), atol=1e-8):
        raise ValueError("basis columns must be orthonormal")
    return b


def shrink(C: np.ndarray, C0: np.ndarray | None, zeta: float) -> np.ndarray:
    """``(1 - zeta) C + zeta C0`` (``C0=None``: the identity), the covariance IsoScore* scores;
    ``C`` may be a stack ``(B, d, d)``."""
    z = float(zeta)
    if not 0.0 <= z <= 1.0:
        raise ValueError(f"zeta must be in [0, 1], got {zeta!r}")
    c = np.asarray(C, dtype=np.float64)
    target = np.eye(c.shape[-1]) if C0 is None else np.asarray(C0, dtype=np.float64)
    if target.shape != c.shape[-2:]:
        raise ValueError(f"C0 must be {c.shape[-2:]}, got {target.shape}")
    return c if z == 0.0 else (1.0 - z) * c + z * target


def isoscore_of_covariance(S: np.ndarray) -> np.ndarray | float:
    """IsoScore of ``S`` itself (nothing removed; ``(d, d)`` or ``(B, d, d)``), by the same
    trace/Frobenius route, so that changes from it carry no method difference."""
    s = _covariances(S)
    tr = np.trace(s, axis1=-2, axis2=-1)
    out = _participation(tr, (s * s).sum((-2, -1)), s.shape[-1], tr)
    return float(out) if s.ndim == 2 else out


def residual_isoscore(S: np.ndarray, bases: np.ndarray, check_input: bool = True) -> np.ndarray:
    """IsoScore of the covariance(s) ``S`` after removing each subspace in ``bases``.

    ``S``: ``(d, d)`` or a stack ``(B, d, d)`` of symmetric PSD matrices (for IsoScore*, the
    shrunk covariance from :func:`shrink`). ``bases``: ``(d, k)`` or ``(m, d, k)`` orthonormal.
    Returns ``(m,)`` for one S, ``(B, m)`` for a stack: the IsoScore in the ``(d - k)``
    coordinates of each complement (module docstring). ``check_input=False`` skips the checks
    of ``S`` (finite, symmetric) for a caller that scores one checked stack against many bases:
    on a stack of 200 resampled covariances the checks cost more than the scores.
    """
    s = _covariances(S) if check_input else np.asarray(S, dtype=np.float64)
    single = s.ndim == 2
    s3 = s[None] if single else s
    d = s3.shape[-1]
    u = _bases(bases, d)
    k = u.shape[2]
    st, ut = torch.from_numpy(np.ascontiguousarray(s3)), torch.from_numpy(u)
    su = torch.einsum("bij,mjk->bmik", st, ut)  # (B, m, d, k)
    utsu = torch.einsum("mik,bmil->bmkl", ut, su)  # (B, m, k, k)
    tr_s = torch.diagonal(st, dim1=-2, dim2=-1).sum(-1)[:, None]
    fro_s = (st * st).sum((-2, -1))[:, None]
    total = tr_s - torch.diagonal(utsu, dim1=-2, dim2=-1).sum(-1)
    sum_sq = fro_s - 2.0 * (su * su).sum((-2, -1)) + (utsu * utsu).sum((-2, -1))
    out = _participation(total.numpy(), sum_sq.numpy(), d - k, tr_s.numpy())
    return out[0] if single else out


def top_removal_isoscores(S: np.ndarray, ranks: list[int]) -> dict[int, np.ndarray | float]:
    """``{k: IsoScore of S after removing its own top-k principal subspace}`` for every k in
    ``ranks``, from one eigendecomposition: the ``d - k`` smallest eigenvalues, scored in
    ``d - k`` dimensions. ``S``: ``(d, d)`` (floats) or ``(B, d, d)`` (``(B,)`` arrays)."""
    s = _covariances(S)
    d = s.shape[-1]
    for k in ranks:
        if isinstance(k, bool) or int(k) != k or not 1 <= k <= d - 2:
            raise ValueError(f"k must be an integer in [1, d - 2 = {d - 2}], got {k!r}")
    lam = torch.linalg.eigvalsh(torch.from_numpy(np.ascontiguousarray(s))).numpy()
    scale = np.abs(lam).max(axis=-1, keepdims=True)
    if np.any(lam[..., :1] < -1e-9 * scale):
        raise ValueError("covariance is not positive semidefinite")
    lam = np.clip(lam, 0.0, None)  # ascending
    # cumulative sums from the bottom: dropping the top k keeps lam[..., : d - k]
    c1, c2 = np.cumsum(lam, axis=-1), np.cumsum(lam * lam, axis=-1)
    out = {}
    for k in ranks:
        v = _participation(
            c1[..., d - int(k) - 1], c2[..., d - int(k) - 1], d - int(k), c1[..., -1]
        )
        out[int(k)] = float(v) if s.ndim == 2 else v
    return out


def top_removal_isoscore(S: np.ndarray, k: int) -> np.ndarray | float:
    """IsoScore of ``S`` (``(d, d)`` or ``(B, d, d)``) after removing its own top-k principal
    subspace (:func:`top_removal_isoscores` for one k)."""
    return top_removal_isoscores(S, [k])[int(k)]


def top_removal_isoscore_near(S: np.ndarray, start: np.ndarray, iters: int = 6) -> np.ndarray:
    """:func:`top_removal_isoscore` for a stack ``(B, d, d)`` of small perturbations of one
    covariance (bootstrap resamples), without ``B`` eigendecompositions: each resample's top-k
    subspace is found by ``iters`` steps of subspace iteration from ``start``, the ``(d, k)``
    top-k basis of the unperturbed covariance, then removed as in :func:`residual_isoscore`.
    From such a warm start the error falls like ``(lam_{k+1} / lam_k)^iters``; where the two
    are nearly equal, either subspace leaves nearly the same spectrum (tested against the
    exact route)."""
    s = torch.from_numpy(np.ascontiguousarray(_covariances(S)))
    if s.ndim != 3:
        raise ValueError(f"S must be a stack (B, d, d), got shape {tuple(s.shape)}")
    d = s.shape[-1]
    u0 = _bases(start, d)[0]
    k = u0.shape[1]
    v = torch.from_numpy(u0).expand(s.shape[0], d, k)
    for _ in range(int(iters)):
        v, _ = torch.linalg.qr(s @ v)
    sv = s @ v
    vtsv = v.transpose(1, 2) @ sv
    tr_s = torch.diagonal(s, dim1=-2, dim2=-1).sum(-1)
    total = tr_s - torch.diagonal(vtsv, dim1=-2, dim2=-1).sum(-1)
    sum_sq = (s * s).sum((-2, -1)) - 2.0 * (sv * sv).sum((-2, -1)) + (vtsv * vtsv).sum((-2, -1))
    return _participation(total.numpy(), sum_sq.numpy(), d - k, tr_s.numpy())


def gain_fraction(
    d_t: np.ndarray, d_n: np.ndarray, d_max: np.ndarray, min_gain: float = 1e-6
) -> np.ndarray:
    """``(dT - dN) / (dMax - dN)``: the share of the achievable gain, beyond the controls, that
    removing T delivers. NaN where ``dMax - dN <= min_gain`` (nothing to explain: no rank-k
    removal does better than a random one)."""
    num = np.asarray(d_t, dtype=np.float64) - d_n
    den = np.asarray(d_max, dtype=np.float64) - d_n
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > min_gain, num / den, np.nan)


def centred_replicates(draws: np.ndarray, estimate: float) -> tuple[np.ndarray, float]:
    """``(draws - bias, bias)``: bootstrap replicates of a plug-in IsoScore gain moved by their
    bootstrap bias ``bias = mean(draws) - estimate``, so that they are centred on the estimate.

    Why: IsoScore of a covariance estimated from few sequences is biased low (sampling noise
    spreads its eigenvalues, the most where the spectrum is flat: the bulk left after the top-k
    removal). A bootstrap resample is the sample plus a second dose of that noise (its duplicated
    sequences), so its replicates sit one bias below the estimate, and a percentile interval of a
    statistic whose bias exceeds its spread excludes the estimate. The moved replicates keep the
    bootstrap's spread and describe the plug-in at the sample's size, the quantity the estimate
    measures; ``bias`` is returned to be reported, not hidden. No finite draw: NaN bias, draws
    as given."""
    d = np.asarray(draws, dtype=np.float64)
    ok = np.isfinite(d)
    if not ok.any() or not np.isfinite(estimate):
        return d, float("nan")
    bias = float(d[ok].mean() - float(estimate))
    return d - bias, bias


class SequenceMoments:
    """First and second moments of each sequence's states about a fixed shift ``m0``, so that
    any reweighting of the sequences (a bootstrap resample) gives its covariance exactly.

    ``update(h)`` takes one sequence's states ``(n_tokens, d)``. The shift (e.g. the mean of a
    reference sample) keeps ``E[x x^T] - mean mean^T`` free of cancellation when the states'
    mean is large against their spread, as it is for LM activations.
    """

    def __init__(self, shift: np.ndarray) -> None:
        m0 = np.asarray(shift, dtype=np.float64)
        if m0.ndim != 1 or not np.all(np.isfinite(m0)):
            raise ValueError(f"shift must be a finite (d,) vector, got shape {m0.shape}")
        self.shift = m0
        self._n: list[int] = []
        self._s1: list[np.ndarray] = []
        self._s2: list[np.ndarray] = []

    def update(self, states: np.ndarray | torch.Tensor) -> None:
        x = torch.as_tensor(states, dtype=torch.float64)
        if x.ndim != 2 or x.shape[1] != self.shift.size or x.shape[0] < 1:
            raise ValueError(
                f"states must be (n_tokens >= 1, {self.shift.size}), got {tuple(x.shape)}"
            )
        x = x - torch.from_numpy(self.shift)
        self._n.append(int(x.shape[0]))
        self._s1.append(x.sum(0).numpy())
        self._s2.append((x.T @ x).numpy())

    @property
    def n_sequences(self) -> int:
        return len(self._n)

    def covariance(self, weights: np.ndarray | None = None) -> np.ndarray:
        """Population covariance of the (re)weighted tokens: ``(d, d)`` for ``weights=None`` (each
        sequence once) or ``(n_seq,)``; ``(B, d, d)`` for ``weights`` of shape ``(B, n_seq)``
        (e.g. bootstrap counts)."""
        if not self._n:
            raise ValueError("no sequences accumulated")
        n = np.asarray(self._n, dtype=np.float64)
        w = np.ones(len(n)) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape[-1] != len(n) or w.ndim > 2 or np.any(w < 0):
            raise ValueError(f"weights must be non-negative (…, {len(n)}), got shape {w.shape}")
        single = w.ndim == 1
        w2 = w[None] if single else w
        tokens = w2 @ n
        if np.any(tokens <= 0):
            raise ValueError("a weighting gives no tokens")
        d = self.shift.size
        s1 = (w2 @ np.stack(self._s1)) / tokens[:, None]
        s2 = (w2 @ np.stack(self._s2).reshape(len(n), -1)).reshape(-1, d, d) / tokens[:, None, None]
        cov = s2 - s1[:, :, None] * s1[:, None, :]
        cov = 0.5 * (cov + np.swapaxes(cov, -1, -2))
        return cov[0] if single else cov
