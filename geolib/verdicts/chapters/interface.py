"""The one interface of an empirical chapter module: what its notebook calls to decide its claims.

Every module of :data:`CHAPTERS` has

- ``CHAPTER``: its stage (and notebook) name;
- ``read_section(params_path, overrides=None) -> section``: its rules and constants from the
  parameters file (its own section with the notebook's overrides, and the top-level
  ``verdicts``), every field checked together (``scripts/run_notebook.py`` calls it before the
  notebook starts);
- ``read(params_path, overrides=None) -> (section, tables)``: that section and the analysis
  stages' tables it decides on;
- ``verdicts(tables, section) -> list[Claim]``: its rows of the claims table (the scale chapter:
  its cells of the table's "trend with size" column, :class:`~geolib.verdicts.trends.TrendRow`).

A notebook reads, plots and explains; its verdicts are these three lines::

    SECTION, TABLES = chapter.read(params_path, overrides)
    rows = chapter.verdicts(TABLES, SECTION)
    write_claims(OUT.claims, rows)

:func:`problems` says how a module falls short of the interface (a test runs it on each).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from geolib.config import stage_params
from geolib.verdicts.sections import section_of

#: a chapter's section type (each has ``from_params(section, verdicts)``)
S = TypeVar("S")

#: the chapter modules under :mod:`geolib.verdicts.chapters`, one per empirical chapter
CHAPTERS = (
    "frequency_collapse",
    "residual_isotropy",
    "gradient_energy",
    "saturation",
    "geometry_performance",
    "training_knobs",
    "forgetting_quantization",
    "scale",
)
#: each function of the interface and its parameters, in order
SIGNATURES = {
    "read_section": ("params_path", "overrides"),
    "read": ("params_path", "overrides"),
    "verdicts": ("tables", "section"),
}


def own_sections(
    params_path: str | Path, name: str, overrides: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Chapter ``name``'s section of the parameters file (the one it shares,
    :func:`~geolib.verdicts.sections.section_of`; ``common`` merged, ``overrides`` applied) and the
    top-level ``verdicts`` section (who learned, the confirmatory seeds)."""
    own = stage_params(params_path, section_of(name), overrides)
    return own, stage_params(params_path, "verdicts")


def own_section(
    params_path: str | Path,
    name: str,
    overrides: Mapping[str, Any] | None,
    section_type: type[S],
) -> S:
    """``read_section`` of a chapter whose section reads its own section and ``verdicts``:
    ``section_type.from_params`` on them (:func:`own_sections`)."""
    return section_type.from_params(*own_sections(params_path, name, overrides))


def read_with_losses(
    params_path: str | Path,
    name: str,
    overrides: Mapping[str, Any] | None,
    section_type: Any,
    load_tables: Any,
) -> tuple[Any, Any]:
    """``read`` of a Paper A chapter whose tables are its analysis stage's (``out_dir``) with the
    loss table that says who learned (``learned_losses``)."""
    section = own_section(params_path, name, overrides, section_type)
    p = section.raw
    return section, load_tables(p["out_dir"], p["learned_losses"])


def chapter(name: str) -> Any:
    """The chapter module ``name`` (one of :data:`CHAPTERS`)."""
    if name not in CHAPTERS:
        raise KeyError(f"no chapter module {name!r}; chapters: {', '.join(CHAPTERS)}")
    return importlib.import_module(f"geolib.verdicts.chapters.{name}")


def problems(module: Any, name: str) -> list[str]:
    """How ``module`` (expected to be chapter ``name``) falls short of the interface: a missing
    or misnamed ``CHAPTER``, a missing function, or one whose parameters differ from
    :data:`SIGNATURES` (``read``'s ``overrides`` must default to ``None``)."""
    found = []
    if getattr(module, "CHAPTER", None) != name:
        found.append(f"{name}: CHAPTER is {getattr(module, 'CHAPTER', None)!r}, not {name!r}")
    for fn, want in SIGNATURES.items():
        f = getattr(module, fn, None)
        if not callable(f):
            found.append(f"{name}: no function {fn}()")
            continue
        params = inspect.signature(f).parameters
        if tuple(params) != want:
            found.append(f"{name}: {fn}{tuple(params)}, not {fn}{want}")
        elif fn.startswith("read") and params["overrides"].default is not None:
            found.append(f"{name}: {fn}()'s overrides must default to None")
    return found
