"""Claim B6, chapter ``saturation``: parallel (Pythia-style) against sequential (OLMo-style)
blocks trained long.

Paper B: "Pythia models (parallel blocks) show late-training degradation together with rank
collapse; OLMo-style models (sequential blocks) trained the same way reach very low rank
without degrading". The unit is a matched (width, seed) pair of runs that differ only in the
block layout; it enters only if both runs learned (:func:`geolib.verdicts.learners.learners`). A run
*degrades* when its final ID loss lies above that of its best late checkpoint (the interval of
the difference above 0; the point estimate as a declared alternative).

Rule v3: the premise is that the degradation the claim contrasts occurs at all (some
parallel-block run degrades); where it does not, the verdict is inconclusive and its reason
says what the design reaches (tokens, epochs, each run's best checkpoint), so that a reader
sees what saturation would need. Then the share of pairs in which the parallel run degrades and
the sequential one does not, with its Clopper–Pearson interval, against ``b6_v3.decide``'s
bar: 1/4, the most that share can be when the layout makes no difference. v1 and v2 (a count
of pairs against three in four; v2 after the same premise) are kept beside it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from geolib.measure import validate as check
from geolib.measure.stats import count_excluding, proportion_ci
from geolib.verdicts.chapters.interface import own_section
from geolib.verdicts.claims import AFTER_DATA, Claim, scale_of_runs
from geolib.verdicts.history import History
from geolib.verdicts.learners import Learners, learners
from geolib.verdicts.markup import words
from geolib.verdicts.rules import (
    Verdict,
    given_premise,
    robustness,
    rule_from_params,
    seeds_agreeing,
)
from geolib.verdicts.schema import check_section, learned_margin
from geolib.verdicts.sweep_chapters import share_text
from geolib.verdicts.sweep_tables import (
    V3Terms,
    mapping,
    unigram_entropy,
)

CHAPTER, ANCHOR = "saturation", "verdict-b6"
#: how a run "degrades": the lower bound of its degradation's interval above 0, or the point
BY = {"ci": "degradation_ci_low", "point": "degradation"}
RUN_COLUMNS = (
    "name", "layout", "width", "seed", "best_step", "final_step", "degradation",
    "degradation_ci_low", "degradation_ci_high", "rank_drop", "loss_id_eval_final",
    "epochs_final", "params", "tokens",
)  # fmt: skip


@dataclass(frozen=True)
class Section(V3Terms):
    """What B6's verdicts read of ``params.yaml``: section ``saturation`` (where its tables are,
    the layouts, the late span, the interval level, v3's mapping ``b6_v3``),
    ``verdicts.learned_margin`` (the fields its v3 rule states:
    :class:`~geolib.verdicts.sweep_tables.V3Terms`) and ``verdicts.history`` (v1: the rule
    ``b6_rule``; v2: the same after its premise)."""

    out_dir: str  #: where ``saturation_tables`` wrote the tables
    layouts: tuple[str, str]  #: (parallel, sequential)
    second_half_from: float
    ci_level: float
    history: History
    rule: Mapping[str, Any]
    reference_tokens: float

    @classmethod
    def from_params(
        cls, section: Mapping[str, Any], verdicts: Mapping[str, Any] | None = None
    ) -> Section:
        where = "saturation"
        section = mapping(where, section)
        check_section(where, section)
        margin = learned_margin(verdicts)
        layouts = tuple(section["layouts"])
        if len(layouts) != 2:
            raise ValueError(f"{where}.layouts: two layouts (parallel, sequential), got {layouts}")
        v3 = section["b6_v3"]
        alts = v3["alternatives"]
        for name, change in alts.items():
            bad = {k: v for k, v in change.items() if k != "by" or v not in BY}
            if bad or not change:
                raise ValueError(f"{where}.b6_v3.alternatives.{name}: only 'by' in {sorted(BY)}")
        return cls(
            out_dir=str(section["out_dir"]),
            layouts=(str(layouts[0]), str(layouts[1])),
            second_half_from=float(section["second_half_from"]),
            ci_level=float(section["ci_level"]),
            history=History.from_params(verdicts, CHAPTER, section),
            rule=dict(v3["decide"]),
            revision=words(v3["revision"]),
            alternatives={str(k): dict(v) for k, v in alts.items()},
            reference_tokens=float(v3["reference_tokens"]),
            unigram_counts=str(v3["unigram_counts"]),
            learned_margin=margin,
        )


@dataclass(frozen=True)
class Tables:
    """The tables of ``saturation_tables`` (``saturation.out_dir``): one row per run
    (``runs.csv``), the curves through training (``curves.csv``), the stage's B6 count as v1 and
    v2 read it (``summary.json``), and the unigram entropy of the training split."""

    runs: pd.DataFrame
    curves: pd.DataFrame
    summary: Mapping[str, Any]
    unigram_entropy: float

    def __post_init__(self) -> None:
        missing = [c for c in RUN_COLUMNS if c not in self.runs.columns]
        if missing:
            raise ValueError(f"runs.csv lacks column(s) {missing}")
        missing = [c for c in ("name", "step", "loss_id_eval") if c not in self.curves.columns]
        if missing:
            raise ValueError(f"curves.csv lacks column(s) {missing}")
        if set(self.curves["name"]) != set(self.runs["name"]):
            raise ValueError("curves.csv and runs.csv hold different runs")
        missing = [k for k in ("successes", "n_units", "n_parallel_degrades", "point")]
        missing = [k for k in missing if k not in self.summary]
        if missing:
            raise ValueError(f"summary.json lacks key(s) {missing}")
        check.scalar("unigram_entropy", self.unigram_entropy, low=0.0, strict=True)


def load_tables(folder: str | Path, unigram_counts: str | Path) -> Tables:
    """The tables of ``saturation_tables`` from ``folder`` and the entropy of the training
    split's token counts ``unigram_counts``."""
    folder = Path(folder)
    return Tables(
        runs=pd.read_csv(folder / "runs.csv"),
        curves=pd.read_csv(folder / "curves.csv"),
        summary=json.loads((folder / "summary.json").read_text()),
        unigram_entropy=unigram_entropy(unigram_counts),
    )


