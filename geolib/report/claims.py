"""The claims table and the rules that decide it.

**Rules.** A chapter never decides a verdict in notebook code: it names a rule and its
thresholds in its ``params.yaml`` section (a mapping with ``rule: <kind>``, the rule's numbers
and a one-line ``reason`` from the paper), builds it with :func:`rule_from_params`, prints
:meth:`describe` and calls ``decide`` on its measured numbers. Four kinds:

* ``within_tolerance`` (:class:`WithinTolerance`) — an estimate with its interval near a
  target: the whole interval inside ``target ± tol``.
* ``threshold`` (:class:`Threshold`) — an effect beyond a threshold (e.g. a ratio above 10):
  the interval's near bound beyond it.
* ``fraction`` (:class:`Fraction`) — a sign or an ordering that holds in at least a fraction of
  independent units (seeds, models, layers).
* ``identity`` (:class:`Identity`) — a derived identity checked numerically: the largest
  deviation within a round-off tolerance. No interval: it is not a statistical finding.

**Statuses.** ``reproduced``; ``not reproduced``; ``partly`` (part of a claim holds: a
direction without the paper's size, or several evidence rows that disagree); ``inconclusive``
(the data at this scale cannot decide: an interval too wide to tell the paper's effect from
none — not a polite "partly"); ``not yet run``.

**Premise, seeds, robustness.** A rule first checks the claim's premise (:func:`given_premise`:
the effect exists, the outcome varies beyond its noise); where it fails the verdict is
*inconclusive* with the reason. Where several seeds (models) exist, :func:`seeds_agreeing` says
how many per-seed verdicts agree with the pooled one, and :func:`robustness` whether the verdict
survives the alternatives the paper's text admits (declared in ``params.yaml`` beforehand).
Math checks of a derivation are rows with ``evidence="math check"``, never combined into an
empirical status. A rule revised after its first version keeps that verdict (``rule_v1``) and
the reason (``revision``) on its row.

**Evidence.** Each notebook stage writes ``data/claims/<stage>.json`` with one row per claim it
tests; a claim may have rows from several chapters (A1: the theory chapter and trained
models). The table holds one row per (claim, chapter) and a combined status by
:func:`combine_statuses`. The book stage renders it on the book's introduction page, each row
linked to the cell where the chapter applies its rule (``anchor``, a MyST target).

Usage: ``python -m geolib.report.claims OUT.md [--trends TRENDS.json] FILE.json ...``
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from scipy import stats

from geolib.files import write_text_atomic
from geolib.measure import validate as check
from geolib.measure.stats import interval, t_quantile
from geolib.report.markup import checked_name, plain

#: Claim IDs and one-line summaries (see ``shared/PAPERS.md`` for the full statements).
CLAIMS: dict[str, str] = {
    "A1": "Frequency-induced variance collapse (variance ∝ 1/n)",
    "A2": "Chord–arc curvature bias (normal share ∝ κ²·scale²)",
    "A3": "Tangent gradient dominance (normal/tangent ∝ t)",
    "A4": "Gradient energy concentrates in tangent subspaces (R_energy ≫ 1)",
    "A5": "Anisotropy is structured along tangents (IsoScore* after removal)",
    "A6": "Decoders align more than encoders",
    "A7": "Tangent alignment imprinted early in training",
    "B1": "Effective rank correlates loosely with, but does not predict, performance",
    "B2": "In-distribution loss predicts OOD behaviour better than effective rank",
    "B3": "Larger batches keep effective rank higher; loss U-shaped in batch size",
    "B4": "Stronger weight decay keeps effective rank higher",
    "B5": "Learning rate moves performance, geometry only weakly",
    "B6": "Saturation is not caused by low rank (Pythia vs OLMo blocks)",
    "B7": "Geometry metrics agree with each other but do not predict performance",
    "B8": "Same for quantization robustness and for forgetting",
}

REPRODUCED, PARTLY, INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN = (
    "reproduced",
    "partly",
    "inconclusive",
    "not reproduced",
    "not yet run",
)
STATUSES = (NOT_RUN, REPRODUCED, PARTLY, INCONCLUSIVE, NOT_REPRODUCED)
EMPIRICAL, MATH_CHECK = "empirical", "math check"
EVIDENCE = (EMPIRICAL, MATH_CHECK)


# ---------------------------------------------------------------------------------------------
# Verdict rules
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """A rule's decision: ``status``, the rule in words (``rule``) and why this branch fired."""

    status: str
    rule: str
    reason: str

    def __str__(self) -> str:
        return f"{self.status}: {self.reason}"


