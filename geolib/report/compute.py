"""What the book cost to compute: wall and CPU seconds of the pipeline stages behind each chapter
and behind the whole build, from the run log that ``scripts/lanes.py`` (how ``make all`` runs
the pipeline) appends one row to per stage run (``logs/lanes.csv``).

The log is a record of the runs, not an input of any result: the book build reads it (as it reads
``dvc.lock``) without depending on it, since every run appends to it. Each stage counts with its
latest run that computed something: failed runs, and runs where DVC skipped the stage's command
(unchanged, or restored from its run cache), are left out. Which stages a chapter needs comes
from ``dvc.lock``: a stage is upstream of another when one of its outputs is (under, or holds)
one of the other's dependencies.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

#: the columns a run log must have (``ran`` is optional: logs from before it was added)
REQUIRED = ("started_utc", "stage", "exit", "wall_s", "cpu_s", "peak_rss_gib", "lanes")
#: where a chapter stage writes its executed notebook: ``book/chapters/<chapter>.ipynb``
CHAPTER_DIR = PurePosixPath("book/chapters")


@dataclass(frozen=True)
class StageRun:
    """One recorded run of one stage: seconds of wall time, CPU seconds of its whole process
    tree (user + system), the largest process's peak memory in GiB, how many stages ran at once."""

    stage: str
    started_utc: str
    wall_s: float
    cpu_s: float
    peak_rss_gib: float
    lanes: int


@dataclass(frozen=True)
class Compute:
    """The sum over ``stages`` of their latest runs; ``missing``: those with no recorded run."""

    stages: tuple[str, ...]
    missing: tuple[str, ...]
    wall_s: float
    cpu_s: float
    peak_rss_gib: float
    first_utc: str
    last_utc: str
    lanes: tuple[int, ...]

    @property
    def recorded(self) -> int:
        return len(self.stages) - len(self.missing)


def read_run_log(path: Path) -> list[dict[str, str]]:
    """The rows of a run log, as strings; ``[]`` when there is no log. A log without the
    :data:`REQUIRED` columns is refused, naming them."""
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        lacking = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if lacking:
            raise ValueError(f"{path}: not a run log of scripts/lanes.py (no columns {lacking})")
        return list(reader)


def latest_runs(rows: Iterable[Mapping[str, str]]) -> dict[str, StageRun]:
    """Each stage's latest run (by start time; the later row on a tie) that ended with exit 0
    and ran the stage's command (``ran`` is 1, or empty in a log from before the column)."""
    latest: dict[str, StageRun] = {}
    for i, row in enumerate(rows, start=2):  # line numbers of the CSV, header on line 1
        if row["exit"] != "0" or row.get("ran", "") not in ("1", ""):
            continue
        try:
            run = StageRun(
                stage=row["stage"],
                started_utc=row["started_utc"],
                wall_s=float(row["wall_s"]),
                cpu_s=float(row["cpu_s"]),
                peak_rss_gib=float(row["peak_rss_gib"]),
                lanes=int(row["lanes"]),
            )
        except (TypeError, ValueError) as e:
            raise ValueError(f"run log line {i}: {dict(row)}: {e}") from None
        if min(run.wall_s, run.cpu_s, run.peak_rss_gib) < 0 or run.lanes < 1:
            raise ValueError(f"run log line {i}: negative time or memory, or lanes < 1: {row}")
        old = latest.get(run.stage)
        if old is None or run.started_utc >= old.started_utc:  # ISO-8601 UTC sorts as text
            latest[run.stage] = run
    return latest


def _paths(entries: Iterable[Any]) -> list[PurePosixPath]:
    return [PurePosixPath(e["path"] if isinstance(e, Mapping) else e) for e in entries or ()]


def _overlaps(a: PurePosixPath, b: PurePosixPath) -> bool:
    return a == b or a in b.parents or b in a.parents


def upstream_stages(lock: Mapping[str, Any]) -> dict[str, set[str]]:
    """For each stage of a parsed ``dvc.lock``, the stages whose outputs it depends on (only
    the lock's entries count: see :func:`pipeline_lock` for a lock with leftovers)."""
    stages = lock.get("stages")
    if not isinstance(stages, Mapping):
        raise ValueError("not a dvc.lock: no 'stages' mapping")
    outs = {name: _paths(s.get("outs")) for name, s in stages.items()}
    upstream: dict[str, set[str]] = {}
    for name, stage in stages.items():
        deps = _paths(stage.get("deps"))
        upstream[name] = {
            other
            for other, produced in outs.items()
            if other != name and any(_overlaps(d, o) for d in deps for o in produced)
        }
    return upstream


def pipeline_lock(lock: Mapping[str, Any], stages: set[str]) -> dict[str, Any]:
    """The parsed ``lock`` with only the entries of ``stages`` (:func:`pipeline_stages`)."""
    if not isinstance(lock.get("stages"), Mapping):
        raise ValueError("not a dvc.lock: no 'stages' mapping")
    return {**lock, "stages": {k: v for k, v in lock["stages"].items() if k in stages}}


