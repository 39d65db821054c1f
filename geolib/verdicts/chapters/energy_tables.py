"""The gradient-energy tables as the verdicts read them: the measures of the analysis stage
:mod:`geolib.experiments.gradient_energy` and each trained model's A4, A6 and A7 numbers, which
:mod:`geolib.experiments.gradient_energy_models` computed from them (:class:`ModelTables`). The
chapter (:mod:`geolib.verdicts.chapters.gradient_energy`) reads both and applies its rules; it
computes no per-model number. Only a notebook rerun with overrides, whose numbers the stage did
not use, has its per-model tables computed when asked, by the stage's own functions
(:class:`Computed`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from geolib.files import sha256_file
from geolib.measure.energy_per_model import (
    EVERY_RUN,
    INPUTS,
    INPUTS_KEY,
    TABLE_FILES,
    VIEWS_FILE,
    WARMUP,
    WARMUP_FILE,
    per_model,
)
from geolib.measure.energy_per_model import on_steps as on_table_steps
from geolib.verdicts.learners import Learners, learners_of_runs


class PerModel(Protocol):
    """What the chapter asks of per-model tables: ``claim``'s rows for one view's arguments
    (:func:`geolib.measure.energy_per_model.view`), of ``runs`` only, in their order."""

    def rows(self, claim: str, args: Mapping[str, Any], runs: Sequence[str]) -> pd.DataFrame: ...


def select(table: pd.DataFrame, runs: Sequence[str]) -> pd.DataFrame:
    """The rows of ``runs`` (a run may have none), in the order of ``runs``."""
    if "run" not in table.columns:
        return pd.DataFrame()
    order = {r: i for i, r in enumerate(runs)}
    mine = table[table["run"].isin(list(order))]
    return mine.iloc[mine["run"].map(order).argsort(kind="stable")].reset_index(drop=True)


def _complete(claim: str, table: pd.DataFrame, runs: Sequence[str], where: str) -> pd.DataFrame:
    """``table`` (``claim``'s rows of ``runs``), after checking that every run has its row where
    the claim's table holds one per run (:data:`~geolib.measure.energy_per_model.EVERY_RUN`)."""
    have = set(table["run"]) if "run" in table.columns else set()
    missing = [r for r in runs if r not in have]
    if claim in EVERY_RUN and missing:
        raise ValueError(
            f"{where} has no {claim} row for {missing} (no rows at that rank, or no loss "
            "recorded): a model that learned must have its numbers"
        )
    return table


@dataclass(frozen=True)
class ModelTables:
    """The tables the per-model stage wrote in ``folder``: ``frames`` (claim -> its rows, a
    ``view`` column naming the view) and ``views`` (claim -> view name -> the arguments it was
    computed with)."""

    frames: Mapping[str, pd.DataFrame]
    views: Mapping[str, Mapping[str, Mapping[str, Any]]]
    folder: str

    def rows(self, claim: str, args: Mapping[str, Any], runs: Sequence[str]) -> pd.DataFrame:
        """The rows of the view computed with exactly ``args``; an error where the stage wrote
        none (its tables were computed with other numbers than the chapter's)."""
        want = json.loads(json.dumps(dict(args)))
        views = self.views.get(claim, {})
        name = next((n for n, a in views.items() if a == want), None)
        if name is None:
            raise ValueError(
                f"{self.folder}/{VIEWS_FILE} has no {claim} table computed with {want} (it has "
                f"{sorted(views)}): the per-model tables were computed with other parameters "
                "than these; set them in params.yaml and run `dvc repro gradient_energy_models` "
                "(a notebook rerun with overrides computes its own)"
            )
        table = self.frames[claim]
        rows = select(table[table["view"] == name].drop(columns="view"), runs)
        return _complete(claim, rows, runs, f"{self.folder}/{TABLE_FILES[claim]}")


@dataclass(frozen=True)
class Computed:
    """Per-model tables computed when asked, by the per-model stage's own functions
    (:func:`geolib.measure.energy_per_model.per_model`): what a notebook rerun with overrides
    reads, since the stage computed its tables with the parameters file's numbers."""

    r_energy: pd.DataFrame
    losses: pd.DataFrame
    info: Mapping[str, Mapping[str, Any]]

    def rows(self, claim: str, args: Mapping[str, Any], runs: Sequence[str]) -> pd.DataFrame:
        table = per_model(claim, self.r_energy, self.losses, self.info, args)
        return _complete(claim, select(table, runs), runs, "the computed per-model table")


#: columns of step numbers that may be empty (no checkpoint on that side, no source step): whole
#: numbers with a missing value, not floats
_STEPS = ("before_peak", "after_peak", "null_source", "early_source")


def _read_models(path: Path) -> pd.DataFrame:
    dtype = {"view": str, "steps": str} | dict.fromkeys(_STEPS, "Int64")
    return pd.read_csv(path, dtype=dtype)


def load_models(folder: str | Path, tables: str | Path, *, warmup: bool = False) -> ModelTables:
    """The per-model stage's tables in ``folder`` (``warmup``: its A7 table of the warm-up
    alternative's runs), after checking they were computed from the gradient-energy tables in
    ``tables`` (the SHA-256 of each, recorded in ``views.json``)."""
    out = Path(folder)
    views = json.loads((out / VIEWS_FILE).read_text())
    inputs = INPUTS_KEY[warmup]
    if inputs not in views:
        raise ValueError(
            f"{out}/{VIEWS_FILE} records no per-model tables of {tables}: the stage ran before "
            "those tables existed; run `dvc repro gradient_energy_models`"
        )
    if views[inputs] != {n: sha256_file(Path(tables) / n) for n in INPUTS}:
        raise ValueError(
            f"the per-model tables in {out} were computed from other tables than those in "
            f"{tables} (their SHA-256 differ): run `dvc repro gradient_energy_models`"
        )
    if warmup:
        return ModelTables({"A7": _read_models(out / WARMUP_FILE)}, views[WARMUP], str(out))
    frames = {c: _read_models(out / f) for c, f in TABLE_FILES.items()}
    return ModelTables(frames, {c: views[c] for c in TABLE_FILES}, str(out))


@dataclass(frozen=True)
class Tables:
    """The stage's tables: ``r_energy`` (one row per run, step, layer, k, source of T),
    ``losses`` (evaluation loss and unigram entropy per run and step), ``summary`` (the
    stage's ``summary.json``: runs with family, seed and size; the v1/v2 counts), ``models``
    (each model's A4, A6, A7 numbers: the stage's :class:`ModelTables`, or :class:`Computed`)
    and ``warmup``: the same tables of A7's warm-up alternative (``None``: not measured)."""

    r_energy: pd.DataFrame
    losses: pd.DataFrame
    summary: Mapping[str, Any]
    models: PerModel
    warmup: Tables | None = None

    def model(self, run: str) -> str:
        return Path(run).name


def _measures(folder: str | Path, models: str | Path | None, warmup: bool = False) -> Tables:
    out = Path(folder)
    r_energy, losses = pd.read_csv(out / "r_energy.csv"), pd.read_csv(out / "losses.csv")
    summary = json.loads((out / "summary.json").read_text())
    per = (
        Computed(r_energy, losses, summary["runs"])
        if models is None
        else load_models(models, out, warmup=warmup)
    )
    return Tables(r_energy, losses, summary, per)


def load_tables(
    out_dir: str | Path, models_dir: str | Path | None, warmup_dir: str | Path | None = None
) -> Tables:
    """The tables :mod:`geolib.experiments.gradient_energy` wrote in ``out_dir`` and the
    per-model tables in ``models_dir`` (``None``: computed when asked, :class:`Computed`); with
    ``warmup_dir``, A7's warm-up alternative's too."""
    main = _measures(out_dir, models_dir)
    warm = None if warmup_dir is None else _measures(warmup_dir, models_dir, warmup=True)
    return Tables(main.r_energy, main.losses, main.summary, main.models, warm)


def on_steps(tables: Tables, steps: tuple[int, ...] | None) -> Tables:
    """``tables`` with only the checkpoints at ``steps`` (``None``: all of them;
    :func:`geolib.measure.energy_per_model.on_steps`): the checkpoints A4 and A6 read
    (``gradient_energy.verdict_steps``), where the chapter asks who learned and which ranks were
    measured."""
    if steps is None:
        return tables
    r_energy, losses = on_table_steps(tables.r_energy, tables.losses, steps)
    return Tables(r_energy, losses, tables.summary, tables.models, tables.warmup)


def learned_models(tables: Tables, margin: float) -> Learners:
    """Which of the stage's runs learned (:func:`geolib.verdicts.learners.learners_of_runs`)."""
    return learners_of_runs(list(tables.summary["runs"]), tables.losses, margin)


def decoders(tables: Tables, runs: Sequence[str]) -> list[str]:
    """The decoders among ``runs``, in their order."""
    dec = set(tables.r_energy.loc[tables.r_energy["decoder"].astype(bool), "run"])
    return [r for r in runs if r in dec]


def measured_ranks(tables: Tables) -> set[int]:
    return {int(v) for v in tables.r_energy["k"].unique()}


def bracket_words(row: Any) -> str:
    """``"64 (48 | 80)"``: a per-model row's peak step and the checkpoints around it."""
    side = [str(int(x)) if pd.notna(x) else "none" for x in (row.before_peak, row.after_peak)]
    return f"{int(row.peak_step)} ({side[0]} | {side[1]})"


def first_after(tables: Tables, warmup: int) -> int:
    steps = sorted(int(s) for s in tables.r_energy["step"].unique() if s > warmup)
    return steps[0] if steps else -1


def margins_words(tables: Tables) -> str:
    """Every run's final margin below the unigram entropy (nats), encoders and decoders, e.g.
    ``"Final loss below the unigram entropy (nats): pythia 1.21, bert 0.61"``."""
    last = tables.losses.loc[tables.losses.groupby("run", sort=False)["step"].idxmax()]
    below = last["unigram_entropy"] - last["eval_loss"]
    return "Final loss below the unigram entropy (nats): " + ", ".join(
        f"{tables.model(r)} {m:.3g}" for r, m in zip(last["run"], below, strict=True)
    )
