"""Rule history as data: each claim's earlier rules (v1, v2), declared in ``params.yaml``
(``verdicts.history.<chapter>``) and applied again to today's data by one engine, so that a
row keeps every earlier verdict visible beside the current one, with no code of its own per
version.

A version is a list of checks; its status combines theirs
(:func:`~geolib.report.rules.combine_statuses`). A check applies ``rule`` (a key of the
chapter's section) to the number at ``at`` (a dotted path into the analysis stage's
``summary.json``; ``""``: the summary itself):

- ``interval``: ``value [low, high]`` (:mod:`geolib.report.evidence`: ``decide_interval``);
- ``clipped``: the same, the rule's own reason kept (``decide_clipped``);
- ``count``: ``successes`` of ``n_units`` (``decide_count``).

``each``: ``at`` holds one such number per model; each is decided and their statuses combined.
``premise``: the path of a value that must be true, else the check is *inconclusive* and
``fails`` (formatted with the fields at ``at``) says why. ``missing``: the status where the
summary lacks ``at`` (by default the number is undefined). A path may name ``{fields}`` the
chapter fills (residual isotropy's zeta, ``{change}``).

    history = History.from_params(verdicts, "gradient_energy", section)
    history.verdicts(summary)   # {"A4": {"v1": Verdict, "v2": Verdict}, ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from geolib.report.evidence import decide_clipped, decide_count, decide_interval
from geolib.report.rules import (
    STATUSES,
    Verdict,
    combine_statuses,
    given_premise,
    rule_from_params,
)

KINDS = ("interval", "clipped", "count")
KEYS = {"rule", "kind", "at", "each", "premise", "fails", "missing", "undefined"}


@dataclass(frozen=True)
class Check:
    """One check of an earlier rule (module docstring)."""

    rule: str
    kind: str
    at: str
    each: bool = False
    premise: str | None = None
    fails: str = ""
    missing: str | None = None
    undefined: str = "the stage left it undefined"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(
                f"check of {self.rule}: kind must be one of {KINDS}, got {self.kind!r}"
            )
        if self.missing is not None and self.missing not in STATUSES:
            raise ValueError(
                f"check of {self.rule}: missing must be a status, got {self.missing!r}"
            )
        if self.premise is not None and not self.fails.strip():
            raise ValueError(f"check of {self.rule}: a premise needs `fails` (why, in words)")


def _path(at: str, fields: Mapping[str, Any]) -> list[str]:
    return [part.format(**fields) for part in at.split(".")] if at else []


def _get(summary: Mapping[str, Any], path: list[str]) -> Any:
    """The value at ``path`` in ``summary``, ``KeyError`` naming the path where it is absent."""
    node: Any = summary
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(".".join(path))
        node = node[part]
    return node


def _decide_one(check: Check, rule: Any, d: Mapping[str, Any]) -> Verdict:
    if check.kind == "count":
        return decide_count(rule, d)
    if check.kind == "clipped":
        return decide_clipped(rule, d, check.undefined)[0]
    return decide_interval(rule, d.get("value"), d.get("low"), d.get("high"), check.rule)[0]


def decide_check(
    check: Check, section: Mapping[str, Any], summary: Mapping[str, Any], fields: Mapping[str, Any]
) -> Verdict:
    """``check`` on the stage's ``summary``, its rule read from the chapter's ``section``."""
    rule = rule_from_params(section[check.rule])
    try:
        d = _get(summary, _path(check.at, fields))
    except KeyError as absent:
        if check.missing is not None:
            return Verdict(check.missing, rule.describe(), f"{absent.args[0]} not in the summary")
        if check.kind == "count":
            raise ValueError(f"the stage's summary lacks the count {absent.args[0]}") from None
        d = {}

    def decide() -> Verdict:
        if not check.each:
            return _decide_one(check, rule, d)
        units = [_decide_one(check, rule, x) for x in d.values()]
        why = "; ".join(f"{name}: {v.status}" for name, v in zip(d, units, strict=True))
        return Verdict(combine_statuses(v.status for v in units), rule.describe(), why)

    if check.premise is None:
        return decide()
    holds = bool(_get(summary, _path(check.premise, fields)))
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


@dataclass(frozen=True)
class History:
    """A chapter's earlier rules: ``{claim: {version: (checks...)}}`` in declared order, with
    the chapter's ``section`` whose rule mappings they name."""

    versions: Mapping[str, Mapping[str, tuple[Check, ...]]]
    section: Mapping[str, Any]

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
        for claim, by_version in spec.items():
            if not isinstance(by_version, Mapping) or not by_version:
                raise ValueError(f"{where}.{claim}: a mapping of versions to checks")
            versions[claim] = {}
            for version, checks in by_version.items():
                if not isinstance(checks, list) or not checks:
                    raise ValueError(f"{where}.{claim}.{version}: a non-empty list of checks")
                parsed = []
                for c in checks:
                    extra = set(c) - KEYS if isinstance(c, Mapping) else {"(not a mapping)"}
                    if extra:
                        raise ValueError(f"{where}.{claim}.{version}: unknown keys {sorted(extra)}")
                    if c.get("rule") not in section:
                        raise ValueError(
                            f"{where}.{claim}.{version}: the section lacks rule {c.get('rule')!r}"
                        )
                    try:  # a malformed rule fails here, named by its key
                        rule_from_params(section[c["rule"]])
                    except ValueError as bad:
                        raise ValueError(f"{chapter}.{c['rule']}: {bad}") from None
                    parsed.append(Check(**{**c, "at": str(c.get("at", ""))}))
                versions[claim][str(version)] = tuple(parsed)
        return cls(versions, section)

    def verdicts(self, summary: Mapping[str, Any], **fields: Any) -> dict[str, dict[str, Verdict]]:
        """Each claim's earlier verdicts on the stage's ``summary`` (``fields``: what its
        paths name), ``{claim: {version: Verdict}}``."""
        return {
            claim: {
                version: combine([decide_check(c, self.section, summary, fields) for c in checks])
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
