"""What claim B8's verdicts read of ``params.yaml`` (:class:`Section`), checked when built:
section ``geometry_performance``'s v2 premise, ``b8_v3``, ``sweep_v3``, bootstrap settings and
rules v4, the v1 rules and interval levels of sections ``forgetting`` and ``quantization``, and
``verdicts.learned_margin``. The chapter's rules live in
:mod:`~geolib.report.chapters.forgetting_quantization`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from geolib.measure import validate as check
from geolib.report.markup import words
from geolib.report.settled_premise import PremiseSpec
from geolib.report.sweep_tables import V3Terms, rule_spec, v3_spec
from geolib.report.sweep_v4 import V4, v4_of

#: what a declared alternative may change
CHANGES = ("predictor", "within", "loss_beats_rank", "loose")
#: the v3 rules of ``b8_v3``
RULES = ("no_prediction", "loss_beats_rank")


def param_at(where: str, mapping: Any, path: str) -> Any:
    """``mapping[a][b]…`` for ``path = "a.b…"``; an error naming the section and the key."""
    value = mapping
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            raise ValueError(f"params.yaml {where}: missing {path!r}")
        value = value[key]
    return value


def _alternatives(where: str, alts: Mapping[str, Any], allowed: tuple[str, ...]) -> dict:
    """The declared alternatives (name → settings), each setting one of ``allowed``."""
    for name, change in alts.items():
        bad = sorted(set(change) - set(allowed))
        if bad:
            raise ValueError(f"params.yaml {where}.{name}: unknown {bad}; known {allowed}")
    return {str(k): dict(v) for k, v in alts.items()}


def _level(where: str, value: Any) -> float:
    level = check.scalar(where, value)
    if not 0.0 < level < 1.0:
        raise ValueError(f"{where} must be in (0, 1), got {level}")
    return level


@dataclass(frozen=True)
class Section(V3Terms):
    """What B8's verdicts read of ``params.yaml``: section ``geometry_performance`` (v2's
    premise, ``b8_v3``, ``sweep_v3``, ``n_boot``, ``ci_level``, ``seed``), the v1 rules and
    interval levels of sections ``forgetting`` and ``quantization``, and
    ``verdicts.learned_margin`` (the fields its v3 rule states:
    :class:`~geolib.report.sweep_tables.V3Terms`)."""

    v1: Mapping[str, Mapping[str, Any]]  #: family → {"loose": rule, "no_prediction": rule}
    outcome_level: Mapping[str, float]  #: family → level of its per-model intervals
    v2_min_share_above_zero: float
    premise_min_sd_ratio: float
    no_prediction: Mapping[str, Any]
    loss_beats_rank: Mapping[str, Any]
    min_learned_per_size: int
    n_boot: int
    ci_level: float
    seed: int
    w_premise: PremiseSpec
    #: rules v4 (``geometry_performance.sweep_v4``), absent from a v3-only section
    v4: V4 | None = field(default=None, kw_only=True)

    @classmethod
    def from_params(
        cls,
        section: Mapping[str, Any],
        verdicts: Mapping[str, Any] | None = None,
        *,
        forgetting: Mapping[str, Any],
        quantization: Mapping[str, Any],
    ) -> Section:
        gp = "geometry_performance"
        if verdicts is None:
            raise ValueError("B8 needs the verdicts section (learned_margin): pass it")
        share = check.scalar(
            "v2.min_share_above_zero", param_at(gp, section, "v2.min_share_above_zero")
        )
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"v2.min_share_above_zero must be in [0, 1], got {share}")
        v3 = v3_spec(f"{gp}.b8_v3", param_at(gp, section, "b8_v3"), RULES)
        v1, levels = {}, {}
        for fam, spec, prefix in (
            ("forgetting", forgetting, "b8_forgetting"),
            ("quantization", quantization, "b8_quant"),
        ):
            v1[fam] = {
                k: rule_spec(f"{fam}.{prefix}_{k}", param_at(fam, spec, f"{prefix}_{k}"))
                for k in ("loose", "no_prediction")
            }
            levels[fam] = _level(f"{fam}.ci_level", param_at(fam, spec, "ci_level"))
        return cls(
            v1=v1,
            outcome_level=levels,
            v2_min_share_above_zero=share,
            premise_min_sd_ratio=check.scalar(
                "b8_v3.premise_min_sd_ratio",
                param_at(gp, section, "b8_v3.premise_min_sd_ratio"),
                low=0.0,
                strict=True,
            ),
            no_prediction=v3["no_prediction"],
            loss_beats_rank=v3["loss_beats_rank"],
            revision=words(v3["revision"]),
            alternatives=_alternatives(f"{gp}.b8_v3.alternatives", v3["alternatives"], CHANGES),
            unigram_counts=str(param_at(gp, section, "sweep_v3.unigram_counts")),
            min_learned_per_size=check.integer(
                "sweep_v3.min_learned_per_size",
                param_at(gp, section, "sweep_v3.min_learned_per_size"),
                low=2,
            ),
            learned_margin=check.scalar(
                "verdicts.learned_margin", param_at("verdicts", verdicts, "learned_margin"), low=0.0
            ),
            n_boot=check.integer("n_boot", param_at(gp, section, "n_boot"), low=100),
            ci_level=_level("ci_level", param_at(gp, section, "ci_level")),
            seed=check.integer("seed", section.get("seed", 0), low=0),
            w_premise=PremiseSpec.from_params(param_at(gp, section, "sweep_v3.w_premise")),
            v4=v4_of(section),
        )
