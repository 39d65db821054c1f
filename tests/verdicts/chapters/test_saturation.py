"""geolib.verdicts.chapters.saturation: claim B6's rules v1, v2 and v3 on hand-made tables,
branch by branch; the shares' intervals checked against the binomial distribution."""

from __future__ import annotations

import dataclasses
import json
import re

import pandas as pd
import pytest
from scipy import optimize
from scipy import stats as sps

from geolib.config import load_params
from geolib.verdicts.chapters import saturation as sat
from geolib.verdicts.claims import AFTER_DATA
from geolib.verdicts.rules import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED

ENTROPY = 6.0  # unigram entropy of the training split: a run learned below 5.75 nats
STEPS = [0, 150, 750, 1050, 1500]  # the late span starts at 750 (second_half_from 0.5)


@pytest.fixture(scope="module")
def params():
    return load_params("params.yaml")


@pytest.fixture(scope="module")
def section(params):
    return sat.Section.from_params({**params["common"], **params["saturation"]}, params["verdicts"])


def tables(degrades=(), *, seeds=(0, 1), point=(), loss=None, summary=None):
    """Runs of two widths x ``seeds`` x two layouts. A run named in ``degrades`` degrades
    (interval above 0); one in ``point`` only by its point estimate (its interval reaches
    below 0); the others end at their best checkpoint. ``loss``: final ID loss by run."""
    runs, curves = [], []
    for seed in seeds:
        for width in ("d32", "d64"):
            for layout in ("parallel", "sequential"):
                name = f"{layout}-{width}-s{seed}"
                deg = (0.05, 0.02, 0.08) if name in degrades else (0.0, 0.0, 0.0)
                deg = (0.01, -0.01, 0.03) if name in point else deg
                best = 1050 if deg[0] else 1500
                final = (loss or {}).get(name, 5.0)
                runs.append(
                    {
                        "name": name,
                        "layout": layout,
                        "width": width,
                        "seed": seed,
                        "best_step": best,
                        "final_step": 1500,
                        "degradation": deg[0],
                        "degradation_ci_low": deg[1],
                        "degradation_ci_high": deg[2],
                        "rank_drop": 0.5,
                        "loss_id_eval_final": final,
                        "epochs_final": 0.52,
                        "params": 300000,
                        "tokens": 1536000,
                    }
                )
                # still falling: 0.1 nats from step 750 to the end
                for step, ell in zip(
                    STEPS, [8.3, 7.0, final + 0.1, final + 0.05, final], strict=True
                ):
                    curves.append({"name": name, "step": step, "loss_id_eval": ell})
    summary = summary or {"successes": 0, "n_units": 4, "n_parallel_degrades": 0, "point": {}}
    return sat.Tables(pd.DataFrame(runs), pd.DataFrame(curves), summary, ENTROPY)


PARALLEL = [f"parallel-{w}-s{s}" for s in (0, 1) for w in ("d32", "d64")]


def cp(k, n, level=0.95):
    """Clopper–Pearson bounds from the binomial tails: P(X >= k | low) = P(X <= k | high) = α/2."""
    a = (1 - level) / 2
    low = (
        0.0
        if k == 0
        else optimize.brentq(lambda p: sps.binom.sf(k - 1, n, p) - a, 1e-12, 1 - 1e-12)
    )
    high = (
        1.0 if k == n else optimize.brentq(lambda p: sps.binom.cdf(k, n, p) - a, 1e-12, 1 - 1e-12)
    )
    return low, high


# --- parameters -------------------------------------------------------------------------------


def test_the_repository_rules_are_read(section, params):
    assert section.layouts == ("parallel", "sequential") and section.second_half_from == 0.5
    assert section.rule["threshold"] == 0.25
    assert section.history.rules["b6_rule"].min_fraction == 0.75
    assert section.alternatives == {"degrades = point estimate above 0": {"by": "point"}}
    assert section.learned_margin == params["verdicts"]["learned_margin"]
    assert section.reference_tokens == 1e11 and "Clopper-Pearson" in section.revision


@pytest.mark.parametrize(
    "change, message",
    [
        ({"b6_v3": None}, "b6_v3.revision is missing"),
        ({"layouts": {"a": 1, "b": 2, "c": 3}}, "two layouts"),
        ({"ci_level": 2}, "ci_level must be in (0, 1): 2"),
        ({"b6_rule": {"rule": "fraction"}}, "b6_rule: rule 'fraction': missing"),
        ({"v3": {"revision": ""}}, "b6_v3.revision must be non-empty text"),
        ({"v3": {"alternatives": {"x": {"by": "mood"}}}}, "alternatives.x: only 'by'"),
        ({"v3": {"decide": {"rule": "nope"}}}, "b6_v3.decide: unknown rule"),
        ({"v3": {"reference_tokens": 0}}, "reference_tokens must be in (0, inf]: 0"),
    ],
)
def test_bad_sections_raise_naming_the_key(params, change, message):
    s = dict(params["saturation"])
    s["b6_v3"] = {**s["b6_v3"], **change.pop("v3", {})}
    s |= change
    with pytest.raises(ValueError, match=re.escape(message)):
        sat.Section.from_params(s, params["verdicts"])
    with pytest.raises(ValueError, match="learned_margin"):
        sat.Section.from_params(params["saturation"], None)


