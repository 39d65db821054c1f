"""Section schemas: each field's kind and bounds declared once, and checked together before a
notebook starts (``scripts/run_notebook.py``), so that a value out of range, or two values that
cannot go together (a rank above the dimension), is named before any cell runs, with every
other problem of the section, instead of failing in a cell minutes later.

    check_section("metric_validation", stage_params("params.yaml", "metric_validation", overrides))
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Field:
    """One key of a section: a value of ``kind`` (``int`` or ``float``) within ``low`` and
    ``high`` (inclusive; each a number, the name of another field of the section whose value
    bounds it, or ``None``: no bound); with ``many``, a non-empty list of such values."""

    key: str
    kind: type = float
    low: float | str | None = None
    high: float | str | None = None
    many: bool = False

    def __post_init__(self) -> None:
        if self.kind not in (int, float):
            raise ValueError(f"field {self.key}: kind must be int or float, got {self.kind!r}")


def _bound(bound: float | str | None, section: Mapping[str, Any]) -> tuple[float | None, str]:
    """A bound's value and how to name it (``dim=32`` for a field's)."""
    if isinstance(bound, str):
        value = section.get(bound)
        return (float(value) if _is_number(value) else None), f"{bound}={value}"
    return (None if bound is None else float(bound)), f"{bound:g}" if bound is not None else ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def problems(section: Mapping[str, Any], fields: Sequence[Field]) -> list[str]:
    """Every way ``section`` breaks ``fields``, one message per field (empty: none)."""
    found = []
    for f in fields:
        if f.key not in section:
            found.append(f"{f.key} is missing")
            continue
        value = section[f.key]
        if f.many and (not isinstance(value, list | tuple) or not value):
            found.append(f"{f.key} must be a non-empty list, got {value!r}")
            continue
        low, low_name = _bound(f.low, section)
        high, high_name = _bound(f.high, section)
        bad = []
        for v in value if f.many else [value]:
            if not _is_number(v) or (f.kind is int and not isinstance(v, int)):
                bad.append(f"{v!r} is not {'an integer' if f.kind is int else 'a number'}")
            elif not math.isfinite(v):
                bad.append(f"{v!r} is not finite")
            elif (low is not None and v < low) or (high is not None and v > high):
                bad.append(repr(v))
        if bad:
            within = f"[{low_name or '-inf'}, {high_name or 'inf'}]"
            found.append(f"{f.key} must be in {within}: {', '.join(bad)}")
    return found


def check_section(name: str, section: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming every problem of section ``name`` against its schema in
    :data:`SCHEMAS`; a section without a schema passes."""
    found = problems(section, SCHEMAS.get(name, ()))
    if found:
        raise ValueError(f"section {name}: " + "; ".join(found))


#: The schemas, by section name.
SCHEMAS: Mapping[str, tuple[Field, ...]] = {
    # the metric-validation chapter: point clouds of known geometry in `dim` dimensions
    "metric_validation": (
        Field("dim", int, low=2),  # a cone needs two dimensions
        Field("n_points", int, low=2, many=True),
        Field("n_repeats", int, low=1),
        Field("k_values", int, low=1, high="dim", many=True),  # k of d dimensions used
        Field("k_of_d_points_per_dim", int, low=1),
        Field("cone_angles_deg", float, low=0.0, high=180.0, many=True),
        Field("cone_n_points", int, low=2),
        Field("zetas", float, low=0.0, high=1.0, many=True),  # IsoScore*'s shrinkage weight
        Field("zeta_n_points", int, low=2, many=True),
        Field("spectrum_dim", int, low=1),
        Field("spectrum_decays", float, low=0.0, many=True),
    ),
}
