"""Geometry metrics of point clouds and weight matrices (the measure wing's math: numpy and
torch only; no files, runs or models).

Every function follows the definitions in ``PAPERS.md`` ("Metric definitions") exactly and says
which variant it computes. Conventions shared by all of them:

* Rows are points: ``X`` / ``W`` has shape ``(n, d)`` (n points or vocabulary rows, d features).
* Inputs are numpy arrays, torch tensors (any device, any real floating dtype including float16
  and bfloat16) or nested sequences, read as float64 row blocks by :mod:`geolib.measure.blocks`,
  so a float32 matrix is never copied whole and every result is accurate to float64. Results
  are plain Python floats.
* Spectral quantities come from the float64 d x d Gram (or scatter) matrix of
  :func:`~geolib.measure.blocks.gram` (BLAS ``syrk``), followed by a cheap ``eigh`` of the small
  matrix. Centring costs no extra pass (:func:`~geolib.measure.blocks.scatter`).
* Thread pools: numpy's BLAS (OpenBLAS) and torch's (MKL/OpenMP) each keep idle workers spinning
  for a while after a call (OpenBLAS: ~0.1 s), and on a 2-core machine a 2-thread op of the other
  pool then runs up to 2x slower. So a pass over the data calls one pool only: the one-shot
  metrics run their Gram passes on numpy's BLAS (syrk: the fastest route) and the d x d
  eigensolvers on torch with one thread; torch conversions inside a pass (bfloat16, GPU tensors)
  run on one thread. :meth:`StreamingCovariance.update`, which is called between the forward
  passes of a model, uses torch's BLAS instead (measured: with numpy's, the forward passes of a
  128-wide model in between ran 2x slower). A torch op started right after a one-shot metric
  still shares a core with OpenBLAS's spinning worker for up to ~0.1 s.
* Bad input raises ``ValueError`` with a message naming the argument. All input checks live in
  :func:`~geolib.measure.blocks.validate` and the :class:`~geolib.measure.blocks.Matrix` it
  returns; :func:`~geolib.measure.blocks.validate_cov` builds on it for covariances.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from geolib.measure.blocks import (
    COV_RTOL,
    ArrayLike,
    Matrix,
    gram,
    one_thread,
    scatter,
    validate,
    validate_cov,
)

__all__ = [
    "ArrayLike",
    "StreamingCovariance",
    "effective_rank",
    "isoscore",
    "isoscore_from_cov",
    "isoscore_star",
    "isoscore_star_from_cov",
    "mean_cosine_similarity",
    "partition_isotropy",
    "singular_entropy",
    "stable_rank",
]

_EPS = float(np.finfo(np.float64).eps)
_ERANK_RTOL = 1e-10  # tolerated a-posteriori relative error of the Gram route for effective rank


class StreamingCovariance:
    """Mean and covariance of rows seen in batches, in O(d^2) memory, accurate to float64.

    Each batch's scatter ``M2_b`` comes from :func:`scatter`, shifted by the running mean (by its
    first block's mean for the first batch), so it never subtracts two large, nearly equal
    quantities, even when the mean is large compared with the spread (typical of LM
    activations); batches are combined with the pairwise update of Chan, Golub & LeVeque (1979):
    ``M2 = M2_a + M2_b + delta delta^T n_a n_b / n``, ``delta = mean_b - mean_a``. Updates run on
    torch's BLAS, the pool of the model whose states they usually receive (module docstring).
    """

    def __init__(self, dim: int) -> None:
        if int(dim) != dim or dim < 1:
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        self.dim = int(dim)
        self._n = 0
        self._mean = np.zeros(self.dim)
        self._m2 = np.zeros((self.dim, self.dim))  # exactly symmetric

    @property
    def count(self) -> int:
        """Number of rows accumulated so far."""
        return self._n

    @property
    def mean(self) -> np.ndarray:
        """Mean row, float64 array of shape (dim,) (a copy)."""
        if self._n == 0:
            raise ValueError("StreamingCovariance has no data yet")
        return self._mean.copy()

    def covariance(self, ddof: int = 1) -> np.ndarray:
        """Covariance ``M2 / (count - ddof)``, float64 (dim, dim), exactly symmetric.

        ``ddof=1`` (default) is the unbiased sample covariance, as ``np.cov`` and ``torch.cov``
        (which the IsoScore package uses); ``ddof=0`` is the population covariance.
        """
        if int(ddof) != ddof or ddof < 0:
            raise ValueError(f"ddof must be a non-negative integer, got {ddof!r}")
        if self._n - ddof <= 0:
            raise ValueError(
                f"covariance with ddof={ddof} needs more than {ddof} rows, got {self._n}"
            )
        return self._m2 / (self._n - ddof)

    def _combine(self, n_b: int, mean_b: np.ndarray, m2_b: np.ndarray) -> None:
        """Chan et al. merge of (n_b, mean_b, M2_b); the arguments are not modified."""
        n_a = self._n
        n = n_a + n_b
        delta = mean_b - self._mean
        self._m2 += m2_b  # self._m2 is never shared (``mean`` and ``covariance`` return copies)
        if n_a:
            between = np.outer(delta, delta)
            between *= n_a * n_b / n
            self._m2 += between
        self._mean = self._mean + delta * (n_b / n)
        self._n = n

    def update(self, batch: ArrayLike) -> StreamingCovariance:
        """Add a batch of rows, shape (b, dim) with b >= 0; returns ``self`` for chaining."""
        return self._update_validated(validate(batch, "batch", min_rows=0, ncols=self.dim))

    def _update_validated(self, m: Matrix) -> StreamingCovariance:
        if m.shape[0]:
            self._combine(*scatter(m, self._mean if self._n else None, torch_blas=True))
        return self

    def merge(self, other: StreamingCovariance) -> StreamingCovariance:
        """Fold another accumulator into this one (in place; ``other`` is unchanged)."""
        if not isinstance(other, StreamingCovariance) or other.dim != self.dim:
            raise ValueError("can only merge a StreamingCovariance of the same dim")
        if other._n:
            self._combine(other._n, other._mean, other._m2)
        return self


# --------------------------------------------------------------------------------------------
# spectra from the float64 Gram matrix
# --------------------------------------------------------------------------------------------
def _eigvalsh(a: np.ndarray) -> np.ndarray:
    """Ascending eigenvalues of a small symmetric float64 matrix (torch/MKL on one thread)."""
    with one_thread():
        return torch.linalg.eigvalsh(torch.from_numpy(a)).numpy()


def _gram_eigenvalues(m: Matrix, *, center: bool) -> tuple[np.ndarray, np.ndarray]:
    """Squared singular values of W (or of W with centred columns) and their rounding errors.

    Uses the smaller Gram matrix: ``W^T W`` (d x d) if d <= n, else ``W W^T`` (n x n), so exactly
    r = min(n, d) values come back, descending and clipped at 0. Centring W^T W goes through
    :func:`scatter`; for W W^T the blocks are W's columns, centred on their own means.

    Error model for lam_j (float64 Gram + ``eigvalsh``): a relative part from summing n + d
    terms and an absolute floor from the eigensolver, tau_j = 2 eps (sqrt(n + d) lam_j +
    sqrt(r) lam_max). Measured against float64 SVDs (up to 50304 x 768, condition numbers to
    1e6): the largest eigenvalues err by <= 0.46 sqrt(n + d) eps lam_j and the smaller half by
    <= 2 eps lam_max, so tau carries a >= 4x and >= 15x margin respectively.
    """
    n, d = m.shape
    if center and n >= d:
        g = scatter(m)[2]
    else:
        g = gram(m, transpose=n < d, center_rows=center)
    lam = np.clip(_eigvalsh(g)[::-1], 0.0, None)
    tau = 2.0 * _EPS * (math.sqrt(n + d) * lam + math.sqrt(lam.size) * float(lam[0]))
    return lam, tau


def _exact_singular_values(m: Matrix, *, center: bool) -> np.ndarray:
    """Singular values by a float64 SVD of the (centred) matrix; the slow, exact reference."""
    a = torch.from_numpy(m.full())
    if center:
        a = a - a.mean(dim=0)
    return torch.linalg.svdvals(a).numpy()


def _entropy(w: np.ndarray) -> float:
    """Shannon entropy (nats) of p = w / sum(w), with 0 log 0 = 0."""
    p = w / w.sum()
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def _entropy_error(sigma: np.ndarray, delta: np.ndarray, power: int) -> float:
    """Estimated |dH| when the weights w = sigma^power have sigma_j uncertain by +- delta_j.

    dH/dw_j = -(log p_j + H) / S with S = sum(w); near p = 0, where -p log p is not Lipschitz,
    the interval's upper end is used (this bounds the change of -p log p over [0, p_hi] up to
    the +1). Rounding errors of different eigenvalues are independent, so the per-value terms
    are combined in quadrature: an estimate, not a worst-case bound. Measured against float64
    SVDs it exceeds the actual error by 30x-1000x.
    """
    w = sigma**power
    lo, hi = np.clip(sigma - delta, 0.0, None) ** power, (sigma + delta) ** power
    s = float(w.sum())
    p_hi = np.clip(hi / s, 1e-300, 1.0)
    terms = ((hi - lo) / s) * (np.abs(np.log(p_hi)) + _entropy(w) + 1.0)
    return float(np.sqrt((terms * terms).sum()))


def effective_rank(W: ArrayLike, *, squared: bool = False, center: bool = False) -> float:
    """Effective rank of Roy & Vetterli (2007): exp(-sum p log p), p = sigma / sum(sigma).

    ``W``: (n, d). ``squared=True`` uses p = sigma^2 / sum(sigma^2) (the variance spectrum);
    ``center=True`` first subtracts the column means (the spectrum of the point cloud's
    covariance). 0 log 0 = 0, so the result lies in [1, min(n, d)].

    Float64-accurate at the cost of ~one X^T X: sigma^2 are the eigenvalues of the float64 Gram
    matrix. Their error is mostly absolute, ~eps sigma_max^2, so a small sigma_j has relative
    error ~eps (sigma_max / sigma_j)^2 -- harmless while p_j is small, so for the typical
    matrix the erank error is ~1e-13 (measured: condition number 1e3, 50304 x 768: 3e-13). It
    is not harmless for rank-deficient or very ill-conditioned W with ``squared=False``, where a
    zero sigma comes back as sqrt(noise) ~ 1e-8 sigma_max. An error estimate
    (``_entropy_error``) therefore decides: above 1e-10 relative, the spectrum is recomputed by
    a full float64 SVD (exact but ~5-10x slower), so the result is float64-accurate either way.
    """
    m = validate(W, "W")
    lam, tau = _gram_eigenvalues(m, center=center)
    if lam[0] == 0.0:
        what = "has zero variance (all rows identical)" if center else "is all zeros"
        raise ValueError(f"effective rank is undefined: W {what}")
    power = 2 if squared else 1
    sigma = np.sqrt(lam)
    delta = np.sqrt(lam + tau) - sigma  # sigma +- delta covers lam +- tau
    if _entropy_error(sigma, delta, power) > _ERANK_RTOL:
        sigma = _exact_singular_values(m, center=center)
    return math.exp(_entropy(sigma**power))


def singular_entropy(W: ArrayLike, *, squared: bool = False, center: bool = False) -> float:
    """Singular entropy of Godey et al. (2024): log r - log erank(W), with r = min(n, d).

    This is the KL divergence of the normalised singular-value distribution from the uniform one
    on r values: 0 for a flat spectrum, log r for rank 1. We take r = min(shape), the largest
    rank W can have, also when ``center=True`` (so values are comparable across variants).
    Options as in :func:`effective_rank`.
    """
    n, d = validate(W, "W").shape
    return math.log(min(n, d)) - math.log(effective_rank(W, squared=squared, center=center))


def stable_rank(W: ArrayLike) -> float:
    """Stable rank ||W||_F^2 / ||W||_2^2 = sum(sigma^2) / max(sigma^2), in [1, min(n, d)].

    ``W``: (n, d), not centred. Both sums are dominated by the large eigenvalues of the float64
    Gram matrix, so this route is accurate to ~1e-15 relative.
    """
    lam, _ = _gram_eigenvalues(validate(W, "W"), center=False)
    if lam[0] == 0.0:
        raise ValueError("stable rank is undefined: W is all zeros")
    return float(lam.sum() / lam[0])


# --------------------------------------------------------------------------------------------
# IsoScore family
# --------------------------------------------------------------------------------------------
def _isoscore_from_eigenvalues(lam: np.ndarray) -> float:
    """IsoScore from covariance eigenvalues (Rudman et al. 2022), via an exact simplification.

    With n = len(lam) (the dimension) and Sigma = sqrt(n) lam / ||lam||, the defect is
    delta^2 = (n - sum Sigma) / (n - sqrt(n)), so k = (n - delta^2 (n - sqrt n))^2 / n
    = (sum lam)^2 / sum(lam^2), the participation ratio. IsoScore = (k - 1) / (n - 1). This form
    has no cancellation; it agrees with the literal formula to rounding (tested), and the clip to
    [0, 1] only removes rounding-level excursions.
    """
    _check_isoscore_dim(lam.size)
    u = lam / _isoscore_scale(float(lam.max()))  # IsoScore is scale-free; no overflow in lam^2
    return _participation_isoscore(lam.size, float(u.sum()), float((u * u).sum()))


def _isoscore_of_psd(cov: np.ndarray) -> float:
    """IsoScore of a covariance that is positive semidefinite by construction, without ``eigh``.

    ``sum(lam) = tr(C)`` and ``sum(lam^2) = ||C||_F^2`` for a symmetric C, so the participation
    ratio of :func:`_isoscore_from_eigenvalues` needs no eigenvalues, and both are sums of
    non-negative terms. For the scatter of data (PSD up to rounding) this equals the eigenvalue
    route up to that route's clipping of rounding-level negative eigenvalues (~eps lam_max).
    """
    d = cov.shape[0]
    _check_isoscore_dim(d)
    u = cov / _isoscore_scale(float(np.diag(cov).max()))  # PSD: max |C_ij| is on the diagonal
    return _participation_isoscore(d, float(np.trace(u)), float((u * u).sum()))


def _check_isoscore_dim(d: int) -> None:
    if d < 2:
        raise ValueError("IsoScore needs dimension d >= 2 (its formula divides by d - 1)")


def _isoscore_scale(top: float) -> float:
    if top <= 0.0:
        raise ValueError("IsoScore is undefined for a zero covariance (all points identical)")
    return top


def _participation_isoscore(d: int, total: float, sum_sq: float) -> float:
    """(k - 1) / (d - 1) for the participation ratio k = total^2 / sum_sq, clipped to [0, 1]."""
    k = total * total / sum_sq
    return min(1.0, max(0.0, (k - 1.0) / (d - 1.0)))


def _cov_eigenvalues(cov: np.ndarray, name: str) -> np.ndarray:
    """Eigenvalues of a symmetric PSD matrix, clipping rounding-level negatives to 0.

    The IsoScore package uses ``svdvals(cov)`` = |eigenvalues|; for a PSD matrix the two agree
    except for rounding noise, and a clearly negative eigenvalue means the input is not a
    covariance, which we report instead of folding its sign away.
    """
    lam = _eigvalsh(cov)
    scale = float(np.abs(lam).max())
    if lam[0] < -COV_RTOL * scale:
        raise ValueError(
            f"{name} is not positive semidefinite (eigenvalue {lam[0]:.3g}, largest {scale:.3g})"
        )
    return np.clip(lam, 0.0, None)


def isoscore_from_cov(C: ArrayLike) -> float:
    """IsoScore (Rudman et al. 2022) of a covariance matrix ``C`` (d, d), symmetric PSD.

    The original algorithm PCA-reorients the points and takes the variance vector of the rotated
    points, i.e. the eigenvalues of the covariance; the n of the paper's formula is the dimension d.
    IsoScore is scale-invariant, so population (ddof=0) and sample (ddof=1) covariances give the
    same value. 1 = isotropic, 0 = all variance in one direction.
    """
    cov = validate_cov(C, "C")
    return _isoscore_from_eigenvalues(_cov_eigenvalues(cov, "C"))


def _check_zeta(zeta: float) -> float:
    z = float(zeta)
    if not 0.0 <= z <= 1.0:  # also rejects NaN
        raise ValueError(f"zeta must be in [0, 1], got {zeta!r}")
    return z


def isoscore_star_from_cov(C: ArrayLike, C0: ArrayLike | None = None, zeta: float = 0.0) -> float:
    """IsoScore* (Rudman & Eickhoff, ICLR 2024): IsoScore of the shrunk ``(1 - zeta) C + zeta C0``.

    ``C``, ``C0``: (d, d) symmetric; ``C0`` is a covariance estimated from a larger sample and
    ``C0=None`` means the identity, the fallback the IsoScore package recommends (note that it is
    not scale-free: it only makes sense for data of unit-order variance). zeta in [0, 1]; zeta = 0
    is IsoScore. Unlike IsoScore, IsoScore* depends on the normalisation of ``C`` relative to
    ``C0``; :func:`isoscore_star` uses the sample covariance (ddof=1) as the package does.
    """
    z = _check_zeta(zeta)
    cov = validate_cov(C, "C")
    return _shrunk_isoscore(cov, _shrinkage_target(C0, cov.shape[0]), z)


def _shrinkage_target(C0: ArrayLike | None, d: int) -> np.ndarray | None:
    """``C0`` checked: square of dimension ``d``, symmetric and positive semidefinite (a
    covariance); a target that is not would make IsoScore* of a valid ``C`` meaningless even
    when the shrunk matrix happens to stay PSD."""
    if C0 is None:
        return None
    c0 = validate_cov(C0, "C0", dim=d)
    _cov_eigenvalues(c0, "C0")  # raises if clearly not PSD
    return c0


def _shrunk_isoscore(
    cov: np.ndarray, c0: np.ndarray | None, z: float, *, cov_is_psd: bool = False
) -> float:
    """IsoScore of ``(1 - z) cov + z c0`` (``c0=None``: the identity).

    ``cov_is_psd``: ``cov`` is the scatter of data, PSD by construction; then so is the shrunk
    matrix unless a user's ``c0`` is mixed in, and :func:`_isoscore_of_psd` skips the ``eigh``
    that otherwise also checks positive semidefiniteness.
    """
    if z == 0.0:
        shrunk = cov
    elif c0 is None:  # identity target
        shrunk = (1.0 - z) * cov
        shrunk.flat[:: shrunk.shape[0] + 1] += z
    else:
        shrunk = (1.0 - z) * cov + z * c0
    if cov_is_psd and (c0 is None or z == 0.0):
        return _isoscore_of_psd(shrunk)
    return _isoscore_from_eigenvalues(_cov_eigenvalues(shrunk, "the shrunk covariance"))


def isoscore(X: ArrayLike) -> float:
    """IsoScore (Rudman et al. 2022) of the points ``X`` (n, d), n >= 2, d >= 2.

    Matches ``IsoScore.IsoScore(X)`` of the reference package 2.0.1 to ~1e-7: the package
    computes the covariance in the input's precision and sqrt(d) in float32 (``torch.sqrt`` of
    an int64 tensor) even for float64 input. Here the covariance is accumulated in float64 in one
    pass over X (:func:`scatter`), so the result is float64-accurate and no centred copy of X is
    made; the participation ratio is read off its trace and Frobenius norm (no ``eigh``).
    """
    return isoscore_star(X)


def isoscore_star(X: ArrayLike, C0: ArrayLike | None = None, zeta: float = 0.0) -> float:
    """IsoScore* (Rudman & Eickhoff, ICLR 2024) of the points ``X`` (n, d).

    ``C = cov(X)`` with ddof=1 (``torch.cov``, as in the IsoScore package), then IsoScore of
    ``(1 - zeta) C + zeta C0``; ``C0`` (d, d) symmetric, ``None`` = identity; zeta in [0, 1].
    """
    z = _check_zeta(zeta)  # all cheap checks first, before the pass over X
    m = validate(X, "X")
    c0 = _shrinkage_target(C0, m.shape[1])
    n, _, m2 = scatter(m)
    return _shrunk_isoscore(m2 / (n - 1), c0, z, cov_is_psd=True)


# --------------------------------------------------------------------------------------------
# cosine similarity and partition isotropy
# --------------------------------------------------------------------------------------------
def mean_cosine_similarity(X: ArrayLike) -> float:
    """Mean of cos(h_i, h_j) over all ordered pairs i != j (Ethayarajh 2019; Godey's A(H)).

    ``X``: (n, d), n >= 2, no zero rows. Exact, in O(n d) time and O(d) memory: with unit rows
    u_i and s = sum u_i, sum_{i != j} u_i . u_j = ||s||^2 - n, so the mean is
    (||s||^2 - n) / (n (n - 1)); in float64 the absolute error is ~1e-15, also near 0.
    Not translation-invariant (it measures the cone around the origin, by design).
    """
    m = validate(X, "X")
    n, d = m.shape
    s = torch.zeros(d, dtype=torch.float64)
    offset = 0
    for c in m.chunks():
        norms = torch.linalg.vector_norm(c, dim=1)
        zero = torch.nonzero(norms == 0.0)
        if zero.numel():
            raise ValueError(
                f"cosine similarity is undefined for zero vectors: X has a zero row "
                f"(row {offset + int(zero[0, 0])})"
            )
        s.addmv_(c.T, norms.reciprocal())
        offset += c.shape[0]
    return float((s @ s - n) / (n * (n - 1.0)))


def _logsumexp_rows(a: np.ndarray) -> np.ndarray:
    """log sum_i exp(a_ij) for each column j, without overflow."""
    top = a.max(axis=0)
    return top + np.log(np.exp(a - top).sum(axis=0))


def _log_partition(m: Matrix, basis: np.ndarray | torch.Tensor) -> np.ndarray:
    """log Z(c) = logsumexp_w(c . w) for c in the columns of ``basis`` and of ``-basis``.

    Streamed over row blocks and combined with ``logaddexp``, so nothing overflows; on numpy's
    BLAS, like the Gram pass before it. Returns shape (2 k,): the k columns first, then their
    negations.
    """
    b = np.asarray(basis, dtype=np.float64)
    acc = np.full(2 * b.shape[1], -math.inf)
    with one_thread():
        for c in m.blocks(check=True):
            proj = c @ b
            lse = np.concatenate([_logsumexp_rows(proj), _logsumexp_rows(-proj)])
            acc = np.logaddexp(acc, lse)
    return acc


def partition_isotropy(W: ArrayLike) -> float:
    """Partition isotropy I(W) of Mu & Viswanath (2018): min_c Z(c) / max_c Z(c).

    ``W``: (n, d), rows are the vectors w; Z(c) = sum_w exp(c . w); c ranges over the unit
    eigenvectors of the (uncentred) W^T W, computed in float64 and evaluated in log space.

    Sign convention: an eigenvector is defined only up to sign, and Z(c) != Z(-c) whenever the
    projections c . w are not symmetric about 0 -- notably when the vectors share a common
    direction, the very effect being measured.
    We evaluate both c and -c for every eigenvector (2 d candidates), which makes the result
    deterministic and invariant to the signs LAPACK returns, and is faithful to the original
    definition as a min/max over the (symmetric) unit sphere. For a repeated eigenvalue the
    eigenbasis is not unique and the value depends on the basis LAPACK picks, as in the original.
    Not scale-invariant. In (0, 1]; 1 means Z is equal along all tested directions. A ratio
    below ~1e-308 underflows to 0.0.
    """
    m = validate(W, "W")
    with one_thread():
        _, vecs = torch.linalg.eigh(torch.from_numpy(gram(m)))
    log_z = _log_partition(m, vecs.numpy())
    return math.exp(float(log_z.min() - log_z.max()))
