"""The content hash of a model's weights: which model a measurement was taken on, whatever file
format or hub revision it came from."""

from __future__ import annotations

import hashlib

import torch


def weights_hash(model: torch.nn.Module) -> str:
    """SHA-256 of the model's tensors (names, dtypes, shapes and bytes, in name order)."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
