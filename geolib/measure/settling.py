"""When a quantity measured during training has settled: the rule of the training-length study.

The study's runs keep a checkpoint at every doubling of their steps (1, 2, 4, …, the last, a
power of two), so consecutive checkpoints are doublings of the tokens seen. A quantity (the
validation loss, W's effective rank) has **settled at T tokens per parameter** when, from T
on, every doubling of the tokens moves the seeds' mean by less than the seeds' standard
deviation at the later checkpoint — training longer changes it less than a new seed does —
and at least ``min_doublings`` such doublings were seen (one small move is not a plateau).
Where the last doubling still moves it by its seed sd or more, it has not settled within the
run, and the study says so.

W's effective rank first falls from its random start and later climbs back: its **turn**
(:func:`turn_at`) is where the seeds' mean is lowest, provided it then rises by more than the
seeds' sd. Past the turn, W's rank no longer measures mainly its distance from initialisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Settling:
    """The rule's outcome for one quantity of one design (e.g. W's effective rank at d = 64).

    ``x``: tokens per parameter of the checkpoints ``(n,)``; ``mean`` and ``sd``: the seeds'
    mean and standard deviation (ddof 1) there; ``moves[j]``: ``|mean[j+1] − mean[j]|``, the
    move of the doubling that ends at checkpoint ``j+1`` (``n − 1`` of them); ``settled_at``:
    tokens per parameter from which every doubling moved it by less than ``sd``, NaN if not
    settled; ``doublings``: how many doublings the settled stretch holds.
    """

    settled: bool
    settled_at: float
    doublings: int
    n_seeds: int
    x: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    moves: np.ndarray
    reason: str


def settling(x: np.ndarray, values: np.ndarray, *, min_doublings: int = 2) -> Settling:
    """Where a quantity settles (module docstring).

    ``x``: ``(n,)`` tokens per parameter of the checkpoints, increasing, each twice the one
    before (within 1%); ``values``: ``(seeds, n)``, the quantity of each seed's run at them
    (at least two seeds, all finite).
    """
    x = np.asarray(x, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(f"x must hold at least two checkpoints, got shape {x.shape}")
    if v.ndim != 2 or v.shape[1] != x.size:
        raise ValueError(f"values must be (seeds, {x.size}), got shape {v.shape}")
    if v.shape[0] < 2:
        raise ValueError("at least two seeds are needed: the rule compares moves with seed sd")
    if not (np.isfinite(x).all() and np.isfinite(v).all()):
        raise ValueError("x and values must be finite")
    if x[0] <= 0 or np.any(np.abs(x[1:] / x[:-1] - 2) > 0.02):
        raise ValueError(f"checkpoints must sit at doublings of the tokens, got x = {x}")
    if min_doublings < 1:
        raise ValueError(f"min_doublings must be at least 1, got {min_doublings}")
    mean, sd = v.mean(axis=0), v.std(axis=0, ddof=1)
    moves = np.abs(np.diff(mean))
    quiet = moves < sd[1:]
    # the settled stretch: the quiet doublings at the end of the run
    run = 0
    for q in quiet[::-1]:
        if not q:
            break
        run += 1
    settled = run >= min_doublings
    start = len(quiet) - run  # index of the checkpoint the quiet stretch starts from
    if settled:
        at = float(x[start])
        reason = (
            f"from {at:.3g} tokens per parameter on, each of the last {run} doublings moved the "
            f"seeds' mean by less than the seeds' sd"
        )
    else:
        at = float("nan")
        last = f"{moves[-1]:.3g} against a seed sd of {sd[-1]:.3g}"
        reason = (
            f"not settled by {x[-1]:.3g} tokens per parameter: the last doubling moved the "
            f"seeds' mean by {last}"
            if run == 0
            else f"not settled by {x[-1]:.3g} tokens per parameter: only the last {run} "
            f"doubling(s) moved it by less than its seed sd ({min_doublings} needed)"
        )
    return Settling(settled, at, run, v.shape[0], x, mean, sd, moves, reason)


def turn_at(s: Settling) -> float:
    """Tokens per parameter of the checkpoint where the seeds' mean is lowest, if it rises from
    there to the last checkpoint by more than the seeds' sd at the last; NaN where it does not
    (no turn within the run: still falling, or flat within seed noise)."""
    j = int(np.argmin(s.mean))
    if j == s.mean.size - 1 or s.mean[-1] - s.mean[j] <= s.sd[-1]:
        return float("nan")
    return float(s.x[j])
