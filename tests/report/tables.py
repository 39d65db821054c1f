"""Hand-made stage tables for the report's tests: a quantity with its interval, its columns
named as the analysis stages name them."""

from __future__ import annotations


def with_interval(
    name: str, values: list[float], low: list[float], high: list[float], infix: str = ""
) -> dict[str, list[float]]:
    """The columns of ``name`` and of its interval's bounds, ``<name><infix>_low`` and
    ``<name><infix>_high`` (``infix="_ci"``: the sweep's ``_ci_low``, ``_ci_high``)."""
    return {name: values, f"{name}{infix}_low": low, f"{name}{infix}_high": high}
