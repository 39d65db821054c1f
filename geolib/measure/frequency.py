"""Frequency against geometric freedom per token type (Paper A, claim A1 on trained models).

A1's argument: a token seen n times has its representation estimated from n samples, so its
sampling variance around an ideal centroid shrinks like 1/n; frequent tokens become rigid early
and rare ones keep freedom. Three per-type measurements put that to trained models:

* :class:`TypeStates` — the variance of a type's contextual states around its own centroid, as
  a share of the layer's total variance (trace of the covariance of all states);
* :func:`row_jitter` — how far a type's input-embedding row moves between consecutive
  checkpoints late in training, relative to the typical row's move in the same interval;
* :func:`settle_steps` — the first checkpoint after which a row's cosine to its final
  position stays at or above a threshold.

Each is read against the type's training frequency by a log–log slope (:func:`loglog_slope`)
or a rank correlation with an interval from resampling types; :func:`frequency_bins` gives the
binned medians the figures show.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from geolib.measure.stats import (
    Interval,
    fit_loglog,
    interval,
    loglog_slope_along,
    spearman,
    spearman_along,
)

__all__ = [
    "TypeStates",
    "frequency_bins",
    "loglog_slope",
    "row_jitter",
    "settle_spearman",
    "settle_steps",
    "type_counts",
]


def type_counts(tokens: np.ndarray, vocab_size: int) -> np.ndarray:
    """``(vocab_size,)`` int64 counts of each token id in ``tokens``; ids outside the vocabulary
    are an error (a token file from another tokenizer)."""
    t = np.asarray(tokens).ravel()
    if t.size and (int(t.min()) < 0 or int(t.max()) >= vocab_size):
        raise ValueError(
            f"token ids span [{int(t.min())}, {int(t.max())}], outside a vocabulary of {vocab_size}"
        )
    return np.bincount(t.astype(np.int64), minlength=int(vocab_size))


class TypeStates:
    """Per-type sums of one layer's states, accumulated over batches, for within-type variance.

    ``update(ids, states)`` with ``ids`` ``(n,)`` and ``states`` ``(n, d)``. States are shifted
    by the first batch's mean before squaring, so the within-type variance (a difference of
    sums) does not cancel when the states' mean is large against their spread.
    """

    def __init__(self, vocab_size: int, dim: int) -> None:
        if vocab_size < 1 or dim < 1:
            raise ValueError(f"vocab_size and dim must be positive, got {vocab_size}, {dim}")
        self.vocab_size, self.dim = int(vocab_size), int(dim)
        self.count = torch.zeros(self.vocab_size, dtype=torch.float64)
        self._sum = torch.zeros(self.vocab_size, self.dim, dtype=torch.float64)
        self._sq = torch.zeros(self.vocab_size, dtype=torch.float64)
        self._shift: torch.Tensor | None = None
        self._all_sum = torch.zeros(self.dim, dtype=torch.float64)
        self._all_outer_trace = 0.0

    def update(self, ids: np.ndarray | torch.Tensor, states: np.ndarray | torch.Tensor) -> None:
        i = torch.as_tensor(np.asarray(ids), dtype=torch.int64).reshape(-1)
        x = torch.as_tensor(states, dtype=torch.float64).reshape(-1, self.dim)
        if i.numel() != x.shape[0]:
            raise ValueError(f"{i.numel()} ids for {x.shape[0]} states")
        if i.numel() and (int(i.min()) < 0 or int(i.max()) >= self.vocab_size):
            raise ValueError(f"ids outside [0, {self.vocab_size})")
        if self._shift is None:
            self._shift = x.mean(0)
        x = x - self._shift
        sq = (x * x).sum(1)
        self.count.index_add_(0, i, torch.ones_like(sq))
        self._sum.index_add_(0, i, x)
        self._sq.index_add_(0, i, sq)
        self._all_sum += x.sum(0)
        self._all_outer_trace += float(sq.sum())

    def total_variance(self) -> float:
        """Trace of the covariance of all states seen (ddof 1): the layer's total variance."""
        n = float(self.count.sum())
        if n < 2:
            raise ValueError("need at least 2 states")
        return (self._all_outer_trace - float(self._all_sum @ self._all_sum) / n) / (n - 1)

    def within_variance(self, min_occurrences: int = 2) -> np.ndarray:
        """``(vocab_size,)`` mean squared distance of a type's states to its centroid (ddof 1,
        summed over dimensions), divided by :meth:`total_variance`; NaN for types with fewer
        than ``min_occurrences`` states."""
        if min_occurrences < 2:
            raise ValueError(f"min_occurrences must be >= 2, got {min_occurrences}")
        n = self.count
        with np.errstate(divide="ignore", invalid="ignore"):
            ss = self._sq - (self._sum * self._sum).sum(1) / n
            v = (ss / (n - 1)).numpy() / self.total_variance()
        return np.where(n.numpy() >= min_occurrences, np.clip(v, 0.0, None), np.nan)


