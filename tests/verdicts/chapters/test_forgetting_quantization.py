"""geolib.verdicts.chapters.forgetting_quantization: claim B8's rules v1, v2 and v3 on hand-made
tables, branch by branch, the numbers checked against independent computations."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from geolib.config import load_params
from geolib.verdicts.chapters import forgetting_quantization as fq
from geolib.verdicts.chapters import outcome_association as oa
from geolib.verdicts.claims import PROSPECTIVE
from geolib.verdicts.rules import INCONCLUSIVE, NOT_REPRODUCED, PARTLY, REPRODUCED
from geolib.verdicts.settled_premise import RULE_WORDS as PREMISE_RULE
from geolib.verdicts.settled_premise import PremiseSpec
from geolib.verdicts.sweep_v4 import V4
from tests.verdicts.chapters.sweep_params import study
from tests.verdicts.tables import two_sizes

ENTROPY = 6.0  # unigram entropy of the "training tokens": a model learned below 5.75 nats
SETTINGS = ("rtn4", "gptq4")
QCOLS = [f"q_{b}_id_test" for b in SETTINGS]


@pytest.fixture(scope="module")
def params():
    return load_params("params.yaml")


def section(params, **v3):
    """The repository's rules with a small bootstrap (v3's settings replaced by ``v3``)."""
    gp = {**params["geometry_performance"], "n_boot": 200, "seed": 0}
    gp["b8_v3"] = {**gp["b8_v3"], **v3}
    return fq.Section.from_params(
        gp,
        params["verdicts"],
        forgetting=params["forgetting"],
        quantization=params["quantization"],
    )


def models(n=40, *, kind="loss", seed=0, ci=0.02, seed_noise=0.01, noise=0.01):
    """``n`` points per size (S, M) and two seed replicates of each size's first point. The
    outcomes follow ``kind``: ``loss`` (ID loss only), ``rank`` (rank only, not loss),
    ``noise`` (nothing but noise), ``mixed`` (both); each model's paired interval is ± ``ci``."""
    rng = np.random.default_rng(seed)
    rows = []
    for size, shift in (("S", 0.0), ("M", 1.0)):
        names = [f"{size}-p{i}-s0-tD" for i in range(n)] + [f"{size}-p0-s1-tD", f"{size}-p0-s2-tD"]
        loss = rng.uniform(4.0, 5.0, n)
        rank = rng.normal(30.0 + 30 * shift, 5.0, n)
        loss, rank = np.r_[loss, loss[0], loss[0]], np.r_[rank, rank[0], rank[0]]
        for i, name in enumerate(names):
            rows.append(
                {
                    "name": name,
                    "size": size,
                    "params": 1000 * (1 + shift),
                    "tokens": 262144,
                    "loss_id_test": loss[i] - 0.3 * shift,
                    "w_erank": rank[i],
                    "w_erank_sq": rank[i] ** 0.5,
                    "w_erank_centered": rank[i] - 1.0,
                }
            )
    f = pd.DataFrame(rows)
    z_loss = (f["loss_id_test"] - f.groupby("size")["loss_id_test"].transform("mean")) / 0.29
    z_rank = (f["w_erank"] - f.groupby("size")["w_erank"].transform("mean")) / 5.0
    base = {"loss": z_loss, "rank": z_rank, "noise": 0 * z_loss, "mixed": z_loss + 0.5 * z_rank}
    y = 0.1 * base[kind] + rng.normal(0.0, noise, len(f))
    y += np.where(
        f["name"].str.endswith(("-s1-tD", "-s2-tD")), rng.normal(0, seed_noise, len(f)), 0
    )
    for col in ["forgetting", *QCOLS]:
        f[col], f[f"{col}_ci_low"], f[f"{col}_ci_high"] = y, y - ci, y + ci
    return f


def prediction(rows):
    """A prediction table: one row per (outcome, predictor w_erank) with r2, partial_spearman."""
    return pd.DataFrame([{"outcome": o, "predictor": "w_erank", **r} for o, r in rows.items()])


def good_rows():
    row = dict(r2=0.1, r2_ci_low=0.0, r2_ci_high=0.3, partial_spearman=0.05)
    row |= dict(partial_spearman_ci_low=-0.2, partial_spearman_ci_high=0.3)
    return {o: row for o in ["forgetting", *QCOLS]}