# --- tables -------------------------------------------------------------------------------------


def test_load_tables_reads_the_stage_folder(tmp_path):
    t = tables()
    t.runs.to_csv(tmp_path / "runs.csv", index=False)
    t.curves.to_csv(tmp_path / "curves.csv", index=False)
    (tmp_path / "summary.json").write_text(json.dumps(t.summary))
    counts = tmp_path / "freq.csv"
    pd.DataFrame({"token_id": [0, 1, 2, 3], "token": list("abcd"), "count": [1] * 4}).to_csv(counts)
    got = sat.load_tables(tmp_path, counts)
    assert got.unigram_entropy == pytest.approx(2 * 0.6931471805599453)  # log 4
    assert list(got.runs["name"]) == list(t.runs["name"])


def test_tables_check_what_they_hold():
    t = tables()
    with pytest.raises(ValueError, match=r"runs.csv lacks column\(s\) \['rank_drop'\]"):
        sat.Tables(t.runs.drop(columns="rank_drop"), t.curves, t.summary, ENTROPY)
    with pytest.raises(ValueError, match="different runs"):
        sat.Tables(t.runs, t.curves[t.curves["name"] != "parallel-d32-s0"], t.summary, ENTROPY)
    with pytest.raises(ValueError, match=r"summary.json lacks key\(s\) \['point'\]"):
        sat.Tables(t.runs, t.curves, {"successes": 0, "n_units": 4, "n_parallel_degrades": 0}, 6)


def test_pairs_read_the_contrast_by_interval_or_by_point(section):
    t = tables(
        degrades=["parallel-d32-s0", "parallel-d64-s0", "sequential-d64-s0"],
        point=["parallel-d32-s1"],
    )
    p = sat.pairs(t, section).set_index(["width", "seed"])
    assert p.loc[("d32", 0), "contrast"] and not p.loc[("d64", 0), "contrast"]  # both degrade
    assert not p.loc[("d32", 1), "parallel_degrades"]  # its interval reaches below 0
    assert (
        sat.pairs(t, section, by="point").set_index(["width", "seed"]).loc[("d32", 1), "contrast"]
    )
    with pytest.raises(ValueError, match="by must be one of"):
        sat.pairs(t, section, by="mood")
    bad = dataclasses.replace(t, runs=t.runs.assign(layout="parallel"), curves=t.curves)
    with pytest.raises(ValueError, match="one run of each layout"):
        sat.pairs(bad, section)


def test_the_design_in_numbers(section):
    t = tables(degrades=["parallel-d32-s0"])
    late = sat.late_change(t, section)
    assert late.to_numpy() == pytest.approx([-0.1] * 8)  # loss at 1500 minus at 750
    words = sat.design_words(t, section)
    assert "1,536,000 tokens (0.52 epochs of the training split)" in words
    assert (
        "the final one (step 1500) in 7 of 8 runs (earlier: parallel-d32-s0 1050 of 1500)" in words
    )
    assert "still fell in 8 of 8 runs (median change -0.1 nats)" in words
    assert "about 1e11 tokens, 6.5e4 times more" in words  # 1e11 / 1,536,000 = 65,104


# --- v3, branch by branch -------------------------------------------------------------------------


def test_premise_fails_when_no_parallel_run_degrades_and_says_what_the_design_reaches(section):
    v, key = sat.decide(tables(), section)
    low, high = cp(0, 4)
    assert v.status == INCONCLUSIVE and "premise fails: no parallel-block run degrades" in v.reason
    assert f"0 of 4 (0 [0, {high:.2g}], Clopper–Pearson)" in key and high == pytest.approx(
        0.6024, abs=1e-4
    )
    assert (
        "the final one (step 1500) in 8 of 8 runs;" in v.reason and "1,536,000 tokens" in v.reason
    )
    row = sat.b6(tables(), section)
    assert row.detail.count("1,536,000 tokens") == 1  # the design said once


def test_reproduced_when_every_pair_shows_the_contrast(section):
    v, key = sat.decide(tables(degrades=PARALLEL), section)
    low, _ = cp(4, 4)
    assert low > 0.25 and v.status == REPRODUCED and "4 of 4 (1 [0.4, 1]" in key