def _interval(estimate: Any, low: Any, high: Any) -> tuple[float, float, float]:
    e, lo, hi = (
        check.scalar("estimate", estimate),
        check.scalar("low", low),
        check.scalar("high", high),
    )
    if not lo <= e <= hi:
        raise ValueError(f"need low <= estimate <= high, got {lo} <= {e} <= {hi}")
    return e, lo, hi


def _reason(reason: Any) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("a rule needs a one-line reason (from the paper's claim)")
    return reason.strip()


def _band(estimate: Any, low: Any, high: Any, target: float, tol: float) -> tuple[str, str]:
    """Where an interval lies against ``target ± tol``: ``inside`` (entirely, edges included),
    ``outside`` (entirely, on either side) or ``straddles``; with the numbers in words."""
    e, lo, hi = _interval(estimate, low, high)
    a, b = target - tol, target + tol
    where = f"{e:.4g} [{lo:.4g}, {hi:.4g}] against [{a:.4g}, {b:.4g}]"
    if a <= lo and hi <= b:
        return where, "inside"
    if hi < a or lo > b:
        return where, "outside"
    return where, "straddles"


@dataclass(frozen=True)
class _BandRule:
    """A rule on where an interval lies against ``target ± tol``; subclasses say which side
    reproduces the claim."""

    target: float
    tol: float
    reason: str
    kind: ClassVar[str] = ""
    reproduced_when: ClassVar[str] = ""  # "inside" or "outside"
    #: where the interval lies for each outcome, in the rule's description
    _WORDS: ClassVar[dict[str, tuple[str, str]]] = {
        "inside": ("in {target:g} ± {tol:g}", "entirely outside"),
        "outside": ("outside {target:g} ± {tol:g} (either side)", "inside"),
    }

    def __post_init__(self) -> None:
        object.__setattr__(self, "target", check.scalar("target", self.target))
        object.__setattr__(self, "tol", check.scalar("tol", self.tol, low=0, strict=True))
        object.__setattr__(self, "reason", _reason(self.reason))

    def describe(self) -> str:
        yes, no = self._WORDS[self.reproduced_when]
        return (
            f"{self.kind}: reproduced if the whole interval lies "
            f"{yes.format(target=self.target, tol=self.tol)}; not reproduced if it lies {no}; "
            f"otherwise inconclusive. Why: {self.reason}"
        )

    def decide(self, estimate: float, low: float, high: float) -> Verdict:
        where, position = _band(estimate, low, high, self.target, self.tol)
        not_reproduced = "outside" if self.reproduced_when == "inside" else "inside"
        status = {self.reproduced_when: REPRODUCED, not_reproduced: NOT_REPRODUCED}.get(
            position, INCONCLUSIVE
        )
        return Verdict(status, self.describe(), f"{where}: interval {position} the band")


@dataclass(frozen=True)
class WithinTolerance(_BandRule):
    """An estimate near a target: reproduced when its whole interval lies in ``target ± tol``.

    Not reproduced when the interval lies entirely outside the band (it excludes every value
    the tolerance accepts); inconclusive when it straddles an edge of the band, which includes
    every interval wider than the band.
    """

    kind: ClassVar[str] = "within_tolerance"
    reproduced_when: ClassVar[str] = "inside"


@dataclass(frozen=True)
class Beyond(_BandRule):
    """An effect of either sign larger than ``tol`` (the complement of :class:`WithinTolerance`):
    reproduced when the whole interval lies outside ``target ± tol``, not reproduced when it
    lies inside the band, inconclusive when it straddles an edge. For claims that an effect
    exists ("depends on model size") without saying its sign.
    """

    kind: ClassVar[str] = "beyond"
    reproduced_when: ClassVar[str] = "outside"


