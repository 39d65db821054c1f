"""What the three sweep chapters share (claims B1–B5, B7, B8): the tables of stage
``geometry_performance_tables`` loaded once, the lookups the verdicts read, and the v1 checks
kept per claim.

The chapters are ``geometry_performance`` (B1, B2, B7: geometry against performance),
``training_knobs`` (B3–B5: batch size, weight decay, learning rate) and
``forgetting_quantization`` (B8). Each reads the rules of the ``geometry_performance`` section
(``verdict``: v1, fixed before the sweep ran; ``v2``: revised after, each with its reason).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from geolib.report.rules import Verdict, combine_statuses, decide_if_defined, rule_from_params


@dataclass(frozen=True)
class SweepTables:
    """The tables of ``geometry_performance_tables`` (``data/results/geometry_performance``):
    one row per model (``models``, one per point of the sweep), the factor effects in seed-sd
    units, the prediction tables over all models and within size, and the premises' tables."""

    folder: Path
    models: pd.DataFrame
    effects: pd.DataFrame
    interactions: pd.DataFrame
    effects_by_size: pd.DataFrame
    u_shape: pd.DataFrame
    prediction: pd.DataFrame
    within: pd.DataFrame
    r2_gap: pd.DataFrame
    r2_gap_alternatives: pd.DataFrame
    agreement: pd.DataFrame
    spread: pd.DataFrame  #: indexed by outcome
    init_moves: pd.DataFrame

    @classmethod
    def load(cls, folder: str | Path, points: list[str]) -> SweepTables:
        """Read the tables; ``models`` must hold one row per point of ``points``."""
        from geolib.measure.prediction import one_row_per_point

        folder = Path(folder)

        def read(name: str, **kw: Any) -> pd.DataFrame:
            return pd.read_csv(folder / name, **kw)

        return cls(
            folder=folder,
            models=one_row_per_point(read("models.csv"), points, "models.csv"),
            effects=read("effects.csv"),
            interactions=read("interactions.csv"),
            effects_by_size=read("effects_by_size.csv"),
            u_shape=read("u_shape.csv"),
            prediction=read("prediction.csv"),
            within=read("prediction_within_size.csv"),
            r2_gap=read("r2_gap.csv"),
            r2_gap_alternatives=read("r2_gap_alternatives.csv"),
            agreement=read("agreement.csv"),
            spread=read("spread.csv").set_index("outcome"),
            init_moves=read("init_moves.csv"),
        )

    @property
    def ood(self) -> list[str]:
        """The OOD loss columns of ``models`` (one per domain)."""
        return [
            c
            for c in self.models.columns
            if c.startswith("loss_ood_") and not c.endswith(("_ci_low", "_ci_high"))
        ]

    def effect(self, factor: str, quantity: str) -> Any:
        """The row of ``effects`` for one factor and quantity (a namedtuple-like Series)."""
        return row_where(self.effects, factor=factor, quantity=quantity)

    def predicts(self, outcome: str, predictor: str, *, within: bool = False) -> Any:
        """The prediction row of ``outcome`` on ``predictor``, over all models or within size."""
        return row_where(
            self.within if within else self.prediction, outcome=outcome, predictor=predictor
        )

    def varies(self, outcome: str, min_sd_ratio: float) -> tuple[bool, str]:
        """Premise of a prediction claim: ``outcome`` varies across models within size at least
        ``min_sd_ratio`` times its seed-to-seed sd. Returns ``(holds, why not)``."""
        ratio = float(self.spread.loc[outcome, "ratio"])
        why = (
            f"{outcome} varies across models within size only {ratio:.2g}x its seed-to-seed sd "
            f"(premise: at least {min_sd_ratio:g}x)"
        )
        return ratio >= min_sd_ratio, why

    def scale_runs(self) -> dict[str, dict[str, Any]]:
        """The models as :func:`geolib.report.claims.scale_of_runs` reads them: a configuration
        is a point less its seed."""
        return {
            r["name"]: {
                "family": r["name"].rsplit("-s", 1)[0],
                "seed": r["name"].rsplit("-s", 1)[1],
                "params": r["params"],
                "tokens": r["tokens"],
            }
            for r in self.models.to_dict("records")
        }


def row_where(table: pd.DataFrame, **match: str) -> Any:
    """The single row of ``table`` whose columns equal ``match`` (an error naming it otherwise)."""
    mask = pd.Series(True, index=table.index)
    for col, value in match.items():
        mask &= table[col] == value
    rows = table[mask]
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} rows for {match} (expected one)")
    return rows.iloc[0]


def interval_text(what: str, estimate: float, low: float, high: float) -> str:
    """``what: estimate [low, high]`` to three significant digits (a check's key number)."""
    return f"{what}: {estimate:.3g} [{low:.3g}, {high:.3g}]"


def seed_sd_interval(row: Any, change: Mapping[str, Any] | None = None) -> tuple[float, float]:
    """The interval a v2 rule reads in seed-sd units: carrying the seed sd's own uncertainty
    (``ci_low_sd``, ``ci_high_sd``), or, as the declared alternative ``seed_sd: known``, with
    the sd treated as known (v1's ``ci_low``, ``ci_high``)."""
    known = (change or {}).get("seed_sd") == "known"
    return (row.ci_low, row.ci_high) if known else (row.ci_low_sd, row.ci_high_sd)


class Checks:
    """The v1 checks of each claim, in the order they were made: each rule of ``rules`` (the
    section's ``verdict`` mapping) applied to an interval, kept under its claim."""

    def __init__(self, rules: Mapping[str, Mapping[str, Any]], log: Callable = print) -> None:
        self.rules = rules
        self.log = log
        self.by_claim: dict[str, list[tuple[Verdict, str]]] = {}

    def decide(self, claim: str, key: str, estimate, low, high, what: str) -> Verdict:
        """Apply rule ``key`` to ``estimate [low, high]`` and keep the result under ``claim``;
        an undefined interval is *inconclusive* with the reason."""
        why = f"{what}: its interval is undefined (too many resamples undefined)"
        verdict = decide_if_defined(rule_from_params(self.rules[key]), estimate, low, high, why)
        self.add(claim, verdict, interval_text(what, estimate, low, high))
        self.log(f"{claim} · {key} · {verdict}")
        return verdict

    def add(self, claim: str, verdict: Verdict, what: str) -> None:
        """Keep a check decided elsewhere (a count, a premise) under ``claim``."""
        self.by_claim.setdefault(claim, []).append((verdict, what))

    def __getitem__(self, claim: str) -> list[tuple[Verdict, str]]:
        return self.by_claim[claim]

    def status(self, claim: str) -> str:
        """v1's combined status of ``claim``."""
        return combine_statuses(v.status for v, _ in self.by_claim[claim])

    def summary(self, claim: str) -> tuple[str, str, str]:
        """v1's combined status, key number (the first check) and every check in words."""
        rows = self.by_claim[claim]
        detail = "; ".join(f"{what} → {v.status}" for v, what in rows)
        return self.status(claim), rows[0][1], detail
