"""Stage parameters: one notebook or entry point's view of ``params.yaml``.

The file path is always passed in, so tests and notebooks call the same function with plain
values and nothing in ``geolib`` reads ``params.yaml`` behind the caller's back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


def load_params(path: str | Path) -> dict[str, Any]:
    """Read a parameters YAML file into a dict (error if missing or not a mapping)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"parameters file not found: {path}")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at top level, got {type(data).__name__}")
    return data


def stage_params(
    path: str | Path, stage: str, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Parameters of one stage: ``common`` merged with section ``stage``, then ``overrides``.

    Overrides may only replace keys that exist, so a typo in ``papermill -y`` fails loudly
    instead of being silently ignored.
    """
    data = load_params(path)
    if stage not in data:
        raise KeyError(f"{path}: no section {stage!r} (sections: {sorted(data)})")
    merged = {**data.get("common", {}), **data[stage]}
    for key, value in (overrides or {}).items():
        if key not in merged:
            raise KeyError(
                f"unknown parameter {key!r} for stage {stage!r}; known: {sorted(merged)}"
            )
        merged[key] = value
    return merged


def deep_update(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Recursively merge ``update`` into a copy of ``base`` (profiles override defaults)."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_update(dict(out[key]), value)
        else:
            out[key] = value
    return out


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (the key syntax of ``dvc exp run -S``)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def apply_profile(params: Mapping[str, Any], profile: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with a profile's keys replaced (e.g. ``profiles/smoke.yaml``).

    A profile holds only the keys it changes, nested like ``params.yaml``; every key must
    already exist in ``params`` so a profile cannot silently drift from the defaults.
    """
    unknown = sorted(set(flatten(profile)) - set(flatten(params)))
    if unknown:
        raise KeyError(f"profile keys not in the parameters: {unknown}")
    return deep_update(dict(params), profile)
