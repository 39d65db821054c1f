"""Rule history as data: each claim's earlier rules (v1, v2), declared in ``params.yaml``
(``verdicts.history.<chapter>``) and applied again to today's data by one engine, so that a
row keeps every earlier verdict visible beside the current one, with no code of its own per
version.

A version is a list of checks; its status combines theirs
(:func:`~geolib.verdicts.rules.combine_statuses`). A check applies ``rule`` (a key of the
chapter's section) to the number at ``at`` (a dotted path into the analysis stage's
``summary.json``; ``""``: the summary itself):

- ``interval``: ``value [low, high]`` (:mod:`geolib.verdicts.evidence`: ``decide_interval``);
- ``clipped``: the same, the rule's own reason kept (``decide_clipped``; ``undefined``: why
  an undefined number is, in words);
- ``count``: ``successes`` of ``n_units`` (``decide_count``).

``each``: ``at`` holds one such number per model; each is decided and their statuses combined.
``premise``: the path of a value that must be true (a bool; with ``premise_above``, a number
above it), else the check is *inconclusive* and ``fails`` (formatted with the fields at ``at``)
says why. A number the summary lacks is an error, unless declared: ``absent: undefined`` (the
stage leaves it out when it is undefined: *inconclusive*), or ``ran``: the path whose absence
means the runs the check reads were not made (*not yet run*). A path may name ``{fields}`` the
chapter fills (residual isotropy's zeta, ``{change}``).

    history = History.from_params(verdicts, "gradient_energy", section)
    history.verdicts(summary)   # {"A4": {"v1": Verdict, "v2": Verdict}, ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from geolib.verdicts.evidence import decide_clipped, decide_count, decide_interval
from geolib.verdicts.rules import (
    INCONCLUSIVE,
    NOT_RUN,
    Rule,
    Verdict,
    combine_statuses,
    given_premise,
    rule_from_params,
)

KINDS = ("interval", "clipped", "count")
KEYS = {
    "rule", "kind", "at", "each", "premise", "premise_above", "fails", "absent", "ran",
    "undefined",
}  # fmt: skip
#: what a check may declare of a number the summary lacks
ABSENT = ("error", "undefined")


@dataclass(frozen=True)
class Check:
    """One check of an earlier rule (module docstring)."""

    rule: str
    kind: str
    at: str = ""
    each: bool = False
    premise: str | None = None
    premise_above: float | None = None
    fails: str = ""
    absent: str = "error"
    ran: str | None = None
    undefined: str = "the stage left it undefined"

    def __post_init__(self) -> None:
        where = f"check of {self.rule}"
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.absent not in ABSENT:
            raise ValueError(f"{where}: absent must be one of {ABSENT}, got {self.absent!r}")
        if self.absent == "undefined" and self.kind == "count":
            raise ValueError(f"{where}: a count the stage left out cannot be undefined")
        if self.premise is not None and not self.fails.strip():
            raise ValueError(f"{where}: a premise needs `fails` (why, in words)")
        if self.premise_above is not None and self.premise is None:
            raise ValueError(f"{where}: premise_above needs a premise")


def _path(at: str, fields: Mapping[str, Any]) -> list[str]:
    """The keys of dotted path ``at``, each with the chapter's ``fields`` filled in (split
    before filling: a field's value may hold a dot, as zeta's ``0.2/drop``)."""
    return [part.format(**fields) for part in at.split(".")] if at else []


def _get(summary: Mapping[str, Any], path: list[str]) -> Any:
    """The value at ``path`` in ``summary``, ``KeyError`` naming the path where it is absent."""
    node: Any = summary
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(".".join(path))
        node = node[part]
    return node


def _decide_one(check: Check, rule: Rule, d: Mapping[str, Any]) -> Verdict:
    if check.kind == "count":
        return decide_count(rule, d)
    if check.kind == "clipped":
        return decide_clipped(rule, d, check.undefined)[0]
    return decide_interval(rule, d.get("value"), d.get("low"), d.get("high"), check.rule)[0]


def _premise(check: Check, summary: Mapping[str, Any], fields: Mapping[str, Any]) -> Any:
    """The premise's value: a bool as the summary holds it (``given_premise`` refuses any
    other), or, with ``premise_above``, whether the number there is above it (NaN: not)."""
    value = _get(summary, _path(str(check.premise), fields))
    if check.premise_above is None:
        return value
    return isinstance(value, int | float) and value > check.premise_above


def decide_check(
    check: Check, rule: Rule, summary: Mapping[str, Any], fields: Mapping[str, Any]
) -> Verdict:
    """``check`` on the stage's ``summary``, by ``rule`` (the one its ``rule`` key names)."""
    if check.ran is not None:
        try:
            made = bool(_get(summary, _path(check.ran, fields)))
        except KeyError:
            made = False
        if not made:
            return Verdict(NOT_RUN, rule.describe(), f"{check.ran} not in the stage's summary")
    path = _path(check.at, fields)
    try:
        d = _get(summary, path)
    except KeyError:
        if check.absent == "error":
            raise ValueError(
                f"the stage's summary lacks {'.'.join(path)} ({check.rule}'s number)"
            ) from None
        if check.kind == "clipped":
            d = {}  # undefined, in the check's own words
        else:
            why = f"undefined: {'.'.join(path)} not in the stage's summary"
            return Verdict(INCONCLUSIVE, rule.describe(), why)

    def decide() -> Verdict:
        if not check.each:
            return _decide_one(check, rule, d)
        if not d:
            return Verdict(NOT_RUN, rule.describe(), "no model in the stage's summary")
        units = [_decide_one(check, rule, x) for x in d.values()]
        why = "; ".join(f"{name}: {v.status}" for name, v in zip(d, units, strict=True))
        return Verdict(combine_statuses(v.status for v in units), rule.describe(), why)

    if check.premise is None:
        return decide()
    holds = _premise(check, summary, fields)
    return given_premise(rule, holds, check.fails.format(**d), decide)