def closure(upstream: Mapping[str, set[str]], stage: str) -> set[str]:
    """``stage`` and every stage it needs, directly or through others."""
    seen, todo = set(), [stage]
    while todo:
        s = todo.pop()
        if s not in seen:
            seen.add(s)
            todo += upstream.get(s, ())
    return seen


def pipeline_stages(dvc_yaml: Mapping[str, Any], params: Mapping[str, Any]) -> set[str]:
    """The stage names of a parsed ``dvc.yaml``, a ``foreach`` stage as ``name@item`` for each
    item of its list (or key of its mapping), given inline or as ``${dotted.key}`` of
    ``params`` (what ``dvc stage list`` prints). ``dvc.lock`` is no list of them: it keeps the
    entries of stages a profile does not have, or that were removed."""
    names: set[str] = set()
    for name, stage in dvc_yaml.get("stages", {}).items():
        if "foreach" not in stage:
            names.add(name)
            continue
        items: Any = stage["foreach"]
        if isinstance(items, str):
            ref = items.removeprefix("${").removesuffix("}")
            if ref == items:
                raise ValueError(
                    f"stage {name!r}: foreach {items!r} is neither a list nor ${{key}}"
                )
            items = params
            for key in ref.split("."):
                if not isinstance(items, Mapping) or key not in items:
                    raise ValueError(f"stage {name!r}: foreach ${{{ref}}} is not in the params")
                items = items[key]
        names |= {f"{name}@{item}" for item in items}
    return names


def chapter_stages(lock: Mapping[str, Any]) -> dict[str, str]:
    """``{chapter: stage}``: the stage that writes ``book/chapters/<chapter>.ipynb``."""
    found: dict[str, str] = {}
    for name, stage in lock["stages"].items():
        for out in _paths(stage.get("outs")):
            if out.parent == CHAPTER_DIR and out.suffix == ".ipynb":
                found[out.stem] = name
    return found


def total(stages: Iterable[str], runs: Mapping[str, StageRun]) -> Compute:
    """The compute of ``stages`` (each counted once) from their latest ``runs``."""
    names = tuple(sorted(set(stages)))
    got = [runs[s] for s in names if s in runs]
    starts = sorted(r.started_utc for r in got)
    return Compute(
        stages=names,
        missing=tuple(s for s in names if s not in runs),
        wall_s=sum(r.wall_s for r in got),
        cpu_s=sum(r.cpu_s for r in got),
        peak_rss_gib=max((r.peak_rss_gib for r in got), default=0.0),
        first_utc=starts[0] if starts else "",
        last_utc=starts[-1] if starts else "",
        lanes=tuple(sorted({r.lanes for r in got})),
    )


@dataclass(frozen=True)
class ChapterCompute:
    """A chapter's stages (its own and everything upstream) and those no other chapter needs."""

    chapter: str
    stage: str
    needed: Compute
    alone: Compute


def chapters_compute(
    upstream: Mapping[str, set[str]],
    chapters: Mapping[str, str],
    runs: Mapping[str, StageRun],
    order: Sequence[str] | None = None,
) -> list[ChapterCompute]:
    """Every chapter's compute, in ``order`` (chapter names; default: sorted), from the graph
    (:func:`upstream_stages`) and the chapter stages (:func:`chapter_stages`) of one lock. A
    chapter named in ``order`` that no stage of the lock writes is an error."""
    order = list(order) if order is not None else sorted(chapters)
    unknown = [c for c in order if c not in chapters]
    if unknown:
        raise ValueError(f"no stage of dvc.lock writes the chapters {unknown}")
    needs = {c: closure(upstream, chapters[c]) for c in order}
    out = []
    for c in order:
        others = set().union(*(needs[o] for o in order if o != c))
        alone = needs[c] - others
        out.append(ChapterCompute(c, chapters[c], total(needs[c], runs), total(alone, runs)))
    return out