def read_section(params_path: str | Path, overrides: Mapping[str, Any] | None = None) -> Section:
    """This chapter's section (``overrides`` applied) with ``verdicts``, every field checked."""
    return own_section(params_path, CHAPTER, overrides, Section)


def read(
    params_path: str | Path, overrides: Mapping[str, Any] | None = None
) -> tuple[Section, Tables]:
    """This chapter's section and the tables it decides on
    (:mod:`geolib.verdicts.chapters.interface`)."""
    section = read_section(params_path, overrides)
    return section, load_tables(section.out_dir, section.unigram_counts)


def learned(tables: Tables, section: Section) -> Learners:
    """The runs that learned: final ID loss at least ``learned_margin`` nats below the unigram
    entropy of the training split."""
    loss = dict(zip(tables.runs["name"], tables.runs["loss_id_eval_final"], strict=True))
    return learners(loss, dict.fromkeys(loss, tables.unigram_entropy), section.learned_margin)


def pairs(tables: Tables, section: Section, by: str = "ci") -> pd.DataFrame:
    """One row per (width, seed): its two runs, whether each degrades (``by``: the interval's
    lower bound above 0, or the point estimate), the contrast the claim is about (parallel
    degrades, sequential does not) and whether both runs learned."""
    check.one_of("by", by, sorted(BY))
    par, seq = section.layouts
    who, rows = learned(tables, section), []
    for (width, seed), g in tables.runs.groupby(["width", "seed"], sort=False):
        at = g.set_index("layout")
        if sorted(at.index) != sorted(section.layouts):
            raise ValueError(f"width {width}, seed {seed}: need one run of each layout")
        p, s = at.loc[par], at.loc[seq]
        rows.append(
            {
                "width": width,
                "seed": seed,
                "parallel": p["name"],
                "sequential": s["name"],
                "parallel_degrades": bool(p[BY[by]] > 0),
                "sequential_degrades": bool(s[BY[by]] > 0),
                "contrast": bool(p[BY[by]] > 0 and not s[BY[by]] > 0),
                "learned": p["name"] in who.kept and s["name"] in who.kept,
            }
        )
    return pd.DataFrame(rows)


