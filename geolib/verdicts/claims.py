"""The claims table: one evidence row per (claim, chapter), written by each chapter and
rendered on the book's introduction page.

Each notebook stage writes ``data/claims/<stage>.json`` with one :class:`Claim` row per claim
it tests (its status decided by a rule of :mod:`geolib.verdicts.rules`, applied in the chapter's
library module); a claim may have rows from several chapters (A1: the theory chapter and trained
models). The table holds one row per (claim, chapter, scale) and a combined status by
:func:`~geolib.verdicts.rules.combine_statuses`. Math checks of a derivation are rows with
``evidence="math check"``, never combined into an empirical status. A rule revised after its
first version keeps each earlier verdict (``rule_v1``, ``rule_v2``, ``rule_v3``) and the reason
on its row;
``decided`` says whether the rule saw the data it decided (``after seeing data``) or not
(``prospective``); a row decided prospectively on fresh seeds keeps the verdict of the seeds the
rule had seen beside it as ``exploratory`` (:func:`confirmed`, from a record written by
:func:`exploratory_record` before the fresh seeds were trained).

Usage: ``python -m geolib.verdicts.claims OUT.md [--trends TRENDS.json] FILE.json ...``
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from geolib.files import write_text_atomic
from geolib.measure import validate as check
from geolib.verdicts.markup import checked_name, plain
from geolib.verdicts.rules import (
    CLAIMS,
    DESCRIPTION,
    EMPIRICAL,
    EVIDENCE,
    MATH_CHECK,
    NOT_RUN,
    STATUSES,
    KeyNumber,
    combine_statuses,
)
from geolib.verdicts.trends import TrendRow, read_trends

#: whether a row's rule saw the data it decides: committed before the data were made
#: ("prospective") or not ("after seeing data"); empty for a row that predates the field
AFTER_DATA, PROSPECTIVE = "after seeing data", "prospective"
DECIDED = ("", AFTER_DATA, PROSPECTIVE)


def history(c: Claim) -> str:
    """The rule's versions on a row: ``"v1 reproduced → v2 partly → v3 inconclusive: why"``
    (empty for a rule never revised), then how the current rule was decided."""
    steps = [s for s in (c.rule_v1, c.rule_v2, c.rule_v3) if s]
    text = ""
    if steps:
        versions = [f"v{i + 1} {s}" for i, s in enumerate(steps)]
        text = " → ".join([*versions, f"v{len(steps) + 1} {c.status}"]) + f": {c.revision}"
    if c.decided:
        text = (
            f"{text} (decided {c.decided})".strip()
            if c.decided == AFTER_DATA
            else (
                f"{text} (prospective: the rule was committed before these data were made)".strip()
            )
        )
    if c.exploratory:
        text = f"{text}; exploratory, on the seeds the rule had seen: {c.exploratory}".strip("; ")
    if c.post_hoc:
        text = f"{text} (after seeing data: {c.post_hoc})".strip()
    return text


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
    version keeps each earlier version's verdict (``rule_v1``, ``rule_v2``, ``rule_v3``) with
    ``revision`` saying why the current one differs; ``decided`` says whether the current rule
    saw the data it decides (:data:`AFTER_DATA`) or was committed before them
    (:data:`PROSPECTIVE`), and ``exploratory`` gives a prospective row's verdict on the seeds
    the rule had seen (:func:`confirmed`); ``post_hoc`` lists other decisions made after seeing
    data. ``scale`` says what the evidence was measured on (:func:`scale_text`: models,
    parameters, tokens, seeds; or a released model): every empirical row the table shows must
    state it. A chapter may give a claim several rows of different scales (our models, a
    released model).
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
    rule_v2: str = ""
    decided: str = ""
    rule_v3: str = ""
    exploratory: str = ""
    numbers: tuple[KeyNumber, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "numbers", key_numbers(self.claim_id, self.numbers))
        for f in fields(self):
            if f.name == "numbers":
                continue
            value = getattr(self, f.name)
            if not isinstance(value, str):
                raise ValueError(
                    f"claim field {f.name!r} must be a string, got {type(value).__name__} {value!r}"
                )
        if self.claim_id not in CLAIMS:
            raise ValueError(f"unknown claim {self.claim_id!r}; known: {', '.join(CLAIMS)}")
        checked_name(f"claim {self.claim_id}: chapter", self.chapter)
        checked_name(f"claim {self.claim_id}: anchor", self.anchor)
        check.one_of("status", self.status, STATUSES)
        if self.status != NOT_RUN and not self.chapter:
            raise ValueError(f"claim {self.claim_id}: an evidence row needs its chapter")
        check.one_of("evidence", self.evidence, EVIDENCE)
        if self.rule_v1 and self.rule_v1 not in STATUSES:
            raise ValueError(f"rule_v1 must be a status {STATUSES}, got {self.rule_v1!r}")
        if self.rule_v2 and self.rule_v2 not in STATUSES:
            raise ValueError(f"rule_v2 must be a status {STATUSES}, got {self.rule_v2!r}")
        if self.rule_v3 and self.rule_v3 not in STATUSES:
            raise ValueError(f"rule_v3 must be a status {STATUSES}, got {self.rule_v3!r}")
        if self.rule_v2 and not self.rule_v1:
            raise ValueError(f"claim {self.claim_id}: a v2 verdict needs the v1 verdict before it")
        if self.rule_v3 and not self.rule_v2:
            raise ValueError(f"claim {self.claim_id}: a v3 verdict needs the v2 verdict before it")
        check.one_of("decided", self.decided, DECIDED)
        if self.exploratory and self.decided != PROSPECTIVE:
            raise ValueError(
                f"claim {self.claim_id}: an exploratory verdict stands beside a prospective one "
                f"only, not one decided {self.decided or 'without saying how'!r}"
            )
        if bool(self.rule_v1) != bool(self.revision.strip()):
            raise ValueError(
                f"claim {self.claim_id}: a revised rule needs both the first rule's verdict "
                "(rule_v1) and the reason for the revision (revision)"
            )
        if self.evidence == MATH_CHECK and (self.seeds_agreeing or self.robust):
            raise ValueError(f"claim {self.claim_id}: a math check has no seeds or robustness")


def key_numbers(claim_id: str, numbers: Any) -> tuple[KeyNumber, ...]:
    """A row's ``numbers`` as :class:`KeyNumber` objects (from a claims file: mappings)."""
    if not isinstance(numbers, list | tuple):
        raise ValueError(f"claim {claim_id}: numbers must be a list, got {numbers!r}")
    out = []
    for n in numbers:
        if isinstance(n, Mapping):
            try:
                n = KeyNumber(**n)
            except TypeError as err:
                raise ValueError(f"claim {claim_id}: bad key number {n!r}: {err}") from None
        if not isinstance(n, KeyNumber):
            raise ValueError(f"claim {claim_id}: a key number must be a KeyNumber, got {n!r}")
        out.append(n)
    return tuple(out)


