"""Statistics of a model's states accumulated batch by batch in bounded memory, for measuring a
model over many windows (``geolib measure``): the mean cosine over pairs of rows in O(d), the
effective rank of centred points from their streamed covariance, and handing the heap pages a
batch freed back to the operating system between batches."""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import torch

from geolib.measure.metrics import effective_rank

#: the C library, for :func:`release_freed_memory` (None where it cannot be opened)
try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
except OSError:
    _LIBC = None


class CosineSum:
    """Mean cosine over ordered pairs of rows seen in batches, O(d) memory: with unit rows u_i
    and s = Σ u_i, Σ_{i≠j} u_i·u_j = ‖s‖² − n (as ``metrics.mean_cosine_similarity``)."""

    def __init__(self, dim: int) -> None:
        self.s = torch.zeros(dim, dtype=torch.float64)
        self.n = 0

    def update(self, rows: torch.Tensor) -> None:
        r = rows.reshape(-1, rows.shape[-1]).to(torch.float64)
        norms = torch.linalg.vector_norm(r, dim=1)
        if bool((norms == 0).any()):
            raise ValueError("cosine similarity is undefined: a state vector is zero")
        self.s += (r / norms[:, None]).sum(0)
        self.n += r.shape[0]

    def mean(self) -> float:
        return float((self.s @ self.s - self.n) / (self.n * (self.n - 1.0)))


def release_freed_memory() -> None:
    """Hand the heap pages freed by the last batch back to the OS (glibc's ``malloc_trim``; a
    no-op where the C library has none). Without it the process's peak memory grows with the
    number of batches although the measurement holds O(d²): measured on SmolLM2-135M, 1,024
    windows, 9.95 GB peak without and 3.5 GB with, against 3.7 GB for 64 windows."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)


def centred_effective_rank(cov: np.ndarray) -> float:
    """Effective rank of the centred points from their covariance C: the singular values of the
    centred points are ∝ √eig(C), which are those of diag(√eig(C))."""
    lam = np.clip(np.linalg.eigvalsh(cov), 0.0, None)
    return effective_rank(np.diag(np.sqrt(lam)))