@dataclass(frozen=True)
class Threshold:
    """An effect beyond a threshold, e.g. a ratio above 10 (``direction="above"``).

    Reproduced when the interval's near bound is beyond the threshold. When the whole interval
    falls short of it: ``partly`` if ``no_effect`` (the value under no effect, e.g. 1 for a ratio)
    is given and the interval excludes it on the effect's side (the direction holds, not the
    size), else ``not reproduced``. An interval that contains the threshold is inconclusive.
    """

    threshold: float
    reason: str
    direction: str = "above"
    no_effect: float | None = None
    kind: ClassVar[str] = "threshold"

    def __post_init__(self) -> None:
        object.__setattr__(self, "threshold", check.scalar("threshold", self.threshold))
        if self.direction not in ("above", "below"):
            raise ValueError(f"direction must be 'above' or 'below', got {self.direction!r}")
        if self.no_effect is not None:
            base = check.scalar("no_effect", self.no_effect)
            beyond = base >= self.threshold if self.direction == "above" else base <= self.threshold
            if beyond:
                raise ValueError(
                    f"no_effect {base} must lie on the no-effect side of the threshold"
                )
            object.__setattr__(self, "no_effect", base)
        object.__setattr__(self, "reason", _reason(self.reason))

    def describe(self) -> str:
        side = ">" if self.direction == "above" else "<"
        short = (
            f"; partly if it falls short but excludes the no-effect value {self.no_effect:g}"
            if self.no_effect is not None
            else ""
        )
        return (
            f"threshold: reproduced if the whole interval is {side} {self.threshold:g}; not "
            f"reproduced if the whole interval falls short{short}; otherwise inconclusive. "
            f"Why: {self.reason}"
        )

    def decide(self, estimate: float, low: float, high: float) -> Verdict:
        e, lo, hi = _interval(estimate, low, high)
        sign = 1.0 if self.direction == "above" else -1.0
        # Work in "above" coordinates: near bound = low, far bound = high.
        near, far = (lo, hi) if sign > 0 else (-hi, -lo)
        t = sign * self.threshold
        where = f"{e:.4g} [{lo:.4g}, {hi:.4g}] against {self.threshold:g}"
        if near > t:
            return Verdict(REPRODUCED, self.describe(), f"{where}: beyond the threshold")
        if far < t:
            if self.no_effect is not None and near > sign * self.no_effect:
                return Verdict(
                    PARTLY,
                    self.describe(),
                    f"{where}: short of it, but excludes {self.no_effect:g}",
                )
            return Verdict(NOT_REPRODUCED, self.describe(), f"{where}: short of the threshold")
        return Verdict(INCONCLUSIVE, self.describe(), f"{where}: interval contains the threshold")


@dataclass(frozen=True)
class Fraction:
    """A sign or ordering that holds in at least ``min_fraction`` of independent units.

    Inconclusive with fewer than ``min_units`` units (too few to tell); otherwise reproduced if
    the observed fraction reaches ``min_fraction``, else not reproduced.
    """

    min_fraction: float
    min_units: int
    reason: str
    kind: ClassVar[str] = "fraction"

    def __post_init__(self) -> None:
        f = check.scalar("min_fraction", self.min_fraction)
        if not 0.0 < f <= 1.0:
            raise ValueError(f"min_fraction must be in (0, 1], got {f}")
        object.__setattr__(self, "min_fraction", f)
        if isinstance(self.min_units, bool) or int(self.min_units) != self.min_units:
            raise ValueError(f"min_units must be an integer, got {self.min_units!r}")
        if self.min_units < 1:
            raise ValueError(f"min_units must be >= 1, got {self.min_units}")
        object.__setattr__(self, "min_units", int(self.min_units))
        object.__setattr__(self, "reason", _reason(self.reason))

    def describe(self) -> str:
        return (
            f"fraction: reproduced if it holds in >= {self.min_fraction:.0%} of >= "
            f"{self.min_units} units; inconclusive with fewer units; otherwise not reproduced. "
            f"Why: {self.reason}"
        )

    def decide(self, successes: int, n: int) -> Verdict:
        for name, v in (("successes", successes), ("n", n)):
            if isinstance(v, bool) or int(v) != v or v < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
        k, n = int(successes), int(n)
        if k > n:
            raise ValueError(f"successes ({k}) exceed units ({n})")
        where = f"{k} of {n} units"
        if n < self.min_units:
            return Verdict(INCONCLUSIVE, self.describe(), f"{where}: fewer than {self.min_units}")
        if k >= self.min_fraction * n:
            return Verdict(REPRODUCED, self.describe(), f"{where} (>= {self.min_fraction:.0%})")
        return Verdict(NOT_REPRODUCED, self.describe(), f"{where} (< {self.min_fraction:.0%})")


@dataclass(frozen=True)
class Identity:
    """A derived identity checked numerically: reproduced if the largest relative deviation
    between the computation and the closed form is at most ``tol``, else not reproduced.
    """

    tol: float
    reason: str
    kind: ClassVar[str] = "identity"

    def __post_init__(self) -> None:
        object.__setattr__(self, "tol", check.scalar("tol", self.tol, low=0, strict=True))
        object.__setattr__(self, "reason", _reason(self.reason))

    def describe(self) -> str:
        return (
            f"identity: reproduced if max |computed / closed form − 1| <= {self.tol:g}, "
            f"otherwise not reproduced. Why: {self.reason}"
        )

    def decide(self, max_deviation: float) -> Verdict:
        d = check.scalar("max_deviation", max_deviation)
        if d < 0:
            raise ValueError(f"max_deviation must be >= 0, got {d}")
        ok = d <= self.tol
        return Verdict(
            REPRODUCED if ok else NOT_REPRODUCED,
            self.describe(),
            f"max deviation {d:.2g} {'<=' if ok else '>'} {self.tol:g}",
        )


