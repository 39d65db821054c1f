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
#: the tag of a profile mapping that replaces the default's whole mapping instead of merging
#: into it (its keys may differ: e.g. the paper profile's evaluation splits, named for the hub
#: corpus's domains)
REPLACE_TAG = "!replace"


class Replace(dict):
    """A mapping tagged ``!replace`` in a profile: :func:`apply_profile` puts it in place of the
    default mapping whole (a plain ``dict`` after the merge), rather than key by key."""


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


def _construct_replace(loader: _UniqueKeyLoader, node: yaml.Node) -> Replace:
    if not isinstance(node, yaml.MappingNode):
        raise yaml.constructor.ConstructorError(
            None, None, f"{REPLACE_TAG} tags a mapping, got a {node.id}", node.start_mark
        )
    return Replace(loader.construct_mapping(node, deep=True))


_UniqueKeyLoader.add_constructor(REPLACE_TAG, _construct_replace)


def _numbers(value: Any, budget: list[int]) -> Any:
    """``value`` with every string that is a YAML 1.2 exponent float (``1e-3``) made a float;
    ``budget[0]`` counts down the values visited (an error when spent)."""
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError(
            f"more than {MAX_PARAMS_VALUES:,} values once aliases are expanded (an alias bomb?)"
        )
    if isinstance(value, dict):  # a Replace stays one (its tag matters to apply_profile)
        return type(value)({k: _numbers(v, budget) for k, v in value.items()})
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
        if isinstance(value, Replace):
            out[key] = _plain(value)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_update(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _plain(value: Any) -> Any:
    """``value`` with every :class:`Replace` in it a plain ``dict`` (safe to dump as YAML)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (the key syntax of ``dvc exp run -S``)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and not isinstance(value, Replace):  # Replace: one value
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def apply_profile(params: Mapping[str, Any], profile: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with a profile's keys replaced (e.g. ``profiles/smoke.yaml``).

    A profile holds only the keys it changes, nested like ``params.yaml``; every key must
    already exist in ``params`` so a profile cannot silently drift from the defaults. A mapping
    tagged ``!replace`` (:class:`Replace`) replaces the default's mapping whole: the key must
    exist and hold a mapping, the keys inside may differ.
    """
    flat = flatten(params)
    mappings = _mapping_keys(params)
    unknown = sorted(set(flatten(profile)) - set(flat) - mappings)
    if unknown:
        raise KeyError(f"profile keys not in the parameters: {unknown}")
    for key, value in flatten(profile).items():
        if isinstance(value, Replace) and key not in mappings:
            raise KeyError(f"profile key {key!r} is {REPLACE_TAG} but the default is no mapping")
        if key in mappings and not isinstance(value, Replace):
            raise KeyError(
                f"profile key {key!r} replaces a mapping with a {type(value).__name__}; "
                f"tag a mapping {REPLACE_TAG} to replace it whole"
            )
    return deep_update(dict(params), profile)


#: a profile's own section: ``_profile: {extends: [NAME, ...]}`` applies the profiles
#: ``profiles/NAME.yaml`` (beside it) first, in order, then its own keys
PROFILE_SECTION = "_profile"


def profile_chain(path: str | Path, _seen: tuple[Path, ...] = ()) -> list[dict[str, Any]]:
    """The profiles to apply for the profile file ``path``, in order: those it extends (each
    with its own chain), then its own keys (without ``_profile``). A cycle is an error."""
    path = Path(path).resolve()
    if path in _seen:
        raise ValueError(f"profiles extend one another in a cycle: {[p.name for p in _seen]}")
    data = load_params(path)
    meta = data.pop(PROFILE_SECTION, {})
    unknown = sorted(set(meta) - {"extends"})
    if unknown:
        raise KeyError(f"{path}: {PROFILE_SECTION} takes only 'extends', got {unknown}")
    bases = meta.get("extends", [])
    bases = [bases] if isinstance(bases, str) else list(bases)
    chain: list[dict[str, Any]] = []
    for name in bases:
        base = path.parent / f"{name}.yaml"
        if not base.is_file():
            raise FileNotFoundError(f"{path}: extends {name!r}, but there is no {base}")
        chain += profile_chain(base, (*_seen, path))
    return [*chain, data]


def apply_profiles(params: Mapping[str, Any], path: str | Path) -> dict[str, Any]:
    """``params`` with the profile file ``path`` applied, its :func:`profile_chain` in order."""
    out = dict(params)
    for profile in profile_chain(path):
        out = apply_profile(out, profile)
    return out


def _mapping_keys(tree: Mapping[str, Any], prefix: str = "") -> set[str]:
    """The dotted keys of ``tree`` that hold a non-empty mapping."""
    keys: set[str] = set()
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            keys.add(f"{prefix}{key}")
            keys |= _mapping_keys(value, f"{prefix}{key}.")
    return keys


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