def _check_trajectory(steps: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(steps)
    r = np.asarray(rows, dtype=np.float64)
    if s.ndim != 1 or s.size < 2 or np.any(np.diff(s) <= 0):
        raise ValueError("steps must be at least 2 strictly increasing checkpoint steps")
    if r.ndim != 3 or r.shape[0] != s.size:
        raise ValueError(f"rows must be (n_checkpoints={s.size}, vocab, d), got {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError("rows contain non-finite values")
    return s, r


def settle_steps(steps: np.ndarray, rows: np.ndarray, threshold: float) -> np.ndarray:
    """``(vocab,)`` the first checkpoint step from which on a row's cosine to its final position
    stays ``>= threshold`` (the final step for a row that only gets there at the end).

    ``steps``: ``(n,)`` increasing; ``rows``: ``(n, vocab, d)`` the embedding rows at those
    steps. A zero row has cosine 0 to anything.
    """
    if not -1.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (-1, 1], got {threshold}")
    s, r = _check_trajectory(steps, rows)
    final = r[-1]
    norms = np.linalg.norm(r, axis=2) * np.linalg.norm(final, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = np.where(norms > 0, np.einsum("cvd,vd->cv", r, final) / norms, 0.0)
    cos[-1] = 1.0  # a row is at its final position at the final step, even a zero row
    ok = cos >= threshold
    # last checkpoint that fails; the row settles at the next one
    fails_after = np.where(~ok, np.arange(len(s))[:, None], -1).max(axis=0)
    return s[fails_after + 1]


def row_jitter(rows: np.ndarray) -> np.ndarray:
    """``(vocab,)`` mean over consecutive checkpoint intervals of a row's displacement divided by
    the median displacement of all rows in that interval (intervals of different lengths count
    alike). ``rows``: ``(n >= 2, vocab, d)``; rows that never move in an interval where the
    median row does not move either are an error (nothing to compare)."""
    r = np.asarray(rows, dtype=np.float64)
    if r.ndim != 3 or r.shape[0] < 2:
        raise ValueError(f"rows must be (n_checkpoints >= 2, vocab, d), got {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError("rows contain non-finite values")
    moves = np.linalg.norm(np.diff(r, axis=0), axis=2)  # (n - 1, vocab)
    typical = np.median(moves, axis=1, keepdims=True)
    if np.any(typical <= 0):
        raise ValueError("the median row does not move between some checkpoints")
    return (moves / typical).mean(axis=0)


def loglog_slope(
    freq: np.ndarray, values: np.ndarray, *, n_boot: int, level: float, seed: int
) -> Interval:
    """OLS slope of log ``values`` on log ``freq`` over types, with a percentile interval from
    resampling types (the scatter is not homoscedastic, so no OLS interval). Types with a
    non-positive or non-finite value or frequency are an error: select them first."""
    fit_loglog(freq, values)  # the checks of the input (positive, finite, paired)
    return interval(
        loglog_slope_along, freq, values, n_boot=n_boot, level=level, seed=seed, vectorized=True
    )


def settle_spearman(
    freq: np.ndarray, settle: np.ndarray, *, n_boot: int, level: float, seed: int
) -> Interval:
    """Spearman correlation of settle step with frequency over types, interval over types."""
    spearman(freq, settle)  # the checks of the input (finite, paired, >= 3 types)
    return interval(
        spearman_along, freq, settle, n_boot=n_boot, level=level, seed=seed, vectorized=True
    )


@dataclass(frozen=True)
class Bins:
    """Log-frequency bins: ``edges`` (n_bins + 1,), geometric ``centre``, per-bin ``median`` of
    the values and the number of types ``n`` (empty bins: NaN median, n 0)."""

    edges: np.ndarray
    centre: np.ndarray
    median: np.ndarray
    n: np.ndarray


def frequency_bins(freq: np.ndarray, values: np.ndarray, n_bins: int) -> Bins:
    """Equal-width bins in log frequency over the range of ``freq`` (> 0) and the median value in
    each: what the figures draw over the scatter of types."""
    f = np.asarray(freq, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if f.shape != v.shape or f.ndim != 1 or f.size == 0:
        raise ValueError("freq and values must be non-empty 1-d arrays of the same length")
    if np.any(~np.isfinite(f)) or np.any(f <= 0):
        raise ValueError("frequencies must be positive and finite")
    if int(n_bins) != n_bins or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    lo, hi = np.log10(f.min()), np.log10(f.max())
    edges = np.logspace(lo, hi if hi > lo else lo + 1e-9, int(n_bins) + 1)
    which = np.clip(np.searchsorted(edges, f, side="right") - 1, 0, int(n_bins) - 1)
    med = np.full(int(n_bins), np.nan)
    n = np.bincount(which, minlength=int(n_bins))
    for b in range(int(n_bins)):
        if n[b]:
            med[b] = np.median(v[which == b])
    return Bins(edges, np.sqrt(edges[:-1] * edges[1:]), med, n)