def late_change(tables: Tables, section: Section) -> pd.Series:
    """Per run: the ID validation loss at the final checkpoint minus at the first checkpoint of
    the late span (from ``second_half_from`` of training on; negative: still falling)."""
    out = {}
    for name, g in tables.curves.sort_values("step").groupby("name", sort=False):
        late = g[g["step"] >= section.second_half_from * g["step"].iloc[-1]]
        out[name] = float(late["loss_id_eval"].iloc[-1] - late["loss_id_eval"].iloc[0])
    return pd.Series(out, name="late_change").reindex(tables.runs["name"])


#: why B6's row does not carry the other B rows' premise, said in its rule
W_PREMISE_WORDS = (
    "The other B rows' premise, W left its random start and settled, is not applied here: B6 "
    "is about how loss and W's rank move late in training, so W still moving is what it "
    "watches, not a flaw of the design"
)


def _sci(x: float, digits: int) -> str:
    """``1e11``, ``6.5e4``: a large number in short scientific notation."""
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def design_words(tables: Tables, section: Section) -> str:
    """What the design reaches, in numbers: tokens and epochs, the best late checkpoint of each
    run against its final one, how the loss moved over the late span, and the tokens after which
    small Pythia models were seen to saturate."""
    r = tables.runs
    at_end = r["best_step"] == r["final_step"]
    finals = "/".join(str(x) for x in sorted(set(r.loc[at_end, "final_step"])))
    earlier = ", ".join(
        f"{x.name} {x.best_step} of {x.final_step}" for x in r[~at_end].itertuples()
    )
    late = late_change(tables, section)
    tokens = float(r["tokens"].max())
    return (
        f"the runs reach {tokens:,.0f} tokens ({r['epochs_final'].max():.2f} epochs of the "
        f"training split); the best late checkpoint is the final one (step {finals or '-'}) in "
        f"{int(at_end.sum())} of {len(r)} runs{f' (earlier: {earlier})' if earlier else ''}; "
        f"over the late span the ID loss still fell in {int((late < 0).sum())} of {len(r)} runs "
        f"(median change {late.median():+.3g} nats); small Pythia models were seen to saturate "
        f"after about {_sci(section.reference_tokens, 0)} tokens, "
        f"{_sci(section.reference_tokens / tokens, 1)} times more"
    )


def decide(
    tables: Tables,
    section: Section,
    change: Mapping[str, Any] | None = None,
    seeds: Sequence[Any] | None = None,
) -> tuple[Verdict, str]:
    """v3 (module docstring) over the learned pairs (of ``seeds`` only, if given), and its key
    number in words; ``change``: an alternative's settings (``by``)."""
    unknown = sorted(set(change or {}) - {"by"})
    if unknown:
        raise ValueError(f"unknown alternative setting(s) {unknown}; known: ['by']")
    p = pairs(tables, section, (change or {}).get("by", "ci"))
    p = p[p["learned"] & (p["seed"].isin(seeds) if seeds is not None else True)]
    rule, level = rule_from_params(section.rule), section.ci_level
    n, k_par, k = len(p), int(p["parallel_degrades"].sum()), int(p["contrast"].sum())
    if n == 0:
        why = "no matched pair whose two runs both learned"
        return given_premise(rule, False, why, lambda: rule.decide(0, 0, 0)), why
    if k_par == 0:
        why = (
            f"no parallel-block run degrades: {share_text(0, n, level)}; "
            f"{design_words(tables, section)}"
        )
        key = f"parallel-block runs that degrade: {share_text(0, n, level)}"
        return given_premise(rule, False, why, lambda: rule.decide(0, 0, 0)), key
    share = proportion_ci(k, n, level)
    v = rule.decide(share.fraction, share.low, share.high)
    what = "pairs where the parallel run degrades and the sequential does not"
    return v, f"{what}: {share_text(k, n, level)}"


