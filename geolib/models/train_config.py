"""The training configuration: what determines a run (:class:`TrainConfig`, built from a
parameters file by :func:`params_to_config`), the precision it computes in, and its schedules
(the learning rate at each step, the steps that keep a checkpoint). The loop that uses them is
:mod:`geolib.models.train`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch

from geolib.config import checked_number
from geolib.models.families import ModelConfig

SCHEDULES = ("cosine", "linear", "constant", "wsd")
OPTIMIZERS = ("adamw", "sgd")
PRECISIONS = ("fp32", "bf16", "auto")


@dataclass
class TrainConfig:
    """Everything that determines a run (a run directory is tied to one configuration).

    ``batch_size`` is the number of sequences per optimizer step (tokens per step =
    ``batch_size·seq_len``); ``grad_accum`` splits them into that many micro-batches (the data
    and, up to float summation order, the update do not depend on it). Checkpoints are taken at
    :func:`run_checkpoints`: Pythia's steps (``total_steps``, ``checkpoint_every``, ``log_max``)
    and, where ``dense_every`` is set, every ``dense_every`` steps up to ``dense_until`` (a window
    sampled finely enough that a peak in it has a checkpoint on each side). Without a tokenizer
    (synthetic data), give ``vocab_size`` (and ``mask_token_id`` for ``bert``).

    ``precision``: ``fp32``, or ``bf16`` (the forward passes under ``torch.autocast``; weights,
    gradients, optimizer state and checkpoints stay float32, as in the papers' mixed-precision
    training), or ``auto`` (:func:`resolve_precision`: bf16 where this machine runs it faster).
    A model attention of ``auto`` becomes :func:`attention_for` the precision.

    ``schedule: wsd`` (warmup-stable-decay) holds the peak rate after the warmup and decays it
    linearly to ``min_lr_ratio·lr`` over the last ``decay_steps`` steps (given with it alone).
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    train_tokens: str = "data/tokens/id/train.npy"
    val_tokens: str | None = "data/tokens/id/validation.npy"
    tokenizer: str | None = "data/tokenizer"
    vocab_size: int | None = None
    mask_token_id: int | None = None
    batch_size: int = 16
    grad_accum: int = 1
    seq_len: int = 128
    lr: float = 2e-3
    warmup_steps: int = 50
    schedule: str = "cosine"
    decay_steps: int | None = None
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    optimizer: str = "adamw"
    momentum: float = 0.9
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    grad_clip: float | None = 1.0
    mask_prob: float = 0.15
    total_steps: int = 1000
    checkpoint_every: int = 250
    log_max: int = 512
    dense_every: int = 0
    dense_until: int = 0
    eval_interval: int = 50
    eval_batches: int = 8
    seed: int = 0
    device: str = "cpu"
    num_threads: int | None = None
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if isinstance(self.model, dict):
            self.model = ModelConfig.from_dict(self.model)
        if not isinstance(self.model, ModelConfig):
            raise ValueError(f"TrainConfig.model must be a mapping, got {self.model!r}")
        self._check_numbers()
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"TrainConfig.precision must be one of {PRECISIONS}, got {self.precision!r}"
            )
        if self.precision == "auto":  # the run records what it resolved to, never "auto"
            self.precision = resolve_precision(self.device)
        if self.model.attn_implementation == "auto":
            self.model = replace(
                self.model, attn_implementation=attention_for(self.precision, self.device)
            )
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; known: {SCHEDULES}")
        if (self.schedule == "wsd") != (self.decay_steps is not None):
            raise ValueError(
                "TrainConfig.decay_steps (the steps of the final decay) goes with schedule "
                f"'wsd' and only with it: schedule {self.schedule!r}, decay_steps "
                f"{self.decay_steps!r}"
            )
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; known: {OPTIMIZERS}")
        if self.batch_size % self.grad_accum:
            raise ValueError(
                f"batch_size={self.batch_size} not divisible by grad_accum={self.grad_accum}"
            )
        if self.seq_len > self.model.context:
            raise ValueError(
                f"seq_len={self.seq_len} exceeds the model context {self.model.context}"
            )
        if self.tokenizer is None and self.vocab_size is None:
            raise ValueError("give a tokenizer directory or vocab_size")

    def _check_numbers(self) -> None:
        """Type and range of every numeric field (numbers given as strings are parsed), so a
        bad value fails here with its name, not mid-run."""
        w = "TrainConfig."
        ints = {  # name: lowest value
            "batch_size": 1, "grad_accum": 1, "seq_len": 1, "warmup_steps": 0,
            "total_steps": 1, "checkpoint_every": 0, "log_max": 0, "dense_every": 0,
            "dense_until": 0, "eval_interval": 1, "eval_batches": 0, "seed": 0,
        }  # fmt: skip
        for name, low in ints.items():
            setattr(self, name, checked_number(w + name, getattr(self, name), int, low=low))
        if bool(self.dense_every) != bool(self.dense_until):
            raise ValueError(
                f"{w}dense_every ({self.dense_every}) and dense_until ({self.dense_until}) go "
                "together (both 0: no dense window; a window past total_steps ends with the run)"
            )
        if self.warmup_steps > self.total_steps:
            raise ValueError(
                f"{w}warmup_steps ({self.warmup_steps}) exceeds total_steps ({self.total_steps}): "
                "the learning rate would never reach its peak"
            )
        for name, low in (
            ("vocab_size", 2),
            ("mask_token_id", 0),
            ("num_threads", 1),
            ("decay_steps", 1),
        ):
            value = checked_number(w + name, getattr(self, name), int, low=low, optional=True)
            setattr(self, name, value)
        if self.decay_steps is not None and self.decay_steps > self.total_steps - self.warmup_steps:
            raise ValueError(
                f"{w}decay_steps ({self.decay_steps}) exceeds the steps after the warmup "
                f"({self.total_steps} - {self.warmup_steps})"
            )
        positive = dict(low=0, low_open=True)
        self.lr = checked_number(w + "lr", self.lr, float, **positive)
        self.eps = checked_number(w + "eps", self.eps, float, **positive)
        self.grad_clip = checked_number(
            w + "grad_clip", self.grad_clip, float, optional=True, **positive
        )
        self.weight_decay = checked_number(w + "weight_decay", self.weight_decay, float, low=0)
        self.min_lr_ratio = checked_number(
            w + "min_lr_ratio", self.min_lr_ratio, float, low=0, high=1
        )
        unit_open = dict(low=0, high=1, high_open=True)
        self.momentum = checked_number(w + "momentum", self.momentum, float, **unit_open)
        self.mask_prob = checked_number(
            w + "mask_prob", self.mask_prob, float, low_open=True, **unit_open
        )
        if isinstance(self.betas, str | bytes) or len(self.betas) != 2:
            raise ValueError(f"{w}betas must be two numbers, got {self.betas!r}")
        self.betas = tuple(
            checked_number(f"{w}betas[{i}]", b, float, **unit_open)
            for i, b in enumerate(self.betas)
        )

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> TrainConfig:
        """From a (merged) parameters mapping; unknown keys are an error. A model without
        ``context`` gets ``seq_len``."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - known)
        if unknown:
            raise KeyError(f"unknown training parameters {unknown}; known: {sorted(known)}")
        params = dict(params)
        model = params.pop("model", {})
        if not isinstance(model, dict):
            raise ValueError(
                f"TrainConfig.model must be a mapping of the model's keys (family, d_model, …), "
                f"got {type(model).__name__} {model!r}"
            )
        model = dict(model)
        model.setdefault("context", params.get("seq_len", cls.seq_len))
        return cls(model=ModelConfig.from_dict(model), **params)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["betas"] = list(self.betas)
        return d

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len


# ----------------------------------------------------------------------------- precision


def resolve_precision(device: str) -> str:
    """``"bf16"`` where bf16 autocast trains faster than float32 here, else ``"fp32"``.

    On a CPU that means AMX-BF16 tiles: measured with ``benchmarks/bench_train.py
    --precision``, bf16 autocast (eager attention) ran the d = 128 models 1.2–1.5× float32's
    tokens/s on a CPU with AMX, and 0.47–0.75× on one with AVX-512-BF16 but no AMX. On CUDA,
    a GPU with bf16 support. The answer depends only on the hardware, so a run resolves to
    the same precision on every restart on one machine (and is bitwise reproducible there)."""
    if str(device).startswith("cuda"):
        return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_has_amx_bf16() else "fp32"


def cpu_has_amx_bf16() -> bool:
    """Whether this CPU reports AMX tiles with bf16 (torch's own CPU feature probe)."""
    try:
        caps = torch.cpu.get_capabilities()
    except (AttributeError, RuntimeError):  # an older torch: no probe, no claim of AMX
        return False
    return bool(caps.get("amx_bf16")) and bool(caps.get("amx_tile"))


def attention_for(precision: str, device: str) -> str:
    """The attention implementation that trains fastest at ``precision``: eager (matmul +
    softmax) for bf16 on a CPU, whose backward ran faster there than SDPA's flash kernel
    (SDPA's bf16 gained nothing over float32), else SDPA (the faster one in float32)."""
    return "eager" if precision == "bf16" and not str(device).startswith("cuda") else "sdpa"


def autocast(precision: str, device: torch.device | str):
    """The context the forward passes run in: bf16 autocast for ``"bf16"``, else a no-op."""
    device_type = torch.device(device).type
    return torch.autocast(device_type, dtype=torch.bfloat16, enabled=precision == "bf16")


# ----------------------------------------------------------------------------- schedules


def checkpoint_steps(
    total: int, every: int, log_max: int = 512, dense_every: int = 0, dense_until: int = 0
) -> list[int]:
    """Pythia's checkpoint steps: 0, 1, 2, 4, …, ``log_max``, then every ``every`` steps, and
    ``total`` (all ≤ ``total``); ``checkpoint_steps(143000, 1000)`` is Pythia's 154 steps. With
    ``dense_every``, also every ``dense_every`` steps up to ``dense_until``."""
    if min(total, every, dense_every, dense_until) < 0:
        raise ValueError("total, every, dense_every and dense_until must be non-negative")
    steps = {0, total}
    p = 1
    while p <= min(log_max, total):
        steps.add(p)
        p *= 2
    if every:
        steps.update(range(every, total + 1, every))
    if dense_every:
        steps.update(range(dense_every, min(dense_until, total) + 1, dense_every))
    return sorted(steps)


def run_checkpoints(cfg: TrainConfig) -> list[int]:
    """The steps at which the run ``cfg`` saves a checkpoint (:func:`checkpoint_steps`)."""
    return checkpoint_steps(
        cfg.total_steps, cfg.checkpoint_every, cfg.log_max, cfg.dense_every, cfg.dense_until
    )


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate of update number ``step`` (1-based): linear warmup over ``warmup_steps``,
    then ``schedule`` down to ``min_lr_ratio·lr`` at ``total_steps`` (``wsd``: the peak until
    the last ``decay_steps``, then linear)."""
    peak, floor = cfg.lr, cfg.lr * cfg.min_lr_ratio
    if cfg.warmup_steps and step <= cfg.warmup_steps:
        return peak * step / cfg.warmup_steps
    if cfg.schedule == "constant":
        return peak
    if cfg.schedule == "wsd":
        stable_end = cfg.total_steps - cfg.decay_steps
        if step <= stable_end:
            return peak
        return peak - (peak - floor) * min((step - stable_end) / cfg.decay_steps, 1.0)
    span = max(cfg.total_steps - cfg.warmup_steps, 1)
    progress = min(max(step - cfg.warmup_steps, 0) / span, 1.0)
    if cfg.schedule == "linear":
        return peak - (peak - floor) * progress
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def merged_config(params: Mapping[str, Any], *layers: Mapping[str, Any]) -> dict[str, Any]:
    """The one merge every training configuration is built by: the ``common`` keys of
    ``params`` that are training fields (``seed``, ``device``), then each of ``layers`` in
    order (the ``train`` section, a design's own, a size's), nested mappings (``model``)
    merged key by key. A plain mapping, for :meth:`TrainConfig.from_params`."""
    from geolib.config import deep_update

    names = {f.name for f in fields(TrainConfig)}
    merged = {k: v for k, v in params.get("common", {}).items() if k in names}
    for layer in layers:
        merged = deep_update(merged, layer)
    return merged


def params_to_config(params_path: str | Path, section: str, base: str | None = None) -> TrainConfig:
    """The :class:`TrainConfig` of ``section`` of a parameters file: :func:`merged_config` of
    section ``base`` (shared defaults) and then ``section``."""
    from geolib.config import load_params

    data = load_params(params_path)
    for name in (base, section):
        if name is not None and name not in data:
            raise KeyError(f"{params_path}: no section {name!r} (sections: {sorted(data)})")
    return TrainConfig.from_params(
        merged_config(data, *(data[n] for n in (base, section) if n is not None))
    )
