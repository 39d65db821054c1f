"""geolib.verdicts.chapters.residual_isotropy: every branch of the A5 v3 verdict on small hand-made
summaries (a few families and seeds), with the intervals checked against closed forms."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from geolib.verdicts.chapters import residual_isotropy as ri
from geolib.verdicts.claims import AFTER_DATA
from geolib.verdicts.learners import learners_of_runs
from geolib.verdicts.rules import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, PARTLY, REPRODUCED
from tests.verdicts.tables import HISTORY, with_interval

RULE = {
    "rule": "threshold",
    "threshold": 0.5,
    "no_effect": 0.0,
    "direction": "above",
    "reason": "as the paper says",
}
ALTS = {"zeta = 0": {"zeta": 0.0}, "undefined counted as 0": {"undefined": "zero"}}
SECTION = {
    "key_rank": 4,
    "zeta": 0.2,
    "a5_source": 64,
    "ci_level": 0.95,
    "a5_rule": RULE,
    "a5_v2": {"revision": "v2", "alternatives": ALTS},
    "a5_v3": {"min_models": 2, "revision": "why v3", "alternatives": ALTS},
    "a5_rule_v3": RULE,
    "after_data": {"A5": "steps cut"},
}
VERDICTS = {"learned_margin": 0.25, "history": HISTORY}


def section(**change):
    return ri.Section.from_params({**SECTION, **change}, VERDICTS)


def t_interval(values):
    """Student-t 95% interval of a mean, by hand."""
    v = np.asarray(values, dtype=float)
    h = stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
    return v.mean(), v.mean() - h, v.mean() + h


def tables(families, learned=None, zetas=("0.2", "0"), half=0.05, no_loss=()):
    """``families``: family -> per-seed key numbers (median f); each model's window interval is
    value ± ``half``. ``learned``: run -> False for non-learners (final loss 0.1 nats below the
    unigram entropy of 7; learners end at 5). ``no_loss``: runs absent from the loss table."""
    learned = learned or {}
    runs, by_run, losses = {}, {}, []
    for family, values in families.items():
        for seed, value in enumerate(values):
            run = f"runs/{family}-s{seed}"
            runs[run] = {"family": family, "seed": seed, "params": 1000, "tokens": 5000}
            by_run[run] = {
                "value": value,
                "low": value - half,
                "high": value + half,
                "n_units": 12,
                "n_undefined": 0,
            }
            if run not in no_loss:
                end = 5.0 if learned.get(run, True) else 6.9
                losses += [
                    {"run": run, "step": 0, "eval_loss": 8.0, "unigram_entropy": 7.0},
                    {"run": run, "step": 1000, "eval_loss": end, "unigram_entropy": 7.0},
                ]
    a5_v2 = {f"{z}/{how}": by_run for z in zetas for how in ("drop", "zero")}
    values = [d["value"] for d in by_run.values()]
    pooled = {"value": float(np.median(values)), "low": min(values), "high": max(values)}
    summary = {"runs": runs, "a5_v2": a5_v2, "a5": {**pooled, "n_units": 36, "n_undefined": 0}}
    residual = pd.DataFrame(
        {
            **with_interval("d_t", [0.3] * 3, [0.2, 0.2, np.nan], [0.4, 0.25, np.nan]),
            **with_interval("d_max", [0.5] * 3, [0.4, 0.3, 0.45], [0.6, 0.45, 0.55]),
            **with_interval("fraction", [0.9] * 3, [0.8] * 3, [1.0] * 3),
        }
    )
    return ri.Tables(residual, summary, pd.DataFrame(losses))


OLMO = [1.1, 1.2, 1.3]
BERT = [0.05, 0.1, 0.15]


def test_each_family_decided_on_a_t_interval_over_its_models():
    out = ri.a5_v3(tables({"olmo": OLMO, "pythia": [0.9, 1.0, 1.1]}), section())
    assert out.verdict.status == REPRODUCED
    m, lo, hi = t_interval(OLMO)
    row = out.families.set_index("family").loc["olmo"]
    assert (row["value"], row["low"], row["high"]) == pytest.approx((m, lo, hi))
    assert f"olmo {m:.3g} [{lo:.3g}, {hi:.3g}] (3 of 3 models, t)" in out.key_number
    olmo, pythia = out.verdict.numbers  # each family's number, named, for the findings figure
    assert olmo.label == "olmo" and pythia.label == "pythia" and olmo.bar == 0.5
    assert (olmo.estimate, olmo.low, olmo.high) == pytest.approx((m, lo, hi))


def test_a_family_short_of_the_bar_makes_the_claim_partly():
    out = ri.a5_v3(tables({"olmo": OLMO, "bert": BERT}), section())
    fam = out.families.set_index("family")["status"]
    # bert: 0.1 ± 4.303 * 0.05 / sqrt(3) = [-0.024, 0.224]: short of 0.5, includes 0
    assert t_interval(BERT)[1] < 0 < t_interval(BERT)[2] < 0.5
    assert fam["bert"] == NOT_REPRODUCED and fam["olmo"] == REPRODUCED
    assert out.verdict.status == PARTLY


def test_not_reproduced_partly_and_straddling_families():
    assert ri.a5_v3(tables({"bert": BERT}), section()).verdict.status == NOT_REPRODUCED
    # the direction without the size: [0.126, 0.374] excludes 0, short of 0.5
    direction = ri.a5_v3(tables({"bert": [0.2, 0.25, 0.3]}), section())
    assert direction.verdict.status == PARTLY
    # 0.5 ± 4.303 * 0.3 / sqrt(3): the interval contains the bar
    straddle = ri.a5_v3(tables({"bert": [0.2, 0.5, 0.8]}), section())
    assert straddle.verdict.status == INCONCLUSIVE
    assert "contains the threshold" in straddle.verdict.reason


def test_a_non_learner_is_left_out_and_named():
    t = tables({"olmo": [1.1, 1.3, -5.0]}, learned={"runs/olmo-s2": False})
    out = ri.a5_v3(t, section())
    m, lo, hi = t_interval([1.1, 1.3])  # the non-learner's -5 does not enter
    row = out.families.iloc[0]
    assert (row["models"], row["of"]) == (2, 3)
    assert (row["value"], row["low"], row["high"]) == pytest.approx((m, lo, hi))
    assert out.learners.left_out == {"runs/olmo-s2": pytest.approx(0.1)}
    assert "runs/olmo-s2 (0.1)" in out.learners.words()


def test_premise_fails_without_learners_or_with_too_few_models():
    none = {f"runs/olmo-s{i}": False for i in range(3)}
    out = ri.a5_v3(tables({"olmo": OLMO}, learned=none), section())
    assert out.verdict.status == INCONCLUSIVE
    assert out.verdict.reason.startswith("premise fails: no model learned")
    # one learned model of bert: no interval over models, inconclusive; olmo reproduced
    few = {"runs/bert-s1": False, "runs/bert-s2": False}
    out = ri.a5_v3(tables({"olmo": OLMO, "bert": BERT}, learned=few), section())
    fam = out.families.set_index("family")
    assert fam.loc["bert", "status"] == INCONCLUSIVE and math.isnan(fam.loc["bert", "value"])
    assert "an interval over models needs 2" in fam.loc["bert", "reason"]
    assert out.verdict.status == PARTLY
    # an undefined share (NaN) counts as no model
    undefined = ri.a5_v3(
        tables({"olmo": [1.1, float("nan"), 1.2]}),
        section(a5_v3={**SECTION["a5_v3"], "min_models": 3}),
    )
    assert undefined.verdict.status == INCONCLUSIVE


def test_a_run_without_a_recorded_loss_is_left_out():
    t = tables({"olmo": OLMO}, no_loss=("runs/olmo-s0",))
    out = ri.a5_v3(t, section())
    assert out.families.iloc[0]["models"] == 2
    assert "no loss recorded: runs/olmo-s0" in out.learners.words()


def test_an_unmeasured_zeta_is_not_run_and_robustness_names_it():
    t = tables({"olmo": OLMO, "pythia": [0.9, 1.0, 1.1]}, zetas=("0.2",))
    assert ri.a5_v3(t, section(), {"zeta": 0.0}).verdict.status == NOT_RUN
    alts = ri.alternatives(t, section())
    assert alts == {"zeta = 0": NOT_RUN, "undefined counted as 0": REPRODUCED}
    (row,) = ri.verdicts(t, section())
    assert row.robust == "yes (not run here: zeta = 0)"


def test_excluding_counts_each_bootstrapped_column():
    t = tables({"olmo": OLMO})
    got = ri.excluding(t.residual).set_index("column")
    # d_t: 0.3 above 0.25 in row 2, row 3 has no interval; d_max: 0.5 above 0.45 in row 2
    assert got.loc["d_t"].tolist() == [1, 2]
    assert got.loc["d_max"].tolist() == [1, 3]
    assert got.loc["fraction"].tolist() == [0, 3]
    assert "d_n" not in got.index  # a column without intervals is not counted
    assert "d_t 1 of 2" in ri.excluding_words(ri.excluding(t.residual))


def test_v1_pooled_and_v2_per_model_statuses():
    t = tables({"olmo": OLMO, "bert": BERT})
    before = section().history.verdicts(t.summary, change=ri.change_key(section()))["A5"]
    v1, v2 = before["v1"], before["v2"].status
    # v1: the pooled median 0.625 [0.05, 1.3] contains 0.5: inconclusive. v2, per model on its
    # window interval: olmo reproduced; bert-s0 [0, 0.1] not reproduced (0 not excluded),
    # bert-s1 and -s2 partly (short of 0.5, above 0): a mix, partly
    assert v1.status == INCONCLUSIVE
    assert v2 == PARTLY


def test_the_claim_row():
    t = tables({"olmo": OLMO, "bert": BERT})
    (row,) = ri.verdicts(t, section())
    assert row.claim_id == "A5" and row.status == PARTLY
    assert (row.rule_v1, row.rule_v2, row.revision) == (INCONCLUSIVE, PARTLY, "why v3")
    assert row.decided == AFTER_DATA and row.anchor == "verdict-a5"
    assert "d_max 1 of 3" in row.detail and "Every model learned" in row.detail
    # each seed: olmo reproduced, bert not on its window interval -> partly in all three
    assert row.seeds_agreeing == "3 of 3"
    assert "n = 6" in row.unit
    assert row.scale.startswith("6 models (3 seeds each)")


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="a5_rule_v3 is missing"):
        ri.Section.from_params({k: v for k, v in SECTION.items() if k != "a5_rule_v3"}, VERDICTS)
    with pytest.raises(ValueError, match="learned_margin"):
        ri.Section.from_params(SECTION, {})
    with pytest.raises(ValueError, match=r"a5_v3.min_models must be in \[2, inf\]: 1"):
        section(a5_v3={**SECTION["a5_v3"], "min_models": 1})
    with pytest.raises(ValueError, match="a5_v3.revision is missing"):
        section(a5_v3={"min_models": 2, "alternatives": {}})
    with pytest.raises(ValueError, match="unknown rule"):
        section(a5_rule_v3={"rule": "majority"})
    with pytest.raises(ValueError, match="ci_level"):
        section(ci_level=1.5)
    t = tables({"olmo": OLMO})
    with pytest.raises(ValueError, match="loss table needs columns"):
        learners_of_runs(["runs/olmo-s0"], t.losses.drop(columns="unigram_entropy"), 0.25)


def test_v1_at_every_zeta():
    t = tables({"olmo": OLMO})
    t.summary["a5_by_zeta"] = {
        "0.0": {"value": 0.9, "low": 0.6, "high": 1.0, "n_units": 9, "n_undefined": 1},
        "0.2": {"value": 0.9, "low": 0.55, "high": 0.8, "n_units": 9, "n_undefined": 0},
        "0.5": {"value": 0.4, "low": 0.2, "high": 0.7, "n_units": 9, "n_undefined": 0},
    }
    got = ri.v1_by_zeta(t, section())
    assert got["status"].tolist() == [REPRODUCED, REPRODUCED, INCONCLUSIVE]
    assert got["excludes_estimate"].tolist() == [False, True, False]
    assert got["undefined"].tolist() == [1, 0, 0]
