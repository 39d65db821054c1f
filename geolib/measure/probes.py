"""What a model does to its residual stream: states H and loss gradients G per layer, and the
subspace measure of Paper A's claim A4 (gradient energy in a tangent subspace against normal
controls).

Reading a model out (this module) is a separate job from building one
(``geolib.models.families``); it
works the same for our runs and for hub checkpoints loaded by ``geolib.models.checkpoints.load``.

Conventions
-----------
* **Layers.** ``ℓ = 0`` is the embedding output (for BERT the embeddings module's output, after
  its LayerNorm), ``ℓ = 1 … L`` the output of block ℓ: the residual stream *before* any final
  norm. (``output_hidden_states`` of the decoders ends with the final-normed state instead; the
  other entries agree with these.)
* **Loss.** The training loss summed over target positions: next-token cross-entropy for
  decoders, masked-token cross-entropy on the masked positions for the encoder (targets
  ``-100`` elsewhere). ``G_ℓ = ∂L/∂H_ℓ`` at every position (for the encoder unmasked positions
  get gradient through attention). The sum, not the mean, so that G of one sequence does not
  depend on the batch it was computed in.
* **Unembedding.** ``W`` = ``model.get_output_embeddings().weight`` (vocab × d) and ``H`` = its
  input (``final_hidden``), so that ``logits = H @ W.T + b`` exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from geolib.measure.energy_counts import REFIT  # noqa: F401 - the label T's tables carry
from geolib.measure.evaluate import IGNORE_INDEX, loss_sum, on_model_device
from geolib.measure.stats import bootstrap_weights, percentile_interval

if TYPE_CHECKING:  # transformers' model classes are imported where a model is loaded or built
    from transformers import PreTrainedModel

# ---------------------------------------------------------------------------------------------
# The LM head's view: W and the final H
# ---------------------------------------------------------------------------------------------


def is_decoder(model: PreTrainedModel) -> bool:
    """True for causal LMs (ours and the hub's), False for masked-LM encoders."""
    archs = getattr(model.config, "architectures", None) or [type(model).__name__]
    return not any("MaskedLM" in a for a in archs)


def unembedding(model: PreTrainedModel) -> torch.Tensor:
    """The unembedding (LM head) matrix ``W``, shape ``(vocab_size, d_model)`` (a view of the
    parameter; ``.detach()`` it before analysis)."""
    head = model.get_output_embeddings()
    if head is None:
        raise ValueError(f"{type(model).__name__} has no output embeddings (LM head)")
    return head.weight


def output_bias(model: PreTrainedModel) -> torch.Tensor | None:
    """The LM head's bias ``b`` (shape ``(vocab_size,)``) or ``None``."""
    return getattr(model.get_output_embeddings(), "bias", None)


def final_hidden(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    return_logits: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Last-layer representations ``H`` (the LM head's input), shape ``(batch, seq, d_model)``.

    Captured with a forward hook on the output embeddings, so it is the same for all three
    families and for hub models: ``logits = H @ W.T + b``. Runs under the caller's grad mode.
    """
    captured: list[torch.Tensor] = []
    head = model.get_output_embeddings()
    handle = head.register_forward_hook(lambda _m, inputs, _out: captured.append(inputs[0]))
    try:
        out = model(
            input_ids=on_model_device(model, input_ids),
            attention_mask=None
            if attention_mask is None
            else on_model_device(model, attention_mask),
        )
    finally:
        handle.remove()
    h = captured[0]
    return (h, out.logits) if return_logits else h


# ---------------------------------------------------------------------------------------------
# Residual-stream states and gradients
# ---------------------------------------------------------------------------------------------


def residual_modules(model: PreTrainedModel) -> list[nn.Module]:
    """``[embedding, block_1, …, block_L]``: the modules whose outputs are the residual stream.

    The blocks are the base model's ``nn.ModuleList`` of ``config.num_hidden_layers`` layers
    (GPT-NeoX ``layers``, OLMo/Llama ``layers``, BERT ``encoder.layer``).
    """
    base = model.base_model
    embedding = getattr(base, "embeddings", None)
    if embedding is None:
        embedding = model.get_input_embeddings()
    n = model.config.num_hidden_layers
    lists = [m for m in base.modules() if isinstance(m, nn.ModuleList) and len(m) == n]
    if not lists:
        raise ValueError(f"{type(model).__name__}: no list of {n} blocks in the base model")
    return [embedding, *lists[0]]


def layer_names(model: PreTrainedModel) -> list[str]:
    """``["embed", "block1", …, "blockL"]``, the names used in every results table."""
    return ["embed"] + [f"block{i}" for i in range(1, model.config.num_hidden_layers + 1)]


@contextmanager
def _frozen(model: nn.Module) -> Iterator[None]:
    """No weight gradients inside (only activation gradients are wanted); restored after."""
    flags = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(model.parameters(), flags, strict=True):
            p.requires_grad_(flag)


def residual_states(model: PreTrainedModel, inputs: torch.Tensor) -> list[torch.Tensor]:
    """H_ℓ for every layer (ℓ = 0 … L) from one forward pass without gradients; each
    ``(batch, seq, d)``. Same layers and conventions as :func:`states_and_gradients`.

    The pass runs the base model only: the states are the same modules' outputs, bit for bit,
    and the LM head, which no state needs, is skipped (at our d = 128 and 4,096 tokens it is
    about 40% of a forward pass; for a released model with a large vocabulary, most of it)."""
    if inputs.ndim != 2:
        raise ValueError(f"inputs must be (batch, seq), got {tuple(inputs.shape)}")
    captured: list[torch.Tensor] = []

    def keep(_m, _inputs, out):
        captured.append(out[0] if isinstance(out, tuple) else out)

    handles = [m.register_forward_hook(keep) for m in residual_modules(model)]
    try:
        with torch.no_grad():
            model.base_model(input_ids=on_model_device(model, inputs))
    finally:
        for h in handles:
            h.remove()
    return [h.detach().cpu() for h in captured]


@dataclass(frozen=True)
class StatesAndGradients:
    """One forward + backward pass over a batch.

    ``hidden[ℓ]`` and ``grads[ℓ]``: float32 tensors ``(batch, seq, d)`` for ℓ = 0 … L (layer
    names in ``layers``); ``loss_sum`` the summed loss, ``n_targets`` the number of target
    positions (mean loss = loss_sum / n_targets).
    """

    layers: list[str]
    hidden: list[torch.Tensor]
    grads: list[torch.Tensor]
    loss_sum: float
    n_targets: int


def states_and_gradients(
    model: PreTrainedModel, inputs: torch.Tensor, targets: torch.Tensor
) -> StatesAndGradients:
    """H_ℓ and G_ℓ = ∂L/∂H_ℓ for every layer from one forward and one backward pass.

    ``inputs``/``targets``: int64 ``(batch, seq)``; decoders: targets are the next tokens
    (already shifted, as in training); encoder: masked inputs, targets ``-100`` except at masked
    positions. Weight gradients are not computed (parameters are frozen during the pass, the
    embedding output is made the leaf), which is what makes the pass cheaper than a training
    step. Dropout follows the model's mode (``checkpoints.load`` returns eval mode).
    """
    if inputs.shape != targets.shape or inputs.ndim != 2:
        raise ValueError(
            f"inputs and targets must both be (batch, seq), got {tuple(inputs.shape)} and "
            f"{tuple(targets.shape)}"
        )
    n_targets = int((targets != IGNORE_INDEX).sum())
    if n_targets == 0:
        raise ValueError("no target positions in the batch (all targets are -100)")
    modules = residual_modules(model)
    captured: list[torch.Tensor] = []

    def leaf(_m, _inputs, out):  # the embedding output becomes the graph's leaf
        out = out.detach().requires_grad_(True)
        captured.append(out)
        return out

    def keep(_m, _inputs, out):
        captured.append(out[0] if isinstance(out, tuple) else out)

    handles = [modules[0].register_forward_hook(leaf)]
    handles += [m.register_forward_hook(keep) for m in modules[1:]]
    try:
        with _frozen(model), torch.enable_grad():
            loss = loss_sum(model, inputs, targets, is_decoder(model))
            grads = torch.autograd.grad(loss, captured)
    finally:
        for h in handles:
            h.remove()
    if len(captured) != len(modules):
        raise RuntimeError(f"captured {len(captured)} states for {len(modules)} residual modules")
    return StatesAndGradients(
        layer_names(model),
        [h.detach().cpu() for h in captured],
        [g.detach().cpu() for g in grads],
        float(loss.detach()),
        n_targets,
    )


# ---------------------------------------------------------------------------------------------
# Subspaces
# ---------------------------------------------------------------------------------------------


def _check_basis(basis: np.ndarray, name: str = "basis") -> np.ndarray:
    b = np.asarray(basis, dtype=np.float64)
    if b.ndim != 2 or b.shape[1] < 1 or b.shape[1] >= b.shape[0]:
        raise ValueError(f"{name} must be (d, k) with 1 <= k < d, got shape {b.shape}")
    if not np.allclose(b.T @ b, np.eye(b.shape[1]), atol=1e-8):
        raise ValueError(f"{name} columns must be orthonormal")
    return b


def _square_and_ranks(matrix: np.ndarray, ranks: list[int], name: str) -> np.ndarray:
    """A finite square matrix, symmetrised, after checking every rank is an integer in [1, d)."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"{name} must be square, got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"{name} contains non-finite values")
    d = m.shape[0]
    for k in ranks:
        if isinstance(k, bool) or int(k) != k or not 1 <= k < d:
            raise ValueError(f"rank k must be an integer in [1, d={d}), got {k!r}")
    return 0.5 * (m + m.T)


def top_subspaces(matrix: np.ndarray, ranks: list[int]) -> dict[int, np.ndarray]:
    """``{k: (d, k) basis}`` of the top-k eigenvectors of a symmetric PSD matrix for every rank
    in ``ranks``, from one eigendecomposition (a covariance of H: the tangent subspaces T).

    Errors if a k is not in [1, d) or the matrix is not square and finite.
    """
    _, vecs = np.linalg.eigh(_square_and_ranks(matrix, ranks, "matrix"))
    top = vecs[:, ::-1]
    return {int(k): np.ascontiguousarray(top[:, : int(k)]) for k in ranks}


def top_subspace(matrix: np.ndarray, k: int) -> np.ndarray:
    """Orthonormal basis ``(d, k)`` of the top-k eigenvectors (:func:`top_subspaces`, one k)."""
    return top_subspaces(matrix, [k])[int(k)]


def complement_subspaces(basis: np.ndarray, n: int, seed: int | np.random.Generator) -> np.ndarray:
    """``n`` subspaces of rank k drawn uniformly (Haar) from the orthogonal complement of
    ``basis`` (d, k): the normal controls N. Returns ``(n, d, k)`` orthonormal bases.

    A Gaussian (d − k) × k matrix has a Haar-distributed column space; its QR basis, mapped into
    an orthonormal basis of the complement, is uniform on the complement's Grassmannian.
    """
    t = _check_basis(basis)
    d, k = t.shape
    if 2 * k > d:
        raise ValueError(f"the complement (dimension {d - k}) cannot hold a rank-{k} subspace")
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    q, _ = np.linalg.qr(t, mode="complete")
    comp = q[:, k:]  # (d, d − k), orthonormal, orthogonal to span(t)
    out = np.empty((int(n), d, k))
    for i in range(int(n)):
        g, r = np.linalg.qr(rng.standard_normal((d - k, k)))
        out[i] = comp @ (g * np.sign(np.diag(r)))  # sign fix: exactly Haar
    return out


def subspace_energy(second_moment: np.ndarray, bases: np.ndarray) -> np.ndarray:
    """Energy tr(Uᵀ M U) = Σ_tokens ‖P_U g‖² of gradients with second moment M = Σ g gᵀ in each
    basis U. ``bases`` is (d, k) or (m, d, k); returns a scalar array or shape (m,)."""
    m = np.asarray(second_moment, dtype=np.float64)
    u = np.asarray(bases, dtype=np.float64)
    return np.einsum("...ik,ij,...jk->...", u, m, u)


# ---------------------------------------------------------------------------------------------
# R_energy
# ---------------------------------------------------------------------------------------------


class GradientEnergy:
    """Per-sequence energies of G in T and in each normal control, accumulated batch by batch.

    ``bases`` is ``(1 + n_controls, d, k)``: T first, then the controls. ``update(G)`` takes one
    batch's gradients ``(batch, seq, d)`` and appends one row per sequence of energies
    ``Σ_tokens ‖G U‖²`` (float64). Memory is O(sequences × controls), not O(tokens × d).
    """

    def __init__(self, bases: np.ndarray) -> None:
        b = np.asarray(bases, dtype=np.float64)
        if b.ndim != 3 or b.shape[0] < 2:
            raise ValueError(f"bases must be (1 + n_controls >= 2, d, k), got shape {b.shape}")
        self.bases = torch.from_numpy(b).to(torch.float32)  # projections in float32,
        self._rows: list[np.ndarray] = []  # sums of squares per sequence in float64

    def update(self, grads: torch.Tensor) -> GradientEnergy:
        g = torch.as_tensor(grads).to(torch.float32)
        if g.ndim != 3 or g.shape[-1] != self.bases.shape[1]:
            raise ValueError(
                f"grads must be (batch, seq, d={self.bases.shape[1]}), got {tuple(g.shape)}"
            )
        proj = torch.einsum("bsd,mdk->bmsk", g, self.bases).to(torch.float64)
        self._rows.append((proj**2).sum(dim=(2, 3)).numpy())
        return self

    @property
    def energies(self) -> np.ndarray:
        """``(sequences, 1 + n_controls)``: column 0 is T, the rest the controls."""
        if not self._rows:
            raise ValueError("no gradients accumulated")
        return np.concatenate(self._rows)


@dataclass(frozen=True)
class REnergy:
    """R_energy = E_T / mean_N E_N with a bootstrap interval over sequences.

    ``p_value``: rank of E_T among the controls' energies, (1 + #{E_N >= E_T}) / (1 + #N), the
    smallest value the number of controls allows being 1/(#N + 1).
    """

    ratio: float
    low: float
    high: float
    level: float
    p_value: float
    n_sequences: int
    n_controls: int


def r_energy(
    energies: np.ndarray, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> REnergy:
    """R_energy from per-sequence energies ``(sequences, 1 + n_controls)`` (column 0 = T).

    Percentile bootstrap over sequences (tokens of one sequence are not independent): each
    resample reweights whole sequences, in numerator and denominator alike.
    """
    e = np.asarray(energies, dtype=np.float64)
    if e.ndim != 2 or e.shape[1] < 2:
        raise ValueError(f"energies must be (sequences, 1 + n_controls), got shape {e.shape}")
    if e.shape[0] < 2:
        raise ValueError(f"need at least 2 sequences for a bootstrap, got {e.shape[0]}")
    if not np.all(np.isfinite(e)) or np.any(e < 0):
        raise ValueError("energies must be finite and non-negative")
    if not 0 < level < 1 or n_boot < 2:
        raise ValueError(f"need 0 < level < 1 and n_boot >= 2, got {level=}, {n_boot=}")
    totals = e.sum(axis=0)
    if totals[1:].mean() <= 0:
        raise ValueError("the normal controls hold no gradient energy")
    ratio = float(totals[0] / totals[1:].mean())
    n = e.shape[0]
    boot = bootstrap_weights(n, n_boot, seed) @ e  # (n_boot, 1 + controls)
    iv = percentile_interval(boot[:, 0] / boot[:, 1:].mean(axis=1), ratio, level, n, "sequence")
    n_ctrl = e.shape[1] - 1
    p = (1 + int(np.sum(totals[1:] >= totals[0]))) / (1 + n_ctrl)
    return REnergy(ratio, iv.low, iv.high, level, p, n, n_ctrl)


def ceiling_ratios(second_moment: np.ndarray, ranks: list[int]) -> dict[int, float]:
    """``{k: ceiling}`` for every rank, from one eigendecomposition: the largest R_energy a rank-k
    subspace can reach, G's own top-k eigen-directions against the expected energy of a Haar
    rank-k subspace of their complement,

        Σ_{i<=k} λ_i / (k/(d − k) · Σ_{i>k} λ_i),   λ the eigenvalues of M = Σ g gᵀ.

    Equal to 1 exactly when M ∝ I (isotropic gradients); infinite when M has rank <= k.
    """
    m = _square_and_ranks(second_moment, ranks, "second_moment")
    d = m.shape[0]
    lam = np.clip(np.linalg.eigvalsh(m)[::-1], 0.0, None)
    out = {}
    for k in map(int, ranks):
        rest = lam[k:].sum()
        out[k] = float("inf") if rest <= 0 else float(lam[:k].sum() / (k / (d - k) * rest))
    return out


def ceiling_ratio(second_moment: np.ndarray, k: int) -> float:
    """The ceiling of :func:`ceiling_ratios` for one rank k."""
    return ceiling_ratios(second_moment, [k])[int(k)]


class SecondMoment:
    """Uncentred second moment ``M = Σ g gᵀ`` of gradient rows, streamed in float64 (d × d)."""

    def __init__(self, dim: int) -> None:
        if isinstance(dim, bool) or int(dim) != dim or dim < 1:
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        self.matrix = torch.zeros((int(dim), int(dim)), dtype=torch.float64)
        self.count = 0

    def update(self, rows: torch.Tensor) -> SecondMoment:
        r = torch.as_tensor(rows).reshape(-1, rows.shape[-1]).to(torch.float64)
        if r.shape[1] != self.matrix.shape[0]:
            raise ValueError(f"rows must have {self.matrix.shape[0]} columns, got {r.shape[1]}")
        self.matrix += r.T @ r
        self.count += r.shape[0]
        return self


@torch.no_grad()
def final_states(model, windows: np.ndarray, batch: int = 32) -> torch.Tensor:
    """Last-layer states of ``windows`` as rows, float64 ``(n·L, d)``."""
    parts = [
        final_hidden(model, torch.from_numpy(windows[i : i + batch]))
        for i in range(0, len(windows), batch)
    ]
    h = torch.cat(parts).cpu()
    return h.reshape(-1, h.shape[-1]).double()