def tables(frame, *, pred=None, within=None, gap=None, q=None, settling=None):
    gap = (
        gap
        if gap is not None
        else pd.DataFrame({"r2_gap": [0.5], "ci_low": [0.2], "ci_high": [0.7]})
    )
    pred = pred if pred is not None else prediction(good_rows())
    within = within if within is not None else pred
    return fq.Tables(
        forgetting=frame,
        quantization=q if q is not None else frame,
        block_settings=SETTINGS,
        prediction={"forgetting": pred, "quantization": pred},
        within={"forgetting": within, "quantization": within},
        r2_gap={"forgetting": gap, "quantization": gap},
        unigram_entropy=ENTROPY,
        study=study() if settling is None else settling,
    )


def statuses(checks):
    return [v.status for v, _ in checks]


# --- parameters ----------------------------------------------------------------------------------


def test_the_repository_rules_are_read(params):
    s = section(params)
    assert (
        s.premise_min_sd_ratio == 2.0 and s.learned_margin == params["verdicts"]["learned_margin"]
    )
    assert s.no_prediction["tol"] == 0.4 and s.loss_beats_rank["threshold"] == 0.0
    assert (
        set(s.v1) == {"forgetting", "quantization"}
        and s.v1["quantization"]["loose"]["threshold"] == 0.5
    )
    assert "sigma^2 effective rank" in s.alternatives and "B1" not in s.revision


@pytest.mark.parametrize(
    "change, message",
    [
        ({"b8_v3": None}, "b8_v3.revision is missing; b8_v3.alternatives is missing"),
        ({"sweep_v3": {}}, "sweep_v3.unigram_counts is missing"),
        ({"n_boot": 10}, "n_boot must be in [100, inf]: 10"),
        ({"ci_level": 1.5}, "ci_level must be in (0, 1): 1.5"),
        ({"no_prediction": {"rule": "nope"}}, "b8_v3.no_prediction: unknown rule 'nope'"),
        ({"premise_min_sd_ratio": 0}, "b8_v3.premise_min_sd_ratio must be in (0, inf]: 0"),
        ({"revision": " "}, "b8_v3.revision must be non-empty text"),
    ],
)
def test_bad_sections_raise_naming_the_key(params, change, message):
    gp = dict(params["geometry_performance"])
    v3 = {k: v for k, v in change.items() if k in gp["b8_v3"]}
    gp |= {k: v for k, v in change.items() if k not in v3}
    if v3:
        gp["b8_v3"] = {**gp["b8_v3"], **v3}
    with pytest.raises(ValueError, match=re.escape(message)):
        fq.Section.from_params(
            gp,
            params["verdicts"],
            forgetting=params["forgetting"],
            quantization=params["quantization"],
        )


def test_missing_verdicts_and_bad_alternatives_raise(params):
    kw = {"forgetting": params["forgetting"], "quantization": params["quantization"]}
    with pytest.raises(ValueError, match="learned_margin"):
        fq.Section.from_params(params["geometry_performance"], None, **kw)
    gp = dict(params["geometry_performance"])
    gp["b8_v3"] = {**gp["b8_v3"], "alternatives": {"x": {"colour": "red"}}}
    with pytest.raises(ValueError, match=r"b8_v3.alternatives.x: unknown \['colour'\]"):
        fq.Section.from_params(gp, params["verdicts"], **kw)
    with pytest.raises(ValueError, match="section quantization: b8_quant_loose is missing"):
        fq.Section.from_params(
            params["geometry_performance"],
            params["verdicts"],
            forgetting=kw["forgetting"],
            quantization={"ci_level": 0.95},
        )


# --- tables --------------------------------------------------------------------------------------


