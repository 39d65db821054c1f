"""What claim B8's verdicts read of ``params.yaml`` (:class:`Section`), checked when built:
section ``geometry_performance``'s v2 premise, ``b8_v3``, ``sweep_v3``, bootstrap settings and
rules v4, the v1 rules and interval levels of sections ``forgetting`` and ``quantization``, and
``verdicts.learned_margin`` and the chapter's rule history. The chapter's rules live in
:mod:`~geolib.verdicts.chapters.forgetting_quantization`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from geolib.verdicts.history import History
from geolib.verdicts.markup import words
from geolib.verdicts.schema import Field, learned_margin, require, v3_fields
from geolib.verdicts.settled_premise import PremiseSpec
from geolib.verdicts.sweep_tables import SWEEP_FIELDS, RuleVersions, V3Terms
from geolib.verdicts.sweep_v4 import v4_of

#: what a declared alternative may change
CHANGES = ("predictor", "within", "loss_beats_rank", "loose")
#: the v3 rules of ``b8_v3``
RULES = ("no_prediction", "loss_beats_rank")


#: the fields B8 reads of the ``geometry_performance`` section, beside every sweep chapter's
FIELDS = (
    *SWEEP_FIELDS,
    Field("v2.min_share_above_zero", float, low=0.0, high=1.0),
    *v3_fields(
        "b8_v3",
        *(Field(f"b8_v3.{rule}", "rule") for rule in RULES),
        Field("b8_v3.premise_min_sd_ratio", float, low=0.0, open_low=True),
        some_alternative=True,
    ),
)
#: each outcome's section and the prefix of its v1 rules (``<prefix>_loose``, ...)
PREFIX = {"forgetting": "b8_forgetting", "quantization": "b8_quant"}
#: the v1 rules of each outcome
V1_RULES = ("loose", "no_prediction")
#: the fields B8 reads of each outcome's section: its v1 rules, its intervals' level and where
#: its tables are
FAMILY_FIELDS = {
    family: (
        *(Field(f"{prefix}_{rule}", "rule") for rule in V1_RULES),
        Field("ci_level", float, low=0.0, high=1.0, open_low=True, open_high=True),
        Field("out_dir", "text"),
    )
    for family, prefix in PREFIX.items()
}


def _alternatives(where: str, alts: Mapping[str, Any], allowed: tuple[str, ...]) -> dict:
    """The declared alternatives (name → settings), each setting one of ``allowed``."""
    for name, change in alts.items():
        bad = sorted(set(change) - set(allowed))
        if bad:
            raise ValueError(f"params.yaml {where}.{name}: unknown {bad}; known {allowed}")
    return {str(k): dict(v) for k, v in alts.items()}


@dataclass(frozen=True)
class Section(V3Terms, RuleVersions):
    """What B8's verdicts read of ``params.yaml``: section ``geometry_performance`` (v2's
    premise, ``b8_v3``, ``sweep_v3``, ``n_boot``, ``ci_level``, ``seed``), the v1 rules and
    interval levels of sections ``forgetting`` and ``quantization``, and
    ``verdicts.learned_margin`` (the fields its v3 rule states:
    :class:`~geolib.verdicts.sweep_tables.V3Terms`), with rules v4 and the rule history of v1
    and v2 (:class:`~geolib.verdicts.sweep_tables.RuleVersions`; v1's and v2's rules are keys of
    the ``forgetting`` and ``quantization`` sections)."""

    v1: Mapping[str, Mapping[str, Any]]  #: family → {"loose": rule, "no_prediction": rule}
    outcome_level: Mapping[str, float]  #: family → level of its per-model intervals
    out_dir: Mapping[str, str]  #: family → where its stage wrote the tables
    v2_min_share_above_zero: float
    premise_min_sd_ratio: float
    no_prediction: Mapping[str, Any]
    loss_beats_rank: Mapping[str, Any]
    min_learned_per_size: int
    n_boot: int
    ci_level: float
    seed: int
    w_premise: PremiseSpec

    @classmethod
    def from_params(
        cls,
        section: Mapping[str, Any],
        verdicts: Mapping[str, Any] | None = None,
        *,
        forgetting: Mapping[str, Any],
        quantization: Mapping[str, Any],
    ) -> Section:
        """From the three sections and the top-level ``verdicts`` section; an error names every
        field of a section that breaks its schema at once (:data:`FIELDS`,
        :data:`FAMILY_FIELDS`)."""
        gp = "geometry_performance"
        require(gp, section, FIELDS)
        families = {"forgetting": forgetting, "quantization": quantization}
        for family, spec in families.items():
            require(family, spec, FAMILY_FIELDS[family])
        margin = learned_margin(verdicts)
        v3, sweep_v3 = section["b8_v3"], section["sweep_v3"]
        return cls(
            v1={
                family: {rule: dict(spec[f"{PREFIX[family]}_{rule}"]) for rule in V1_RULES}
                for family, spec in families.items()
            },
            outcome_level={family: float(spec["ci_level"]) for family, spec in families.items()},
            out_dir={family: str(spec["out_dir"]) for family, spec in families.items()},
            v2_min_share_above_zero=float(section["v2"]["min_share_above_zero"]),
            premise_min_sd_ratio=float(v3["premise_min_sd_ratio"]),
            no_prediction=v3["no_prediction"],
            loss_beats_rank=v3["loss_beats_rank"],
            revision=words(v3["revision"]),
            alternatives=_alternatives(f"{gp}.b8_v3.alternatives", v3["alternatives"], CHANGES),
            unigram_counts=str(sweep_v3["unigram_counts"]),
            min_learned_per_size=int(sweep_v3["min_learned_per_size"]),
            learned_margin=margin,
            n_boot=int(section["n_boot"]),
            ci_level=float(section["ci_level"]),
            seed=int(section.get("seed", 0)),
            w_premise=PremiseSpec.from_params(sweep_v3["w_premise"]),
            v4=v4_of(section),
            history=History.from_params(verdicts, "forgetting_quantization", families),
        )
