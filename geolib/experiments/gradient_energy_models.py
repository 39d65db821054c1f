"""Each trained model's numbers for Paper A's A4, A6 and A7 (rules v3): the analysis stage that
turns the gradient-energy tables into the per-model tables the chapter decides on.

    python -m geolib.experiments.gradient_energy_models --params params.yaml

It reads the tables of the ``gradient_energy`` stage (and of ``warmup_gradient_energy``, A7's
warm-up alternative, where they exist) and computes, for every declared view
(:func:`geolib.measure.energy_per_model.declared_views`: the rule's own numbers and each
alternative of ``gradient_energy.a4_v3``, ``a6_v3``, ``a7_v3``), one row per run. Every run is
computed; which of them learned, and so enter a verdict, is the chapter's rule. A view at a rank
the stage did not measure is not written (the chapter reports it as not run).

Outputs in ``out_dir``: ``a4.csv``, ``a6.csv``, ``a7.csv`` (a ``view`` column, then the
per-model columns), ``warmup_a7.csv`` (A7's own numbers on the warm-up alternative's runs) and
``views.json``: each view's arguments, by claim and name (what the chapter looks a table up by),
and the SHA-256 of the tables they were computed from (``inputs``, ``warmup_inputs``: the
chapter refuses per-model tables of other tables than those it reads). Floats are written in
full: the verdicts read the same numbers the stage computed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from geolib.files import sha256_file, write_csv, write_json
from geolib.measure import energy_per_model as em
from geolib.measure import validate as check
from geolib.stage import stage

#: the sections whose tables this stage reads (``dvc.yaml`` declares their keys it depends on)
TABLES, WARMUP_TABLES = "gradient_energy", "warmup_gradient_energy"


def _inputs(folder: str | Path) -> Path:
    """``folder``, after checking it holds every one of
    :data:`~geolib.measure.energy_per_model.INPUTS` (an error naming the stage to run)."""
    out = Path(folder)
    missing = [n for n in em.INPUTS if not (out / n).is_file()]
    if missing:
        raise FileNotFoundError(f"{out} lacks {missing}: run the gradient_energy stage first")
    return out


def fingerprint(folder: str | Path) -> dict[str, str]:
    """SHA-256 of each of :data:`~geolib.measure.energy_per_model.INPUTS` in ``folder``: what
    the per-model tables were computed from (the chapter compares it with the tables it
    reads)."""
    out = _inputs(folder)
    return {n: sha256_file(out / n) for n in em.INPUTS}


def read_stage_tables(folder: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """``(r_energy, losses, runs)`` of a gradient-energy stage's ``folder``; ``runs``: each run's
    family and seed (``summary.json``)."""
    out = _inputs(folder)
    runs = json.loads((out / "summary.json").read_text())["runs"]
    return pd.read_csv(out / "r_energy.csv"), pd.read_csv(out / "losses.csv"), runs


def views_table(
    claim: str,
    views: Mapping[str, Mapping[str, Any]],
    r_energy: pd.DataFrame,
    losses: pd.DataFrame,
    runs: Mapping[str, Mapping[str, Any]],
) -> tuple[pd.DataFrame, dict[str, dict]]:
    """One claim's rows for each view at a measured rank (``view`` column first) and the views
    written; views with the same arguments are computed once."""
    ranks = {int(k) for k in r_energy["k"].unique()}
    done: dict[str, pd.DataFrame] = {}
    parts, written = [], {}
    for name, args in views.items():
        if int(args["k"]) not in ranks:
            continue
        key = json.dumps(args, sort_keys=True)
        if key not in done:
            done[key] = em.per_model(claim, r_energy, losses, runs, args)
        parts.append(done[key].assign(view=name))
        written[name] = dict(args)
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["view"])
    return table[["view", *[c for c in table.columns if c != "view"]]], written


def has_tables(folder: str | Path | None) -> bool:
    """Whether a gradient-energy stage has written its tables in ``folder`` (the stage and the
    chapter ask alike whether the warm-up alternative was measured)."""
    return folder is not None and (Path(folder) / "summary.json").is_file()


def run_stage(
    p: Mapping[str, Any],
    section: Mapping[str, Any],
    verdicts: Mapping[str, Any],
    warmup_dir: str | Path | None,
) -> dict[str, Any]:
    """Write the per-model tables of ``section`` (the gradient-energy section) in
    ``p["out_dir"]``; ``warmup_dir``: the warm-up alternative's tables (``None``: none)."""
    margin = check.scalar("verdicts.learned_margin", verdicts["learned_margin"], low=0.0)
    out = Path(p["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    r_energy, losses, runs = read_stage_tables(section["out_dir"])
    views = em.declared_views(section, margin)
    written: dict[str, Any] = {em.INPUTS_KEY[False]: fingerprint(section["out_dir"])}
    for claim in em.CLAIMS:
        table, written[claim] = views_table(claim, views[claim], r_energy, losses, runs)
        write_csv(out / em.TABLE_FILES[claim], table, index=False)
    if has_tables(warmup_dir):
        tables = read_stage_tables(warmup_dir)
        table, own = views_table("A7", {"primary": views["A7"]["primary"]}, *tables)
        write_csv(out / em.WARMUP_FILE, table, index=False)
        written[em.WARMUP] = {"A7": own}
        written[em.INPUTS_KEY[True]] = fingerprint(warmup_dir)
    write_json(out / em.VIEWS_FILE, written, indent=1, sort_keys=True)
    warmed = {em.WARMUP: em.WARMUP in written}
    return {c: sorted(written[c]) for c in em.CLAIMS} | {"runs": len(runs)} | warmed


def main(argv: list[str] | None = None) -> int:
    st = stage(__doc__, "gradient_energy_models", argv)
    warmup = st.section_of(WARMUP_TABLES)["out_dir"]
    return st.done(run_stage(st.params, st.section_of(TABLES), st.section_of("verdicts"), warmup))


if __name__ == "__main__":
    raise SystemExit(main())
