"""Where a chapter writes: its pipeline folders, or an exploration folder under overrides.

The default results (``figures/<stage>/``, ``data/results/<stage>/``, ``data/claims/<stage>.json``)
are DVC outs and change only through ``dvc repro``. A chapter rerun with parameter overrides
(``papermill … -y "overrides: {…}"`` or ``scripts/run_notebook.py NAME -y …``) writes instead
to ``explore/<stage>-<hash of the overrides>/`` with the same layout inside, plus the
overrides themselves in ``overrides.json``, so an exploration never passes for a result.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Exploration runs go here (git-ignored, not a DVC out).
EXPLORE = Path("explore")


@dataclass(frozen=True)
class StageOutputs:
    """The output locations of one notebook stage (paths relative to the repository root)."""

    stage: str
    root: Path  #: ``.`` for the pipeline, ``explore/<stage>-<hash>`` for an exploration
    figures: Path  #: folder of the stage's figures (PNG + SVG)
    results: Path  #: folder of the stage's tables
    claims: Path  #: the stage's claims file (JSON)

    @property
    def exploring(self) -> bool:
        return self.root != Path(".")


def overrides_tag(overrides: Mapping[str, Any]) -> str:
    """A short, order-independent name for a set of overrides (8 hex digits of sha256)."""
    text = json.dumps(dict(overrides), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def stage_outputs(
    stage: str,
    overrides: Mapping[str, Any] | None = None,
    *,
    create: bool = True,
    params_path: str | Path | None = None,
) -> StageOutputs:
    """Output locations of ``stage``; under overrides, a fresh exploration folder.

    With ``create`` the folders are made and an exploration's ``overrides.json`` is written;
    with ``params_path`` too, the chapter run's provenance record is written into the figures
    folder (``geolib.report.provenance``), without which no figure can be saved there.
    """
    if not stage or "/" in stage or stage.startswith("."):
        raise ValueError(f"not a stage name: {stage!r}")
    if overrides:
        root = EXPLORE / f"{stage}-{overrides_tag(overrides)}"
        out = StageOutputs(
            stage, root, root / "figures", root / "results", root / "claims" / f"{stage}.json"
        )
    else:
        out = StageOutputs(
            stage,
            Path("."),
            Path("figures") / stage,
            Path("data") / "results" / stage,
            Path("data") / "claims" / f"{stage}.json",
        )
    if create:
        for folder in (out.figures, out.results, out.claims.parent):
            folder.mkdir(parents=True, exist_ok=True)
        if out.exploring:
            text = json.dumps(dict(overrides or {}), sort_keys=True, indent=2, default=str)
            (out.root / "overrides.json").write_text(text + "\n")
        if params_path is not None:
            from geolib.report.provenance import stage_record, write_stage_record

            write_stage_record(out.figures, stage_record(stage, params_path, overrides))
    return out
