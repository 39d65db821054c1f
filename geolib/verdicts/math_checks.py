"""The math checks of Paper A's derivations (claims A1, A2, A3): each chapter's checks decided by
their declared rules and combined into the row's status.

A math check verifies a derivation numerically (A1: the sample mean's variance against 1/n; A2:
the normal/tangent variance of sampled neighbourhoods against its closed form; A3: the weight
gradient's ratio against tan(κt/2)). Its row is labelled "math check": it cannot speak for or
against a claim about trained models and is never combined into an empirical status.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from geolib.verdicts.rules import Rule, Verdict, combine_statuses

#: one check: its name, its rule, and the number it decides with its interval (``None`` for a
#: rule that reads the number alone, e.g. an identity's largest deviation)
Check = tuple[str, Rule, float, float | None, float | None]
COLUMNS = ["check", "value", "interval", "status", "reason"]


def decide(
    rule: Rule, value: float, low: float | None = None, high: float | None = None
) -> Verdict:
    """``rule``'s verdict on ``value`` (with its interval ``[low, high]`` when given)."""
    if (low is None) != (high is None):
        raise ValueError("give both ends of the interval or neither")
    return rule.decide(value) if low is None else rule.decide(value, low, high)


def decide_checks(checks: Sequence[Check]) -> tuple[pd.DataFrame, str]:
    """Each check decided by its rule, as a table (:data:`COLUMNS`: the value to 4 decimals, the
    interval as ``[low, high]``, the status and why), and the status of them all together
    (:func:`geolib.verdicts.rules.combine_statuses`)."""
    if not checks:
        raise ValueError("a math check needs at least one check")
    rows = []
    for name, rule, value, low, high in checks:
        if not math.isfinite(float(value)):
            raise ValueError(f"check {name!r}: its number is not finite ({value})")
        verdict = decide(rule, value, low, high)
        interval = "" if low is None else f"[{low:.4f}, {high:.4f}]"
        rows.append(
            {
                "check": name,
                "value": round(float(value), 4),
                "interval": interval,
                "status": verdict.status,
                "reason": verdict.reason,
            }
        )
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table, combine_statuses(table["status"])