def test_load_tables_reads_the_stage_folders(tmp_path):
    frame = models(5)
    points = list(frame["name"])
    fg, qz = tmp_path / "fg", tmp_path / "qz"
    # the stage tables hold every budget's models; the prediction tables sit under <budget>/
    other = frame.assign(name=frame["name"].str.replace("-tD", "-t2D"))
    for folder, name in ((fg, "forgetting.csv"), (qz, "models.csv")):
        (folder / "D").mkdir(parents=True)
        pd.concat([other, frame]).to_csv(folder / name, index=False)
        prediction(good_rows()).to_csv(folder / "D" / "prediction.csv", index=False)
        prediction(good_rows()).to_csv(folder / "D" / "prediction_within_size.csv", index=False)
        pd.DataFrame({"r2_gap": [0.1], "ci_low": [0.0], "ci_high": [0.2]}).to_csv(
            folder / "D" / "r2_gap.csv", index=False
        )
    (qz / "summary.json").write_text(json.dumps({"block_settings": list(SETTINGS)}))
    pd.DataFrame({"token_id": [0, 1], "token": ["a", "b"], "count": [1, 1]}).to_csv(
        tmp_path / "f.csv", index=False
    )
    premise = PremiseSpec(tmp_path / "settling.csv", "w_erank", {"S": "d32"}, "p")
    with pytest.raises(FileNotFoundError, match="training_length_tables"):
        fq.load_tables(fg, qz, points, tmp_path / "f.csv", premise, "D")
    study().to_csv(premise.study, index=False)
    t = fq.load_tables(fg, qz, points, tmp_path / "f.csv", premise, "D")
    assert list(t.forgetting["name"]) == points and list(t.quantization["name"]) == points
    with pytest.raises(FileNotFoundError):  # no tables at a budget the stages did not write
        fq.load_tables(fg, qz, points, tmp_path / "f.csv", premise, "2D")
    assert t.block_settings == SETTINGS and t.unigram_entropy == pytest.approx(math.log(2))
    assert [o.column for o in t.outcomes] == ["forgetting", *QCOLS]
    pd.testing.assert_frame_equal(t.study, study())
    with pytest.raises(ValueError, match="missing"):  # a table cut short
        fq.load_tables(fg, qz, [*points, "S-extra-s0-tD"], tmp_path / "f.csv", premise, "D")


def test_tables_check_their_columns_and_models():
    frame = models(5)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['w_erank'\]"):
        tables(frame.drop(columns="w_erank"))
    with pytest.raises(ValueError, match="different models"):
        tables(frame, q=frame.iloc[1:])


# --- the pieces of v3 ----------------------------------------------------------------------------


def test_spread_against_closed_forms():
    f = two_sizes([1.0, 1.2, 2.0, 5.0, 6.0, 7.0])
    f["y_ci_low"], f["y_ci_high"] = f["y"] - 1.96, f["y"] + 1.96  # one standard error of 1
    sp = oa.spread(f, "y", within=True, level=0.95)
    s_dev = np.array([1.0, 1.2, 2.0]) - 4.2 / 3
    within = math.sqrt((float(s_dev @ s_dev) + 2.0) / (6 - 2))  # M: deviations -1, 0, 1
    assert sp["spread_sd"] == pytest.approx(within)
    assert sp["seed_sd"] == pytest.approx(math.sqrt(0.02)) and sp["seed_dof"] == 1  # (1, 1.2)
    assert sp["measurement_se"] == pytest.approx(1.96 / sps.norm.ppf(0.975), rel=1e-9)
    assert sp["noise"] == pytest.approx(sp["measurement_se"])  # the larger of the two
    assert sp["ratio"] == pytest.approx(within / sp["measurement_se"])
    across = oa.spread(f, "y", within=False, level=0.95)["spread_sd"]
    assert across == pytest.approx(float(np.std(f["y"], ddof=1)))


