"""A rule decided on a number an analysis stage wrote: an interval (``estimate [low, high]``)
or a count (``successes`` of ``n`` units). One place for what every chapter must do the same
way: an undefined number decides nothing (*inconclusive*, saying why), and a bootstrap interval
that excludes its estimate is kept as drawn, never widened: the rule reads the estimate moved
to its nearest bound, and the exclusion is reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from geolib.verdicts.rules import INCONCLUSIVE, Rule, Verdict, decide_if_defined


def interval_text(what: str, estimate: Any, low: Any, high: Any) -> str:
    """``what: estimate [low, high]`` to three significant digits (a check's key number); a
    number the stage left out (``None``) reads ``nan``, as an undefined one does."""
    e, lo, hi = (math.nan if v is None else v for v in (estimate, low, high))
    return f"{what}: {e:.3g} [{lo:.3g}, {hi:.3g}]"


def decide_interval(
    rule: Rule, estimate: Any, low: Any, high: Any, what: str
) -> tuple[Verdict, str]:
    """``rule`` decided on ``estimate [low, high]``, and the check in words.

    An undefined interval (NaN) is *inconclusive* (:func:`decide_if_defined`). A bootstrap
    interval that excludes its estimate is kept as drawn, never widened: the rule is decided on
    the interval (the estimate moved to its nearest bound for the rule alone), and the words say
    so, so that the exclusion is reported where the number is."""
    text = interval_text(what, estimate, low, high)
    values = [estimate, low, high]
    if any(v is None for v in values) or not all(math.isfinite(float(v)) for v in values):
        why = f"{what}: its interval is undefined (too many resamples undefined)"
        return decide_if_defined(rule, estimate, low, high, why), text
    e, lo, hi = (float(v) for v in values)
    if lo <= e <= hi:
        return rule.decide(e, lo, hi), text
    note = "estimate outside its interval: decided on the interval"
    v = rule.decide(min(max(e, lo), hi), lo, hi)
    return Verdict(v.status, v.rule, f"{v.reason} ({note})", v.numbers), f"{text} ({note})"


def decide_clipped(
    rule: Rule, d: Mapping[str, Any] | None, why_undefined: str
) -> tuple[Verdict, bool]:
    """``(verdict, excluded)`` of a stage's interval ``d`` (``value``, ``low``, ``high``): as
    :func:`decide_interval`, with the exclusion returned as ``excluded`` for the caller to
    report beside the number, the reason left as the rule gave it. Undefined (or ``d`` absent):
    *inconclusive*, ``why_undefined`` saying why."""
    d = d or {}
    e, lo, hi = (d.get(x) for x in ("value", "low", "high"))
    if any(v is None or not math.isfinite(float(v)) for v in (e, lo, hi)):
        return Verdict(INCONCLUSIVE, rule.describe(), f"undefined: {why_undefined}"), False
    e, lo, hi = float(e), float(lo), float(hi)
    excluded = not lo <= e <= hi
    return rule.decide(min(max(e, lo), hi), lo, hi), excluded


def decide_count(rule: Rule, d: Mapping[str, Any]) -> Verdict:
    """``rule`` on a stage's count ``d`` (``successes`` of ``n_units``); a fraction rule reads
    fewer than its ``min_units`` (at least one) as *inconclusive*."""
    return rule.decide(d["successes"], d["n_units"])
