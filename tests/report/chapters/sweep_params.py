"""What the tests of the sweep chapters that read ``geometry_performance`` (B1–B5, B7) build
their section from: a rule's mapping, and the fields every such chapter reads (a small
bootstrap)."""

from __future__ import annotations

from typing import Any


def rule_params(**kw: Any) -> dict[str, Any]:
    """A rule's mapping as ``params.yaml`` writes it (every rule gives a reason)."""
    return {"reason": "Paper B: a test rule", **kw}


#: the section's fields :class:`geolib.report.sweep_chapters.SweepSection` reads beside its
#: rules (``verdict``, ``v2``)
SHARED = {
    "seed": 0,
    "models_table": "data/results/geometry_performance/models.csv",
    "n_boot": 200,
    "ci_level": 0.95,
    "sweep_v3": {"unigram_counts": "data/tokens/token_freq.csv", "min_learned_per_size": 4},
}
