"""Geometry metrics of point clouds and weight matrices (the measure wing's math: numpy and
torch only; no files, runs or models).

Every function follows the definitions in ``PAPERS.md`` ("Metric definitions") exactly and says
which variant it computes. Conventions shared by all of them:

* Rows are points: ``X`` / ``W`` has shape ``(n, d)`` (n points or vocabulary rows, d features).
* Inputs are numpy arrays, torch tensors (any device, any real floating dtype including float16
  and bfloat16) or nested sequences. Data is read in row blocks, upcast to float64 one at a time
  into one reusable buffer of ~24 MiB that stays in the CPU cache until BLAS has read it, so a
  float32 matrix is never copied whole and every result is accurate to float64. Results are
  plain Python floats.
* Spectral quantities come from the float64 d x d Gram (or scatter) matrix, accumulated block by
  block as numpy's ``B.T @ B``, which numpy hands to BLAS ``syrk`` (a symmetric rank-k update,
  half the flops of a general product), followed by a cheap ``eigh`` of the small matrix.
  Centring costs no extra pass (:func:`_scatter`). Memory is O(d^2 + block * d).
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
  :func:`_validate` and the :class:`_Matrix` it returns (finiteness: a Gram pass checks its
  trace, a sum of squares of all the data; other readers check block by block);
  :func:`_validate_cov` builds on it for covariance arguments.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
import torch

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

ArrayLike = np.ndarray | torch.Tensor | Sequence[Sequence[float]]

_EPS = float(np.finfo(np.float64).eps)
# float64 elements per block: 24 MiB stays in a typical L3 cache between the upcast and the syrk
# that reads it (blocks of 64 MiB made the upcast 3-4x dearer); a block has at least as many rows
# as columns, so that its flops outweigh the O(d^2) work per block (adding up the d x d results).
_CHUNK_ELEMENTS = 3 << 20
_SHIFT_SLACK = 1.0  # one-pass scatter kept while n (mean - shift)^2 <= this x the centred one
_ERANK_RTOL = 1e-10  # tolerated a-posteriori relative error of the Gram route for effective rank
_COV_RTOL = 1e-5  # symmetry / positive-semidefiniteness slack for user covariances (float32-made)


# --------------------------------------------------------------------------------------------
# validation and blockwise float64 access (the only place where inputs are checked)
# --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block (its thread count is global: restored on exit).

    Used for the small d x d eigensolvers: LAPACK syevd on a 768 x 768 matrix gains little from
    a second thread, and on a shared 2-core machine a descheduled partner thread made it 10-20x
    slower in the tail (0.06 s -> 1.4 s). Also keeps torch's pool asleep during numpy passes.
    """
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@dataclass(frozen=True)
class _Matrix:
    """A validated 2-D input, kept in its original dtype/device and read as float64 blocks."""

    data: np.ndarray | torch.Tensor
    name: str

    @property
    def shape(self) -> tuple[int, int]:
        n, d = self.data.shape
        return int(n), int(d)

    def blocks(
        self,
        *,
        transpose: bool = False,
        shift: np.ndarray | None = None,
        ones: bool = False,
        check: bool = False,
    ) -> Iterator[np.ndarray]:
        """Consecutive row blocks (of ``data.T`` if ``transpose``) as float64 numpy arrays.

        ``shift`` (one value per column) is subtracted from each block while it is in cache;
        ``ones`` appends a column of ones (so a block's Gram also holds its column sums and row
        count). Every block is a C-contiguous view of one reusable buffer owned here: callers may
        modify it in place but must not keep it past the next iteration. Reusing the buffer
        avoids a fresh allocation (page faults, kernel zeroing) per block. Torch tensors are
        converted (dtype, device) and the shift is subtracted by torch, with the caller's thread
        count (:func:`_one_thread` keeps its pool asleep during a pass on numpy's BLAS); numpy
        arrays are upcast by numpy. With ``check`` each block is screened for NaN/inf and
        overflow by its sum of squares (numpy's own loop, no BLAS pool); without, the caller
        checks a sum of squares of all the data (:meth:`check_sum_of_squares`).
        """
        a = self.data.T if transpose else self.data
        rows, cols = int(a.shape[0]), int(a.shape[1])
        if rows == 0:
            return
        step = min(rows, max(64, cols, _CHUNK_ELEMENTS // max(cols, 1)))
        buf = np.empty((step, cols + int(ones)))
        if ones:
            buf[:, cols] = 1.0
        out = torch.from_numpy(buf)[:, :cols]
        shift_t = None if shift is None else torch.from_numpy(shift)
        for start in range(0, rows, step):
            block = a[start : start + step]
            k = int(block.shape[0])
            if isinstance(block, torch.Tensor):
                out[:k].copy_(block)  # converts dtype and moves to CPU in one pass
            else:
                np.copyto(buf[:k, :cols], block)
            if shift_t is not None:
                out[:k].sub_(shift_t)  # measured ~2x faster than numpy's in-place subtract
            if check:
                flat = buf[:k, :cols].reshape(-1)
                # NaN/inf propagate into the sum of squares, and so does overflow, which would
                # ruin every Gram-based metric. The elementwise test runs only to word the error.
                self.check_sum_of_squares(float(np.einsum("i,i->", flat, flat)))
            yield buf[:k]

    def chunks(self) -> Iterator[torch.Tensor]:
        """Checked :meth:`blocks` as float64 CPU tensors (sharing the buffer)."""
        for b in self.blocks(check=True):
            yield torch.from_numpy(b)

    def check_sum_of_squares(self, total: float) -> None:
        """Raise the input error unless ``total``, a sum of squares of the data, is finite."""
        if not math.isfinite(total):
            self._raise_not_finite()

    def _raise_not_finite(self) -> NoReturn:
        for b in self.blocks():
            if not np.isfinite(b).all():
                raise ValueError(f"{self.name} contains NaN or inf values")
        raise ValueError(f"{self.name} has values too large: their squares overflow")

    def full(self) -> np.ndarray:
        """The whole matrix as a new float64 array; for small inputs and the exact SVD."""
        out = np.empty(self.shape)
        start = 0
        for b in self.blocks(check=True):
            out[start : start + b.shape[0]] = b
            start += b.shape[0]
        return out


def _validate(x: ArrayLike, name: str, *, min_rows: int = 2, ncols: int | None = None) -> _Matrix:
    """Check rank, dtype and size of ``x`` (cheap metadata checks; finiteness is checked per pass).

    Integer, bool and complex inputs are rejected: in this project they are always a mistake
    (token ids instead of embeddings, a mask, a spectrum with phases), and silently casting them
    would hide it.
    """
    if isinstance(x, torch.Tensor):
        data: np.ndarray | torch.Tensor = x.detach()
        ok_dtype = x.is_floating_point()
    else:
        data = np.asarray(x)
        ok_dtype = data.dtype.kind == "f"
    if data.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D with points in rows, got shape {tuple(data.shape)} ({data.ndim}-D)"
        )
    if not ok_dtype:
        raise ValueError(
            f"{name} must have a real floating dtype (float16/bfloat16/float32/float64), "
            f"got {data.dtype}; cast explicitly if this is intended"
        )
    n, d = int(data.shape[0]), int(data.shape[1])
    if n < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows (points), got {n}")
    if d < 1:
        raise ValueError(f"{name} needs at least 1 column (feature), got shape {(n, d)}")
    if ncols is not None and d != ncols:
        raise ValueError(f"{name} must have {ncols} columns, got shape {(n, d)}")
    return _Matrix(data, name)


def _validate_cov(c: ArrayLike, name: str, *, dim: int | None = None) -> np.ndarray:
    """Validate a covariance: square d x d, finite, symmetric up to ``_COV_RTOL``; float64.

    The tolerance admits covariances computed in float32 (whose matmul need not be exactly
    symmetric); the result is symmetrised so that ``eigh`` sees exactly what was meant.
    """
    m = _validate(c, name, min_rows=1)
    n, d = m.shape
    if n != d or (dim is not None and d != dim):
        want = f"({dim}, {dim})" if dim is not None else "square (d, d)"
        raise ValueError(f"{name} must have shape {want}, got {(n, d)}")
    a = m.full()
    if float(np.abs(a - a.T).max()) > _COV_RTOL * float(np.abs(a).max()):
        raise ValueError(f"{name} must be symmetric (a covariance matrix)")
    return 0.5 * (a + a.T)


# --------------------------------------------------------------------------------------------
# Gram accumulation (symmetric rank-k updates) and streaming covariance
# --------------------------------------------------------------------------------------------
def _column_blocks(d: int) -> list[tuple[int, int]]:
    """Split d columns into k <= 4 blocks of >= 192 columns, for the block-triangular update."""
    k = min(4, max(1, d // 192))
    edges = [round(i * d / k) for i in range(k + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def _add_gram_torch_(acc: torch.Tensor, c: torch.Tensor) -> None:
    """acc += c^T c on the block upper triangle only, with torch's BLAS (which has no syrk).

    Block rows [j0, j1) x [j0, d) by gemm do (k + 1) / (2 k) of the flops of a full c^T c
    (62.5 % for k = 4) at full BLAS efficiency.
    """
    for j0, j1 in _column_blocks(c.shape[1]):
        acc[j0:j1, j0:].addmm_(c[:, j0:j1].T, c[:, j0:])


def _gram(
    m: _Matrix,
    *,
    transpose: bool = False,
    shift: np.ndarray | None = None,
    ones: bool = False,
    center_rows: bool = False,
    torch_blas: bool = False,
) -> np.ndarray:
    """Float64 ``sum_B B^T B`` over the blocks B of :meth:`_Matrix.blocks`; exactly symmetric.

    ``center_rows`` subtracts each block row's own mean first (the columns of W, when W W^T is
    read through ``transpose``). numpy sends ``B.T @ B`` on one buffer to BLAS syrk and mirrors
    the triangle; ``torch_blas`` accumulates the upper triangle with torch's BLAS instead
    (:func:`_add_gram_torch_`) and mirrors it at the end. The trace, a sum of squares of all
    the data read, is the finiteness check: NaN, inf and overflow all reach it.
    """
    acc: np.ndarray | None = None
    with contextlib.nullcontext() if torch_blas else _one_thread():
        for b in m.blocks(transpose=transpose, shift=shift, ones=ones):
            with np.errstate(invalid="ignore", over="ignore"):  # non-finite: reported below
                if center_rows:
                    b -= b.mean(axis=1, keepdims=True)
                if torch_blas:
                    if acc is None:
                        acc = np.zeros((b.shape[1], b.shape[1]))
                    _add_gram_torch_(torch.from_numpy(acc), torch.from_numpy(b))
                elif acc is None:
                    acc = b.T @ b
                else:
                    acc += b.T @ b
    if acc is None:
        raise ValueError(f"{m.name} has no rows")
    if torch_blas:  # mirror the upper triangle (gemm's diagonal blocks need not be symmetric)
        acc = np.triu(acc)
        acc += np.triu(acc, 1).T
    m.check_sum_of_squares(float(np.trace(acc)))
    return acc


def _first_block_mean(m: _Matrix) -> np.ndarray:
    """Column means of the first block, taken relative to its first row.

    Relative to a row so that a constant column gets exactly its value (and exactly zero
    variance after the shift), whatever the rounding of a mean of equal numbers.
    """
    with _one_thread():
        b = next(m.blocks())
    x0 = b[0].copy()
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite data: reported by _gram
        b -= x0
        return x0 + b.mean(axis=0)


def _scatter(
    m: _Matrix, shift: np.ndarray | None = None, *, torch_blas: bool = False
) -> tuple[int, np.ndarray, np.ndarray]:
    """``(n, mean, M2)`` of the rows of ``m``: ``M2 = sum_i (x_i - mean)(x_i - mean)^T``, float64.

    One pass for data close to ``shift`` (default: the mean of the first block): the Gram of
    the blocks ``[x - shift, 1]`` holds ``G = sum (x - s)(x - s)^T``, ``t = sum (x - s)`` and
    n, and ``M2 = G - n delta delta^T`` with ``delta = t / n = mean - s``. Subtracting cancels
    ``n delta_j^2`` of ``G_jj``, so this is kept only while ``n delta_j^2 <= _SHIFT_SLACK *
    M2_jj`` for every column j: then G_jj <= (1 + ``_SHIFT_SLACK``) M2_jj, and the rounding
    error bound of every entry of M2 is at most that factor times the bound for exactly centred
    data. Otherwise (the first block is unlike the rest, e.g. sorted or drifting data) a second
    pass with ``s = mean`` is final: the corrected two-pass algorithm of Chan, Golub & LeVeque
    (1983). For rows in random order n delta^2 ~ M2 / (rows per block), so one pass suffices.
    A column whose centred sum of squares comes out <= 0 (constant data) gets an exactly zero
    row and column. ``torch_blas``: see :func:`_gram`.
    """
    s = _first_block_mean(m) if shift is None else shift
    for final in (False, True):
        a = _gram(m, shift=s, ones=True, torch_blas=torch_blas)
        d = a.shape[0] - 1
        n = float(a[d, d])  # a sum of ones: exact
        delta = a[:d, d] / n
        cancel = np.outer(delta, delta)  # exactly symmetric, and so is n times it
        cancel *= n
        m2 = a[:d, :d]  # a view: the last row and column of a have been read
        m2 -= cancel
        var = np.diag(m2).copy()
        if final or bool(np.all(n * delta * delta <= _SHIFT_SLACK * var)):
            break
        s = s + delta
    dead = var <= 0.0
    if dead.any():
        m2[dead, :] = 0.0
        m2[:, dead] = 0.0
    return int(n), s + delta, m2


class StreamingCovariance:
    """Mean and covariance of rows seen in batches, in O(d^2) memory, accurate to float64.

    Each batch's scatter ``M2_b`` comes from :func:`_scatter`, shifted by the running mean (by its
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
        return self._update_validated(_validate(batch, "batch", min_rows=0, ncols=self.dim))

    def _update_validated(self, m: _Matrix) -> StreamingCovariance:
        if m.shape[0]:
            self._combine(*_scatter(m, self._mean if self._n else None, torch_blas=True))
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
    with _one_thread():
        return torch.linalg.eigvalsh(torch.from_numpy(a)).numpy()


def _gram_eigenvalues(m: _Matrix, *, center: bool) -> tuple[np.ndarray, np.ndarray]:
    """Squared singular values of W (or of W with centred columns) and their rounding errors.

    Uses the smaller Gram matrix: ``W^T W`` (d x d) if d <= n, else ``W W^T`` (n x n), so exactly
    r = min(n, d) values come back, descending and clipped at 0. Centring W^T W goes through
    :func:`_scatter`; for W W^T the blocks are W's columns, centred on their own means.

    Error model for lam_j (float64 Gram + ``eigvalsh``): a relative part from summing n + d
    terms and an absolute floor from the eigensolver, tau_j = 2 eps (sqrt(n + d) lam_j +
    sqrt(r) lam_max). Measured against float64 SVDs (up to 50304 x 768, condition numbers to
    1e6): the largest eigenvalues err by <= 0.46 sqrt(n + d) eps lam_j and the smaller half by
    <= 2 eps lam_max, so tau carries a >= 4x and >= 15x margin respectively.
    """
    n, d = m.shape
    if center and n >= d:
        gram = _scatter(m)[2]
    else:
        gram = _gram(m, transpose=n < d, center_rows=center)
    lam = np.clip(_eigvalsh(gram)[::-1], 0.0, None)
    tau = 2.0 * _EPS * (math.sqrt(n + d) * lam + math.sqrt(lam.size) * float(lam[0]))
    return lam, tau


def _exact_singular_values(m: _Matrix, *, center: bool) -> np.ndarray:
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
    m = _validate(W, "W")
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
    n, d = _validate(W, "W").shape
    return math.log(min(n, d)) - math.log(effective_rank(W, squared=squared, center=center))


def stable_rank(W: ArrayLike) -> float:
    """Stable rank ||W||_F^2 / ||W||_2^2 = sum(sigma^2) / max(sigma^2), in [1, min(n, d)].

    ``W``: (n, d), not centred. Both sums are dominated by the large eigenvalues of the float64
    Gram matrix, so this route is accurate to ~1e-15 relative.
    """
    lam, _ = _gram_eigenvalues(_validate(W, "W"), center=False)
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
    if lam[0] < -_COV_RTOL * scale:
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
    cov = _validate_cov(C, "C")
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
    cov = _validate_cov(C, "C")
    return _shrunk_isoscore(cov, _shrinkage_target(C0, cov.shape[0]), z)


def _shrinkage_target(C0: ArrayLike | None, d: int) -> np.ndarray | None:
    """``C0`` checked: square of dimension ``d``, symmetric and positive semidefinite (a
    covariance); a target that is not would make IsoScore* of a valid ``C`` meaningless even
    when the shrunk matrix happens to stay PSD."""
    if C0 is None:
        return None
    c0 = _validate_cov(C0, "C0", dim=d)
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
    pass over X (:func:`_scatter`), so the result is float64-accurate and no centred copy of X is
    made; the participation ratio is read off its trace and Frobenius norm (no ``eigh``).
    """
    return isoscore_star(X)


def isoscore_star(X: ArrayLike, C0: ArrayLike | None = None, zeta: float = 0.0) -> float:
    """IsoScore* (Rudman & Eickhoff, ICLR 2024) of the points ``X`` (n, d).

    ``C = cov(X)`` with ddof=1 (``torch.cov``, as in the IsoScore package), then IsoScore of
    ``(1 - zeta) C + zeta C0``; ``C0`` (d, d) symmetric, ``None`` = identity; zeta in [0, 1].
    """
    z = _check_zeta(zeta)  # all cheap checks first, before the pass over X
    m = _validate(X, "X")
    c0 = _shrinkage_target(C0, m.shape[1])
    n, _, m2 = _scatter(m)
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
    m = _validate(X, "X")
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


def _log_partition(m: _Matrix, basis: np.ndarray | torch.Tensor) -> np.ndarray:
    """log Z(c) = logsumexp_w(c . w) for c in the columns of ``basis`` and of ``-basis``.

    Streamed over row blocks and combined with ``logaddexp``, so nothing overflows; on numpy's
    BLAS, like the Gram pass before it. Returns shape (2 k,): the k columns first, then their
    negations.
    """
    b = np.asarray(basis, dtype=np.float64)
    acc = np.full(2 * b.shape[1], -math.inf)
    with _one_thread():
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
    m = _validate(W, "W")
    with _one_thread():
        _, vecs = torch.linalg.eigh(torch.from_numpy(_gram(m)))
    log_z = _log_partition(m, vecs.numpy())
    return math.exp(float(log_z.min() - log_z.max()))