def row_json(c: Claim) -> dict[str, Any]:
    """A row as its file holds it: every field, ``numbers`` only where the rule decided on an
    interval (so rows without one read as they did before the field existed)."""
    row = asdict(c)
    if not c.numbers:
        del row["numbers"]
    return row


def write_claims(path: str | Path, claims: list[Claim]) -> Path:
    """Write a stage's claim rows as JSON (sorted keys, stable bytes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [row_json(c) for c in sorted(claims, key=lambda c: c.claim_id)]
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


#: the fields of a row that an exploratory record keeps
RECORDED = ("claim_id", "chapter", "status", "key_number", "unit", "seeds_agreeing", "decided")


def exploratory_record(
    table: Mapping[str, list[Claim]],
    claim_ids: Sequence[str],
    chapters: Sequence[str],
    *,
    seeds: Sequence[int],
    source: str,
) -> dict[str, Any]:
    """The verdicts that rows of ``claim_ids`` in ``chapters`` reached on the seeds their rule
    had seen (empirical rows decided after seeing data; one per claim and chapter), kept before
    fresh seeds replace those models. ``source`` says where the rows were read (a commit)."""
    rows = [
        {f: getattr(c, f) for f in RECORDED}
        for cid in claim_ids
        for c in table.get(cid, [])
        if c.chapter in chapters and c.evidence == EMPIRICAL and c.decided == AFTER_DATA
    ]
    keys = [(r["claim_id"], r["chapter"]) for r in rows]
    if len(set(keys)) != len(keys):
        raise ValueError(f"more than one empirical row per claim and chapter: {keys}")
    if not rows:
        raise ValueError(f"no empirical row decided after seeing data for {list(claim_ids)}")
    return {
        "seeds": [int(s) for s in seeds],
        "source": source,
        "rows": rows,
    }


def confirmed(
    claim: Claim, seeds: Iterable[int], confirmatory: Iterable[int], record: Mapping[str, Any]
) -> Claim:
    """``claim`` as decided on models of ``seeds``: where every seed is a confirmatory one (none
    of them seen by the rule), the row reads :data:`PROSPECTIVE` with the record's verdict of
    the same claim and chapter beside it as ``exploratory``; otherwise it is returned as it is.
    A confirmatory row with no recorded exploratory verdict is an error."""
    seeds, fresh = {int(s) for s in seeds}, {int(s) for s in confirmatory}
    if not seeds or not seeds <= fresh:
        return claim
    seen = set(record.get("seeds", []))
    if seen & fresh:
        raise ValueError(f"the confirmatory seeds {sorted(fresh)} include seen ones {sorted(seen)}")
    match = [
        r
        for r in record.get("rows", [])
        if r["claim_id"] == claim.claim_id and r["chapter"] == claim.chapter
    ]
    if len(match) != 1:
        raise ValueError(
            f"claim {claim.claim_id} ({claim.chapter}): {len(match)} exploratory rows recorded, "
            "one needed beside a confirmatory verdict"
        )
    r = match[0]
    agree = f"; seeds agreeing {r['seeds_agreeing']}" if r["seeds_agreeing"] else ""
    words = (
        f"{r['status']} on seeds {', '.join(map(str, sorted(seen)))}, which seeds "
        f"{', '.join(map(str, sorted(seeds)))} replace here ({r['key_number']}; {r['unit']}"
        f"{agree}; decided after seeing data; {record['source']})"
    )
    return replace(claim, decided=PROSPECTIVE, exploratory=words)


@dataclass(frozen=True)
class Confirmation:
    """The confirmatory seeds (``verdicts.confirmatory_seeds``) and the path of the record of
    the verdicts on the seeds the rules had seen (``verdicts.exploratory_record``, a JSON file
    written by :func:`exploratory_record`, read when a row is confirmatory). Empty (no seeds):
    every row stays as decided."""

    seeds: frozenset[int] = frozenset()
    record: str = ""

    @classmethod
    def from_params(cls, verdicts: Mapping[str, Any] | None) -> Confirmation:
        """From the ``verdicts`` section; neither key: none. One without the other is an error."""
        verdicts = verdicts or {}
        seeds, path = verdicts.get("confirmatory_seeds"), verdicts.get("exploratory_record")
        if seeds is None and path is None:
            return cls()
        if seeds is None or not path:
            raise ValueError(
                "verdicts.confirmatory_seeds and verdicts.exploratory_record go together"
            )
        if not isinstance(seeds, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in seeds
        ):
            raise ValueError(f"verdicts.confirmatory_seeds must be seeds (integers), got {seeds!r}")
        return cls(frozenset(seeds), str(path))

    def apply(self, claim: Claim, runs: Mapping[str, Mapping[str, Any]]) -> Claim:
        """:func:`confirmed` on the seeds of ``runs`` (an analysis summary's); runs with no
        seed (released checkpoints) are never confirmatory. The record is read only here, for
        a row whose seeds are all confirmatory; one that cannot be read is an error."""
        seeds = [v.get("seed") for v in runs.values()]
        if not self.seeds or not seeds or any(x is None or x not in self.seeds for x in seeds):
            return claim
        try:
            record = json.loads(Path(self.record).read_text())
        except (OSError, ValueError) as err:
            raise ValueError(f"exploratory record {self.record}: cannot be read: {err}") from None
        if not isinstance(record, dict) or not {"seeds", "source", "rows"} <= set(record):
            raise ValueError(f"{self.record}: not an exploratory record (seeds, source, rows)")
        return confirmed(claim, seeds, self.seeds, record)


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
    (a number, or the fewest and most), and tokens per parameter (all parameters: the paper's
    training length is stated in it), e.g.
    ``"9 models (3 seeds each), 1.8M parameters, 2.1M tokens each, 1.17 tokens per parameter"``.
    """
    if not len(params) or len(params) != len(tokens):
        raise ValueError(f"one parameter count and token count per model: {params}, {tokens}")
    lo, hi = (seeds, seeds) if isinstance(seeds, int) else seeds
    if not 1 <= lo <= hi:
        raise ValueError(f"seeds must be at least 1 (fewest <= most), got {seeds}")
    n = len(params)
    if min(params) <= 0:
        raise ValueError(f"parameter counts must be positive, got {params}")
    per = f"{lo}" if lo == hi else f"{lo}–{hi}"
    ratio = [t / p for t, p in zip(tokens, params, strict=True)]
    few, many = f"{min(ratio):.3g}", f"{max(ratio):.3g}"
    return (
        f"{n} model{'s' if n > 1 else ''} ({per} seed{'s' if hi > 1 else ''} each), "
        f"{_span(params)} parameters, {_span(tokens)} tokens each, "
        f"{few if few == many else f'{few}–{many}'} tokens per parameter"
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
            if c.evidence != MATH_CHECK and c.status != NOT_RUN and not c.scale.strip():
                raise ValueError(
                    f"claim {cid} from chapter {c.chapter!r}: an empirical row must state its "
                    "scale (Claim.scale, geolib.verdicts.claims.scale_text)"
                )
            words = c.chapter.replace("_", " ")  # a name that wraps in a narrow column
            link = f"{{ref}}`{words} <{c.anchor}>`" if c.anchor else words
            status = {
                EMPIRICAL: c.status,
                MATH_CHECK: f"math check: {c.status}",
                DESCRIPTION: f"description, not a verdict ({c.status} on what it can speak to)",
            }[c.evidence]
            scale = cell(c.scale) if c.evidence != MATH_CHECK else "— (a derivation)"
            lines.append(
                f"{head if i == 0 else '| |'} {link}: {status} | {cell(c.key_number)} | {scale} |"
            )
            rule_history = history(c)
            parts = [
                f"{name} {plain(value)}"
                for name, value in (
                    ("unit:", c.unit),
                    ("seeds agreeing:", c.seeds_agreeing),
                    ("robust:", c.robust),
                    ("rule history:", rule_history),
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
