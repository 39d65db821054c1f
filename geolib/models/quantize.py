"""Post-training weight quantization of a model, by round-to-nearest and by GPTQ, with
maintained libraries (Paper B, claim B8: robustness to quantization).

* ``rtn``: torchao's ``IntxWeightOnlyConfig`` (``quantize_``): each weight becomes an integer
  tensor with a scale per group; the model computes with it from then on.
* ``gptq``: gptqmodel's ``GPTQ`` (Frantar et al. 2022): the layer's input Hessian H = 2XᵀX is
  accumulated from calibration windows, then the weight is quantized column by column with the
  rounding error compensated through H⁻¹. gptqmodel's own end-to-end ``quantize()`` packs the
  weights into int32 kernels, which (a) refuses 3-bit packing of layers whose output width is
  not a multiple of 32 (our MLPs: 172, 344) and (b) after an in-memory ``quantize()`` gave logits
  off by 141% on a 4-bit tiny model (checked here), so this module drives the same ``GPTQ``
  object the way gptqmodel's Hugging Face integration does (``add_batch`` then ``quantize``) and
  writes its de-quantized weight Q back into the linear layer. The driver is sequential: layers
  are quantized in forward order, and each one's calibration inputs come from the model whose
  earlier layers are already quantized (gptqmodel's ``true_sequential``).

Both methods use the same grid. Symmetric, ``b`` bits, a scale s = amax / ((2^b − 1)/2) per
group (the group's largest |w|), codes q ∈ [−2^(b−1), 2^(b−1) − 1], w ≈ s·q: torchao's
``MappingType.SYMMETRIC`` and gptqmodel's ``sym=True`` (zero point 2^(b−1)) are this same grid
(tested). ``group_size=-1`` means one group per output row (``PerAxis(0)``).

Layers: every ``nn.Linear`` of the model except the output embedding (for our decoders: the
attention q, k, v, o and MLP gate, up, down projections of every block); with ``lm_head=True``
the output embedding (the unembedding W) too. Embeddings and norms stay float.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass

import torch
from torch import nn

METHODS = ("rtn", "gptq")


@dataclass(frozen=True)
class QuantSpec:
    """One quantization setting; ``group_size=-1`` is one group per output row."""

    method: str
    bits: int
    group_size: int = -1
    symmetric: bool = True
    lm_head: bool = False
    damp_percent: float = 0.05  # GPTQ's dampening of H (fraction of its mean diagonal)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown quantization method {self.method!r}; known: {METHODS}")
        if isinstance(self.bits, bool) or not isinstance(self.bits, int) or not 2 <= self.bits <= 8:
            raise ValueError(f"bits must be an int in [2, 8], got {self.bits!r}")
        if not isinstance(self.group_size, int) or not (
            self.group_size == -1 or self.group_size > 0
        ):
            raise ValueError(
                f"group_size must be -1 (per row) or positive, got {self.group_size!r}"
            )
        if not self.symmetric:
            raise ValueError("only symmetric grids are supported (the same grid for both methods)")
        if not 0.0 < float(self.damp_percent) < 1.0:
            raise ValueError(f"damp_percent must be in (0, 1), got {self.damp_percent!r}")

    @property
    def label(self) -> str:
        """``rtn4``, ``gptq3_head`` …: a column-name fragment."""
        return f"{self.method}{self.bits}" + ("_head" if self.lm_head else "")


@dataclass(frozen=True)
class LayerReport:
    """One quantized layer. ``error`` and ``rtn_error`` (GPTQ only) are the relative output
    error on that layer's calibration inputs X: tr(ΔXᵀXΔᵀ) / tr(WXᵀXWᵀ), Δ = W − Q, for the
    GPTQ weight and for round-to-nearest of the same W on the same grid."""

    name: str
    rows: int
    cols: int
    seconds: float
    error: float = float("nan")
    rtn_error: float = float("nan")
    capture_seconds: float = 0.0  # GPTQ: forward passes that collect the layer's inputs


def target_linears(model: nn.Module, lm_head: bool = False) -> list[tuple[str, nn.Linear]]:
    """The layers a :class:`QuantSpec` quantizes, in forward (registration) order."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    found = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear) and m is not head]
    if lm_head:
        if head is None or not isinstance(head, nn.Linear):
            raise ValueError("lm_head=True but the model has no linear output embedding")
        inp = model.get_input_embeddings()
        if inp is not None and inp.weight is head.weight:
            raise ValueError(
                "lm_head=True on a model with tied embeddings would quantize the input "
                "embedding too"
            )
        name = next(n for n, m in model.named_modules() if m is head)
        found.append((name, head))
    if not found:
        raise ValueError("the model has no linear layer to quantize")
    return found