def test_association_matches_independent_computations():
    f = models(12, kind="mixed", seed=3)
    a = oa.association(f, "forgetting", n_boot=200)
    centred = f.groupby("size")[["w_erank", "forgetting", "loss_id_test"]].transform(
        lambda v: v - v.mean()
    )
    r_rank = np.corrcoef(centred["w_erank"], centred["forgetting"])[0, 1] ** 2
    r_loss = np.corrcoef(centred["loss_id_test"], centred["forgetting"])[0, 1] ** 2
    assert a.r2_rank.value == pytest.approx(r_rank) and a.r2_loss.value == pytest.approx(r_loss)
    assert a.gap.value == pytest.approx(r_loss - r_rank)
    # partial Spearman within size: ranks residualised on rank(loss) and a size indicator
    design = np.column_stack([np.ones(len(f)), sps.rankdata(f["loss_id_test"]), f["size"] == "S"])

    def resid(v):
        r = sps.rankdata(v)
        return r - design @ np.linalg.lstsq(design, r, rcond=None)[0]

    expected = np.corrcoef(resid(f["w_erank"]), resid(f["forgetting"]))[0, 1]
    assert a.partial.value == pytest.approx(expected)
    assert all(iv.method in ("bca", "percentile") and iv.n == len(f) for iv in a.intervals())
    few = oa.association(f.iloc[:3], "forgetting", n_boot=200)
    assert all(math.isnan(iv.value) for iv in few.intervals()) and few.n == 3


def test_learned_leaves_out_models_near_the_unigram_entropy(params):
    f = models(5)
    f.loc[0, "loss_id_test"] = ENTROPY - 0.1  # 0.1 nats below: under the 0.25 margin
    who = fq.learned(tables(f), section(params))
    assert f.loc[0, "name"] not in who.kept and who.left_out == {
        f.loc[0, "name"]: pytest.approx(0.1)
    }
    assert len(who.kept) == len(f) - 1


# --- v3, branch by branch ------------------------------------------------------------------------


def test_v3_reproduced_when_loss_explains_the_outcome(params):
    s, t = section(params), tables(models(60, kind="loss"))
    checks = fq.b8_checks(t, s)
    assert statuses(checks) == [REPRODUCED] * 6  # 3 outcomes x (no prediction, gap)
    a = oa.association(fq._kept(t.forgetting, fq.learned(t, s)), "forgetting", n_boot=200)
    assert -0.4 <= a.partial.low and a.partial.high <= 0.4 and a.gap.low > 0


def test_v3_not_reproduced_when_rank_predicts_beyond_loss(params):
    checks = fq.b8_checks(tables(models(60, kind="rank")), section(params))
    assert statuses(checks) == [NOT_REPRODUCED] * 6
    assert "partial ρ(erank W, forgetting | ID loss, size)" in checks[0][1]


def test_v3_inconclusive_when_the_interval_straddles_the_band(params):
    s, t = section(params), tables(models(8, kind="mixed", seed=0, noise=0.05))
    a = oa.association(t.forgetting, "forgetting", n_boot=200)
    assert a.partial.low < 0.4 < a.partial.high  # the band's edge inside the interval
    assert fq.outcome_checks(t, s, t.outcomes[0])[0][0].status == INCONCLUSIVE


def test_v3_premise_fails_when_the_outcome_is_noise(params):
    t = tables(models(20, kind="noise", noise=0.01, ci=0.05))
    checks = fq.outcome_checks(t, section(params), t.outcomes[1])
    assert statuses(checks) == [INCONCLUSIVE]  # one row for the outcome, not one per check
    assert "premise fails" in checks[0][0].reason and "varies within size only" in checks[0][1]
    sp = fq.v3_table(t, section(params)).iloc[1]
    assert (
        not sp["premise"]
        and sp["ratio"] < 2
        and sp["noise"] == pytest.approx(0.05 / 1.96, rel=1e-3)
    )


def test_v3_premise_fails_with_too_few_learned_models_in_a_size(params):
    f = models(20, kind="loss")
    f.loc[(f["size"] == "M") & ~f["name"].str.contains(r"-p[1-3]-s0-tD$"), "loss_id_test"] = 7
    checks = fq.b8_checks(tables(f), section(params))  # 3 of M's 22 models learned
    assert set(statuses(checks)) == {INCONCLUSIVE}
    assert "too few models learned: 3 in size M (premise: at least 4 per size)" in checks[0][1]


def test_no_model_learned_is_inconclusive_and_says_so(params):
    f = models(5).assign(loss_id_test=ENTROPY)
    row = fq.b8(tables(f), section(params))
    assert row.status == INCONCLUSIVE and row.key_number.startswith("too few models learned: 0")
    assert row.scale.startswith(f"{len(f)} sweep models, none learned; Paper B: ")
    assert row.unit.endswith("(n = 0 of 14)")


