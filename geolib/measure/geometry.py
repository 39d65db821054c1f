"""Paper B's geometry of one model: every metric of W (the unembedding) and of H (last-layer
states), and the per-model table row those measures become.

W and H are point clouds ``(n, d)`` with one point per row. The metrics are those of
:mod:`geolib.measure.metrics` (effective rank and its variants, stable rank, IsoScore, mean
cosine, partition isotropy); IsoScore* needs a covariance from a larger sample, which only H has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from geolib.measure import metrics as M

#: the per-model table's in-distribution outcome: mean loss on the ID test windows (nats)
ID_LOSS = "loss_id_test"


#: Metric name → function of a point cloud ``(n, d)`` (rows are points).
GEOMETRY = {
    "erank": lambda x: M.effective_rank(x),
    "erank_sq": lambda x: M.effective_rank(x, squared=True),
    "erank_centered": lambda x: M.effective_rank(x, center=True),
    "erank_sq_centered": lambda x: M.effective_rank(x, squared=True, center=True),
    "stable_rank": lambda x: M.stable_rank(x),
    "isoscore": lambda x: M.isoscore(x),
    "mean_cosine": lambda x: M.mean_cosine_similarity(x),
    "partition_isotropy": lambda x: M.partition_isotropy(x),
}


def geometry(
    x: np.ndarray | torch.Tensor, zeta: float, c0: torch.Tensor | None = None
) -> dict[str, float]:
    """Every metric of :data:`GEOMETRY` on the rows of ``x``, and ``isoscore_star`` (shrinkage
    ``zeta`` towards ``c0``, a covariance from a larger sample; NaN without one)."""
    out = {name: float(f(x)) for name, f in GEOMETRY.items()}
    out["isoscore_star"] = float("nan") if c0 is None else M.isoscore_star(x, c0, zeta)
    return out


def unused_rows(train_tokens: np.ndarray, vocab_size: int) -> np.ndarray:
    """Boolean mask over the vocabulary: tokens that never occur in the training split."""
    counts = np.bincount(np.asarray(train_tokens, dtype=np.int64), minlength=vocab_size)
    if counts.size > vocab_size:
        raise ValueError(f"token ids up to {counts.size - 1} exceed the vocabulary ({vocab_size})")
    return counts == 0


def flatten_measures(measures: Mapping[str, Any]) -> dict[str, Any]:
    """One table row: the point's factors, then ``w_*``, ``w_all_*``, ``h_*`` metrics (and
    ``init_w_*``: W at its random start, where measured) and ``loss_<split>`` (+
    ``_ci_low``/``_ci_high``)."""
    row: dict[str, Any] = {"name": measures["name"], **measures["point"]}
    for key in ("steps", "tokens", "params", "decay_exponent", "vocab_size", "n_unused_rows"):
        row[key] = measures[key]
    row["tokens_per_param"] = measures["tokens"] / measures["params"]  # all parameters
    # the peak learning rate trained with (measures from before batch scaling: the named lr)
    row["peak_lr"] = measures.get("peak_lr", measures["point"]["lr"])
    for group in ("w", "w_all", "h", "init_w"):
        row.update({f"{group}_{k}": v for k, v in measures.get(group, {}).items()})
    for split, est in measures["loss"].items():
        row[f"loss_{split}"] = est["mean"]
        row[f"loss_{split}_ci_low"] = est["ci_low"]
        row[f"loss_{split}_ci_high"] = est["ci_high"]
    row["train_seconds"] = measures["timing"]["train_seconds"]
    return row
