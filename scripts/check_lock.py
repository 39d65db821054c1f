"""Fail when the committed ``dvc.lock`` does not describe the committed code and parameters.

    python scripts/check_lock.py          # CI, on a clean clone, before the pipeline runs

``dvc.lock`` records, per stage, the hashes of its deps and the parameter values it ran with.
If code or ``params.yaml`` changed after the lock was written, the lock claims results that the
committed code did not produce (and ``dvc status`` on a fresh clone calls the stage stale).
This asks ``dvc status`` and reports every stage whose *source* deps (files no stage produces),
parameters or command differ from the lock. Pipeline outputs are not checked here: a fresh
clone has none, and a stale output is the consequence of a stale source upstream.
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


def main() -> int:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    dvc = Path(sys.executable).parent / "dvc"
    out = subprocess.run(
        [str(dvc), "status", "--json"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    problems = stale_entries(json.loads(out or "{}"), produced_paths(stages))
    if problems:
        print("dvc.lock is stale (run `dvc repro` and commit dvc.lock):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print(f"dvc.lock matches the committed code and parameters of {len(stages)} stages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
