"""Rule history as data: each claim's earlier rules (v1, v2), declared in ``params.yaml``
(``verdicts.history.<chapter>``) and applied again to today's data by one engine, so that a
row keeps every earlier verdict visible beside the current one, with no code of its own per
version.

A version is a list of checks; its status combines theirs
(:func:`~geolib.verdicts.rules.combine_statuses`). A check applies ``rule`` (a key, or a dotted
path, of the chapter's section) to the number at ``at`` (a dotted path into the analysis stage's
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

A check may instead read an analysis stage's ``table`` (the sweep chapters' tables): the rows
``where`` its columns match (a value; ``{not: v}``; ``{startswith: s}``), then the ``row``-th
of them, ``each`` of them, or the one that must be there. An ``interval`` reads the row's
``columns`` (value, low, high; default ``[value, ci_low, ci_high]``; ``skip_undefined``: rows
whose value is missing are passed over); a ``count`` counts the rows whose column ``count`` is
true (each must be true or false), of all selected; a ``rows`` check reads each selected row
with each of its ``reads`` (``rule``, ``columns``, ``label``) in turn. ``note``: the column
whose text joins the words of an interval whose low end is undefined. A check with ``each``
that selects no row is an error. ``label`` is the check in words (the row's fields, or ``k`` and
``n``, filled in); ``given`` names a premise the chapter computes (:data:`Premises`), with its
arguments after the name, split on spaces (``"varies {outcome}"``): false, the check is
*inconclusive* saying why.

    history = History.from_params(verdicts, "gradient_energy", section)
    history.verdicts(summary)   # {"A4": {"v1": Verdict, "v2": Verdict}, ...}
    history.checks(tables=frames, premises=premises)   # {"B1": {"v1": [(Verdict, words)]}}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from geolib.measure import validate as check
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

KINDS = ("interval", "clipped", "count", "rows")
#: the keys of a check on the stage's summary, and of one on its tables (beside rule and kind)
SUMMARY_KEYS = {"at", "premise", "premise_above", "fails", "absent", "ran", "undefined"}
TABLE_KEYS = {"table", "where", "row", "columns", "skip_undefined", "count", "given", "note"}
#: the keys of one read of a ``rows`` check
READ_KEYS = {"rule", "columns", "label"}
KEYS = {"rule", "kind", "each", "label", "reads"} | SUMMARY_KEYS | TABLE_KEYS
#: what a check may declare of a number the summary lacks
ABSENT = ("error", "undefined")
#: how a table check's ``where`` may match a column beside equality, and what it matches
MATCHES = ("not", "startswith")
SCALARS = (str, int, float, bool)
#: the premises a chapter computes for its table checks: name → ``(*args) -> (holds, why not)``
Premises = Mapping[str, Callable[..., tuple[bool, str]]]
#: a check decided, with what it measured in words
Checked = tuple[Verdict, str]


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
    label: str = ""
    table: str | None = None
    where: Mapping[str, Any] = field(default_factory=dict)
    row: int | None = None
    columns: tuple[str, str, str] = ("value", "ci_low", "ci_high")
    skip_undefined: bool = False
    count: str | None = None
    given: str | None = None
    note: str | None = None
    reads: tuple[Check, ...] = ()

    @property
    def name(self) -> str:
        """The check in error messages: its rule, or the table a ``rows`` check reads."""
        return self.rule or f"rows of {self.table}"

    def __post_init__(self) -> None:
        where = f"check of {self.name}"
        check.one_of(f"{where}: kind", self.kind, KINDS)
        if (self.kind == "rows") != bool(self.reads):
            raise ValueError(f"{where}: a `rows` check, and only it, has `reads`")
        if self.kind == "rows" and self.table is None:
            raise ValueError(f"{where}: a `rows` check reads a table")
        if self.table is not None:
            self._check_table(where)
        check.one_of(f"{where}: absent", self.absent, ABSENT)
        if self.absent == "undefined" and self.kind == "count":
            raise ValueError(f"{where}: a count the stage left out cannot be undefined")
        if self.premise is not None and not self.fails.strip():
            raise ValueError(f"{where}: a premise needs `fails` (why, in words)")
        if self.premise_above is not None and self.premise is None:
            raise ValueError(f"{where}: premise_above needs a premise")

    def _check_table(self, where: str) -> None:
        """What a check on a table may declare (errors name the check)."""
        if self.kind == "clipped":
            raise ValueError(f"{where}: a table check is an interval or a count")
        if (self.kind == "count") != (self.count is not None):
            raise ValueError(f"{where}: a count on a table names its `count` column, only it")
        for read in self.reads or (self,):
            columns = read.columns
            if not isinstance(columns, tuple) or len(columns) != 3:
                raise ValueError(f"{where}: columns are [value, low, high], got {columns!r}")
            if not all(isinstance(c, str) for c in columns):
                raise ValueError(f"{where}: columns are [value, low, high], got {columns!r}")
        bad_row = isinstance(self.row, bool) or not isinstance(self.row, int) or self.row < 0
        if self.row is not None and (self.each or bad_row):
            raise ValueError(f"{where}: `row` is one row (an integer >= 0), not with `each`")
        if self.kind == "count" and self.given is not None and "{" in self.given:
            raise ValueError(f"{where}: a count's premise has no row to fill {self.given!r} from")
        if not isinstance(self.where, Mapping):
            raise ValueError(
                f"{where}: `where` maps columns to what they match, got {self.where!r}"
            )
        for column, match in self.where.items():
            tests = match.values() if isinstance(match, Mapping) else [match]
            if (isinstance(match, Mapping) and (not match or set(match) - set(MATCHES))) or any(
                not isinstance(m, SCALARS) for m in tests
            ):
                raise ValueError(
                    f"{where}: where.{column} is a value or some of {MATCHES}, got {match!r}"
                )


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


def _filled(template: str, fields: Mapping[str, Any], check: Check) -> str:
    """``template`` with ``fields`` filled in; an error names the check and the fields."""
    try:
        return template.format(**fields)
    except (KeyError, IndexError, ValueError) as bad:
        raise ValueError(
            f"{check.name}: cannot fill {template!r} ({bad!r}) from {sorted(fields)}"
        ) from None


def _selected(check: Check, tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The rows of the check's table it reads (an error names a table or column that lacks)."""
    if check.table not in tables:
        raise ValueError(f"{check.name}: no table {check.table!r}; tables: {sorted(tables)}")
    frame = tables[check.table]
    keep = pd.Series(True, index=frame.index)
    for column, match in check.where.items():
        if column not in frame.columns:
            raise ValueError(f"{check.name}: table {check.table} has no column {column!r}")
        values = frame[column]
        if not isinstance(match, Mapping):
            keep &= values == match
            continue
        if "not" in match:
            keep &= values != match["not"]
        if "startswith" in match:
            keep &= values.astype(str).str.startswith(str(match["startswith"]))
    rows = frame[keep]
    if check.each and rows.empty:
        raise ValueError(f"{check.name}: no row of {check.table} where {dict(check.where)}")
    if check.row is not None:
        if check.row >= len(rows):
            raise ValueError(
                f"{check.name}: {check.table} has {len(rows)} such rows, no row {check.row}"
            )
        rows = rows.iloc[[check.row]]
    return rows