def runs_table(tables: Tables, section: Section) -> pd.DataFrame:
    """Per run, what the verdict reads: who learned (nats below the unigram entropy), the best
    late and final steps, the degradation with its interval (and whether it excludes its
    estimate), the rank drop, the late-span loss change and the epochs seen."""
    r = tables.runs
    est, lo, hi = (r[c] for c in ("degradation", "degradation_ci_low", "degradation_ci_high"))
    return pd.DataFrame(
        {
            "run": r["name"],
            "below_unigram": tables.unigram_entropy - r["loss_id_eval_final"],
            "best_step": r["best_step"],
            "final_step": r["final_step"],
            "degradation": est,
            "ci_low": lo,
            "ci_high": hi,
            "excludes_estimate": (est < lo) | (est > hi),
            "rank_drop": r["rank_drop"],
            "late_change": late_change(tables, section).to_numpy(),
            "epochs": r["epochs_final"],
        }
    )


def excluding(tables: Tables) -> tuple[int, int]:
    """How many runs' degradation intervals exclude their estimate (kept as drawn)."""
    r = tables.runs
    return count_excluding(r["degradation"], r["degradation_ci_low"], r["degradation_ci_high"])


def _scale(tables: Tables, kept: pd.DataFrame) -> str:
    """The scale of the runs of the pairs ``kept`` (a configuration: a layout at a width)."""
    names = set(kept["parallel"]) | set(kept["sequential"])
    runs = tables.runs[tables.runs["name"].isin(names)]
    if runs.empty:
        return f"{len(tables.runs)} runs, none in a pair that learned"
    return scale_of_runs(
        {
            r["name"]: {
                "family": f"{r['layout']}-{r['width']}",
                "seed": r["seed"],
                "params": r["params"],
                "tokens": r["tokens"],
            }
            for r in runs.to_dict("records")
        }
    )


def b6(tables: Tables, section: Section) -> Claim:
    """B6's row: v3 with its per-seed agreement and robustness, v1 and v2 beside it."""
    v, key = decide(tables, section)
    alts = {n: decide(tables, section, c)[0].status for n, c in section.alternatives.items()}
    p = pairs(tables, section)
    p = p[p["learned"]]
    per_seed = [decide(tables, section, seeds=[s])[0].status for s in sorted(set(p["seed"]))]
    before = section.history.verdicts(tables.summary)["B6"]
    v1, v2 = before["v1"], before["v2"]
    k_ex, n_ex = excluding(tables)
    median = tables.runs.groupby("layout")["degradation"].median()
    level = section.ci_level
    words_ = design_words(tables, section)
    design = "" if words_ in v.reason else f"The design: {words_}. "
    detail = (
        f"v3: {v.reason}. Learned pairs {len(p)} of {len(pairs(tables, section))}; parallel runs "
        f"that degrade {share_text(int(p['parallel_degrades'].sum()), len(p), level)}, "
        f"sequential {share_text(int(p['sequential_degrades'].sum()), len(p), level)}. "
        f"Median degradation by layout: {', '.join(f'{k} {x:+.4f}' for k, x in median.items())} "
        f"nats; {k_ex} of {n_ex} degradation intervals exclude their estimate. {design}"
        f"v2: {v2.reason}. v1: {v1.reason}."
    )
    return Claim(
        "B6",
        v.status,
        key,
        CHAPTER,
        detail,
        anchor=ANCHOR,
        rule=(
            "v3, over the matched (width, seed) pairs whose two runs learned; premise: some "
            f"parallel-block run degrades. {rule_from_params(section.rule).describe()}. "
            f"{W_PREMISE_WORDS}"
        ),
        unit=f"matched (width, seed) pairs whose two runs learned (n = {len(p)})",
        seeds_agreeing=seeds_agreeing(per_seed, v.status) if per_seed else "",
        robust=robustness(v.status, alts),
        rule_v1=v1.status,
        rule_v2=v2.status,
        revision=section.revision,
        scale=_scale(tables, p),
        decided=AFTER_DATA,
        numbers=v.numbers,
    )


def verdicts(tables: Tables, section: Section) -> list[Claim]:
    """The chapter's claim rows: B6."""
    return [b6(tables, section)]
