"""The one place a measurement computes a model's cross-entropy: per-window losses (ID, OOD,
after quantization, after fine-tuning, at every saturation checkpoint) and the loss the probes
differentiate. (Training has its objective in ``geolib.models.train``: a stage that trains must
not depend on measurement code.)

Targets follow torch's convention: ``IGNORE_INDEX`` (-100) marks positions without a target
(the encoder's unmasked positions). Losses are in nats.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

#: target id without a loss (torch's ``cross_entropy`` default; ``data.windows`` writes it)
IGNORE_INDEX = -100


def on_model_device(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``x`` on the device of ``model``'s parameters: batches follow the model, so a stage
    that loaded its model on ``common.device`` needs to say it once. (A no-op on the CPU.)"""
    return x.to(next(model.parameters()).device)


def loss_sum(model, inputs: torch.Tensor, targets: torch.Tensor, is_decoder: bool) -> torch.Tensor:
    """Summed cross-entropy over the target positions of ``inputs``/``targets`` ``(batch, seq)``
    (``IGNORE_INDEX`` skipped), from the model's full logits: the loss the probes differentiate
    (their hooks see the complete forward pass). The training objective is
    ``geolib.models.train.lm_loss_sum`` (the same loss; the encoder's head on masked positions
    only), kept apart so that editing a measurement never retrains a model."""
    inputs, targets = on_model_device(model, inputs), on_model_device(model, targets)
    logits = model(input_ids=inputs).logits
    if is_decoder:
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum"
        )
    keep = targets != IGNORE_INDEX
    return F.cross_entropy(logits[keep], targets[keep], reduction="sum")


@torch.inference_mode()
def window_losses(model, windows: np.ndarray, batch: int = 128) -> np.ndarray:
    """Mean next-token loss (nats) of each window ``(n, L+1)`` under a causal LM: ``(n,)``."""
    model.eval()
    out = []
    for i in range(0, len(windows), batch):
        w = on_model_device(model, torch.from_numpy(windows[i : i + batch]))
        logits = model(input_ids=w[:, :-1]).logits
        # on contiguous (tokens, vocab) rows: 1.3–1.6× faster than on logits.transpose(1, 2)
        nll = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1), reduction="none"
        )
        out.append(nll.view(len(w), -1).mean(dim=1).double().cpu().numpy())
    return np.concatenate(out)
