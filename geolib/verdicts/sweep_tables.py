"""What the three sweep chapters read (claims B1–B5, B7, B8): the sections a notebook reads
beside its rules (:class:`SweepSetup`), the tables of stage ``geometry_performance_tables``
loaded once (:class:`SweepTables`), the lookups the verdicts read, the unigram entropy a model
must beat to have learned, and the count of the tables' intervals that exclude their estimate.
The rules that read them are in :mod:`geolib.verdicts.sweep_chapters`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd

from geolib.config import stage_params
from geolib.measure.stats import count_excluding, entropy_of_counts
from geolib.verdicts.budget_premise import BUDGETS
from geolib.verdicts.history import History
from geolib.verdicts.schema import Field, learned_margin, require, v3_fields
from geolib.verdicts.settled_premise import PremiseSpec, read_study
from geolib.verdicts.sweep_v4 import V4, configuration, points_at, required, v4_of

#: the sweep's factors, as :data:`geolib.models.grid.FACTORS` names them (a test keeps them
#: equal; the report wing knows no models)
FACTORS = ("size", "batch_size", "weight_decay", "lr", "final_lr_ratio", "seed")


@dataclass(frozen=True)
class SweepSetup:
    """What each sweep chapter's notebook reads beside its rules: who learned (the top-level
    ``verdicts`` section), the design (``sweep``), and the sections of other stages whose
    tables it reads (``stages``: B8's ``forgetting`` and ``quantization``), each with
    ``common`` merged in. Its rules (the ``geometry_performance`` section, with its overrides)
    and where it writes, a notebook reads itself: the pipeline's checks look for them there."""

    verdicts: dict[str, Any]
    sweep: dict[str, Any]
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def read(cls, params_path: str | Path, *stages: str) -> SweepSetup:
        """The sections from the parameters file ``params_path``: ``verdicts``, ``sweep``, then
        each of ``stages`` (a missing one is an error naming it)."""
        verdicts = stage_params(params_path, "verdicts")
        sweep = stage_params(params_path, "sweep")
        return cls(verdicts, sweep, {s: stage_params(params_path, s) for s in stages})

    def grid_words(self, models: pd.DataFrame) -> str:
        """This run's grid in words (Markdown), from the design and the per-model table
        ``models`` (how many models, the vocabulary): sizes, factor levels, tokens and steps,
        the centre point, what varies around it and the seed replicates."""
        sweep = self.sweep
        levels, base = sweep["factorial"], sweep["base"]
        sizes = ", ".join(
            f"{k} (d = {v['d_model']}, {v['n_layers']} layers)" for k, v in sweep["sizes"].items()
        )
        steps = ", ".join(
            f"{b}: {base['token_budget'] // (b * base['seq_len'])}" for b in levels["batch_size"]
        )
        multiples = sweep.get("budgets") or {"D": 1}
        budgets = " and ".join(f"{b} = {k * base['token_budget']:,}" for b, k in multiples.items())
        scaling = base.get("lr_scaling")
        lr = f"peak learning rate {levels['lr']}"
        if scaling and scaling["exponent"]:
            ref = scaling["reference_batch"]
            lr += f" at batch {ref}, times (batch / {ref})^{scaling['exponent']:g}"
        schedule = base.get("schedule", "cosine")
        if schedule == "wsd":
            schedule = (
                f"warmup-stable-decay, the last {base['decay_fraction']:.0%} of each run's steps "
                "decaying linearly (each smaller budget a cooldown branch of the largest)"
            )
        return (
            f"**This run's grid.** {len(models)} models. Sizes {sizes}; vocabulary "
            f"{models['vocab_size'].iloc[0]}. Batch sizes {levels['batch_size']} sequences of "
            f"{base['seq_len']} tokens; weight decay {levels['weight_decay']}; {lr}; schedule "
            f"{schedule}, annealed to {levels['final_lr_ratio']} of the peak; "
            f"each point at {budgets} tokens per model (rules v4 decide every row at each), so "
            f"steps by batch size at D {steps}. Centre "
            f"{sweep['center']}, varied {sweep['vary']}; seed replicates "
            f"{sweep['replicate_seeds']}."
        )


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

    def frames(self) -> dict[str, pd.DataFrame]:
        """The tables by name, as the rule history's table checks read them
        (:mod:`geolib.verdicts.history`)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "folder"}

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
        """The models as :func:`geolib.verdicts.claims.scale_of_runs` reads them: a configuration
        is a point less its seed (at its budget)."""
        return {
            r["name"]: {
                "family": configuration(r["name"])[0],
                "seed": configuration(r["name"])[1],
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


def unigram_entropy(path: str | Path) -> float:
    """Entropy (nats) of the token counts in ``path`` (``token_id,token,count``: the training
    split's counts, written by the tokenizer stage): the loss of the best predictor that ignores
    context, the bar a model must beat to have learned."""
    counts = pd.read_csv(path, usecols=["count"])["count"].to_numpy(np.float64)
    try:
        return entropy_of_counts(counts)
    except ValueError as err:
        raise ValueError(f"{path}: token counts: {err}") from None


@dataclass(frozen=True)
class ChapterTables:
    """The sweep's tables as a chapter reads them, with the unigram entropy of the training
    split (the bar a model must beat to have learned) and the training-length study's settling
    table (``study``: the premise that W settled); a chapter's subclass adds its own."""

    sweep: SweepTables
    unigram_entropy: float
    study: pd.DataFrame


#: the intervals of the sweep's tables: attribute of :class:`SweepTables` → its file and its
#: (estimate, low, high) column triples
INTERVALS: dict[str, tuple[str, tuple[tuple[str, str, str], ...]]] = {
    "prediction": (
        "prediction.csv",
        tuple((s, f"{s}_ci_low", f"{s}_ci_high") for s in ("r2", "spearman", "partial_spearman")),
    ),
    "within": (
        "prediction_within_size.csv",
        tuple((s, f"{s}_ci_low", f"{s}_ci_high") for s in ("r2", "partial_spearman")),
    ),
    "r2_gap": ("r2_gap.csv", (("r2_gap", "ci_low", "ci_high"),)),
    "r2_gap_alternatives": ("r2_gap_alternatives.csv", (("r2_gap", "ci_low", "ci_high"),)),
    "agreement": ("agreement.csv", (("value", "ci_low", "ci_high"),)),
    **{
        name: (
            f"{name}.csv",
            ((est, "ci_low", "ci_high"), (est, "ci_low_sd", "ci_high_sd")),
        )
        for name, est in (
            ("effects", "effect_sd"),
            ("interactions", "interaction_sd"),
            ("effects_by_size", "effect_sd"),
        )
    },
}


def excluding(tables: SweepTables, names: Sequence[str]) -> pd.DataFrame:
    """How many intervals of each table (``names``: attributes of :class:`SweepTables`) exclude
    their estimate (:func:`geolib.measure.stats.count_excluding`): one row per table and
    interval, ``excluding`` of ``intervals`` (finite ones)."""
    rows = []
    for name in names:
        if name not in INTERVALS:
            raise KeyError(f"no intervals known for table {name!r}; known: {sorted(INTERVALS)}")
        file, triples = INTERVALS[name]
        table = getattr(tables, name)
        for est, lo, hi in triples:
            if {est, lo, hi} <= set(table.columns):
                k, n = count_excluding(table[est], table[lo], table[hi])
                rows.append(
                    {
                        "table": file,
                        "interval": f"{est} [{lo}, {hi}]",
                        "excluding": k,
                        "intervals": n,
                    }
                )
    return pd.DataFrame(rows, columns=["table", "interval", "excluding", "intervals"])


def excluding_words(counts: pd.DataFrame) -> str:
    """:func:`excluding`'s table in one sentence."""
    k, n = int(counts["excluding"].sum()), int(counts["intervals"].sum())
    which = "; ".join(
        f"{r.table} {r.interval}: {r.excluding} of {r.intervals}"
        for r in counts.itertuples()
        if r.excluding
    )
    return f"{k} of {n} intervals in the tables exclude their estimate" + (
        f" ({which})" if which else ""
    )


def tables_at_budgets(
    sweep: Mapping[str, Any], load: Callable[[str, list[str]], Any]
) -> dict[str, Any]:
    """A sweep chapter's tables at each token budget: budget → ``load(budget, that budget's
    points)``, from its stages' ``<budget>/`` folders (what rules v4 read). ``sweep``: the
    design (section ``sweep``)."""
    return {b: load(b, points_at(sweep["points"], b)) for b in BUDGETS}


def read_budgets(params_path: str | Path, load: Callable[[str, list[str]], Any]) -> dict[str, Any]:
    """:func:`tables_at_budgets` with the design read from the parameters file: the tables half
    of a sweep chapter's ``read`` (:mod:`geolib.verdicts.chapters.interface`), ``load`` reading
    them for the section ``read_section`` built and checked."""
    return tables_at_budgets(stage_params(params_path, "sweep"), load)


@dataclass(frozen=True, kw_only=True)
class RuleVersions:
    """The rule versions a sweep chapter's section holds beside v3: v4 (``sweep_v4``: one
    verdict over both budgets; absent from a v3-only section) and v1 and v2, declared as data
    (:mod:`geolib.verdicts.history`)."""

    v4: V4 | None = None
    history: History | None = field(default=None, repr=False)

    def v4_rules(self) -> V4:
        """Rules v4, or an error saying the section has none."""
        return required(self.v4)

    def earlier_rules(self) -> History:
        """The chapter's v1 and v2 rules, or an error saying the section has none."""
        if self.history is None:
            raise ValueError(f"{type(self).__name__} holds no rule history (verdicts.history)")
        return self.history


@dataclass(frozen=True)
class SweepSection(RuleVersions):
    """What every sweep chapter reads of the ``geometry_performance`` section (and of the
    top-level ``verdicts`` section): where the tables are, the bootstrap's settings, the v1
    rules (``verdict``), the v2 mapping, and the v3 constants (``sweep_v3``).

    A chapter's subclass adds a field per v3 mapping it reads, and declares what its schema
    adds to the shared fields (:data:`SWEEP_FIELDS`): ``V1_RULES`` (rules of ``verdict``),
    ``V2_FIELDS`` (fields of ``v2``), ``V2_RULES`` (claims whose v2 rule is
    ``v2.<claim>.decide``), ``V3_RULES`` (v3 mapping → the rules it holds) and what no schema
    states (:meth:`check_v2`)."""

    #: the chapter whose rule history (``verdicts.history.<CHAPTER>``) the section holds
    CHAPTER: ClassVar[str] = ""
    V1_RULES: ClassVar[Sequence[str]] = ()
    V2_FIELDS: ClassVar[Sequence[Field]] = ()
    V2_RULES: ClassVar[Sequence[str]] = ()
    V3_RULES: ClassVar[Mapping[str, Sequence[str]]] = {}

    models_table: Path
    n_boot: int
    level: float
    seed: int
    verdict: Mapping[str, Mapping[str, Any]]
    v2: Mapping[str, Any]
    unigram_counts: Path
    min_learned_per_size: int
    learned_margin: float
    w_premise: PremiseSpec

    @classmethod
    def schema(cls) -> tuple[Field, ...]:
        """The section's fields, declared once: the shared ones and the chapter's."""
        return (
            *SWEEP_FIELDS,
            *(Field(f"verdict.{key}", "rule") for key in cls.V1_RULES),
            *cls.V2_FIELDS,
            *(Field(f"v2.{claim}.decide", "rule") for claim in cls.V2_RULES),
            *(
                f
                for key, rules in cls.V3_RULES.items()
                for f in v3_fields(
                    key, *(Field(f"{key}.{rule}", "rule") for rule in rules), some_alternative=True
                )
            ),
        )

    @classmethod
    def from_params(
        cls, section: Mapping[str, Any], verdicts: Mapping[str, Any] | None = None
    ) -> Self:
        """From the section (``common`` merged in) and the top-level ``verdicts`` section; an
        error names every field that breaks the schema (:meth:`schema`) at once, then what
        else is wrong."""
        where = "geometry_performance"
        require(where, mapping(where, section), cls.schema())
        margin = learned_margin(verdicts)
        cls.check_v2(section["v2"])
        v3 = section["sweep_v3"]
        return cls(
            models_table=Path(str(section["models_table"])),
            n_boot=int(section["n_boot"]),
            level=float(section["ci_level"]),
            seed=int(section.get("seed", 0)),
            verdict=dict(section["verdict"]),
            v2=dict(section["v2"]),
            unigram_counts=Path(str(v3["unigram_counts"])),
            min_learned_per_size=int(v3["min_learned_per_size"]),
            learned_margin=margin,
            w_premise=PremiseSpec.from_params(v3["w_premise"]),
            **{key: dict(section[key]) for key in cls.V3_RULES},
            v4=v4_of(section),
            history=History.from_params(verdicts, cls.CHAPTER, section) if cls.CHAPTER else None,
        )

    @staticmethod
    def check_v2(v2: Mapping[str, Any]) -> None:
        """A chapter's own settings of ``v2`` (none here; an error names the key)."""

    def at_budget(self, budget: str) -> Self:
        """This section reading the tables of one token budget (the analysis stage's
        ``<budget>/`` folder beside the models table)."""
        return replace(
            self, models_table=self.models_table.parent / budget / self.models_table.name
        )

    def load_sweep(self, points: Sequence[str]) -> SweepTables:
        """The sweep's tables, from where the analysis stage wrote them (``points``: the
        sweep's)."""
        return SweepTables.load(self.models_table.parent, list(points))

    def chapter_tables(self, points: Sequence[str]) -> dict[str, Any]:
        """The fields of :class:`ChapterTables`: the sweep's tables, the unigram entropy, the
        study's settling table."""
        return {
            "sweep": self.load_sweep(points),
            "unigram_entropy": unigram_entropy(self.unigram_counts),
            "study": read_study(self.w_premise),
        }


#: what every sweep chapter reads of the ``geometry_performance`` section (common merged in)
SWEEP_FIELDS = (
    Field("models_table", "text"),
    Field("n_boot", int, low=100),
    Field("ci_level", float, low=0.0, high=1.0, open_low=True, open_high=True),
    Field("seed", int, low=0, optional=True),
    Field("verdict", "mapping"),
    Field("v2", "mapping"),
    Field("v2.premise_min_sd_ratio", float, low=0.0, open_low=True),
    Field("sweep_v3.unigram_counts", "text"),
    Field("sweep_v3.min_learned_per_size", int, low=2),  # a spread within a size
    Field("sweep_v3.w_premise", "mapping"),
)


@dataclass(frozen=True, kw_only=True)
class V3Terms:
    """What the section of a chapter with one v3 rule (B6, B8) states beside its checks: why v3
    differs from v2 (``revision``, in words), the alternatives declared with it (name →
    settings), and whom it counts: the models whose ID loss lies at least ``learned_margin``
    nats (``verdicts.learned_margin``) below the unigram entropy of the training split's token
    counts (``unigram_counts``)."""

    revision: str
    alternatives: Mapping[str, Mapping[str, Any]]
    unigram_counts: str
    learned_margin: float


def mapping(where: str, value: Any) -> dict[str, Any]:
    """``value`` as a dict, or an error naming ``where``."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be a mapping, got {value!r}")
    return dict(value)