def combine(verdicts: list[Verdict]) -> Verdict:
    """One version's verdict from its checks': the one check's verdict as it is, or the
    combined status with every check's rule and reason."""
    if len(verdicts) == 1:
        return verdicts[0]
    return Verdict(
        combine_statuses(v.status for v in verdicts),
        "; ".join(dict.fromkeys(v.rule for v in verdicts)),
        "; ".join(v.reason for v in verdicts),
    )


def _check(
    where: str, spec: Any, section: Mapping[str, Any], chapter: str, rules: dict[str, Rule]
) -> Check:
    """One declared check, read, and its rule built into ``rules`` once (errors name
    ``where``, or the rule's key in ``chapter``'s section)."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where}: a check is a mapping (rule, kind, at), got {spec!r}")
    extra, lacking = set(spec) - KEYS, {"rule", "kind"} - set(spec)
    if extra or lacking:
        raise ValueError(f"{where}: unknown keys {sorted(extra)}, lacking {sorted(lacking)}")
    if spec["rule"] not in section:
        raise ValueError(f"{where}: the section lacks rule {spec['rule']!r}")
    if spec["rule"] not in rules:
        try:  # a malformed rule fails here, named by its key
            rules[spec["rule"]] = rule_from_params(section[spec["rule"]])
        except ValueError as bad:
            raise ValueError(f"{chapter}.{spec['rule']}: {bad}") from None
    return Check(**{**spec, "at": str(spec.get("at", ""))})


@dataclass(frozen=True)
class History:
    """A chapter's earlier rules: ``{claim: {version: (checks...)}}`` in declared order, with
    the ``rules`` they name, built once from the chapter's section (key → rule)."""

    versions: Mapping[str, Mapping[str, tuple[Check, ...]]]
    rules: Mapping[str, Rule]

    @classmethod
    def from_params(
        cls, verdicts: Mapping[str, Any] | None, chapter: str, section: Mapping[str, Any]
    ) -> History:
        """From ``verdicts.history.<chapter>``; an error names a check that is malformed or a
        rule the section lacks (before any cell runs)."""
        where = f"verdicts.history.{chapter}"
        spec = ((verdicts or {}).get("history") or {}).get(chapter)
        if not isinstance(spec, Mapping) or not spec:
            raise ValueError(f"{where}: declare each claim's earlier rules (v1, v2)")
        versions: dict[str, dict[str, tuple[Check, ...]]] = {}
        rules: dict[str, Rule] = {}
        for claim, by_version in spec.items():
            if not isinstance(by_version, Mapping) or not by_version:
                raise ValueError(f"{where}.{claim}: a mapping of versions to checks")
            versions[claim] = {}
            for version, checks in by_version.items():
                at = f"{where}.{claim}.{version}"
                if not isinstance(checks, list) or not checks:
                    raise ValueError(f"{at}: a non-empty list of checks")
                versions[claim][str(version)] = tuple(
                    _check(at, c, section, chapter, rules) for c in checks
                )
        return cls(versions, rules)

    def verdicts(self, summary: Mapping[str, Any], **fields: Any) -> dict[str, dict[str, Verdict]]:
        """Each claim's earlier verdicts on the stage's ``summary`` (``fields``: what its
        paths name), ``{claim: {version: Verdict}}``."""
        return {
            claim: {
                version: combine(
                    [decide_check(c, self.rules[c.rule], summary, fields) for c in checks]
                )
                for version, checks in by_version.items()
            }
            for claim, by_version in self.versions.items()
        }

    def statuses(self, summary: Mapping[str, Any], **fields: Any) -> dict[str, dict[str, str]]:
        """:meth:`verdicts`' statuses alone."""
        return {
            claim: {version: v.status for version, v in by_version.items()}
            for claim, by_version in self.verdicts(summary, **fields).items()
        }
