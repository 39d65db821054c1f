"""Blockwise float64 access to a matrix: input checks, Gram and scatter passes (the measure wing's
numerics under :mod:`geolib.measure.metrics`; numpy and torch only).

* Inputs are numpy arrays, torch tensors (any device, any real floating dtype including float16
  and bfloat16) or nested sequences, rows as points. :func:`validate` checks them once
  (rank, dtype, size) and returns a :class:`Matrix`, which reads the data in row blocks, upcast
  to float64 one at a time into one reusable buffer of ~24 MiB that stays in the CPU cache until
  BLAS has read it: a float32 matrix is never copied whole and every result is accurate to
  float64. Finiteness is checked per pass (a Gram pass checks its trace, a sum of squares of all
  the data; other readers check block by block).
* :func:`gram` accumulates the float64 d x d Gram matrix block by block as numpy's ``B.T @ B``,
  which numpy hands to BLAS ``syrk`` (half the flops of a general product); :func:`scatter`
  centres it at no extra pass. Memory is O(d^2 + block * d).
* Thread pools: see :mod:`geolib.measure.metrics` (a pass calls one pool only; :func:`one_thread`
  keeps torch's asleep during numpy's passes and runs the small eigensolvers on one thread).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
import torch

ArrayLike = np.ndarray | torch.Tensor | Sequence[Sequence[float]]

# float64 elements per block: 24 MiB stays in a typical L3 cache between the upcast and the syrk
# that reads it (blocks of 64 MiB made the upcast 3-4x dearer); a block has at least as many rows
# as columns, so that its flops outweigh the O(d^2) work per block (adding up the d x d results).
_CHUNK_ELEMENTS = 3 << 20
_SHIFT_SLACK = 1.0  # one-pass scatter kept while n (mean - shift)^2 <= this x the centred one
COV_RTOL = 1e-5  # symmetry / positive-semidefiniteness slack for user covariances (float32-made)


# --------------------------------------------------------------------------------------------
# validation and blockwise float64 access (the only place where inputs are checked)
# --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def one_thread() -> Iterator[None]:
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
class Matrix:
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
        count (:func:`one_thread` keeps its pool asleep during a pass on numpy's BLAS); numpy
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


def validate(x: ArrayLike, name: str, *, min_rows: int = 2, ncols: int | None = None) -> Matrix:
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
    return Matrix(data, name)


def validate_cov(c: ArrayLike, name: str, *, dim: int | None = None) -> np.ndarray:
    """Validate a covariance: square d x d, finite, symmetric up to ``COV_RTOL``; float64.

    The tolerance admits covariances computed in float32 (whose matmul need not be exactly
    symmetric); the result is symmetrised so that ``eigh`` sees exactly what was meant.
    """
    m = validate(c, name, min_rows=1)
    n, d = m.shape
    if n != d or (dim is not None and d != dim):
        want = f"({dim}, {dim})" if dim is not None else "square (d, d)"
        raise ValueError(f"{name} must have shape {want}, got {(n, d)}")
    a = m.full()
    if float(np.abs(a - a.T).max()) > COV_RTOL * float(np.abs(a).max()):
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


def gram(
    m: Matrix,
    *,
    transpose: bool = False,
    shift: np.ndarray | None = None,
    ones: bool = False,
    center_rows: bool = False,
    torch_blas: bool = False,
) -> np.ndarray:
    """Float64 ``sum_B B^T B`` over the blocks B of :meth:`Matrix.blocks`; exactly symmetric.

    ``center_rows`` subtracts each block row's own mean first (the columns of W, when W W^T is
    read through ``transpose``). numpy sends ``B.T @ B`` on one buffer to BLAS syrk and mirrors
    the triangle; ``torch_blas`` accumulates the upper triangle with torch's BLAS instead
    (:func:`_add_gram_torch_`) and mirrors it at the end. The trace, a sum of squares of all
    the data read, is the finiteness check: NaN, inf and overflow all reach it.
    """
    acc: np.ndarray | None = None
    with contextlib.nullcontext() if torch_blas else one_thread():
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


def _first_block_mean(m: Matrix) -> np.ndarray:
    """Column means of the first block, taken relative to its first row.

    Relative to a row so that a constant column gets exactly its value (and exactly zero
    variance after the shift), whatever the rounding of a mean of equal numbers.
    """
    with one_thread():
        b = next(m.blocks())
    x0 = b[0].copy()
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite data: reported by gram
        b -= x0
        return x0 + b.mean(axis=0)


def scatter(
    m: Matrix, shift: np.ndarray | None = None, *, torch_blas: bool = False
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
    row and column. ``torch_blas``: see :func:`gram`.
    """
    s = _first_block_mean(m) if shift is None else shift
    for final in (False, True):
        a = gram(m, shift=s, ones=True, torch_blas=torch_blas)
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