def head_layer(model: nn.Module) -> list[tuple[str, nn.Linear]]:
    """The output embedding alone, as ``layers`` for :func:`quantize`: quantizing the blocks
    and then this is the ``lm_head=True`` setting (the head comes last in forward order)."""
    return target_linears(model, lm_head=True)[-1:]


def _torchao_config(spec: QuantSpec):
    from torchao.quantization import IntxWeightOnlyConfig, MappingType, PerAxis, PerGroup

    granularity = PerAxis(0) if spec.group_size == -1 else PerGroup(spec.group_size)
    return IntxWeightOnlyConfig(
        weight_dtype=getattr(torch, f"int{spec.bits}"),
        granularity=granularity,
        mapping_type=MappingType.SYMMETRIC,
    )


def _check_groups(name: str, layer: nn.Linear, spec: QuantSpec) -> None:
    if spec.group_size != -1 and layer.in_features % spec.group_size:
        raise ValueError(
            f"group_size {spec.group_size} does not divide the {layer.in_features} inputs of "
            f"{name}; use -1 (one group per row) or a divisor"
        )


def quantize_rtn(
    model: nn.Module, spec: QuantSpec, *, layers: list[tuple[str, nn.Linear]] | None = None
) -> list[LayerReport]:
    """Round-to-nearest in place (torchao ``quantize_``) on :func:`target_linears` (or
    ``layers``)."""
    from torchao.quantization import quantize_

    layers = target_linears(model, spec.lm_head) if layers is None else layers
    for name, layer in layers:
        _check_groups(name, layer, spec)
    names = {n for n, _ in layers}
    t0 = time.perf_counter()
    quantize_(model, _torchao_config(spec), filter_fn=lambda m, fqn: fqn in names)
    share = (time.perf_counter() - t0) / len(layers)
    return [LayerReport(n, m.out_features, m.in_features, share) for n, m in layers]


