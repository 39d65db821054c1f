"""Check the files each stage opened against its declared deps and outs (``--audit`` runs).

    python scripts/check_io.py AUDIT_DIR [--dvc-yaml dvc.yaml]

Reads the ``*.jsonl`` logs written by ``scripts/audit/sitecustomize.py`` (one record per file a
stage's Python process opened) and fails, naming stage and file, when a stage

* read a file that is neither under one of its deps, one of its outs, nor its parameters file;
* wrote a file that is not under one of its outs.

Python sources are left to the import-closure test (``tests/test_pipeline.py``), which also
sees imports that byte-compiled caches hide from the audit.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

import yaml

from geolib.files import atomic_target

#: Reads a stage may make without declaring them, each with its reason.
EXEMPT_READS: dict[str, tuple[str, ...]] = {
    # The book renders the executed chapters; depending on them would rerun it on every run
    # (their bytes change with timing). It depends on the notebooks and every chapter's data.
    "book": ("book/chapters",),
}
#: Reads any stage may make: a chapter's provenance record (geolib.report.outputs) reads its own
#: stage's deps and params list from dvc.yaml to hash its inputs; nothing it computes depends
#: on the file, and depending on it would rerun every chapter on any pipeline edit.
EXEMPT_EVERYWHERE = ("dvc.yaml",)
#: Stages that read dvc.lock itself (which no stage can depend on): the book build checks that
#: what it renders is what the lock recorded each stage writing (scripts/build_book.py).
LOCK_READERS = ("book",)
#: The run log of scripts/lanes.py and the stages that read it: the book build shows the compute
#: behind each chapter (geolib.report.compute). Every run appends to the log, the reader's own
#: included, so no stage can depend on it; no result is computed from it.
RUN_LOG = "logs/lanes.csv"
RUN_LOG_READERS = ("book",)


def _path(entry: Any) -> str:
    return entry if isinstance(entry, str) else next(iter(entry))


def _under(path: str, roots: Iterable[str]) -> bool:
    p = PurePosixPath(path)
    return any(p == PurePosixPath(r) or PurePosixPath(r) in p.parents for r in roots)


def _stage(stages: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """A stage by name; ``base@item`` is a ``foreach`` stage's template with ``${item}`` (over a
    list) or ``${key}`` (over a mapping) filled."""
    if name in stages:
        return stages[name]
    base, _, item = name.partition("@")
    template = stages.get(base)
    if not item or template is None or "foreach" not in template:
        return None
    filled = json.dumps(template["do"]).replace("${item}", item).replace("${key}", item)
    return json.loads(filled)


def undeclared_io(records: Iterable[Mapping[str, Any]], stages: Mapping[str, Any]) -> list[str]:
    """One message per (stage, file, read/write) that the stage's deps and outs do not cover.

    ``records``: ``{"stage", "path", "write"}`` with repo-relative POSIX paths; ``stages``: the
    ``stages`` mapping of ``dvc.yaml``. Records of stages not in ``stages`` are reported too.
    """
    problems: set[str] = set()
    for rec in records:
        name, path, write = rec["stage"], rec["path"], bool(rec["write"])
        if path.endswith(".py"):
            continue
        stage = _stage(stages, name)
        if stage is None:
            problems.add(f"{name}: not a stage of dvc.yaml (opened {path})")
            continue
        outs = [_path(o) for o in stage.get("outs", [])]
        target = atomic_target(path)  # the temporary of an atomic write (geolib.files)
        if target is not None and _under(target.as_posix(), outs):
            continue
        if write:
            if not _under(path, outs):
                problems.add(f"stage {name!r} writes {path}, which is not under its outs")
            continue
        params = [_path(p) for p in stage.get("params", []) if isinstance(p, dict)]
        allowed = [_path(d) for d in stage.get("deps", [])] + outs + ["params.yaml", *params]
        exempt = EXEMPT_READS.get(name.split("@")[0], ()) + EXEMPT_EVERYWHERE
        exempt += ("dvc.lock",) if name in LOCK_READERS else ()
        exempt += (RUN_LOG,) if name in RUN_LOG_READERS else ()
        if not _under(path, allowed + list(exempt)):
            problems.add(f"stage {name!r} reads {path}, which is not among its deps")
    return sorted(problems)


def read_records(audit_dir: str) -> list[dict[str, Any]]:
    from pathlib import Path

    files = sorted(Path(audit_dir).glob("*.jsonl"))
    if not files:
        raise SystemExit(f"no audit logs in {audit_dir}: was the pipeline run with --audit?")
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("audit_dir")
    parser.add_argument("--dvc-yaml", default="dvc.yaml")
    args = parser.parse_args(argv)
    with open(args.dvc_yaml) as f:
        stages = yaml.safe_load(f)["stages"]
    records = read_records(args.audit_dir)
    problems = undeclared_io(records, stages)
    seen = sorted({r["stage"] for r in records})
    print(f"audit: {len(records)} file opens by {len(seen)} stages checked against {args.dvc_yaml}")
    for p in problems:
        print(f"  {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
