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

from geolib.measure import validate as check
from geolib.verdicts.rules import rule_from_params

KINDS = (int, float, "text", "rule", "mapping", "mappings")


@dataclass(frozen=True)
class Field:
    """One key of a section (``key``; dotted for a nested one, ``a5_v3.min_models``):

    - ``int`` or ``float``: a number within ``low`` and ``high`` (each a number, the name of
      another field whose value bounds it, or ``None``: no bound; inclusive unless
      ``open_low``/``open_high``); with ``many``, a non-empty list of such numbers;
    - ``"text"``: a non-empty string (a revision's reason in words, a path);
    - ``"rule"``: a rule mapping that builds (:func:`~geolib.verdicts.rules.rule_from_params`);
    - ``"mapping"``: a mapping; ``"mappings"``: one of mappings (a rule's declared
      alternatives, each its settings); with ``many``, a non-empty one.

    ``optional``: the field may be absent (a nested one: where the section's mapping that
    holds it is absent or null; where that mapping is given, its fields are required).
    ``null``: the field may be null (a meaning of its own, as "every step")."""

    key: str
    kind: type | str = float
    low: float | str | None = None
    high: float | str | None = None
    many: bool = False
    open_low: bool = False
    open_high: bool = False
    optional: bool = False
    null: bool = False

    def __post_init__(self) -> None:
        check.one_of(f"field {self.key}: kind", self.kind, KINDS)


_ABSENT = object()


def _get(section: Mapping[str, Any], key: str) -> Any:
    """The value at dotted ``key``, or ``_ABSENT`` (also where a mapping on the way is not
    one: :func:`_not_mapping` names it)."""
    node: Any = section
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def _not_mapping(section: Mapping[str, Any], key: str) -> str | None:
    """The problem of a value on the way to dotted ``key`` that should hold keys and does not
    (``sweep_v3: 5``), named once for every field beneath it."""
    parts = key.split(".")
    for i in range(1, len(parts)):
        value = _get(section, ".".join(parts[:i]))
        if value is not _ABSENT and value is not None and not isinstance(value, Mapping):
            return f"{'.'.join(parts[:i])} must be a mapping, got {value!r}"
    return None


def _bound(bound: float | str | None, section: Mapping[str, Any]) -> tuple[float | None, str]:
    """A bound's value and how to name it (``dim=32`` for a field's)."""
    if isinstance(bound, str):
        value = _get(section, bound)
        return (float(value) if _is_number(value) else None), f"{bound}={value}"
    return (None if bound is None else float(bound)), f"{bound:g}" if bound is not None else ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number_problem(f: Field, value: Any, section: Mapping[str, Any]) -> str | None:
    """The problem of a number (or list of numbers) against the field's kind and bounds."""
    if f.many and (not isinstance(value, list | tuple) or not value):
        return f"{f.key} must be a non-empty list, got {value!r}"
    low, low_name = _bound(f.low, section)
    high, high_name = _bound(f.high, section)
    bad = []
    for v in value if f.many else [value]:
        if not _is_number(v) or (f.kind is int and not isinstance(v, int)):
            bad.append(f"{v!r} is not {'an integer' if f.kind is int else 'a number'}")
        elif not math.isfinite(v):
            bad.append(f"{v!r} is not finite")
        elif (low is not None and (v < low or (f.open_low and v == low))) or (
            high is not None and (v > high or (f.open_high and v == high))
        ):
            bad.append(repr(v))
    if not bad:
        return None
    within = (
        f"{'(' if f.open_low else '['}{low_name or '-inf'}, "
        f"{high_name or 'inf'}{')' if f.open_high else ']'}"
    )
    return f"{f.key} must be in {within}: {', '.join(bad)}"


def _problem(f: Field, value: Any, section: Mapping[str, Any]) -> str | None:
    """The problem of a value that is there, by the field's kind (``None``: none)."""
    if f.kind in (int, float):
        return _number_problem(f, value, section)
    if f.kind == "text":
        ok = isinstance(value, str) and value.strip()
        return None if ok else f"{f.key} must be non-empty text, got {value!r}"
    if f.kind in ("mapping", "mappings"):
        what = "a mapping" if f.kind == "mapping" else "a mapping of settings (name: mapping)"
        if not isinstance(value, Mapping) or (
            f.kind == "mappings" and not all(isinstance(v, Mapping) for v in value.values())
        ):
            return f"{f.key} must be {what}, got {value!r}"
        return f"{f.key} must not be empty: declare at least one" if f.many and not value else None
    try:
        rule_from_params(value)
    except ValueError as bad:
        return f"{f.key}: {bad}"
    return None


def _absence(f: Field, section: Mapping[str, Any], value: Any) -> str | None:
    """The problem of a field that is absent (``_ABSENT``) or null, or ``None`` where its
    declaration allows it."""
    if value is None and f.null:
        return None
    top = _get(section, f.key.split(".")[0])
    if f.optional and (top is _ABSENT or ("." in f.key and top is None)):
        return None
    return _not_mapping(section, f.key) or (
        f"{f.key} is null" if value is None else f"{f.key} is missing"
    )


