"""The released models (``params.yaml``: ``pretrained.models``) as the gradient-energy chapter
reads them: each model's datasheet, written by its fetch (:mod:`geolib.models.pretrained`), and
the R_energy table ``geolib measure`` wrote for it (stage ``gradient_energy_pretrained@<key>``).

A released model has one checkpoint, its final one: it describes (its A4 row is
:func:`geolib.verdicts.chapters.gradient_energy.released_row`), it never decides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from geolib.measure.energy_counts import REFIT

#: columns of ``geolib measure``'s ``r_energy.csv`` that the chapter reads
COLUMNS = ("text", "layer", "layer_index", "k", "source", "r_energy", "ci_low", "ci_high",
           "ceiling", "fraction_of_ceiling", "eval_loss")  # fmt: skip


@dataclass(frozen=True)
class Released:
    """One released model: ``key`` in ``pretrained.models``, its datasheet, its measured table
    (``r_energy``: one row per text × layer × rank × source of T, with ``domain`` = the corpus
    domain) and the command that measured it."""

    key: str
    sheet: Mapping[str, Any]
    r_energy: pd.DataFrame = field(repr=False)
    command: str

    @property
    def name(self) -> str:
        """The model as its datasheet's title names it (up to the first comma)."""
        return str(self.sheet["title"]).split(",")[0]

    @property
    def scale(self) -> str:
        return (
            f"released model {self.name}, {self.sheet['parameters'] / 1e6:.0f}M parameters, "
            "final checkpoint only"
        )

    def header(self) -> str:
        s = self.sheet
        return (
            f"{s['title']}: {s['architecture']}, {s['parameters'] / 1e6:.1f}M parameters, "
            f"{s['layers']} layers, d = {s['d_model']}, vocabulary {s['vocab_size']:,}; "
            f"{s['package']}=={s['version']}, sha256 {s['artifact_sha256'][:16]}…"
        )

    def rank(self, k: int) -> int:
        """``k`` if it was measured, else the smallest rank that was."""
        ks = set(self.r_energy["k"])
        return k if k in ks else int(min(ks))

    def profile(self, k: int) -> pd.DataFrame:
        """T refitted, rank ``k``: one row per domain × layer, with ``depth`` = layer index over
        the last one (0: the embedding output, 1: the last block)."""
        t = self.r_energy[(self.r_energy["k"] == k) & (self.r_energy["source"] == REFIT)].copy()
        t["depth"] = t["layer_index"] / t["layer_index"].max()
        return t

    def domain_summary(self, k: int) -> pd.DataFrame:
        """Per domain over the block layers (the embedding output left out): medians of
        R_energy, ceiling and their ratio, the layers whose lower bound is above 1, and the
        model's loss on that domain (nats per token of its own vocabulary)."""
        blocks = self.profile(k)
        blocks = blocks[blocks["layer"] != "embed"]
        loss = self.r_energy.groupby("domain", sort=False)["eval_loss"].first()
        return (
            blocks.groupby("domain", sort=False)
            .agg(
                median_r_energy=("r_energy", "median"),
                median_ceiling=("ceiling", "median"),
                median_fraction_of_ceiling=("fraction_of_ceiling", "median"),
                layers_with_lower_bound_above_1=("ci_low", lambda x: int((x > 1).sum())),
                layers=("ci_low", "size"),
            )
            .join(loss)
        )


def load_released(pretrained: Mapping[str, Any], measured: Mapping[str, Any]) -> list[Released]:
    """Every model of ``pretrained["models"]``, in that order: its datasheet from
    ``<pretrained.out_root>/<key>/`` and its tables from ``<measured.out_root>/<key>/``
    (``measured`` is the ``gradient_energy_pretrained`` section). A missing file or column is
    an error naming the stage that writes it."""
    out: list[Released] = []
    for key in pretrained.get("models") or {}:
        sheet_path = Path(pretrained["out_root"]) / key / "datasheet.json"
        tables = Path(measured["out_root"]) / key
        for path, writer in (
            (sheet_path, f"fetch_pretrained@{key}"),
            (tables / "r_energy.csv", f"gradient_energy_pretrained@{key}"),
            (tables / "summary.json", f"gradient_energy_pretrained@{key}"),
        ):
            if not path.is_file():
                raise FileNotFoundError(f"no {path}: run `dvc repro {writer}`")
        table = pd.read_csv(tables / "r_energy.csv")
        missing = [c for c in COLUMNS if c not in table.columns]
        if missing:
            raise ValueError(f"{tables / 'r_energy.csv'} lacks the columns {missing}")
        table["domain"] = table["text"].str.removeprefix("corpus:")
        command = json.loads((tables / "summary.json").read_text())["command"]
        out.append(Released(key, json.loads(sheet_path.read_text()), table, command))
    return out