def test_an_interval_that_excludes_its_estimate_is_decided_on_it_and_said_so(params):
    s, t = section(params), tables(models(60, kind="loss"))
    o = t.outcomes[0]
    a = fq._association(t, s, o, fq.RANK, True)
    moved = dataclasses.replace(a.gap, low=a.gap.value + 0.01, high=a.gap.value + 0.02)
    key = next(iter(t.cache))
    t.cache[key] = dataclasses.replace(a, gap=moved)  # a biased bootstrap, kept as drawn
    v, what = fq.outcome_checks(t, s, o)[1]
    assert v.status == REPRODUCED and "estimate outside its interval" in what
    ex = fq.excluding(t, s)
    assert ex[ex["interval"] == "gap of forgetting"]["excluding"].item() == 1


def test_v3_premise_fails_without_seed_replicates_among_the_learners(params):
    f = models(20, kind="loss")
    f.loc[f["name"].str.endswith(("-s1-tD", "-s2-tD")), "loss_id_test"] = ENTROPY  # not learned
    checks = fq.b8_checks(tables(f), section(params))
    assert set(statuses(checks)) == {INCONCLUSIVE} and "no seed replicates" in checks[0][1]


def test_a_model_that_did_not_learn_is_left_out(params):
    f = models(60, kind="loss")
    # twenty models at the unigram entropy whose forgetting follows their rank, not their loss
    wild = f.iloc[:20].assign(name=[f"S-wild{i}-s0-tD" for i in range(20)], loss_id_test=ENTROPY)
    wild["w_erank"] = np.linspace(20.0, 40.0, 20)
    for c in ("forgetting", "forgetting_ci_low", "forgetting_ci_high"):
        wild[c] = (
            wild["w_erank"] - 30.0 + {"forgetting": 0.0, "forgetting_ci_low": -0.1}.get(c, 0.1)
        )
    both, s = tables(pd.concat([f, wild], ignore_index=True)), section(params)
    row = fq.b8(both, s)
    assert row.status == fq.b8(tables(f), s).status == REPRODUCED
    unsettled = fq.b8(tables(f, settling=study(settled_at=None)), s)
    assert unsettled.status == INCONCLUSIVE and "premise fails: W has not settled" in (
        unsettled.key_number
    )
    assert unsettled.robust.endswith("W past its rank's turn, settling not required → reproduced")
    assert "Premise W left its random start and settled: fails" in unsettled.detail
    assert unsettled.rule.endswith(f"; {PREMISE_RULE}")
    assert row.unit.endswith(f"(n = {len(f)} of {len(f) + 20})") and "S-wild0" in row.detail
    # had they counted (no margin), rank would explain forgetting better than ID loss does
    everyone = dataclasses.replace(s, learned_margin=0.0)
    assert fq.outcome_checks(both, everyone, both.outcomes[0])[1][0].status == NOT_REPRODUCED


def test_the_combined_row_partly_when_one_half_cannot_be_judged(params):
    f = models(60, kind="loss")
    f[["forgetting", "forgetting_ci_low", "forgetting_ci_high"]] += 1.0  # all above 0
    q = f.copy()
    q[QCOLS] = 0.0  # the quantization increases: all zero, intervals ± 0.02
    for c in QCOLS:
        q[f"{c}_ci_low"], q[f"{c}_ci_high"] = -0.02, 0.02
    row = fq.b8(tables(f, q=q), section(params))
    assert row.status == PARTLY and row.decided == PROSPECTIVE
    assert "rtn4 ID loss increase varies within size only 0x its noise" in row.key_number
    assert row.rule_v1 == REPRODUCED and row.rule_v2 == PARTLY  # v2: no increase above 0
    assert row.scale.startswith(f"{len(f)} models") and row.robust.startswith(("yes", "fragile"))