def test_inconclusive_when_the_share_interval_straddles_the_bar(section):
    v, _ = sat.decide(tables(degrades=PARALLEL[:3]), section)
    low, high = cp(3, 4)
    assert low < 0.25 < high and v.status == INCONCLUSIVE and "contains the threshold" in v.reason


def test_not_reproduced_when_no_pair_shows_the_contrast_among_many(section):
    seeds = range(7)  # 14 pairs; the parallel runs of seed 0 degrade, and so do their partners
    both = [f"{lay}-{w}-s0" for lay in ("parallel", "sequential") for w in ("d32", "d64")]
    v, key = sat.decide(tables(degrades=both, seeds=seeds), section)
    assert cp(0, 14)[1] < 0.25 and v.status == NOT_REPRODUCED and "0 of 14" in key


def test_a_pair_with_a_run_that_did_not_learn_is_left_out(section):
    loss = {"sequential-d64-s1": ENTROPY - 0.1}  # within the margin: not learned
    t = tables(degrades=PARALLEL[:3], loss=loss)
    v, key = sat.decide(t, section)  # 3 of the 3 learned pairs, not 3 of 4
    assert cp(3, 3)[0] > 0.25 and v.status == REPRODUCED and "3 of 3" in key
    row = sat.b6(t, section)
    assert row.unit.endswith("(n = 3)") and "Learned pairs 3 of 4" in row.detail
    assert row.scale.startswith("6 models")
    assert sat.learned(t, section).left_out == {"sequential-d64-s1": pytest.approx(0.1)}
    none = tables(loss=dict.fromkeys(t.runs["name"], ENTROPY))
    v, key = sat.decide(none, section)
    assert v.status == INCONCLUSIVE and key == "no matched pair whose two runs both learned"
    assert sat.b6(none, section).scale == "8 runs, none in a pair that learned"


def test_the_row_keeps_v1_v2_seeds_and_robustness(section):
    t = tables(point=PARALLEL)  # degrade by their point estimates only
    row = sat.b6(t, section)
    assert row.status == INCONCLUSIVE and row.decided == AFTER_DATA
    assert row.robust == "fragile: degrades = point estimate above 0 → reproduced"
    assert row.rule_v1 == NOT_REPRODUCED and row.rule_v2 == INCONCLUSIVE  # 0 of 4: v2's premise
    assert row.seeds_agreeing == "2 of 2"  # each seed's two pairs: inconclusive too
    assert "v2: premise fails" in row.detail and "v1: 0 of 4 units" in row.detail
    # the other B rows' premise is named, and why it is not B6's
    assert row.rule.startswith("v3,") and row.rule.endswith(sat.W_PREMISE_WORDS)
    assert "W left its random start and settled, is not applied" in row.rule
    good = sat.b6(tables(degrades=PARALLEL), section)
    assert good.status == REPRODUCED and good.seeds_agreeing == "0 of 2"  # 2 of 2: [0.16, 1]
    with pytest.raises(ValueError, match="unknown alternative"):
        sat.decide(t, section, {"colour": "red"})


def test_v1_and_v2_read_the_stage_summary(section):
    summary = {"successes": 3, "n_units": 4, "n_parallel_degrades": 3, "point": {}}
    t = tables(summary=summary)
    before = section.history.verdicts(t.summary)["B6"]
    assert before["v1"].status == before["v2"].status == REPRODUCED  # 3 of 4 >= 75%
    t = tables(summary={**summary, "successes": 2})
    assert section.history.statuses(t.summary)["B6"]["v1"] == NOT_REPRODUCED
    t = tables(summary={**summary, "n_parallel_degrades": 0})
    v2 = section.history.verdicts(t.summary)["B6"]["v2"]
    assert v2.status == INCONCLUSIVE
    assert v2.reason == (
        "premise fails: no parallel-block run degrades (0 of 4): the contrast cannot be seen"
    )


def test_runs_table_and_the_intervals_that_exclude_their_estimate(section):
    t = tables(degrades=["parallel-d32-s0"])
    runs = t.runs.copy()
    runs.loc[1, ["degradation", "degradation_ci_low", "degradation_ci_high"]] = [0.05, 0.06, 0.09]
    t = dataclasses.replace(t, runs=runs)
    assert sat.excluding(t) == (1, 8)
    table = sat.runs_table(t, section)
    assert list(table["excludes_estimate"]) == [False, True] + [False] * 6
    assert table["below_unigram"].to_numpy() == pytest.approx([1.0] * 8)
    assert "1 of 8 degradation intervals exclude their estimate" in sat.b6(t, section).detail
