"""When a model's tangent alignment peaks (claim A7): the warm-up alternative that tells a peak
of learning from a peak of the schedule.

Paper A: "The effect is strongest in the first phase of training and is then maintained". A
peak read at one checkpoint says little unless a checkpoint lies on each side of it
(:func:`geolib.measure.energy_per_model.bracket`). And a peak at the end of the learning-rate
warm-up may mark the schedule rather than learning: :func:`warmup_alternative` pairs each
model with one trained with a longer warm-up (same family and seed) and asks whether the peak
moved with the warm-up's end or with the step at which the model learned (:func:`follows`). The
constants are ``gradient_energy.a7_warmup`` in ``params.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from geolib.measure import validate as check

SCHEDULE, LEARNING, CANNOT_TELL = "the schedule", "learning", "cannot tell"


def follows(peak_shift: float, warmup_shift: float, learning_shift: float, tolerance: float) -> str:
    """What a peak's shift (steps, longer warm-up minus default) tracks: :data:`SCHEDULE` when
    it lies within ``tolerance`` of the warm-up's shift and not of learning's, :data:`LEARNING`
    the other way round, :data:`CANNOT_TELL` when both or neither."""
    tol = check.scalar("tolerance", tolerance, low=0.0)
    near_w = abs(peak_shift - warmup_shift) <= tol
    near_l = abs(peak_shift - learning_shift) <= tol
    if near_w and not near_l:
        return SCHEDULE
    if near_l and not near_w:
        return LEARNING
    return CANNOT_TELL


@dataclass(frozen=True)
class WarmupAlternative:
    """The pairs (one row per seed: both models' peak and learned steps, the shifts and what the
    peak follows) and the outcome over pairs, with its words for the claim's detail."""

    pairs: pd.DataFrame
    outcome: str
    words: str


PER_MODEL = ("seed", "peak_step", "learned_step")


def warmup_alternative(
    default: pd.DataFrame,
    longer: pd.DataFrame,
    *,
    warmup_shift: int,
    tolerance: float,
    min_pairs: int,
) -> WarmupAlternative:
    """Pair the default models with the longer-warm-up models by ``seed`` (columns
    :data:`PER_MODEL`: the seed, the step where R_energy peaks, the first checkpoint at which
    the model has learned; NaN where it never did, which leaves its pair out) and read each pair
    with :func:`follows`. The outcome is the pairs' common reading when at least ``min_pairs``
    pairs agree and none differs, else :data:`CANNOT_TELL`."""
    for name, t in (("default", default), ("longer", longer)):
        missing = set(PER_MODEL) - set(t.columns)
        if missing:
            raise ValueError(f"{name} per-model table lacks columns {sorted(missing)}")
        if t["seed"].duplicated().any():
            raise ValueError(f"{name} per-model table repeats a seed: {list(t['seed'])}")
    if int(min_pairs) < 1:
        raise ValueError(f"min_pairs must be at least 1, got {min_pairs}")
    pairs = default[list(PER_MODEL)].merge(
        longer[list(PER_MODEL)], on="seed", suffixes=("_default", "_longer")
    )
    pairs = pairs.dropna().sort_values("seed").reset_index(drop=True)
    pairs["peak_shift"] = pairs["peak_step_longer"] - pairs["peak_step_default"]
    pairs["learning_shift"] = pairs["learned_step_longer"] - pairs["learned_step_default"]
    pairs["follows"] = [
        follows(p, warmup_shift, lr, tolerance)
        for p, lr in zip(pairs["peak_shift"], pairs["learning_shift"], strict=True)
    ]
    readings = set(pairs["follows"])
    n = len(pairs)
    outcome = readings.pop() if n >= int(min_pairs) and len(readings) == 1 else CANNOT_TELL
    each = "; ".join(
        f"seed {int(r.seed)}: peak {int(r.peak_step_default)} → {int(r.peak_step_longer)} "
        f"(shift {r.peak_shift:+.0f}), learned at {int(r.learned_step_default)} → "
        f"{int(r.learned_step_longer)} (shift {r.learning_shift:+.0f}): {r.follows}"
        for r in pairs.itertuples()
    )
    words = (
        f"warm-up {warmup_shift} steps longer, {n} learned pair(s) by seed (tolerance "
        f"{tolerance:g} steps): {each or 'none'}. The peak follows {outcome}"
        if outcome != CANNOT_TELL
        else f"warm-up {warmup_shift} steps longer, {n} learned pair(s) by seed (tolerance "
        f"{tolerance:g} steps; {min_pairs} needed, all alike): {each or 'none'}. Whether the "
        "peak follows the schedule or learning: cannot tell"
    )
    return WarmupAlternative(pairs, outcome, words)