Rule = WithinTolerance | Beyond | Threshold | Fraction | Identity
RULES: dict[str, type] = {
    r.kind: r for r in (WithinTolerance, Beyond, Threshold, Fraction, Identity)
}


def rule_from_params(spec: Mapping[str, Any]) -> Rule:
    """Build a rule from its ``params.yaml`` mapping: ``rule: <kind>`` plus the kind's fields.

    Unknown kinds, missing fields and unknown fields are errors naming what is wrong.
    """
    if not isinstance(spec, Mapping):
        raise ValueError(f"a rule must be a mapping with a 'rule' key, got {type(spec).__name__}")
    kind = spec.get("rule")
    if kind not in RULES:
        raise ValueError(f"unknown rule {kind!r}; known: {', '.join(RULES)}")
    cls = RULES[kind]
    names = {f.name for f in fields(cls)}
    given = {k: v for k, v in spec.items() if k != "rule"}
    unknown = sorted(set(given) - names)
    if unknown:
        raise ValueError(f"rule {kind!r}: unknown field(s) {unknown}; fields: {sorted(names)}")
    required = {f.name for f in fields(cls) if f.default is MISSING}
    missing = sorted(required - set(given))
    if missing:
        raise ValueError(f"rule {kind!r}: missing field(s) {missing}")
    return cls(**given)


def rule_with(spec: Mapping[str, Any], change: Mapping[str, Any]) -> Rule:
    """The rule of ``spec`` with the fields of ``change`` that belong to it replaced (an
    alternative analysis changes some settings of the count and some of the rule; the others
    are ignored here)."""
    cls = RULES.get(spec.get("rule")) if isinstance(spec, Mapping) else None
    names = {f.name for f in fields(cls)} if cls else set()
    return rule_from_params({**spec, **{k: v for k, v in change.items() if k in names}})


def decide_if_defined(
    rule: Rule, estimate: Any, low: Any, high: Any, why_undefined: str
) -> Verdict:
    """``rule.decide(estimate, low, high)``, or ``inconclusive`` with ``why_undefined`` when the
    key number or its interval is undefined (NaN, None): a statistic that the data leave
    undefined at this scale decides nothing, and is said so rather than raising."""
    values = [estimate, low, high]
    if any(v is None for v in values) or not all(math.isfinite(float(v)) for v in values):
        return Verdict(INCONCLUSIVE, rule.describe(), f"undefined: {why_undefined}")
    return rule.decide(estimate, low, high)


def combine_statuses(statuses: Iterable[str]) -> str:
    """The combined status of several evidence rows (or several checks within one chapter).

    Rows that are ``not yet run`` are ignored (none left: ``not yet run``). If all agree, that
    status. Otherwise ``partly`` when any row is reproduced or partly (some of the claim holds),
    and ``not reproduced`` when the rows are a mix of not reproduced and inconclusive (no row
    supports the claim, and at least one contradicts it).
    """
    rows = [s for s in statuses if s != NOT_RUN]
    for s in rows:
        if s not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {s!r}")
    if not rows:
        return NOT_RUN
    if len(set(rows)) == 1:
        return rows[0]
    if REPRODUCED in rows or PARTLY in rows:
        return PARTLY
    return NOT_REPRODUCED


def deciding_check(checks: Sequence[tuple[Verdict, str]]) -> tuple[str, str]:
    """The combined status of several checks of one claim and the check that decided it, as
    ``(status, what)``: the first check with the combined status; for "partly", the first that
    failed (not reproduced, else inconclusive, else partly) — the key number of a row that is
    not reproduced is the check that failed, not one that passed or could not decide.
    ``checks``: ``(verdict, what was measured, in words)`` pairs."""
    if not checks:
        raise ValueError("no checks to combine")
    status = combine_statuses(v.status for v, _ in checks)
    order = [NOT_REPRODUCED, INCONCLUSIVE, PARTLY] if status == PARTLY else [status]
    for wanted in order:
        for v, what in checks:
            if v.status == wanted:
                return status, what
    return status, checks[0][1]


def given_premise(rule: Rule, holds: bool, why: str, decide: Callable[[], Verdict]) -> Verdict:
    """``decide()`` if the claim's premise holds, else *inconclusive* saying why.

    The premise is what the claim is about happening at all (an effect larger than its noise, a
    degradation that exists, an outcome that varies beyond its measurement error, a design that
    covers the paper's range). Where it fails the data can neither support nor contradict the
    claim; ``why`` names the number that failed.
    """
    if not isinstance(holds, bool | np.bool_):
        raise ValueError(f"a premise must be True or False, got {holds!r}")
    if not holds:
        return Verdict(INCONCLUSIVE, rule.describe(), f"premise fails: {_reason(why)}")
    return decide()


#: the words of :func:`trend_with_size`
GROWS, SHRINKS, NO_TREND = "grows with size", "shrinks with size", "no trend resolvable"


