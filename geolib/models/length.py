"""The training-length study's runs: how many tokens a model of the sweep's kind needs before
what the papers measure stops moving.

    python -m geolib.models.designs length names          # the runs of the design
    python -m geolib.models.designs length train NAME     # stage length_train@NAME

One long run per size and seed (``<size>-s<seed>``, section ``training_length`` of
``params.yaml``), at the hyperparameters declared there, with a checkpoint at every doubling of
its steps (1, 2, 4, …). Its step count is the smallest power of two that reaches
``min_tokens_per_param`` tokens per parameter (all parameters, embeddings included; one number,
or one per size), so the last checkpoint is a doubling too. The learning rate stays at its peak
after the warm-up (schedule ``constant``): a decaying schedule would slow every quantity at the
end of the run whatever the model had left to learn, and the study asks when training at full
rate stops moving them.

Training writes the run folders only; measuring them is
:mod:`geolib.experiments.training_length`. This module imports no measurement code, so an edit
to a metric never retrains a run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geolib.config import checked_number, load_params
from geolib.models.families import build_model, count_params
from geolib.models.train import resolve_vocab
from geolib.models.train_config import TrainConfig, merged_config

_NAME = re.compile(r"^(?P<size>[A-Za-z]\w*)-s(?P<seed>\d+)$")


@dataclass(frozen=True)
class LengthRun:
    """One run of the study: a size and a seed."""

    size: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.size}-s{self.seed}"

    @classmethod
    def from_name(cls, name: str) -> LengthRun:
        m = _NAME.match(name)
        if m is None:
            raise ValueError(f"not a training-length run name: {name!r} (<size>-s<seed>)")
        return cls(m["size"], int(m["seed"]))


def length_runs(spec: Mapping[str, Any]) -> list[LengthRun]:
    """Every size × seed of the design, sizes in listed order."""
    return [LengthRun(size, int(seed)) for size in spec["sizes"] for seed in spec["seeds"]]


def check_names_listed(spec: Mapping[str, Any]) -> list[str]:
    """The design's names; error if ``spec["names"]`` (what DVC's ``foreach`` reads) differs."""
    names = [r.name for r in length_runs(spec)]
    if list(spec.get("names", [])) != names:
        raise ValueError(
            "training_length.names must equal the design's expansion (the list to write there): "
            f"{names}"
        )
    return names


def steps_for(n_params: int, tokens_per_step: int, min_tokens_per_param: float) -> int:
    """The smallest power of two of steps whose tokens reach ``min_tokens_per_param`` per
    parameter."""
    if n_params < 1 or tokens_per_step < 1 or min_tokens_per_param <= 0:
        raise ValueError(
            f"need positive n_params, tokens_per_step and min_tokens_per_param, got {n_params}, "
            f"{tokens_per_step}, {min_tokens_per_param}"
        )
    need = min_tokens_per_param * n_params / tokens_per_step
    return 2 ** max(0, math.ceil(math.log2(need)))


def min_tokens_per_param(spec: Mapping[str, Any], size: str) -> float:
    """``spec["min_tokens_per_param"]`` for ``size``: one number for every size, or a mapping
    size → number (the smaller width can afford a longer run than the larger one)."""
    value = spec["min_tokens_per_param"]
    key = "training_length.min_tokens_per_param"
    if isinstance(value, Mapping):
        if set(value) != set(spec["sizes"]):
            raise ValueError(
                f"{key} must name every size of training_length.sizes {sorted(spec['sizes'])}, "
                f"got {sorted(value)}"
            )
        value, key = value[size], f"{key}.{size}"
    return checked_number(key, value, float, low=0)


def run_config(params: Mapping[str, Any], run: LengthRun) -> TrainConfig:
    """The TrainConfig of one run: ``common`` (seed, device) < ``train`` <
    ``training_length.train`` < the size's model, then the seed and the step count."""
    spec = params["training_length"]
    if run.size not in spec["sizes"]:
        raise KeyError(f"training_length.sizes has no size {run.size!r}")
    merged = merged_config(
        params, params["train"], {**spec["train"], "model": dict(spec["sizes"][run.size])}
    )
    merged["seed"] = run.seed
    cfg = TrainConfig.from_params(merged)
    min_tpp = min_tokens_per_param(spec, run.size)
    steps = steps_for(n_params(cfg), cfg.tokens_per_step, min_tpp)
    merged.update(
        total_steps=steps,
        checkpoint_every=0,
        log_max=steps,  # a checkpoint at every doubling: 1, 2, 4, …, steps
        eval_interval=steps,  # the study measures its own fixed windows at every checkpoint
    )
    return TrainConfig.from_params(merged)


def n_params(cfg: TrainConfig) -> int:
    """All parameters of the run's model (tied weights once), as tokens per parameter counts
    them."""
    vocab, _ = resolve_vocab(cfg)
    return count_params(build_model(cfg.model, vocab.size, seed=0))


def check_listed(params: Mapping[str, Any]) -> list[str]:
    """The design's names from the whole parameters (:func:`check_names_listed`)."""
    return check_names_listed(params["training_length"])


def named_run(params_path: str | Path, name: str) -> tuple[TrainConfig, Path]:
    """:func:`length_run` from a parameters file: the design command line's ``build``."""
    return length_run(load_params(params_path), name)


def length_run(params: Mapping[str, Any], name: str) -> tuple[TrainConfig, Path]:
    """The configuration and run folder of the study's run ``name`` (error if not listed)."""
    spec = params["training_length"]
    names = check_names_listed(spec)
    if name not in names:
        raise KeyError(f"{name!r} is not a training-length run; runs: {names}")
    return run_config(params, LengthRun.from_name(name)), Path(spec["run_root"]) / name
