"""Which trained models learned: a model enters a verdict only if its final evaluation loss lies
a declared margin (``verdicts.learned_margin`` in ``params.yaml``) below the unigram entropy of
its training tokens, the loss of the best predictor that ignores context."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geolib.measure import validate as check


@dataclass(frozen=True)
class Learners:
    """Which trained models learned: ``kept`` end at least ``margin`` nats below the unigram
    entropy of their training tokens (the loss of the best predictor that ignores context);
    ``left_out`` maps each other model to how far below it ended (nats)."""

    kept: tuple[str, ...]
    left_out: dict[str, float]
    margin: float

    def words(self) -> str:
        """E.g. ``"left out, not learned (nats below the unigram entropy, margin 0.25):
        bert-s1 (0.05)"``; a model whose loss no table records (NaN) is named apart."""
        if not self.left_out:
            return f"every model learned (at least {self.margin:g} nats below the unigram entropy)"
        short = {m: d for m, d in self.left_out.items() if not math.isnan(d)}
        absent = [m for m, d in self.left_out.items() if math.isnan(d)]
        parts = []
        if short:
            gone = ", ".join(f"{m} ({d:.3g})" for m, d in short.items())
            parts.append(
                f"left out, not learned (nats below the unigram entropy, margin "
                f"{self.margin:g}): {gone}"
            )
        if absent:
            parts.append(f"left out, no loss recorded: {', '.join(absent)}")
        return "; ".join(parts)


def learners(
    final_loss: Mapping[str, float], unigram_entropy: Mapping[str, float], margin: float
) -> Learners:
    """A model enters a verdict only if it learned: its final evaluation loss lies at least
    ``margin`` nats below the unigram entropy (``verdicts.learned_margin`` in ``params.yaml``,
    which says which runs it preceded and which it followed).
    ``final_loss`` and ``unigram_entropy``: per model, in nats per token."""
    margin = check.scalar("margin", margin, low=0.0)
    if set(final_loss) != set(unigram_entropy):
        raise ValueError(
            f"one loss and one unigram entropy per model: {sorted(final_loss)} against "
            f"{sorted(unigram_entropy)}"
        )
    below = {}
    for m, loss in final_loss.items():
        u = check.scalar(f"unigram entropy of {m}", unigram_entropy[m])
        below[m] = u - check.scalar(f"loss of {m}", loss)
    kept = tuple(m for m, d in below.items() if d >= margin)
    return Learners(kept, {m: d for m, d in below.items() if d < margin}, margin)


def learners_of_runs(runs: Sequence[str], losses: Any, margin: float) -> Learners:
    """:func:`learners` of ``runs`` from a loss table (columns ``run``, ``step``, ``eval_loss``,
    ``unigram_entropy``; each run's last step is its final loss). A run the table does not hold
    is left out too, with NaN (no loss recorded)."""
    need = {"run", "step", "eval_loss", "unigram_entropy"}
    if not need <= set(losses.columns):
        raise ValueError(f"the loss table needs columns {sorted(need)}, has {list(losses)}")
    mine = losses[losses["run"].isin(list(runs))]
    last = mine.loc[mine.groupby("run", sort=False)["step"].idxmax()]
    lv = learners(
        dict(zip(last["run"], last["eval_loss"], strict=True)),
        dict(zip(last["run"], last["unigram_entropy"], strict=True)),
        margin,
    )
    absent = {r: math.nan for r in runs if r not in set(last["run"])}
    kept = tuple(r for r in runs if r in lv.kept)
    return Learners(kept, {**lv.left_out, **absent}, lv.margin)