@dataclass(frozen=True)
class Trend:
    """A key number against model size: ``slope`` per decade of non-embedding parameters (OLS
    of the value on log10 of the count, every model one point), its Student-t interval, and
    the trend in words with why."""

    slope: float
    low: float
    high: float
    level: float
    n_models: int
    n_sizes: int
    span: float
    words: str
    reason: str


def trend_with_size(
    params: Any, values: Any, *, level: float = 0.95, min_sizes: int = 4, min_span: float = 30.0
) -> Trend:
    """Which way a claim's key number goes with scale (the ladder of model sizes).

    ``params``: each trained model's non-embedding parameter count; ``values``: its key number
    (several models of one size — seeds — are separate points). The slope of ``values`` on
    ``log10(params)`` with its OLS Student-t interval (n − 2 degrees of freedom) decides:
    :data:`GROWS` when the interval lies above 0, :data:`SHRINKS` below 0, :data:`NO_TREND`
    when it contains 0 — and also, before any fit is read, when the ladder has fewer than
    ``min_sizes`` distinct sizes or spans less than ``min_span``× in parameters (too short to
    speak of a trend). What it says at the papers' scale is an extrapolation, never a verdict.
    """
    x = np.asarray(params, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(
            f"params and values must be 1-D and of one length, got {x.shape}, {y.shape}"
        )
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("params and values must be finite")
    if np.any(x <= 0):
        raise ValueError("parameter counts must be positive")
    check.scalar("level", level, low=0.0, strict=True)
    if x.size == 0:  # every model's key number undefined (e.g. no unit to count)
        why = "no model has this key number defined"
        return Trend(np.nan, np.nan, np.nan, level, 0, 0, np.nan, NO_TREND, why)
    sizes = np.unique(x)
    span = float(sizes.max() / sizes.min())
    if sizes.size < max(min_sizes, 2) or span < min_span or x.size < 3:
        why = (
            f"{sizes.size} sizes spanning {span:.3g}x in parameters (the rule needs at least "
            f"{min_sizes} sizes spanning {min_span:g}x)"
        )
        return Trend(
            np.nan, np.nan, np.nan, level, int(x.size), int(sizes.size), span, NO_TREND, why
        )
    if np.ptp(y) == 0:  # OLS gives slope 0 with a zero-width interval; scipy's stderr is nan
        why = f"the key number is {y[0]:.3g} on every one of the {x.size} models: nothing varies"
        return Trend(0.0, 0.0, 0.0, level, int(x.size), int(sizes.size), span, NO_TREND, why)
    fit = stats.linregress(np.log10(x), y)
    h = t_quantile(level, x.size - 2) * float(fit.stderr)
    slope = float(fit.slope)
    low, high = slope - h, slope + h
    words = GROWS if low > 0 else SHRINKS if high < 0 else NO_TREND
    reason = (
        f"slope {slope:.3g} [{low:.3g}, {high:.3g}] per decade of parameters "
        f"({100 * level:g}% t interval, {x.size} models, {sizes.size} sizes over {span:.3g}x)"
    )
    return Trend(slope, low, high, level, int(x.size), int(sizes.size), span, words, reason)


@dataclass(frozen=True)
class TrendRow:
    """One claim's ``trend with size`` cell: :func:`trend_with_size`'s ``words``, a short
    ``detail`` (slope and interval, models, sizes) and the MyST ``anchor`` of its figure."""

    claim_id: str
    words: str
    detail: str
    anchor: str

    def __post_init__(self) -> None:
        if self.claim_id not in CLAIMS:
            raise ValueError(f"unknown claim {self.claim_id!r}; known: {', '.join(CLAIMS)}")
        if self.words not in (GROWS, SHRINKS, NO_TREND):
            words = (GROWS, SHRINKS, NO_TREND)
            raise ValueError(f"trend words must be one of {words}, got {self.words!r}")
        if not self.anchor:
            raise ValueError(f"claim {self.claim_id}: a trend row needs the anchor of its figure")
        checked_name(f"trend of {self.claim_id}: anchor", self.anchor)


def write_trends(path: str | Path, rows: Iterable[TrendRow]) -> Path:
    """Write the trend rows as JSON (sorted, stable bytes); one row per claim."""
    rows = sorted(rows, key=lambda r: r.claim_id)
    ids = [r.claim_id for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"one trend row per claim, got {ids}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps([asdict(r) for r in rows], indent=2, sort_keys=True, ensure_ascii=False)
    write_text_atomic(path, text + "\n")
    return path


def read_trends(path: str | Path) -> dict[str, TrendRow]:
    """The trend rows of :func:`write_trends`, by claim (a malformed file is an error naming it)."""
    try:
        rows = [TrendRow(**r) for r in json.loads(Path(path).read_text())]
    except (OSError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: cannot read the trend rows: {err}") from None
    out = {r.claim_id: r for r in rows}
    if len(out) != len(rows):
        raise ValueError(f"{path}: more than one trend row for a claim")
    return out


def seeds_agreeing(statuses: Iterable[str], status: str) -> str:
    """``"k of n"``: how many per-seed (per-model) verdicts equal the pooled ``status``."""
    rows = list(statuses)
    for s in [*rows, status]:
        if s not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {s!r}")
    if not rows:
        raise ValueError("no per-seed verdicts")
    return f"{sum(s == status for s in rows)} of {len(rows)}"


def seed_statuses(
    summary: Mapping[str, Any], decide: Callable[[Mapping[str, Any]], str]
) -> dict[str, str]:
    """Each seed's status: ``decide`` applied to the analysis summary of that seed's models
    (``summary["by_seed"]``, one entry per seed, written by the analysis stages); a summary
    without it holds one seed and is its only entry (key ``"all"``). For :func:`seeds_agreeing`.
    """
    groups = summary.get("by_seed") or {"all": summary}
    return {seed: decide(group) for seed, group in groups.items()}


def over_seeds(values: Mapping[str, float], level: float = 0.95) -> str:
    """A per-seed key number summarised over seeds, the trained model as the unit:
    ``"mean [low, high] over n seeds (t)"`` (Student-t, :func:`geolib.measure.stats.interval`),
    or the one value with "one seed". A seed whose value is undefined (NaN: no units to count)
    is left out and named; infinite values are an error."""
    if not values:
        raise ValueError("over_seeds needs at least one seed")
    x = {seed: float(v) for seed, v in values.items()}
    if any(np.isinf(v) for v in x.values()):
        raise ValueError(f"over_seeds: infinite per-seed value in {x}")
    undefined = [seed for seed, v in x.items() if np.isnan(v)]
    ok = np.array([v for v in x.values() if not np.isnan(v)])
    note = f"; undefined for seed {', '.join(undefined)}" if undefined else ""
    if ok.size == 0:
        return "undefined for every seed"
    if ok.size == 1:
        return f"{ok[0]:.3g} (one seed{note})"
    iv = interval(None, ok, level=level, unit="seed")
    return f"{iv.value:.3g} [{iv.low:.3g}, {iv.high:.3g}] over {ok.size} seeds ({iv.method}{note})"


def robustness(status: str, alternatives: Mapping[str, str]) -> str:
    """``"yes"`` when every declared alternative analysis gives ``status``; otherwise
    ``"fragile: <alternative> → <its status>; …"`` naming each one that flips it. An
    alternative the run did not measure (status ``not yet run``, e.g. a rank a small profile
    skips) is named apart and decides nothing; none measured: ``"untested"``.

    The alternatives are those the paper's text admits, declared in ``params.yaml`` before the
    run (never chosen by their outcome).
    """
    if not alternatives:
        raise ValueError("no alternatives declared: robustness needs at least one")
    for s in [status, *alternatives.values()]:
        if s not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {s!r}")
    ran = {name: s for name, s in alternatives.items() if s != NOT_RUN}
    skipped = [name for name, s in alternatives.items() if s == NOT_RUN]
    flips = [f"{name} → {s}" for name, s in ran.items() if s != status]
    word = ("yes" if not flips else "fragile: " + "; ".join(flips)) if ran else "untested"
    return word + (f" (not run here: {', '.join(skipped)})" if skipped else "")


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """One evidence row of the claims table: one claim as tested by one chapter.

    ``key_number`` is the measured quantity that decides the verdict, with its uncertainty
    (e.g. ``"slope −0.99 [−1.00, −0.98] (95% CI)"``); ``chapter`` is the stage (notebook) name;
    ``anchor`` is the MyST target of the cell in that chapter where the rule is applied;
    ``rule`` is the rule in words (:meth:`describe`).

    ``evidence`` is ``"empirical"`` or ``"math check"`` (a numerical verification of the
    paper's derivation: it cannot speak for or against the claim about trained models and is
    never combined into the empirical status). ``unit`` names the resampling unit and its n;
    ``seeds_agreeing`` is ``"k of n"`` per-seed verdicts equal to this one; ``robust`` is
    :func:`robustness`'s word over the declared alternatives. A rule revised after its first
    version keeps that version's verdict in ``rule_v1`` with ``revision`` saying why;
    ``post_hoc`` lists decisions made after seeing data. ``scale`` says what the evidence was
    measured on (:func:`scale_text`: models, parameters, tokens, seeds; or a released model):
    every empirical row the table shows must state it. A chapter may give a claim several rows
    of different scales (our models, a released model).
    """

    claim_id: str
    status: str
    key_number: str = ""
    chapter: str = ""
    detail: str = ""
    anchor: str = ""
    rule: str = ""
    evidence: str = EMPIRICAL
    unit: str = ""
    seeds_agreeing: str = ""
    robust: str = ""
    rule_v1: str = ""
    revision: str = ""
    post_hoc: str = ""
    scale: str = ""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, str):
                raise ValueError(
                    f"claim field {f.name!r} must be a string, got {type(value).__name__} {value!r}"
                )
        if self.claim_id not in CLAIMS:
            raise ValueError(f"unknown claim {self.claim_id!r}; known: {', '.join(CLAIMS)}")
        checked_name(f"claim {self.claim_id}: chapter", self.chapter)
        checked_name(f"claim {self.claim_id}: anchor", self.anchor)
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.status != NOT_RUN and not self.chapter:
            raise ValueError(f"claim {self.claim_id}: an evidence row needs its chapter")
        if self.evidence not in EVIDENCE:
            raise ValueError(f"evidence must be one of {EVIDENCE}, got {self.evidence!r}")
        if self.rule_v1 and self.rule_v1 not in STATUSES:
            raise ValueError(f"rule_v1 must be a status {STATUSES}, got {self.rule_v1!r}")
        if bool(self.rule_v1) != bool(self.revision.strip()):
            raise ValueError(
                f"claim {self.claim_id}: a revised rule needs both the first rule's verdict "
                "(rule_v1) and the reason for the revision (revision)"
            )
        if self.evidence == MATH_CHECK and (self.seeds_agreeing or self.robust):
            raise ValueError(f"claim {self.claim_id}: a math check has no seeds or robustness")


def write_claims(path: str | Path, claims: list[Claim]) -> Path:
    """Write a stage's claim rows as JSON (sorted keys, stable bytes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [asdict(c) for c in sorted(claims, key=lambda c: c.claim_id)]
    write_text_atomic(path, json.dumps(rows, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def read_claims(paths: Iterable[str | Path]) -> dict[str, list[Claim]]:
    """Evidence rows of every claim (empty list: not yet run), from the stages' files.

    Two rows for the same (claim, chapter, scale) are an error.
    """
    table: dict[str, list[Claim]] = {cid: [] for cid in CLAIMS}
    seen: dict[tuple[str, str], Path] = {}
    for path in map(Path, paths):
        try:
            rows = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise ValueError(f"{path}: cannot read the claim rows: {err}") from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ValueError(f"{path}: expected a JSON list of claim objects")
        for row in rows:
            try:
                claim = Claim(**row)
            except (TypeError, ValueError) as err:
                raise ValueError(f"{path}: bad claim row {row!r}: {err}") from None
            key = (claim.claim_id, claim.chapter, claim.scale)
            if key in seen:
                raise ValueError(
                    f"claim {claim.claim_id} from chapter {claim.chapter!r} (scale "
                    f"{claim.scale!r}) written by both {seen[key]} and {path}"
                )
            seen[key] = path
            table[claim.claim_id].append(claim)
    for rows in table.values():
        rows.sort(key=lambda c: (c.chapter, c.scale))
    return table


def _count(n: float) -> str:
    """12_300_000 → ``12.3M``; 262_144 → ``262k``; 900 → ``900``."""
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.3g}{suffix}"
    return f"{n:g}"


def _span(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    return _count(lo) if _count(lo) == _count(hi) else f"{_count(lo)}–{_count(hi)}"


def scale_text(params: Sequence[int], tokens: Sequence[int], seeds: int | tuple[int, int]) -> str:
    """The ``scale`` of an evidence row measured on trained models: how many, their parameter
    counts and training tokens (each model's, as ranges), and the seeds per configuration
    (a number, or the fewest and most), e.g.
    ``"9 models (3 seeds each), 1.8M parameters, 2.1M tokens each"``."""
    if not len(params) or len(params) != len(tokens):
        raise ValueError(f"one parameter count and token count per model: {params}, {tokens}")
    lo, hi = (seeds, seeds) if isinstance(seeds, int) else seeds
    if not 1 <= lo <= hi:
        raise ValueError(f"seeds must be at least 1 (fewest <= most), got {seeds}")
    n = len(params)
    per = f"{lo}" if lo == hi else f"{lo}–{hi}"
    return (
        f"{n} model{'s' if n > 1 else ''} ({per} seed{'s' if hi > 1 else ''} each), "
        f"{_span(params)} parameters, {_span(tokens)} tokens each"
    )


def scale_of_runs(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """:func:`scale_text` of the runs an analysis stage measured, from its summary's ``runs``
    (run → ``family``, ``seed``, ``params``, ``tokens``; a configuration is a family, seeds
    counted per family); hub checkpoints (size ``None``: not recorded locally) are named
    instead. A run with no size entry at all is an error (a summary older than the records)."""
    unsized = [str(r) for r, v in runs.items() if "params" not in v]
    if unsized:
        raise ValueError(
            f"no recorded size for {unsized[:3]}: the summary predates size records (rerun the "
            "analysis stage that wrote it)"
        )
    ours = {r: v for r, v in runs.items() if v["params"] is not None}
    hub = [str(r) for r in runs if r not in ours]
    parts = []
    if ours:
        seeds: dict[str, set] = {}
        for v in ours.values():
            seeds.setdefault(str(v["family"]), set()).add(v["seed"])
        counts = [len(s) for s in seeds.values()]
        params = [int(v["params"]) for v in ours.values()]
        tokens = [int(v["tokens"]) for v in ours.values()]
        parts.append(scale_text(params, tokens, (min(counts), max(counts))))
    if hub:
        parts.append(f"released checkpoints {', '.join(hub)}")
    if not parts:
        raise ValueError("no runs to state the scale of")
    return "; ".join(parts)


def claims_markdown(
    table: Mapping[str, list[Claim]], trends: Mapping[str, TrendRow] | None = None
) -> str:
    """The claims table in MyST Markdown, narrow enough for the book's column: per claim, its
    combined empirical status (math checks are listed but never combined into it), then one
    row per evidence row — the chapter (linked to the cell where it applies its rule) with its
    verdict, the deciding number and the scale it was measured at. Below it, per claim, the
    details: the trend with size (``trends``, linked to the Scale chapter), and per evidence
    row its unit, the seeds agreeing, whether the verdict survives the declared alternatives,
    and the rule's history. An empirical row without its scale is an error.
    """

    def cell(text: str) -> str:  # text from data: shown as written, never as markup
        return plain(text) or "—"

    lines = [
        "```{table}",
        ":class: claims-table",  # book/_css/claims.css: four columns that fit the text column
        "",
        "| claim: status | evidence: verdict | deciding number | scale |",
        "|---|---|---|---|",
    ]
    details = []
    trends = trends or {}
    for cid, rows in table.items():
        empirical = [c.status for c in rows if c.evidence == EMPIRICAL]
        combined = combine_statuses(empirical) if empirical or not rows else "no empirical test"
        head = f"| **{cid}: {combined}**. {CLAIMS[cid]} |"
        if not rows:
            lines.append(f"{head} — | — | — |")
        t = trends.get(cid)
        notes = (
            [f"trend with size: {{ref}}`{t.words} <{t.anchor}>` ({plain(t.detail)})"] if t else []
        )
        for i, c in enumerate(rows):
            if c.evidence == EMPIRICAL and c.status != NOT_RUN and not c.scale.strip():
                raise ValueError(
                    f"claim {cid} from chapter {c.chapter!r}: an empirical row must state its "
                    "scale (Claim.scale, geolib.report.claims.scale_text)"
                )
            words = c.chapter.replace("_", " ")  # a name that wraps in a narrow column
            link = f"{{ref}}`{words} <{c.anchor}>`" if c.anchor else words
            status = c.status if c.evidence == EMPIRICAL else f"math check: {c.status}"
            scale = cell(c.scale) if c.evidence == EMPIRICAL else "— (a derivation)"
            lines.append(
                f"{head if i == 0 else '| |'} {link}: {status} | {cell(c.key_number)} | {scale} |"
            )
            history = f"v1 {c.rule_v1} → v2 {c.status}: {c.revision}" if c.rule_v1 else ""
            if c.post_hoc:
                history = f"{history} (after seeing data: {c.post_hoc})".strip()
            parts = [
                f"{name} {plain(value)}"
                for name, value in (
                    ("unit:", c.unit),
                    ("seeds agreeing:", c.seeds_agreeing),
                    ("robust:", c.robust),
                    ("rule history:", history),
                )
                if value
            ]
            where = f"{c.chapter}, {plain(c.scale)}" if c.scale else c.chapter
            notes.append(f"{where}: {'; '.join(parts) or 'no further detail'}")
        if notes:
            details.append(f"- **{cid}**\n" + "\n".join(f"  - {n}" for n in notes))
    out = "\n".join([*lines, "```"]) + "\n"
    if details:
        out += (
            "\n**Details of each evidence row** (the unit of its verdict, how many seeds agree, "
            "whether it survives the declared alternatives, the rule's history, and the trend "
            "with size):\n\n" + "\n".join(details) + "\n"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    trends: dict[str, TrendRow] = {}
    if "--trends" in argv:  # OUT.md --trends TRENDS.json FILE.json ...
        i = argv.index("--trends")
        trends = read_trends(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    out, files = Path(argv[0]), argv[1:]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, claims_markdown(read_claims(files), trends))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
