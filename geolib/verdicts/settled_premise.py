"""The premise of every sweep row (claims B1–B5, B7, B8): W has left its random start and
settled.

Paper B's models see about 10³ tokens per parameter; ours far fewer, and W's effective rank
first falls from its random start and later climbs back. A claim about how the geometry of a
trained W relates to training choices and performance can be tested only on models whose W is
past that fall and no longer moving. Both are read from the training-length study
(``data/results/training_length/settling.csv``), whose runs are each sweep size's centre point
held at a constant learning rate, at the sweep's tokens per parameter of each size:

* **past the turn**: the study's turn of W's rank (:func:`geolib.measure.settling.turn_at`) lies
  at or below the sweep's tokens per parameter;
* **settled**: the study's settling rule found W's rank settled at or below them.

Where either fails at any size, the row is *inconclusive* with the reason; its status with the
first part alone (settling not required) is shown as a declared alternative, so the reader
sees what the data would say if "past the turn" could stand in for "settled".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from geolib.verdicts.rules import INCONCLUSIVE, NOT_RUN

#: the declared alternative every sweep row shows: the premise without its second part
PAST_TURN_ONLY = "W past its rank's turn, settling not required"
#: what every sweep row's rule says of this premise, after the rule itself
RULE_WORDS = (
    "before any of it, the premise that W has left its random start and settled (past the turn "
    "of its effective rank and settled there, in the training-length study, at the sweep's "
    "tokens per parameter)"
)
#: the columns of the study's ``settling.csv`` the premise reads
STUDY_COLUMNS = ("size", "quantity", "settled", "settled_at", "turn_at", "reason")


@dataclass(frozen=True)
class PremiseSpec:
    """``geometry_performance.sweep_v3.w_premise``: the study's table (``study``), the quantity
    (``quantity``, W's effective rank), which study size holds each sweep size's model
    (``sizes``: sweep size → study size), and the paper's training scale in words
    (``paper_scale``, stated beside ours in the scale column)."""

    study: Path
    quantity: str
    sizes: Mapping[str, str]
    paper_scale: str

    @classmethod
    def from_params(cls, spec: Any, where: str = "geometry_performance.sweep_v3.w_premise"):
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where} must be a mapping, got {spec!r}")
        missing = [k for k in ("study", "quantity", "sizes", "paper_scale") if k not in spec]
        if missing:
            raise ValueError(f"{where}: missing key(s) {missing}")
        sizes = spec["sizes"]
        if not isinstance(sizes, Mapping) or not sizes:
            raise ValueError(f"{where}.sizes: map each sweep size to a study size, got {sizes!r}")
        return cls(
            Path(str(spec["study"])),
            str(spec["quantity"]),
            {str(k): str(v) for k, v in sizes.items()},
            str(spec["paper_scale"]),
        )


@dataclass(frozen=True)
class WPremise:
    """The premise's outcome over the sweep's sizes: both parts, and each size's reading in
    words (``why``)."""

    past_turn: bool
    settled: bool
    why: str

    @property
    def holds(self) -> bool:
        return self.past_turn and self.settled


def read_study(spec: PremiseSpec) -> pd.DataFrame:
    """The study's ``settling.csv`` (an error naming the stage that writes it)."""
    if not spec.study.is_file():
        raise FileNotFoundError(
            f"{spec.study}: the training-length study's table is missing (stage "
            "training_length_tables); the sweep's premise reads it"
        )
    table = pd.read_csv(spec.study)
    missing = [c for c in STUDY_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{spec.study}: lacks column(s) {missing} (rerun its stage)")
    return table


def tokens_per_param(models: pd.DataFrame) -> dict[str, float]:
    """The fewest tokens per parameter (all parameters) of each size's models (``size``,
    ``tokens``, ``params`` columns; one row per model)."""
    ratio = models["tokens"].astype(float) / models["params"].astype(float)
    return {str(s): float(v) for s, v in ratio.groupby(models["size"]).min().items()}


def w_premise(study: pd.DataFrame, spec: PremiseSpec, reached: Mapping[str, float]) -> WPremise:
    """The premise at every sweep size of ``reached`` (size → tokens per parameter the sweep
    trains its models for), from the study's ``settling.csv`` rows (``study``)."""
    if not reached:
        raise ValueError("no sweep sizes to check the premise at")
    past, settled, words = True, True, []
    for size, x in reached.items():
        if not np.isfinite(x) or x <= 0:
            raise ValueError(f"size {size}: tokens per parameter must be > 0, got {x}")
        name = spec.sizes.get(size)
        row = study[(study["size"] == name) & (study["quantity"] == spec.quantity)]
        if name is None or len(row) != 1:
            past = settled = False
            words.append(
                f"{size}: the study holds no {spec.quantity} of this size's model"
                + ("" if name is None else f" ({name}: {len(row)} rows)")
            )
            continue
        r = row.iloc[0]
        turn = float(r["turn_at"])
        at = float(r["settled_at"]) if bool(r["settled"]) else float("nan")
        is_past = bool(np.isfinite(turn) and turn <= x)
        is_settled = bool(np.isfinite(at) and at <= x)
        past &= is_past
        settled &= is_settled
        turn_words = (
            f"turns at {turn:.3g} tokens per parameter" if np.isfinite(turn) else "has no turn"
        )
        settle_words = f"settled from {at:.3g} on" if np.isfinite(at) else f"{r['reason']}"
        words.append(
            f"{size} at {x:.3g} tokens per parameter: in the study ({name}) W's {spec.quantity} "
            f"{turn_words} ({'past it' if is_past else 'not past it'}); "
            f"{settle_words} ({'settled' if is_settled else 'not settled'} by then)"
        )
    return WPremise(past, settled, "; ".join(words))


def premise_at(study: pd.DataFrame, spec: PremiseSpec, models: pd.DataFrame) -> WPremise:
    """:func:`w_premise` at the fewest tokens per parameter of each size of ``models``
    (:func:`tokens_per_param`): the premise of the rows decided on those models."""
    return w_premise(study, spec, tokens_per_param(models))


def premise_words(premise: WPremise) -> str:
    """The premise and its outcome in one sentence (a row's detail)."""
    outcome = "holds" if premise.holds else "fails"
    return f"Premise W left its random start and settled: {outcome} ({premise.why})"


def premised_row(
    premise: WPremise, status: str, key: str, alternatives: Mapping[str, str]
) -> tuple[str, str, dict[str, str]]:
    """A sweep row after the premise: ``(status, key number, alternatives)``.

    Where the premise fails the row and every declared alternative (each is the same claim
    under another reading, on the same models) are inconclusive, and the key number says why;
    :data:`PAST_TURN_ONLY` adds the status with the premise's first part alone (``status``,
    the row as decided without this premise, where W is past its turn)."""
    alternatives = dict(alternatives)
    if PAST_TURN_ONLY in alternatives:
        raise ValueError(f"{PAST_TURN_ONLY!r} is the premise's own alternative")
    alone = status if premise.past_turn else INCONCLUSIVE
    if premise.holds:
        return status, key, {**alternatives, PAST_TURN_ONLY: alone}
    failed = "has not left its random start" if not premise.past_turn else "has not settled"
    alternatives = {n: s if s == NOT_RUN else INCONCLUSIVE for n, s in alternatives.items()}
    return (
        INCONCLUSIVE,
        f"{key} (premise fails: W {failed})",
        {**alternatives, PAST_TURN_ONLY: alone},
    )
