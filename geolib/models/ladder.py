"""The ladder of model sizes: one family trained at several widths and depths, so that each
Paper A claim's key number can be read against model size.

A rung is the default model of its family (section ``train_<family>`` over ``train``) with only
its shape changed — ``d_model``, ``n_layers``, ``n_heads``, ``d_ff`` from ``scale.rungs`` — and
everything else kept: the same tokens, steps, schedule, checkpoints, batch and seed. Every rung
therefore sees the same 2M tokens, as every model of the Pythia suite sees the same 300B: the
step-based windows the claims are stated in (the early phase up to step 512, T frozen at step
64, the checkpoints the measurements read) mean the same on every rung. The centre rung is the
default run with its seed replicates (``scale.centre_runs``); it is not retrained here.

Each rung is trained with its family section's seed (``train_<family>.seed``, else
``common.seed``) under its bare name (``xs``) and again with every seed of ``scale.seeds`` as
``<rung>-s<seed>`` (``xs-s1``): only ``seed`` changes (initialisation, batch order, validation
draw), so the trend's unit, the trained model, has replicates at every size and not at the
centre alone.

    python -m geolib.models.designs ladder names        # the rungs of section `scale`
    python -m geolib.models.designs ladder train NAME   # stage ladder_train@NAME

Model size is counted as non-embedding parameters (Kaplan et al. 2020): every parameter except
the token (and position) embedding tables and an untied unembedding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from torch import nn

from geolib.config import load_params
from geolib.models.families import ModelConfig, build_model
from geolib.models.replicas import SEEDED, extra_seeds
from geolib.models.runs import read_run_info
from geolib.models.train_config import TrainConfig, params_to_config

#: the shape fields a rung may set; anything else stays the family's default
SHAPE = ("d_model", "n_layers", "n_heads", "d_ff")


def names(scale: Mapping[str, Any], default_seed: int = 0) -> list[str]:
    """The trained models of section ``scale``, rung by rung in the order of ``scale.rungs``:
    the rung's bare name (seed ``default_seed``), then ``<rung>-s<seed>`` for each of
    ``scale.seeds``. A rung that sets a field other than :data:`SHAPE` (or none), a rung name
    that reads as seeded, or a seed repeated or equal to ``default_seed`` is an error."""
    rungs = scale.get("rungs") or {}
    if not isinstance(rungs, Mapping) or not rungs:
        raise ValueError("scale.rungs must map each rung's name to its shape")
    for name, shape in rungs.items():
        extra = sorted(set(shape or {}) - set(SHAPE))
        if not shape or extra:
            raise ValueError(f"scale.rungs.{name} may set only {SHAPE}, got {dict(shape or {})}")
        if SEEDED.match(str(name)):
            raise ValueError(f"scale.rungs.{name}: a rung's name may not end in -s<seed>")
    seeds = extra_seeds(scale.get("seeds") or [], default_seed, "scale.seeds")
    return [n for r in rungs for n in (str(r), *(f"{r}-s{s}" for s in seeds))]


def parse(name: str) -> tuple[str, int | None]:
    """``(rung, seed)`` of a trained model's name; ``seed`` is ``None`` for the bare name (the
    default seed)."""
    m = SEEDED.match(name)
    return (m["base"], int(m["seed"])) if m else (name, None)


def check_listed(params: Mapping[str, Any]) -> list[str]:
    """The trained models' names; error if ``scale.names`` (the DVC foreach list) differs."""
    common = int(params.get("common", {}).get("seed", 0))
    family = params.get(f"train_{params['scale']['family']}", {})
    expected = names(params["scale"], int(family.get("seed", common)))
    if list(params["scale"].get("names") or []) != expected:
        raise ValueError(
            f"scale.names must list the rungs of scale.rungs, each followed by its scale.seeds, "
            f"in order (the list to write there): {expected}"
        )
    return expected


def rung(params_path: str | Path, name: str) -> tuple[TrainConfig, Path]:
    """The configuration and run folder of ``name`` (a rung, or ``<rung>-s<seed>``):
    ``train_<family>`` with the rung's shape, and the seed where the name gives one."""
    params = load_params(params_path)
    listed = check_listed(params)
    if name not in listed:
        raise ValueError(f"{name!r} is not a rung of scale.rungs: {listed}")
    scale = params["scale"]
    base, seed = parse(name)
    cfg = params_to_config(params_path, f"train_{scale['family']}", base="train")
    shape = {k: int(v) for k, v in scale["rungs"][base].items()}
    cfg = replace(cfg, model=replace(cfg.model, **shape))
    if seed is not None:
        cfg = replace(cfg, seed=seed)
    return cfg, Path(scale["run_root"]) / name


def non_embedding_params(model: nn.Module) -> int:
    """Parameters outside every ``nn.Embedding`` table and outside an untied output embedding
    (the LM head's ``vocab × d`` matrix); a head tied to the input table is counted once, in
    the table, so nothing of it is left here."""
    skip = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is not None:
        skip.add(id(head.weight))
    return sum(p.numel() for p in model.parameters() if id(p) not in skip)


def run_size(run_dir: str | Path) -> dict[str, Any]:
    """Size of a trained run from its ``run.json``: ``non_embedding`` (rebuilt from the stored
    configuration, random weights), ``params`` (all, as trained), ``d_model``, ``n_layers``."""
    info = read_run_info(run_dir)
    cfg = ModelConfig.from_dict(info["config"]["model"])
    model = build_model(cfg, int(info["vocab_size"]))
    return {
        "non_embedding": non_embedding_params(model),
        "params": int(info["params"]),
        "d_model": cfg.d_model,
        "n_layers": cfg.n_layers,
    }
