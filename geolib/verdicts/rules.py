"""The verdict rules: how a chapter turns its measured numbers into a claim's status.

A chapter never decides a verdict in notebook code: its library module
(:mod:`geolib.verdicts.chapters`) names a rule and its thresholds from its ``params.yaml`` section
(a mapping with ``rule: <kind>``, the rule's numbers and a one-line ``reason`` quoting the paper),
builds it with :func:`rule_from_params` and calls ``decide`` on its measured numbers. Kinds:

* ``within_tolerance`` (:class:`WithinTolerance`) — an estimate with its interval near a
  target: the whole interval inside ``target ± tol``.
* ``beyond`` (:class:`Beyond`) — an effect of either sign beyond ``target ± tol``.
* ``threshold`` (:class:`Threshold`) — an effect beyond a threshold (e.g. a ratio above 10):
  the interval's near bound beyond it.
* ``fraction`` (:class:`Fraction`) — a sign or an ordering that holds in at least a fraction of
  independent units (a count, no interval).
* ``identity`` (:class:`Identity`) — a derived identity checked numerically: the largest
  deviation within a round-off tolerance. No interval: it is not a statistical finding.

**Statuses.** ``reproduced``; ``not reproduced``; ``partly`` (part of a claim holds: a
direction without the paper's size, or several evidence rows that disagree); ``inconclusive``
(the data at this scale cannot decide: an interval that straddles the bar, or a premise that
fails — not a polite "partly"); ``not yet run``.

**Premise, seeds, robustness.** A rule first checks the claim's premise (:func:`given_premise`:
the effect exists, the outcome varies beyond its noise); where it fails the verdict is
*inconclusive* with the reason. :func:`seeds_agreeing` says how many per-seed verdicts agree
with the pooled one, :func:`over_seeds` summarises a per-model key number over models (bounded
for shares), and :func:`robustness` whether the verdict survives the alternatives the paper's
text admits (declared in ``params.yaml`` beforehand).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields, replace
from typing import Any, ClassVar

import numpy as np

from geolib.measure import validate as check
from geolib.measure.stats import interval, share_over_models

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
EMPIRICAL, MATH_CHECK, DESCRIPTION = "empirical", "math check", "description"
#: an empirical row decides; a math check verifies a derivation; a description (a released
#: model's final checkpoint on a claim about training dynamics) says what it can speak to.
#: Only empirical rows are combined into a claim's status.
EVIDENCE = (EMPIRICAL, MATH_CHECK, DESCRIPTION)


# ---------------------------------------------------------------------------------------------
# Verdict rules
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyNumber:
    """A number a rule decided on: ``estimate`` with its interval [``low``, ``high``] against
    the rule's ``bar`` (a threshold, or a band's centre with half-width ``band``), and the
    ``status`` that check gave. ``label`` names the check among a claim's several (empty for a
    row's single number). Carried by :class:`Verdict` so that a figure can place every claim
    against its bar without reading numbers back from words."""

    label: str
    status: str
    estimate: float
    low: float
    high: float
    bar: float
    band: float = 0.0

    def __post_init__(self) -> None:
        check.one_of("status", self.status, STATUSES)
        for name in ("estimate", "low", "high", "bar", "band"):
            object.__setattr__(self, name, check.scalar(name, getattr(self, name)))
        if not self.low <= self.estimate <= self.high:
            raise ValueError(
                f"need low <= estimate <= high, got {self.low} <= {self.estimate} <= {self.high}"
            )
        if self.band < 0:
            raise ValueError(f"band must be >= 0, got {self.band}")

    def labelled(self, label: str) -> KeyNumber:
        """The same number under ``label`` (prefixed to a label it already has)."""
        return replace(self, label=f"{label}: {self.label}" if self.label else label)


@dataclass(frozen=True)
class Verdict:
    """A rule's decision: ``status``, the rule in words (``rule``) and why this branch fired;
    ``numbers``: what an interval rule decided on (none for counts, identities, premises)."""

    status: str
    rule: str
    reason: str
    numbers: tuple[KeyNumber, ...] = ()

    def __str__(self) -> str:
        return f"{self.status}: {self.reason}"

    def labelled(self, label: str) -> tuple[KeyNumber, ...]:
        """This verdict's numbers under ``label`` (one check of a claim with several)."""
        return tuple(n.labelled(label) for n in self.numbers)


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
        number = KeyNumber("", status, *_interval(estimate, low, high), self.target, self.tol)
        return Verdict(status, self.describe(), f"{where}: interval {position} the band", (number,))


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
            status, why = REPRODUCED, "beyond the threshold"
        elif far < t and self.no_effect is not None and near > sign * self.no_effect:
            status, why = PARTLY, f"short of it, but excludes {self.no_effect:g}"
        elif far < t:
            status, why = NOT_REPRODUCED, "short of the threshold"
        else:
            status, why = INCONCLUSIVE, "interval contains the threshold"
        number = KeyNumber("", status, e, lo, hi, self.threshold)
        return Verdict(status, self.describe(), f"{where}: {why}", (number,))


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
        check.one_of("status", s, STATUSES)
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
        return premise_fails(rule, why)
    return decide()


def premise_fails(rule: Rule, why: str) -> Verdict:
    """*Inconclusive*: the claim's premise fails, ``why`` naming the number that failed."""
    return Verdict(INCONCLUSIVE, rule.describe(), f"premise fails: {_reason(why)}")


def seeds_agreeing(statuses: Iterable[str], status: str) -> str:
    """``"k of n"``: how many per-seed (per-model) verdicts equal the pooled ``status``."""
    rows = list(statuses)
    for s in [*rows, status]:
        check.one_of("status", s, STATUSES)
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
        check.one_of("status", s, STATUSES)
    ran = {name: s for name, s in alternatives.items() if s != NOT_RUN}
    skipped = [name for name, s in alternatives.items() if s == NOT_RUN]
    flips = [f"{name} → {s}" for name, s in ran.items() if s != status]
    word = ("yes" if not flips else "fragile: " + "; ".join(flips)) if ran else "untested"
    return word + (f" (not run here: {', '.join(skipped)})" if skipped else "")


def shares_over_seeds(counts: Mapping[str, tuple[int, int]], level: float = 0.95) -> str:
    """A per-model share (``successes, units`` per seed or model) summarised over models with a
    bounded interval (:func:`geolib.measure.stats.share_over_models`): ``"0.5 [0.42, 0.58] over
    3 seeds (logit-t)"``. A model with no units is left out and named; none left: undefined."""
    if not counts:
        raise ValueError("shares_over_seeds needs at least one seed")
    empty = [seed for seed, (_, n) in counts.items() if n == 0]
    ok = {seed: c for seed, c in counts.items() if c[1] > 0}
    note = f"; no units for seed {', '.join(empty)}" if empty else ""
    if not ok:
        return "undefined for every seed"
    iv = share_over_models([k for k, _ in ok.values()], [n for _, n in ok.values()], level, "seed")
    seeds = f"{iv.n} seed{'s' if iv.n > 1 else ''}"
    return f"{iv.value:.3g} [{iv.low:.3g}, {iv.high:.3g}] over {seeds} ({iv.method}{note})"
