"""What the tests of the sweep chapters that read ``geometry_performance`` (B1–B5, B7) build
their section from: a rule's mapping, and the fields every such chapter reads (a small
bootstrap)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from geolib.config import load_params

PARAMS = Path(__file__).resolve().parents[3] / "params.yaml"
#: the top-level ``verdicts`` section the sections read: who learned (margin 0.25 nats) and the
#: committed rule history, so that the tests run the v1 and v2 rules as declared
VERDICTS = {"learned_margin": 0.25, "history": load_params(PARAMS)["verdicts"]["history"]}


def rule_params(**kw: Any) -> dict[str, Any]:
    """A rule's mapping as ``params.yaml`` writes it (every rule gives a reason)."""
    return {"reason": "Paper B: a test rule", **kw}


#: the section's fields :class:`geolib.verdicts.sweep_tables.SweepSection` reads beside its
#: rules (``verdict``, ``v2``)
SHARED = {
    "seed": 0,
    "models_table": "data/results/geometry_performance/models.csv",
    "n_boot": 200,
    "ci_level": 0.95,
    "sweep_v3": {
        "unigram_counts": "data/tokens/token_freq.csv",
        "min_learned_per_size": 4,
        "w_premise": {
            "study": "data/results/training_length/settling.csv",
            "quantity": "w_erank",
            "sizes": {"S": "d32", "M": "d64"},
            "paper_scale": "the paper: 10^3 tokens per parameter",
        },
    },
}


def study(settled_at: float | None = 1.0, turn_at: float = 0.5) -> pd.DataFrame:
    """The training-length study's ``settling.csv`` for sizes d32 and d64: W's rank turns at
    ``turn_at`` and settles at ``settled_at`` tokens per parameter (None: not settled). The
    hand-made sweeps train 2.5-5 tokens per parameter, so by default the premise holds."""
    return pd.DataFrame(
        [
            {
                "size": size,
                "quantity": "w_erank",
                "settled": settled_at is not None,
                "settled_at": float("nan") if settled_at is None else settled_at,
                "turn_at": turn_at,
                "reason": "not settled by 30 tokens per parameter",
            }
            for size in ("d32", "d64")
        ]
    )
