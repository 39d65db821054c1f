"""What Paper B measures on each model of the sweep: geometry of W and H, ID and OOD losses.

* **W**, the unembedding (``vocab × d_model``): every metric of :func:`geometry`, once over all
  rows and once without the rows of tokens that never occur in the training split (never a
  target: their rows are moved only by the softmax's push-down and by weight decay).
* **H**, last-layer states of ``n_h_seqs`` fixed held-out validation windows (one row per
  token): the same metrics, and IsoScore* with ``C0`` the covariance of a larger sample
  (``n_c0_seqs`` windows of the same split), as Rudman & Eickhoff define it. W has no larger
  sample (it is the whole vocabulary), so its IsoScore* is not reported (NaN).
* **Losses**: mean next-token loss per fixed window on the ID validation and test splits and on
  each OOD domain; the mean over windows with a percentile-bootstrap interval over windows.
  The per-window losses are kept (``sequence_losses.npz``) so that later comparisons of the
  same model (quantized, fine-tuned) can be paired window by window.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from geolib.measure import metrics as M
from geolib.models.checkpoints import load
from geolib.measure.probes import final_hidden, unembedding
from geolib.measure.stats import bootstrap_association
from geolib.data.tokens import load_tokens
from geolib.models.train import TrainConfig

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


def fixed_windows(tokens: np.ndarray, n: int, length: int) -> np.ndarray:
    """``n`` windows of ``length`` tokens at evenly spaced starts (the same for every model),
    ``int64 (n, length)``; they overlap only when the split is shorter than ``n·length``."""
    if len(tokens) < length:
        raise ValueError(f"{len(tokens)} tokens are fewer than one window of {length}")
    starts = np.linspace(0, len(tokens) - length, n).round().astype(np.int64)
    return np.asarray(tokens[starts[:, None] + np.arange(length)], dtype=np.int64)


@torch.inference_mode()
def window_losses(model, windows: np.ndarray, batch: int = 128) -> np.ndarray:
    """Mean next-token loss (nats) of each window ``(n, L+1)`` under a causal LM: ``(n,)``."""
    model.eval()
    out = []
    for i in range(0, len(windows), batch):
        w = torch.from_numpy(windows[i : i + batch])
        logits = model(input_ids=w[:, :-1]).logits
        # on contiguous (tokens, vocab) rows: 1.3–1.6× faster than on logits.transpose(1, 2)
        nll = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1), reduction="none"
        )
        out.append(nll.view(len(w), -1).mean(dim=1).double().numpy())
    return np.concatenate(out)


@torch.no_grad()
def _states(model, windows: np.ndarray, batch: int = 32) -> torch.Tensor:
    """Last-layer states of ``windows`` as rows, float64 ``(n·L, d)``."""
    parts = [
        final_hidden(model, torch.from_numpy(windows[i : i + batch]))
        for i in range(0, len(windows), batch)
    ]
    h = torch.cat(parts)
    return h.reshape(-1, h.shape[-1]).double()


def measure_run(run_dir: str | Path, cfg: TrainConfig, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Geometry and losses of the final checkpoint of ``run_dir`` (see the module docstring).

    ``spec``: ``n_eval_seqs``, ``n_h_seqs``, ``n_c0_seqs``, ``isoscore_zeta``, ``n_boot``,
    ``ci_level`` and
    ``splits`` (name → token file; the first is the ID validation split H is taken from).
    """
    run_dir = Path(run_dir)
    model, tokenizer = load(run_dir)
    vocab = len(tokenizer) if tokenizer is not None else int(model.config.vocab_size)
    zeta, seed = float(spec["isoscore_zeta"]), cfg.seed
    out: dict[str, Any] = {}

    w = unembedding(model).detach().double()
    unused = unused_rows(load_tokens(cfg.train_tokens, vocab), vocab)
    out["vocab_size"] = vocab
    out["n_unused_rows"] = int(unused.sum())
    out["w_all"] = geometry(w, zeta)
    out["w"] = geometry(w[torch.from_numpy(~unused)], zeta)

    splits = dict(spec["splits"])
    h_split = next(iter(splits))
    h_tokens = load_tokens(splits[h_split], vocab)
    h = _states(model, fixed_windows(h_tokens, spec["n_h_seqs"], cfg.seq_len))
    big = _states(model, fixed_windows(h_tokens, spec["n_c0_seqs"], cfg.seq_len))
    c0 = torch.cov(big.T)
    out["h"] = geometry(h, zeta, c0)
    out["h_source"] = {"split": h_split, "rows": len(h), "c0_rows": len(big)}

    losses, per_window = {}, {}
    for name, path in splits.items():
        windows = fixed_windows(load_tokens(path, vocab), spec["n_eval_seqs"], cfg.seq_len + 1)
        per_window[name] = window_losses(model, windows)
        est = bootstrap_association(
            np.mean, per_window[name], n_boot=spec["n_boot"], level=spec["ci_level"], seed=seed
        )
        losses[name] = {"mean": est.value, "ci_low": est.ci_low, "ci_high": est.ci_high}
    out["loss"] = losses
    np.savez(run_dir / "sequence_losses.npz", **per_window)
    return out


def flatten_measures(measures: Mapping[str, Any]) -> dict[str, Any]:
    """One table row: the point's factors, then ``w_*``, ``w_all_*``, ``h_*`` metrics and
    ``loss_<split>`` (+ ``_ci_low``/``_ci_high``)."""
    row: dict[str, Any] = {"name": measures["name"], **measures["point"]}
    for key in ("steps", "tokens", "params", "decay_exponent", "vocab_size", "n_unused_rows"):
        row[key] = measures[key]
    for group in ("w", "w_all", "h"):
        row.update({f"{group}_{k}": v for k, v in measures[group].items()})
    for split, est in measures["loss"].items():
        row[f"loss_{split}"] = est["mean"]
        row[f"loss_{split}_ci_low"] = est["ci_low"]
        row[f"loss_{split}_ci_high"] = est["ci_high"]
    row["seconds"] = measures["timing"]["seconds"]
    return row
