"""Seed replicates of the default Paper A models: the trained model, not a token, is the unit.

Each replicate is a default model (section ``train_<model>`` over ``train``: pythia, olmo,
bert, and the warm-up alternative olmo_warmup2) trained again with another seed; only ``seed``
changes (initialisation, batch order, validation draw). Its name is ``<model>-s<seed>`` and it
trains into ``<run_root>/<name>``, so a DVC ``foreach`` stage per name retrains exactly the
replicates whose values change. The default run (``runs/<model>``) has the seed of its section
(``seed`` of ``train_<model>``, else ``common.seed``), not repeated here. ``seeds`` are every
model's replicate seeds; ``seeds_of`` gives a model its own list instead.

    python -m geolib.models.designs replicas names        # the replicates of section `replicas`
    python -m geolib.models.designs replicas train NAME   # stage train_replica@NAME

The analysis stages group their runs by :func:`identity` (family, seed) to decide each claim
once per seed; this module imports no measurement code, so editing one retrains nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from geolib.config import load_params
from geolib.models.runs import is_run_dir, read_run_info
from geolib.models.train_config import TrainConfig, params_to_config

_NAME = re.compile(r"^(?P<model>[a-z][a-z0-9_]*)-s(?P<seed>\d+)$")
#: any seeded name, ``<base>-s<seed>`` (a replicate, a seeded rung of the ladder)
SEEDED = re.compile(r"^(?P<base>.+)-s(?P<seed>\d+)$")


def extra_seeds(seeds: Any, default_seed: int, where: str) -> list[int]:
    """Seeds beyond the default runs' own: a list of integers, distinct, none equal to
    ``default_seed`` (that run keeps its bare name); an error naming ``where`` otherwise."""
    if not isinstance(seeds, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) for s in seeds
    ):
        raise ValueError(f"{where} must be a list of integer seeds, got {seeds!r}")
    if len(set(seeds)) != len(seeds) or default_seed in seeds:
        raise ValueError(
            f"{where} must be distinct and differ from the default seed {default_seed} (the "
            f"default runs' own, under their bare names), got {seeds}"
        )
    return list(seeds)


def names(section: Mapping[str, Any], default_seeds: Mapping[str, int] | None = None) -> list[str]:
    """``<model>-s<seed>`` for every model and seed of the ``replicas`` section, model-major:
    ``seeds``, or the model's own list in ``seeds_of``. A seed equal to the model's default
    seed (``default_seeds``, 0 where absent: the default run's) or repeated is an error."""
    models = list(section["models"])
    if len(set(models)) != len(models):
        raise ValueError(f"replicas.models repeats a model: {models}")
    own = section.get("seeds_of") or {}
    if not isinstance(own, Mapping) or set(own) - set(models):
        raise ValueError(
            f"replicas.seeds_of must map models of replicas.models to seeds, got {own!r}"
        )
    out = []
    for model in models:
        where = f"replicas.seeds_of.{model}" if model in own else "replicas.seeds"
        seed0 = int((default_seeds or {}).get(model, 0))
        seeds = extra_seeds(own.get(model, section["seeds"]), seed0, where)
        out += [f"{model}-s{seed}" for seed in seeds]
    return out


def default_seeds(params: Mapping[str, Any]) -> dict[str, int]:
    """Each replicated model's default seed: ``train_<model>.seed``, else ``common.seed``."""
    common = int(params.get("common", {}).get("seed", 0))
    return {
        m: int(params.get(f"train_{m}", {}).get("seed", common))
        for m in params["replicas"]["models"]
    }


def parse(name: str) -> tuple[str, int]:
    """``(model, seed)`` of a replicate's name (``model`` names its ``train_<model>`` section)."""
    m = _NAME.match(name)
    if not m:
        raise ValueError(f"replicate names look like 'pythia-s1', got {name!r}")
    return m["model"], int(m["seed"])


def check_listed(params: Mapping[str, Any]) -> list[str]:
    """The replicates' names; error if ``replicas.names`` (the DVC foreach list) differs."""
    expected = names(params["replicas"], default_seeds(params))
    if list(params["replicas"].get("names", [])) != expected:
        raise ValueError(
            "replicas.names must equal the models x seeds of section replicas (the list to write "
            f"there): {expected}"
        )
    return expected


def replica(params_path: str | Path, name: str) -> tuple[TrainConfig, Path]:
    """The configuration and run folder of replicate ``name``: ``train_<model>`` with its seed."""
    params = load_params(params_path)
    section = params["replicas"]
    if name not in check_listed(params):
        raise ValueError(f"{name!r} is not a replicate of params.replicas (see `names`)")
    model, seed = parse(name)
    cfg = params_to_config(params_path, f"train_{model}", base="train")
    return replace(cfg, seed=seed), Path(section["run_root"]) / name


def identity(run: str) -> tuple[str, int | None]:
    """``(family, seed)`` of a run folder from its ``run.json``; a hub id is its own family with
    no seed (one model per name)."""
    if not is_run_dir(run):
        return str(run), None
    config = read_run_info(run)["config"]
    return str(config["model"]["family"]), int(config["seed"])


def size(run: str) -> dict[str, int | None]:
    """A run's parameter count and training tokens (from its ``run.json``): the scale a
    verdict on it holds at. ``None`` for a hub id (not recorded locally)."""
    if not is_run_dir(run):
        return {"params": None, "tokens": None}
    info = read_run_info(run)
    return {"params": int(info["params"]), "tokens": int(info["tokens"])}


def per_seed(runs: list[str], summarise: Callable[[list[str]], Any]) -> dict[str, Any]:
    """What an analysis stage adds to its summary so that each claim can be decided once per
    seed: ``runs`` (each run's family, seed, parameters and training tokens: :func:`size`)
    and, with more than one seed, ``by_seed`` (``summarise`` of each seed's runs, in their
    listed order; hub ids form the group "None").
    """
    ids = {run: identity(run) for run in runs}
    groups: dict[str, list[str]] = {}
    for run, (_family, seed) in ids.items():
        groups.setdefault(str(seed), []).append(run)
    out: dict[str, Any] = {
        "runs": {r: {"family": f, "seed": s, **size(r)} for r, (f, s) in ids.items()}
    }
    if len(groups) > 1:
        out["by_seed"] = {seed: summarise(members) for seed, members in groups.items()}
    return out
