"""Fail when the committed ``dvc.lock`` does not describe the committed code and parameters.

    python scripts/check_lock.py          # CI, on a clean clone, before the pipeline runs

``dvc.lock`` records, per stage, the hashes of its deps and the parameter values it ran with.
If code or ``params.yaml`` changed after the lock was written, the lock claims results that the
committed code did not produce (and ``dvc status`` on a fresh clone calls the stage stale).
This asks ``dvc status`` and reports every stage whose *source* deps (files no stage produces),
parameters or command differ from the lock. Pipeline outputs are not checked here: a fresh
clone has none, and a stale output is the consequence of a stale source upstream.

It also fails on entries of stages that ``dvc.yaml`` no longer has (DVC never removes them: a
renamed or merged stage leaves its old entry behind, which ``dvc status`` does not see but
whatever reads the lock would). ``--prune`` removes them from the file, leaving every other
byte as DVC wrote it.

    python scripts/check_lock.py --prune
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from geolib.report.compute import pipeline_stages

ROOT = Path(__file__).resolve().parents[1]


def produced_paths(stages: Mapping[str, Any]) -> list[str]:
    """Every out of every stage in ``dvc.yaml`` (a ``foreach`` stage's as templated in ``do``)."""
    outs = []
    for stage in stages.values():
        body = stage.get("do", stage) if "foreach" in stage else stage
        outs += [o if isinstance(o, str) else next(iter(o)) for o in body.get("outs", [])]
    return outs


def stale_entries(status: Mapping[str, Any], produced: list[str]) -> list[str]:
    """Messages for the ``dvc status --json`` entries that mean a stale lock."""

    def is_produced(path: str) -> bool:
        """An out, inside one, or a folder holding outs (e.g. ``runs/sweep``).

        A ``foreach`` out's ``${item}`` segment stands for any name (``runs/sweep/${item}``
        produces ``runs/sweep/S-b8-...``)."""
        parts = PurePosixPath(path).parts
        for out in produced:
            pattern = [re.sub(r"\$\{[^}]*\}", "*", seg) for seg in PurePosixPath(out).parts]
            n = min(len(parts), len(pattern))
            if all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts[:n], pattern[:n], strict=True)):
                return True
        return False

    problems = []
    for stage, entries in status.items():
        for entry in entries:
            if isinstance(entry, str):  # e.g. "changed command", "always changed"
                problems.append(f"{stage}: {entry}")
                continue
            for kind, changes in entry.items():
                if kind == "changed outs":
                    continue
                for path, what in changes.items():
                    if kind == "changed deps" and is_produced(path):
                        continue
                    detail = what if isinstance(what, str) else json.dumps(what)
                    problems.append(f"{stage}: {kind}: {path} {detail}")
    return problems


def lock_stage_blocks(text: str) -> dict[str, tuple[int, int]]:
    """``{stage: (first line, end line)}`` of each entry under ``stages:`` in a ``dvc.lock``
    text as DVC writes it (each stage a key indented by two spaces)."""
    lines = text.splitlines(keepends=True)
    try:
        start = lines.index("stages:\n") + 1
    except ValueError:
        raise ValueError("not a dvc.lock as DVC writes it: no 'stages:' line") from None
    heads = [
        (i, line[2:].rstrip().removesuffix(":"))
        for i, line in enumerate(lines)
        if i >= start and re.match(r"^  [^ #]", line)
    ]
    ends = [i for i, _ in heads[1:]] + [len(lines)]
    return {name: (i, end) for (i, name), end in zip(heads, ends, strict=True)}


def without_stages(text: str, names: set[str]) -> str:
    """The lock ``text`` with the entries of ``names`` removed, every other line unchanged."""
    blocks = lock_stage_blocks(text)
    drop = {i for n in names for i in range(*blocks[n])}
    return "".join(line for i, line in enumerate(text.splitlines(keepends=True)) if i not in drop)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--prune"]):
        raise SystemExit("usage: python scripts/check_lock.py [--prune]")
    pipeline = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    stages = pipeline["stages"]
    dvc = Path(sys.executable).parent / "dvc"
    lock = ROOT / "dvc.lock"
    # foreach expanded as `dvc stage list` does (a test checks they agree), without starting DVC
    current = pipeline_stages(pipeline, yaml.safe_load((ROOT / "params.yaml").read_text()))
    leftover = set(lock_stage_blocks(lock.read_text())) - current
    if leftover and argv == ["--prune"]:
        lock.write_text(without_stages(lock.read_text(), leftover))
        print(f"dvc.lock: removed the entries of {len(leftover)} stages dvc.yaml no longer has")
        leftover = set()
    out = subprocess.run(
        [str(dvc), "status", "--json"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    problems = stale_entries(json.loads(out or "{}"), produced_paths(stages))
    if leftover:
        problems.append(
            f"entries of {len(leftover)} stages that dvc.yaml no longer has (remove them with "
            f"`python scripts/check_lock.py --prune`): {sorted(leftover)[:5]}"
        )
    if problems:
        print("dvc.lock is stale (run `dvc repro` and commit dvc.lock):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print(f"dvc.lock matches the committed code and parameters of {len(stages)} stages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
