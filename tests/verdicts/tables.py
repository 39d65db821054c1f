"""Hand-made stage tables for the report's tests: a quantity with its interval, its columns
named as the analysis stages name them; and the chapters' declared earlier rules."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from geolib.config import load_params

#: every chapter's earlier rules as ``params.yaml`` declares them (``verdicts.history``)
HISTORY = load_params(Path(__file__).resolve().parents[2] / "params.yaml")["verdicts"]["history"]


def with_interval(
    name: str, values: list[float], low: list[float], high: list[float], infix: str = ""
) -> dict[str, list[float]]:
    """The columns of ``name`` and of its interval's bounds, ``<name><infix>_low`` and
    ``<name><infix>_high`` (``infix="_ci"``: the sweep's ``_ci_low``, ``_ci_high``)."""
    return {name: values, f"{name}{infix}_low": low, f"{name}{infix}_high": high}


def two_sizes(y: list[float]) -> pd.DataFrame:
    """Six models of two sizes, ``y`` in their order: S with two seeds of configuration ``a``
    and one of ``b``, M with one seed each of ``a``, ``b`` and ``c`` (names as the sweep's)."""
    return pd.DataFrame(
        {
            "name": [
                f"{n}-tD" for n in ("S-a-s0", "S-a-s1", "S-b-s0", "M-a-s0", "M-b-s0", "M-c-s0")
            ],
            "size": ["S", "S", "S", "M", "M", "M"],
            "y": y,
        }
    )