def duration(seconds: float) -> str:
    """Seconds in the unit a reader takes in at a glance: s below 90 s, min below 90 min, h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def _when(c: Compute) -> str:
    day = {c.first_utc[:10], c.last_utc[:10]}
    span = c.first_utc[:10] if len(day) == 1 else f"{c.first_utc[:10]} to {c.last_utc[:10]}"
    lanes = " or ".join(map(str, c.lanes))
    return f"recorded {span} (UTC), stages run {lanes} at a time"


def _missing(c: Compute) -> str:
    if not c.missing:
        return ""
    names = ", ".join(f"`{s}`" for s in c.missing[:4]) + (", …" if len(c.missing) > 4 else "")
    return (
        f" {len(c.missing)} of the {len(c.stages)} stages have no recorded run (run outside "
        f"`make all`, or before the log began): {names}; they are not counted."
    )


def _count(c: Compute) -> str:
    """How many stages were counted: ``"3"``, or ``"2 of 3"`` when one has no recorded run."""
    return str(c.recorded) if not c.missing else f"{c.recorded} of {len(c.stages)}"


def _seconds(c: Compute, field: str) -> str:
    """A duration of ``c`` for a table cell (kept on one line), or a dash when none of its
    stages has a recorded run."""
    return duration(getattr(c, field)).replace(" ", "\u00a0") if c.recorded else "—"


def _stages(n: int) -> str:
    return f"{n} stage" if n == 1 else f"{n} stages"


def chapter_markdown(cc: ChapterCompute, runs: Mapping[str, StageRun], longest: int = 3) -> str:
    """The "Compute" section at the end of a chapter's page (MyST markdown)."""
    n, a = cc.needed, cc.alone
    head = "## Compute\n\n"
    if n.recorded == 0:
        return head + (
            "No run of this chapter's stages is recorded in `logs/lanes.csv` (the pipeline was "
            "run outside `make all`), so its compute is not shown."
        )
    top = sorted((runs[s] for s in n.stages if s in runs), key=lambda r: -r.wall_s)[:longest]
    tops = ", ".join(f"`{r.stage}` {duration(r.wall_s)}" for r in top)
    shared = len(n.stages) - len(a.stages)
    sharing = (
        "none is shared with another chapter"
        if shared == 0
        else f"{len(a.stages)} {'serves' if len(a.stages) == 1 else 'serve'} this chapter alone "
        f"({duration(a.wall_s)} wall, {duration(a.cpu_s)} CPU) and {shared} "
        f"{'is' if shared == 1 else 'are'} shared with other chapters (counted in each)"
    )
    return head + (
        f"This chapter needs {_stages(len(n.stages))} of the pipeline (from the data to this "
        f"notebook). In their latest runs they took **{duration(n.wall_s)} of wall time and "
        f"{duration(n.cpu_s)} of CPU time**, at most {n.peak_rss_gib:.2f} GiB of memory in one "
        f"process ({_when(n)}); {sharing}. Longest: {tops}.{_missing(n)} Every chapter's "
        "compute and the whole build's: {ref}`on the introduction page <compute-section>`."
    )


def intro_markdown(
    chapters: Sequence[ChapterCompute], build: Compute, csv_href: str, titles: Mapping[str, str]
) -> str:
    """The introduction's "Compute" section: the whole build's total, then one row per chapter.
    ``build``: every stage but the book build itself; ``titles``: chapter -> page title."""
    if build.recorded == 0:
        return (
            "No run of the pipeline's stages is recorded in `logs/lanes.csv` (it was run outside "
            "`make all`), so the compute behind this book is not shown."
        )
    head = (
        f"The {_stages(build.recorded)} behind this book took **{duration(build.cpu_s)} of "
        f"CPU time**, and {duration(build.wall_s)} of wall time summed over stages "
        f"({_when(build)}; at most {build.peak_rss_gib:.2f} GiB of memory in one process). "
        "Each stage counts with its latest run that computed something; the book build itself "
        f"is not included.{_missing(build)} A chapter's stages include those it shares with "
        "other chapters (the models it reads), so the rows add up to more than the total; "
        "*alone* counts the stages no other chapter needs. "
        f'Every stage\'s run: <a href="{csv_href}" download>compute.csv</a>.\n\n'
    )
    rows = [
        "| chapter | stages | wall time | CPU time | alone: stages | wall | CPU |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for cc in chapters:
        n, a = cc.needed, cc.alone
        rows.append(
            f"| [{titles.get(cc.chapter, cc.chapter)}](chapters/{cc.chapter}.ipynb) "
            f"| {_count(n)} | {_seconds(n, 'wall_s')} | {_seconds(n, 'cpu_s')} "
            f"| {_count(a)} | {_seconds(a, 'wall_s')} | {_seconds(a, 'cpu_s')} |"
        )
    return head + "\n".join(rows) + "\n"


#: the columns of :func:`stage_rows` (the downloadable ``compute.csv``)
STAGE_COLUMNS = ("stage", "started_utc", "wall_s", "cpu_s", "peak_rss_gib", "lanes", "chapters")


def stage_rows(
    runs: Mapping[str, StageRun], upstream: Mapping[str, set[str]], chapters: Mapping[str, str]
) -> list[dict[str, Any]]:
    """One row per stage of the lock: its latest run (empty when none) and the chapters that
    need it, for the downloadable table."""
    needs = {c: closure(upstream, s) for c, s in chapters.items()}
    out = []
    for stage in sorted(upstream):
        r = runs.get(stage)
        out.append(
            {
                "stage": stage,
                "started_utc": r.started_utc if r else "",
                "wall_s": r.wall_s if r else "",
                "cpu_s": r.cpu_s if r else "",
                "peak_rss_gib": r.peak_rss_gib if r else "",
                "lanes": r.lanes if r else "",
                "chapters": " ".join(sorted(c for c, ss in needs.items() if stage in ss)),
            }
        )
    return out
