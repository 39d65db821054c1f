"""Stage parameters: one notebook or entry point's view of ``params.yaml``.

The file path is always passed in, so tests and notebooks call the same function with plain
values and nothing in ``geolib`` reads ``params.yaml`` behind the caller's back.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import yaml

# PyYAML follows YAML 1.1, whose floats need a dot: ``1e-3`` is read as the *string* "1e-3"
# (YAML 1.2 and every reader of the file would say 0.001). Such strings are read as numbers.
_SCI_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


#: bounds on what a parameters file may hold: its size, and its values once YAML's aliases are
#: expanded (a 504-byte "billion laughs" file expands to ~10⁹ values)
MAX_PARAMS_BYTES = 4 * 2**20
MAX_PARAMS_VALUES = 1_000_000


_MERGE = "tag:yaml.org,2002:merge"


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (DVC refuses it too;
    PyYAML would keep the last silently)."""

    def construct_mapping(self, node, deep=False):  # noqa: ANN001 - PyYAML's signature
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:  # `<<: *anchor`: keys given here win
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"a key must be a scalar, got {type(key).__name__}",
                    key_node.start_mark,
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"key {key!r} given twice (first on line {seen[key].line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _numbers(value: Any, budget: list[int]) -> Any:
    """``value`` with every string that is a YAML 1.2 exponent float (``1e-3``) made a float;
    ``budget[0]`` counts down the values visited (an error when spent)."""
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError(
            f"more than {MAX_PARAMS_VALUES:,} values once aliases are expanded (an alias bomb?)"
        )
    if isinstance(value, dict):
        return {k: _numbers(v, budget) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v, budget) for v in value]
    if isinstance(value, str) and _SCI_FLOAT.fullmatch(value.strip()):
        return float(value)
    return value


def load_params(path: str | Path) -> dict[str, Any]:
    """Read a parameters YAML file into a dict of sections (error naming the file if it is
    missing, larger than 4 MiB, not valid YAML, gives a key twice, expands past a million values,
    is not a mapping, or has a section that is not one). Exponent floats without a dot
    (``1e-3``) are numbers."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"parameters file not found: {path}")
    if path.stat().st_size > MAX_PARAMS_BYTES:
        raise ValueError(
            f"{path}: {path.stat().st_size:,} bytes, more than a parameters file holds"
        )
    try:
        data = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 - safe loader
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at top level, got {type(data).__name__}")
    for name, value in data.items():
        if not isinstance(value, dict):
            raise ValueError(
                f"{path}: section {name!r} must be a mapping, got {type(value).__name__} "
                f"{reprlib.repr(value)}"
            )
    try:
        return _numbers(data, [MAX_PARAMS_VALUES])
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def section(data: Mapping[str, Any], name: str, path: str | Path) -> dict[str, Any]:
    """Section ``name`` of parameters ``data`` read from ``path``: a non-empty mapping (error
    naming the file and the section otherwise)."""
    if name not in data:
        raise KeyError(f"{path}: no section {name!r} (sections: {sorted(data)})")
    value = data[name]
    if not isinstance(value, Mapping) or not value:
        what = "empty" if isinstance(value, Mapping) else f"a {type(value).__name__}"
        raise ValueError(f"{path}: section {name!r} must be a non-empty mapping, got {what}")
    return dict(value)


def stage_params(
    path: str | Path, stage: str, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Parameters of one stage: ``common`` merged with section ``stage``, then ``overrides``.

    Overrides may only replace keys that exist, so a typo in ``papermill -y`` fails loudly
    instead of being silently ignored.
    """
    data = load_params(path)
    body = section(data, stage, path)
    common = section(data, "common", path) if "common" in data else {}
    merged = {**common, **body}
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


# ----------------------------------------------------------------------------- typed values


def checked_number(
    where: str,
    value: Any,
    kind: type,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    optional: bool = False,
) -> Any:
    """``value`` as ``kind`` (``int`` or ``float``) within [low, high] (ends open if asked).

    A number given as a string (``"1e-3"``, ``"8"``) is parsed; a bool, a non-number, an int
    field given a fraction, NaN, ±inf and out-of-range values raise ``ValueError`` naming ``where``
    (e.g. ``"TrainConfig.lr"``) and the reason. ``optional`` admits ``None``.
    """
    if value is None and optional:
        return None
    original = value
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError(f"{where} must be a number, got the string {original!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where} must be a number, got {type(original).__name__} {original!r}")
    if value != value:
        raise ValueError(f"{where} is NaN")
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{where} must be finite, got {original!r}")
    if kind is int:
        if float(value) != int(value):
            raise ValueError(f"{where} must be an integer, got {original!r}")
        value = int(value)
    else:
        value = float(value)
    if low is not None and (value < low or (low_open and value == low)):
        bound = f"> {low}" if low_open else f">= {low}"
        raise ValueError(f"{where} must be {bound}, got {original!r}")
    if high is not None and (value > high or (high_open and value == high)):
        bound = f"< {high}" if high_open else f"<= {high}"
        raise ValueError(f"{where} must be {bound}, got {original!r}")
    return value


def checked_flag(where: str, value: Any, *, optional: bool = False) -> bool | None:
    """``value`` if it is a bool (``None`` too if ``optional``); a string such as ``"false"``
    is refused, since ``bool("false")`` is True."""
    if (value is None and optional) or isinstance(value, bool):
        return value
    raise ValueError(f"{where} must be true or false, got {type(value).__name__} {value!r}")
