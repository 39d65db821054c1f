"""Where a chapter writes: its pipeline folders, or an exploration folder under overrides.

The default results (``figures/<stage>/``, ``data/results/<stage>/``, ``data/claims/<stage>.json``)
are DVC outs and change only through ``dvc repro``. A chapter rerun with parameter overrides
(``papermill … -y "overrides: {…}"`` or ``scripts/run_notebook.py NAME -y …``), or with a
parameters file other than the repository's ``params.yaml`` (``--params other.yaml``), writes
instead to ``explore/<stage>-<hash of the overrides and that file>/`` with the same layout
inside, plus the overrides (and the file) in ``overrides.json``, so an exploration never passes
for a result. Overrides must name keys of the stage's parameters and keep their kinds
(:func:`check_overrides`): a check that cannot run must not report an outcome.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geolib.files import write_text_atomic

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


#: The pipeline's parameters file; any other file makes a run an exploration.
DEFAULT_PARAMS = Path("params.yaml")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def check_overrides(
    defaults: Mapping[str, Any], overrides: Mapping[str, Any], where: str = ""
) -> None:
    """Refuse an override that names a key ``defaults`` lacks (``KeyError``) or whose value is
    of another kind than the default's (``ValueError``): true/false for true/false, an integer
    for an integer, a number (or an integer) for a number, a string for a string, a list for a
    list, and for a mapping a mapping of its keys, checked the same way. A default of null
    takes anything. The error names the key, the default and the value given."""
    for key, value in overrides.items():
        name = f"{where}{key}"
        if key not in defaults:
            raise KeyError(f"unknown parameter {name!r}; known: {sorted(defaults)}")
        default = defaults[key]
        if default is None:
            continue
        want, got = _kind(default), _kind(value)
        if want == "a mapping" and got == want:
            check_overrides(default, value, f"{name}.")
        elif got != want and not (want == "a number" and got == "an integer"):
            raise ValueError(
                f"override {name}: the parameters give {want} ({default!r}), the override "
                f"{got} ({value!r})"
            )


#: Chapters that read another chapter's section of the parameters (their overrides are checked
#: against it): the three sweep chapters share the rules of ``geometry_performance``.
SHARED_SECTION = {
    "training_knobs": "geometry_performance",
    "forgetting_quantization": "geometry_performance",
}


def section_of(chapter: str) -> str:
    """The section of the parameters file that ``chapter`` reads: its own, by name, unless
    :data:`SHARED_SECTION` names another."""
    return SHARED_SECTION.get(chapter, chapter)


def is_default_params(params_path: str | Path) -> bool:
    """Whether ``params_path`` is the repository's ``params.yaml`` (paths from the root)."""
    return Path(params_path).resolve() == DEFAULT_PARAMS.resolve()


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
    """Output locations of ``stage``; under overrides or with a parameters file other than
    ``params.yaml`` (``params_path``), a fresh exploration folder.

    With ``create`` the folders are made and an exploration's ``overrides.json`` is written;
    with ``params_path`` too, the chapter run's provenance record is written into the figures
    folder (``geolib.report.provenance``), without which no figure can be saved there.
    """
    if not stage or "/" in stage or stage.startswith("."):
        raise ValueError(f"not a stage name: {stage!r}")
    recorded = dict(overrides or {})
    if params_path is not None and not is_default_params(params_path):
        digest = hashlib.sha256(Path(params_path).read_bytes()).hexdigest()
        recorded["parameters file"] = f"{params_path} (sha256 {digest})"
    if recorded:
        root = EXPLORE / f"{stage}-{overrides_tag(recorded)}"
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
            text = json.dumps(recorded, sort_keys=True, indent=2, default=str)
            write_text_atomic(out.root / "overrides.json", text + "\n")
        if params_path is not None:
            from geolib.report.provenance import stage_record, write_stage_record

            write_stage_record(out.figures, stage_record(stage, params_path, overrides))
    return out