def test_alternatives_are_decided_and_named_when_they_flip(params):
    t = tables(models(60, kind="loss"))
    s = section(
        params,
        alternatives={"far better": {"loss_beats_rank": {"threshold": 1.5, "no_effect": 0.0}}},
    )
    row = fq.b8(t, s)  # no R² gap can exceed 1.5: the alternative falls short → partly
    assert row.status == REPRODUCED and row.robust == "fragile: far better → partly"
    loose = fq.b8_checks(t, s, {"loose": True, "within": False})
    assert len(loose) == 9 and loose[2][0].status == REPRODUCED  # R² of rank below 0.5
    with pytest.raises(ValueError, match="unknown alternative"):
        fq.b8_checks(t, s, {"colour": "red"})
    with pytest.raises(ValueError, match="no predictor column"):
        fq.b8_checks(t, s, {"predictor": "w_nothing"})


# --- v1, v2 and the excluded intervals -----------------------------------------------------------


def test_v1_and_v2_decide_the_stage_tables_as_before(params):
    s = section(params)
    rows = good_rows()
    rows["forgetting"] = {**rows["forgetting"], "r2": 0.7, "r2_ci_low": 0.57, "r2_ci_high": 0.83}
    f = models(5, kind="loss")
    f[["forgetting", "forgetting_ci_low", "forgetting_ci_high"]] += 1.0  # every interval above 0
    for c in QCOLS:  # ... and none of the quantization increases'
        f[[c, f"{c}_ci_low", f"{c}_ci_high"]] -= 1.0
    t = tables(f, pred=prediction(rows))
    v1 = statuses(fq.earlier(t, s)["v1"])
    assert v1 == [NOT_REPRODUCED, REPRODUCED] + [REPRODUCED] * 4  # R² 0.7 [0.57, 0.83] > 0.5
    v2 = fq.earlier(t, s)["v2"]
    assert statuses(v2) == [NOT_REPRODUCED, REPRODUCED] + [INCONCLUSIVE] * 4
    assert "only 0 of 14 models have an interval above 0" in v2[2][0].reason
    undefined = prediction(
        {o: {"r2": 0.2, "note": "r2: undefined"} for o in ["forgetting", *QCOLS]}
    )
    t = tables(models(5), pred=undefined)
    v, what = fq.earlier(t, s)["v1"][0]
    assert v.status == INCONCLUSIVE and "(r2: undefined)" in what


def test_excluding_counts_intervals_that_miss_their_estimate(params):
    rows = good_rows()
    rows["forgetting"] = {**rows["forgetting"], "r2": 0.5, "r2_ci_low": 0.6, "r2_ci_high": 0.9}
    f = models(5)
    f.loc[0, "forgetting"] = f.loc[0, "forgetting_ci_high"] + 1.0  # one model's, outside
    t = tables(f, pred=prediction(rows), within=prediction(good_rows()))
    ex = fq.excluding(t).set_index(["table", "interval"])["excluding"]
    n = ex.groupby(level=[0, 1]).size()
    assert n.max() == 1  # one row per table and interval
    assert (
        ex[("forgetting/prediction.csv", "r2")] == 1
        and ex[("forgetting/prediction.csv", "partial_spearman")] == 0
    )
    assert ex[("forgetting/prediction_within_size.csv", "r2")] == 0
    assert ex[("forgetting/forgetting.csv", "forgetting")] == 1
    assert ex[("quantization/models.csv", "forgetting")] == 1  # the same frame serves both here
    assert ex[("forgetting/forgetting.csv", "q_rtn4_id_test")] == 0
    counts = fq.excluding(t)
    assert int(counts["excluding"].sum()) == 4  # r2 twice (both families), the model twice
    assert int(
        counts.set_index(["table", "interval"]).loc[
            ("forgetting/forgetting.csv", "forgetting"), "intervals"
        ]
    ) == len(f)


def test_v4_row_reads_b8_at_each_budget_and_keeps_v3(params):
    t, sec = tables(models(20, kind="loss")), section(params)
    v3 = fq.b8(t, sec)
    v4 = V4.from_params(params["geometry_performance"])
    (row,) = fq.verdicts({"D": t, "2D": t}, replace(sec, v4=v4))
    status, key = fq.deciding_check(fq.b8_checks(t, sec))
    assert row.rule_v3 == v3.status and row.decided == PROSPECTIVE
    assert row.key_number.startswith(f"D: {key}; 2D: {key}")
    past = fq.premise_at(t.study, sec.w_premise, t.forgetting).past_turn
    assert row.status == (status if past else INCONCLUSIVE)