def _given(
    check: Check,
    rule: Rule,
    premises: Premises,
    fields: Mapping[str, Any],
    decide: Callable[[], Verdict],
) -> Verdict:
    """``decide()`` after the check's named premise, its arguments filled from ``fields``."""
    if check.given is None:
        return decide()
    name, *args = _filled(check.given, fields, check).split()
    if name not in premises:
        raise ValueError(f"{check.name}: no premise {name!r}; premises: {sorted(premises)}")
    holds, why = premises[name](*args)
    return given_premise(rule, holds, why, decide)


def _read_row(
    read: Check, rule: Rule, fields: Mapping[str, Any], group: Check, premises: Premises
) -> Checked:
    """``read``'s interval on one row (its ``fields``), after ``group``'s premise; the row's
    ``note`` joins the words where the interval is undefined."""
    value, low, high = read.columns
    missing = [c for c in (value, low, high) if c not in fields]
    if missing:
        raise ValueError(f"{read.name}: table {group.table} has no columns {missing}")
    what = _filled(read.label, fields, read)
    note = fields.get(group.note) if group.note else None
    if isinstance(note, str) and note and not math.isfinite(float(fields[low])):
        what = f"{what} ({note})"
    # decided before the premise, as v1 decides it: the words stay the check's either way
    verdict, words = decide_interval(rule, fields[value], fields[low], fields[high], what)
    return _given(group, rule, premises, fields, lambda: verdict), words


def decide_table(
    check: Check, rules: Mapping[str, Rule], tables: Mapping[str, pd.DataFrame], premises: Premises
) -> list[Checked]:
    """``check`` on the stage's ``tables`` (its rule, or its reads' rules, among ``rules``):
    one decision per row it reads and per read (a count: one), each with its words, after its
    premise (module docstring). A check with ``each`` that selects no row is an error; rows
    ``skip_undefined`` passes over are not."""
    rows = _selected(check, tables)
    if check.kind == "count":
        rule = rules[check.rule]
        if check.count not in rows.columns:
            raise ValueError(f"{check.name}: table {check.table} has no column {check.count!r}")
        flags = rows[check.count]
        if not flags.isin([True, False]).all():
            raise ValueError(f"{check.name}: column {check.count} must be true or false")
        k, n = int(flags.sum()), len(rows)
        verdict = _given(check, rule, premises, {}, lambda: rule.decide(k, n))
        return [(verdict, _filled(check.label, {"k": k, "n": n}, check))]
    reads = check.reads or (check,)
    if check.skip_undefined:
        value = check.columns[0]
        if value not in rows.columns:
            raise ValueError(f"{check.name}: table {check.table} has no column {value!r}")
        rows = rows[rows[value].notna()]
    if not check.each and len(rows) != 1:
        raise ValueError(
            f"{check.name}: {len(rows)} rows of {check.table} where {dict(check.where)} "
            "(expected one)"
        )
    return [
        _read_row(read, rules[read.rule], fields, check, premises)
        for fields in rows.to_dict("records")
        for read in reads
    ]