def problems(section: Mapping[str, Any], fields: Sequence[Field]) -> list[str]:
    """Every way ``section`` breaks ``fields``, one message per field, a mapping that is not
    one named once (empty: none)."""
    found = []
    for f in fields:
        value = _get(section, f.key)
        if value is _ABSENT or value is None:
            problem = _absence(f, section, value)
        else:
            problem = _problem(f, value, section)
        if problem:
            found.append(problem)
    return list(dict.fromkeys(found))


def require(name: str, section: Mapping[str, Any], fields: Sequence[Field]) -> None:
    """Raise ``ValueError`` naming every problem of section ``name`` against ``fields``."""
    found = problems(section, fields)
    if found:
        raise ValueError(f"section {name}: " + "; ".join(found))


def check_section(name: str, section: Mapping[str, Any]) -> None:
    """:func:`require` with section ``name``'s schema in :data:`SCHEMAS`; a section without a
    schema passes."""
    require(name, section, SCHEMAS.get(name, ()))


def learned_margin(verdicts: Mapping[str, Any] | None) -> float:
    """``verdicts.learned_margin``, checked: who learned is decided against it, so a chapter
    cannot decide without the ``verdicts`` section."""
    if not verdicts:
        raise ValueError("the verdicts section (learned_margin) is needed")
    check_section("verdicts", verdicts)
    return float(verdicts["learned_margin"])


def _level(key: str = "ci_level") -> Field:
    """An interval's level, strictly between 0 and 1."""
    return Field(key, float, low=0.0, high=1.0, open_low=True, open_high=True)


def v3_fields(key: str, *extra: Field, some_alternative: bool = False) -> tuple[Field, ...]:
    """A v3 mapping's fields: why it differs from v2 (``revision``, in words), its declared
    alternatives (each its settings; ``some_alternative``: at least one) and its own fields
    (``extra``)."""
    alternatives = Field(f"{key}.alternatives", "mappings", many=some_alternative)
    return (Field(f"{key}.revision", "text"), alternatives, *extra)


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
    # who learned: a final loss at least this many nats below the unigram entropy
    "verdicts": (Field("learned_margin", float, low=0.0),),
    # the released models' A4 row: its rule (a description, never a decision on training)
    "gradient_energy_pretrained": (Field("a4_rule", "rule"),),
    # A4, A6, A7 on our trained models (rules v3 and their earlier rules)
    "gradient_energy": (
        _level(),
        Field("key_rank", int, low=1),
        Field("early_share", float, low=0.0, high=1.0, open_low=True),  # a share of the steps
        Field("frozen_sources", int, low=0, many=True),
        Field("verdict_steps", int, low=0, many=True, optional=True, null=True),  # null: all
        Field("a4_rule_v3", "rule"),
        Field("a6_rule_v3", "rule"),
        Field("a7_rule_v3", "rule"),
        Field("a7_null_rule_v3", "rule"),
        *v3_fields("a4_v3", Field("a4_v3.no_effect", float, low=0.0)),
        Field("a4_v3.r_bar", float, low="a4_v3.no_effect"),  # above no effect at least
        *v3_fields("a6_v3", Field("a6_v3.progress", float, low=0.0, high=1.0, open_low=True)),
        *v3_fields("a7_v3", Field("a7_v3.no_effect", float, low=0.0)),
        Field("a7_v3.warmup_steps", int, low=0),
        # A7's warm-up alternative (absent: none)
        Field("a7_warmup.family", "text", optional=True),
        Field("a7_warmup.reason", "text", optional=True),
        Field("a7_warmup.shift_steps", float, low=0.0, open_low=True, optional=True),
        Field("a7_warmup.tolerance", float, low=0.0, optional=True),
        Field("a7_warmup.min_pairs", int, low=1, optional=True),
    ),
    # A5 on our trained models
    "residual_isotropy": (
        _level(),
        Field("key_rank", int, low=1),
        Field("zeta", float, low=0.0, high=1.0),  # IsoScore*'s shrinkage weight
        Field("a5_source", int, low=0),
        Field("a5_rule", "rule"),
        Field("a5_rule_v3", "rule"),
        Field("a5_v2", "mapping"),
        *v3_fields("a5_v3", Field("a5_v3.min_models", int, low=2)),  # an interval over models
    ),
    # A1 on our trained models
    "frequency_collapse": (
        _level(),
        Field("a1_states_rule", "rule"),
        Field("a1_rows_rule", "rule"),
        Field("a1_states_rule_v3", "rule"),
        Field("a1_rows_rule_v3", "rule"),
        *v3_fields("a1_v3", Field("a1_v3.min_decades", float, low=0.0, open_low=True)),
    ),
    # B6 on the saturation runs
    "saturation": (
        Field("out_dir", "text"),
        _level(),
        Field("layouts", "mapping"),
        Field("second_half_from", float, low=0.0, high=1.0, open_high=True),
        Field("b6_rule", "rule"),
        *v3_fields("b6_v3", Field("b6_v3.decide", "rule"), some_alternative=True),
        Field("b6_v3.reference_tokens", float, low=0.0, open_low=True),
        Field("b6_v3.unigram_counts", "text"),
    ),
}