def rtn_weight(weight: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """Round-to-nearest of one weight ``(out, in)`` by torchao, de-quantized (a copy)."""
    from torchao.quantization import quantize_

    holder = nn.Sequential(nn.Linear(weight.shape[1], weight.shape[0], bias=False))
    holder[0].weight.data.copy_(weight.detach().float())
    quantize_(holder, _torchao_config(spec), filter_fn=lambda m, fqn: isinstance(m, nn.Linear))
    return quantized_weight(holder[0])


class _Captured(Exception):
    """Raised by the capture hook: the rest of the forward pass is not needed."""


def _gptq_config(spec: QuantSpec):
    from gptqmodel import QuantizeConfig

    return QuantizeConfig(
        bits=spec.bits,
        group_size=spec.group_size,
        sym=spec.symmetric,
        desc_act=False,
        act_group_aware=False,  # activation reordering needs group_size > 0: off for both
        damp_percent=spec.damp_percent,
        device="cpu",
        offload_to_disk=False,
    )


@torch.no_grad()
def quantize_gptq(
    model: nn.Module,
    spec: QuantSpec,
    calib: torch.Tensor,
    *,
    batch_size: int = 32,
    layers: list[tuple[str, nn.Linear]] | None = None,
) -> list[LayerReport]:
    """GPTQ in place on :func:`target_linears` (or ``layers``), sequentially in forward order,
    calibrated on ``calib`` (int64 token ids ``(n, T)``); see the module docstring."""
    os.environ.setdefault("GPTQMODEL_CPU_WORKERS", "2")  # gptqmodel's pool needs ≥ 2 here
    from gptqmodel.quantization.gptq import GPTQ

    calib = torch.as_tensor(calib)
    if calib.ndim != 2 or calib.dtype != torch.int64 or calib.numel() == 0:
        raise ValueError(
            f"calib must be non-empty int64 token ids (n, T), got {calib.dtype} "
            f"{tuple(calib.shape)}"
        )
    layers = target_linears(model, spec.lm_head) if layers is None else layers
    for name, layer in layers:
        _check_groups(name, layer, spec)
    was_training = model.training
    model.eval()
    reports = []
    for name, layer in layers:
        t0 = time.perf_counter()
        gptq = GPTQ(layer, _gptq_config(spec))
        gptq.quantizer.configure(perchannel=True)
        gptq.expected_nsamples = float(calib.numel())
        xtx = torch.zeros(layer.in_features, layer.in_features, dtype=torch.float64)

        def capture(mod, inputs, output, gptq=gptq, xtx=xtx):
            x = inputs[0].detach()
            gptq.add_batch(x, output.detach())
            flat = x.reshape(-1, x.shape[-1]).double()
            xtx.add_(flat.T @ flat)
            raise _Captured

        handle = layer.register_forward_hook(capture)
        try:
            for batch in calib.split(batch_size):
                try:
                    model(input_ids=batch)
                except _Captured:
                    pass
        finally:
            handle.remove()
        t_capture = time.perf_counter() - t0
        w = layer.weight.detach().clone()
        q = gptq.quantize()[0].to(w.dtype)
        layer.weight.data.copy_(q)
        reports.append(
            LayerReport(
                name,
                layer.out_features,
                layer.in_features,
                time.perf_counter() - t0,
                error=relative_output_error(w, q, xtx),
                rtn_error=relative_output_error(w, rtn_weight(w, spec), xtx),
                capture_seconds=t_capture,
            )
        )
    model.train(was_training)
    return reports


def quantize(
    model: nn.Module,
    spec: QuantSpec,
    calib: torch.Tensor | None = None,
    *,
    batch_size: int = 32,
    layers: list[tuple[str, nn.Linear]] | None = None,
) -> list[LayerReport]:
    """Quantize ``model`` in place by ``spec`` (on ``layers`` if given, else
    :func:`target_linears`); GPTQ needs ``calib`` token ids ``(n, T)``."""
    if spec.method == "rtn":
        return quantize_rtn(model, spec, layers=layers)
    if calib is None:
        raise ValueError("GPTQ needs calibration token ids (calib)")
    return quantize_gptq(model, spec, calib, batch_size=batch_size, layers=layers)


def quantized(model: nn.Module, spec: QuantSpec, calib=None, **kw) -> tuple[nn.Module, list]:
    """``(a quantized deep copy of model, its layer reports)``; ``model`` is left as it was."""
    q = copy.deepcopy(model)
    return q, quantize(q, spec, calib, **kw)


def quantized_weight(layer: nn.Linear) -> torch.Tensor:
    """The weight a layer computes with, read back from the model, as float ``(out, in)``
    (torchao's integer tensor de-quantized; a GPTQ layer holds its de-quantized weight)."""
    w = layer.weight
    if hasattr(w, "dequantize") and type(w) is not nn.Parameter and type(w) is not torch.Tensor:
        return w.dequantize().detach().float()
    return w.detach().float()


def max_distinct_per_group(weight: torch.Tensor, group_size: int = -1) -> int:
    """The largest number of distinct values in any group of ``weight`` ``(out, in)``."""
    w = weight.detach().reshape(weight.shape[0], -1)
    g = w.shape[1] if group_size == -1 else group_size
    if w.shape[1] % g:
        raise ValueError(f"group_size {group_size} does not divide {w.shape[1]} columns")
    groups = w.reshape(w.shape[0], w.shape[1] // g, g).reshape(-1, g)
    return max(int(torch.unique(row).numel()) for row in groups)


def relative_output_error(w: torch.Tensor, q: torch.Tensor, xtx: torch.Tensor) -> float:
    """tr(ΔXᵀXΔᵀ) / tr(WXᵀXWᵀ) with Δ = W − Q: the squared output error of the layer on the
    inputs whose Gram matrix is ``xtx`` (in, in), relative to its squared output."""
    w64, d = w.double(), (w.double() - q.double())
    den = float(torch.einsum("oi,ij,oj->", w64, xtx, w64))
    if not den > 0:
        raise ValueError("the layer's output on its calibration inputs is zero")
    return float(torch.einsum("oi,ij,oj->", d, xtx, d)) / den


def grid_scale(weight: torch.Tensor, bits: int) -> torch.Tensor:
    """The per-row scale s = amax / ((2^b − 1)/2) of a float ``weight`` ``(out, in)``: ``(out, 1)``;
    on that row's grid, w / s is an integer in [−2^(b−1), 2^(b−1) − 1]."""
    return weight.detach().abs().amax(dim=1, keepdim=True).double() / ((2**bits - 1) / 2)