def version_verdict(checked: Sequence[Checked]) -> Verdict:
    """One version's verdict from its decided checks (:func:`combine`); *inconclusive* where
    every row it selected lacked a number (``skip_undefined``)."""
    if not checked:
        return Verdict(INCONCLUSIVE, "", "no row of the tables had a number to decide on")
    return combine([v for v, _ in checked])


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


def _rule(where: str, key: Any, section: Mapping[str, Any], chapter: str, rules: dict) -> None:
    """Rule ``key`` (a dotted key of ``section``) built into ``rules`` once: an error names a
    rule the section lacks, or one that is malformed, by its key."""
    try:
        params = _get(section, str(key).split("."))
    except KeyError:
        raise ValueError(f"{where}: the section lacks rule {key!r}") from None
    if key not in rules:
        try:
            rules[key] = rule_from_params(params)
        except ValueError as bad:
            raise ValueError(f"{chapter}.{key}: {bad}") from None


def _as_declared(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A check's or read's keys as :class:`Check` takes them: a list of ``columns`` as a tuple
    (anything else is left for :class:`Check` to refuse, naming the check)."""
    columns = spec.get("columns")
    return {**spec, "columns": tuple(columns)} if isinstance(columns, list) else dict(spec)


def _check(
    where: str, spec: Any, section: Mapping[str, Any], chapter: str, rules: dict[str, Rule]
) -> Check:
    """One declared check, read, and its rules built into ``rules`` once (errors name
    ``where``, or the rule's key in ``chapter``'s section)."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where}: a check is a mapping (rule, kind, at), got {spec!r}")
    rows = spec.get("kind") == "rows"  # its reads name the rules, columns and words
    allowed = KEYS - {"rule", "columns", "label", "skip_undefined", "count"} if rows else KEYS
    needed = {"kind", "table", "reads"} if rows else {"kind", "rule"}
    extra, lacking = set(spec) - allowed, needed - set(spec)
    if extra or lacking:
        raise ValueError(f"{where}: unknown keys {sorted(extra)}, lacking {sorted(lacking)}")
    if "table" in spec and set(spec) & SUMMARY_KEYS:
        raise ValueError(f"{where}: a table check takes none of {sorted(SUMMARY_KEYS)}")
    if "table" not in spec and set(spec) & TABLE_KEYS:
        raise ValueError(f"{where}: {sorted(set(spec) & TABLE_KEYS)} need a `table`")
    reads = []
    for read in spec.get("reads") or []:
        if not isinstance(read, Mapping) or not {"rule", "columns"} <= set(read) <= READ_KEYS:
            raise ValueError(f"{where}: a read is a mapping of {sorted(READ_KEYS)}, got {read!r}")
        _rule(where, read["rule"], section, chapter, rules)
        reads.append(Check(**{**_as_declared(read), "kind": "interval"}))
    if not rows:
        _rule(where, spec["rule"], section, chapter, rules)
    return Check(
        **{
            "rule": "",
            **_as_declared(spec),
            "at": str(spec.get("at", "")),
            "where": spec.get("where") or {},
            "reads": tuple(reads),
        }
    )


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

    def checks(
        self,
        summary: Mapping[str, Any] | None = None,
        *,
        tables: Mapping[str, pd.DataFrame] | None = None,
        premises: Premises | None = None,
        **fields: Any,
    ) -> dict[str, dict[str, list[Checked]]]:
        """Each claim's earlier checks, decided in declared order on the stage's ``summary``
        or ``tables`` (``fields``: what the summary's paths name; ``premises``: what the
        table checks' ``given`` name), each with its words: ``{claim: {version: [(Verdict,
        words)]}}``."""

        def decided(c: Check) -> list[Checked]:
            if c.table is not None:
                return decide_table(c, self.rules, tables or {}, premises or {})
            if summary is None:
                raise ValueError(f"{c.rule}: a check on the summary, and no summary given")
            return [(decide_check(c, self.rules[c.rule], summary, fields), c.label or c.rule)]

        return {
            claim: {
                version: [one for c in checks for one in decided(c)]
                for version, checks in by_version.items()
            }
            for claim, by_version in self.versions.items()
        }

    def verdicts(
        self, summary: Mapping[str, Any] | None = None, **kw: Any
    ) -> dict[str, dict[str, Verdict]]:
        """Each claim's earlier verdicts (:meth:`checks`' combined), ``{claim: {version:
        Verdict}}``."""
        return {
            claim: {version: version_verdict(checked) for version, checked in by_version.items()}
            for claim, by_version in self.checks(summary, **kw).items()
        }

    def statuses(
        self, summary: Mapping[str, Any] | None = None, **kw: Any
    ) -> dict[str, dict[str, str]]:
        """:meth:`verdicts`' statuses alone."""
        return {
            claim: {version: v.status for version, v in by_version.items()}
            for claim, by_version in self.verdicts(summary, **kw).items()
        }
