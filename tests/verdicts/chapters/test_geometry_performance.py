"""geolib.verdicts.chapters.geometry_performance: B1, B2 and B7 decided by their v3 rules on
small hand-made sweeps, every branch, the numbers checked against direct computations."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pandas as pd
import pytest

from geolib.config import stage_params
from geolib.verdicts.chapters import geometry_performance as gp
from geolib.verdicts.claims import PROSPECTIVE
from geolib.verdicts.rules import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    NOT_RUN,
    PARTLY,
    REPRODUCED,
)
from geolib.verdicts.sweep_tables import (
    SweepTables,
)
from tests.verdicts.chapters.sweep_params import SHARED, VERDICTS, rule_params, study

ENTROPY = 6.0  # every loss below 5.75 learned (margin 0.25)


SECTION = {
    **SHARED,
    "verdict": {
        "b1_loose": rule_params(rule="threshold", threshold=0.5, direction="below"),
        "b2_id_beats_rank": rule_params(rule="threshold", threshold=0.3, no_effect=0.0),
        "b7_agree": rule_params(rule="threshold", threshold=0.5, no_effect=0.0),
        "b7_no_prediction": rule_params(rule="within_tolerance", target=0.0, tol=0.4),
        "b7_h_varies_less": rule_params(rule="threshold", threshold=1.0, direction="below"),
    },
    "v2": {
        "premise_min_sd_ratio": 2.0,
        "B1": {"decide": rule_params(rule="threshold", threshold=0.5, direction="below")},
        "B7": {},
    },
    "b1_v3": {
        "sign": rule_params(rule="threshold", threshold=0.0, direction="below"),
        "loose": rule_params(rule="threshold", threshold=0.5, direction="below"),
        "revision": "the sign",
        "alternatives": {
            "rank / width over all models": {
                "predictor": "w_erank_per_width",
                "within": False,
            }
        },
    },
    "b2_v3": {
        "decide": rule_params(rule="threshold", threshold=0.3, no_effect=0.0),
        "revision": "within size",
        "alternatives": {"over all models (v2)": {"within": False}},
    },
    "b7_v3": {"revision": "learned", "alternatives": {"over all models": {"within": False}}},
}
SEC = gp.Section.from_params(SECTION, VERDICTS)


def _models(n: int, seed: int = 0, **columns) -> pd.DataFrame:
    """``n`` models per size (S, M); ``columns``: name → function(rng, z_id, z_rank, size_m)
    of standard normal draws; the first two models of each size are seed replicates."""
    rng = np.random.default_rng(seed)
    size = np.repeat(["S", "M"], n)
    m = (size == "M").astype(float)
    z_id, z_rank = rng.standard_normal(2 * n), rng.standard_normal(2 * n)
    names = [f"{s}-p{i % n}-s0-tD" for i, s in enumerate(size)]
    for k in (1, n + 1):  # p1 is a seed replicate of p0 in each size
        names[k] = names[k - 1].replace("-s0", "-s1")
    base = {
        "name": names,
        "size": size,
        "params": 1000 + 1000 * m,
        "tokens": 5000,
        "loss_id_test": 5.0 - 0.5 * m + 0.1 * z_id,
        "w_erank": 30.0 + 30.0 * m + z_rank,
    }
    for metric in gp.W_METRICS[1:]:
        base[metric] = rng.standard_normal(2 * n)
    table = pd.DataFrame(base)
    for name, f in columns.items():
        table[name] = f(rng, z_id, z_rank, m)
    ood = [c for c in table.columns if c.startswith("loss_ood_")]
    if ood:
        table["loss_ood_mean"] = table[ood].mean(axis=1)
    return table


def _tables(models: pd.DataFrame, *, seed_sd: float = 0.01, entropy: float = ENTROPY, **t):
    """Tables over ``models``; the v1/v2 tables ``t`` (empty unless given); every outcome's
    seed sd ``seed_sd``."""
    outcomes = [c for c in models.columns if c.startswith("loss_") and "_ci_" not in c]
    t.setdefault("spread", pd.DataFrame({"seed_sd": seed_sd, "ratio": 5.0}, index=outcomes))
    sweep = SweepTables(**{f.name: t.get(f.name) for f in fields(SweepTables)} | {"models": models})
    sweep = replace(sweep, spread=t["spread"])
    return gp.Tables(sweep, entropy, t.get("study", study()), pd.DataFrame(), pd.DataFrame())


def _within_r(x, y, size) -> float:
    """Pearson's r after removing each size's mean: the closed form."""
    frame = pd.DataFrame({"x": x, "y": y, "g": size})
    c = frame[["x", "y"]] - frame.groupby("g")[["x", "y"]].transform("mean")
    return float(np.corrcoef(c["x"], c["y"])[0, 1])


# ---------------------------------------------------------------------------------------------
# B1
# ---------------------------------------------------------------------------------------------


def _b1_models(n: int, r: float, seed: int = 0) -> pd.DataFrame:
    """ID loss with within-size correlation ``r`` to erank W."""

    def loss(rng, z_id, z_rank, m):
        return 5.0 - 0.5 * m + 0.1 * (r * z_rank + np.sqrt(1 - r**2) * z_id)

    return _models(n, seed, loss_id_test=loss)


def test_b1_reproduced_when_higher_rank_goes_loosely_with_lower_loss():
    models = _b1_models(100, -0.45)
    d = gp.b1(_tables(models), SEC)
    r = _within_r(models.w_erank, models.loss_id_test, models["size"])
    assert r == pytest.approx(-0.45, abs=0.1)  # the data are what the test says
    assert d.status == REPRODUCED
    assert d.key.startswith(f"R²(ID test loss ~ w_erank, within size): {r**2:.3g} [")
    assert d.checks[0][1].startswith(f"r(ID test loss, w_erank, within size): {r:.3g} [")
    assert d.checks[0][0].status == REPRODUCED  # the sign holds


def test_b1_a_wrong_sign_is_not_reproduced_whatever_the_looseness():
    d = gp.b1(_tables(_b1_models(100, 0.45)), SEC)
    assert d.status == NOT_REPRODUCED and d.verdict.reason.startswith("wrong sign")
    assert d.checks[1][0].status == REPRODUCED  # loose: v2 alone would have reproduced it


def test_b1_a_tight_association_of_the_right_sign_is_not_reproduced():
    d = gp.b1(_tables(_b1_models(100, -0.95)), SEC)
    assert d.status == NOT_REPRODUCED and d.checks[0][0].status == REPRODUCED
    assert d.key.startswith("R²(ID test loss ~ w_erank, within size)")


def test_b1_an_undetermined_sign_is_inconclusive():
    d = gp.b1(_tables(_b1_models(6, 0.0, seed=3)), SEC)
    assert (
        d.status == INCONCLUSIVE and "sign of the association is undetermined" in d.verdict.reason
    )


def test_b1_premise_fails_when_loss_varies_no_more_than_between_seeds():
    d = gp.b1(_tables(_b1_models(100, -0.45), seed_sd=1.0), SEC)  # loss sd within size ~0.1
    assert d.status == INCONCLUSIVE
    assert "premise fails: loss_id_test varies across the 200 learned models" in d.key_number


def test_b1_leaves_out_the_models_that_did_not_learn():
    learners = _b1_models(100, -0.45)
    # 20 per size that did not learn (loss above 5.75), high rank with high loss: the wrong sign
    bad = _b1_models(20, 0.9, seed=1).assign(
        loss_id_test=lambda t: 6.5 + (t.loss_id_test - t.loss_id_test.mean()),
        w_erank=lambda t: t.w_erank + 20,
        name=lambda t: [f"{s}-x{i}-s0-tD" for i, s in enumerate(t["size"])],
    )
    models = pd.concat([learners, bad], ignore_index=True)
    d = gp.b1(_tables(models), SEC)
    r = _within_r(learners.w_erank, learners.loss_id_test, learners["size"])
    assert d.status == REPRODUCED and f"{r:.3g}" in d.checks[0][1]
    everyone = gp.b1(_tables(models, entropy=10.0), SEC)  # all count as learned
    assert everyone.status == NOT_REPRODUCED  # so leaving them out decided it
    few = gp.b1(_tables(models, entropy=5.0 - 0.5 + 0.25 + 0.01), SEC)  # M models only
    assert few.status == INCONCLUSIVE and "too few models learned" in few.key_number


def test_rank_loss_by_size_is_spearman_per_size():
    models = _b1_models(30, -0.6)
    table = gp.rank_loss_by_size(_tables(models), SEC, list(models.name))
    for row in table.itertuples():
        g = models[models["size"] == row.size]
        rho = g.w_erank.rank().corr(g.loss_id_test.rank())
        assert row.spearman == pytest.approx(rho) and row.ci_low < row.spearman < row.ci_high


# ---------------------------------------------------------------------------------------------
# B2
# ---------------------------------------------------------------------------------------------


def _b2_models(n: int = 400, seed: int = 0) -> pd.DataFrame:
    return _models(
        n,
        seed,
        loss_ood_a=lambda rng, z_id, z_rank, m: (
            6.0 + 0.3 * m + 0.1 * z_id + 0.01 * rng.standard_normal(z_id.size)
        ),
        loss_ood_b=lambda rng, z_id, z_rank, m: 6.0 + z_rank + 0.1 * rng.standard_normal(z_id.size),
        loss_ood_c=lambda rng, z_id, z_rank, m: (
            6.0
            + np.sqrt(0.45) * z_id
            + np.sqrt(0.3) * z_rank
            + 0.5 * rng.standard_normal(z_id.size)
        ),
    )


def _gap(models, outcome, groups) -> float:
    r_id = _within_r(models.loss_id_test, models[outcome], groups)
    r_rank = _within_r(models.w_erank, models[outcome], groups)
    return r_id**2 - r_rank**2


def test_b2_per_domain_within_size_each_status_and_the_check_that_decided():
    models = _b2_models()
    d = gp.b2(_tables(models), SEC)
    statuses = {what.split(", ")[1]: v.status for v, what in d.checks}
    assert statuses == {
        "loss_ood_a": REPRODUCED,
        "loss_ood_b": NOT_REPRODUCED,
        "loss_ood_c": PARTLY,
    }
    assert d.status == PARTLY and "loss_ood_b" in d.key  # the check that failed decides
    for _, what in d.checks:
        outcome = what.split(", ")[1]
        assert f": {_gap(models, outcome, models['size']):.3g} [" in what


def test_b2_within_size_differs_from_pooled_over_sizes():
    models = _b2_models()
    pooled = gp.r2_gaps(_tables(models), SEC, list(models.name), within=False)
    within = gp.r2_gaps(_tables(models), SEC, list(models.name), within=True)
    a = pooled.set_index("outcome").loc["loss_ood_a", "r2_gap"]
    assert a == pytest.approx(_gap(models, "loss_ood_a", np.zeros(len(models))))
    assert a != pytest.approx(within.set_index("outcome").loc["loss_ood_a", "r2_gap"], abs=0.01)


def test_b2_a_domain_that_does_not_vary_is_inconclusive():
    models = _b2_models()
    spread = pd.DataFrame(
        {"seed_sd": [0.01, 0.01, 5.0, 0.01, 0.01]},
        index=["loss_id_test", "loss_ood_a", "loss_ood_b", "loss_ood_c", "loss_ood_mean"],
    )
    d = gp.b2(_tables(models, spread=spread), SEC)
    by = {what.split(", ")[1]: v for v, what in d.checks}
    assert by["loss_ood_b"].status == INCONCLUSIVE
    assert by["loss_ood_b"].reason.startswith("premise fails: loss_ood_b varies")
    assert d.status == PARTLY and "loss_ood_b" in d.key


# ---------------------------------------------------------------------------------------------
# B7
# ---------------------------------------------------------------------------------------------


def _agreement(agree=(0.8, 0.7, 0.9), cv=(0.5, 0.3, 0.7)) -> pd.DataFrame:
    return pd.DataFrame([agree, cv], columns=["value", "ci_low", "ci_high"])


def _b7_models(n: int = 150, predictive: bool = False) -> pd.DataFrame:
    def ood(rng, z_id, z_rank, m):
        return 6.0 + 0.3 * m + 0.1 * z_id + 0.05 * rng.standard_normal(z_id.size)

    models = _models(n, loss_ood_a=ood)
    if predictive:  # isoscore of W follows OOD loss beyond ID loss
        resid = models.loss_ood_a - 0.1 * (
            models.loss_id_test - 5.0 + 0.5 * (models["size"] == "M")
        )
        models["w_isoscore"] = resid
    return models


def _partial_within(x, y, z, size) -> float:
    """Partial Spearman ρ given z and size: residuals of ranks on [1, rank z, size]."""
    rank = [pd.Series(v).rank().to_numpy() for v in (x, y, z)]
    design = np.column_stack([np.ones(len(x)), rank[2], (np.asarray(size) == "S").astype(float)])

    def resid(v):
        return v - design @ np.linalg.lstsq(design, v, rcond=None)[0]

    return float(np.corrcoef(resid(rank[0]), resid(rank[1]))[0, 1])


def test_b7_reproduced_when_metrics_agree_none_predicts_beyond_loss_and_h_varies_less():
    models = _b7_models()
    d = gp.b7(_tables(models, agreement=_agreement()), SEC)
    assert d.status == REPRODUCED and len(d.checks) == 2 + len(gp.W_METRICS)
    rho = _partial_within(models.w_erank, models.loss_ood_mean, models.loss_id_test, models["size"])
    assert f"partial ρ(w_erank, OOD | ID, size): {rho:.3g} [" in d.words()


def test_b7_a_metric_that_predicts_beyond_loss_is_not_reproduced():
    d = gp.b7(_tables(_b7_models(predictive=True), agreement=_agreement()), SEC)
    by = {what: v.status for v, what in d.checks}
    iso = next(k for k in by if k.startswith("partial ρ(w_isoscore"))
    assert by[iso] == NOT_REPRODUCED and d.status == PARTLY and d.key == iso


def test_b7_table_numbers_over_models_that_did_not_learn_are_inconclusive():
    models = _b7_models()
    models.loc[5, "loss_id_test"] = 5.9  # one model did not learn (not a seed replicate)
    d = gp.b7(_tables(models, agreement=_agreement()), SEC)
    first, last = d.checks[0][0], d.checks[-1][0]
    assert first.status == last.status == INCONCLUSIVE
    assert "agreement.csv was computed over 300 models, 1 of which did not learn" in first.reason
    assert d.status == PARTLY  # the partial correlations, over the 299 that learned, reproduce


def test_b7_straddling_partial_correlations_are_inconclusive():
    d = gp.b7(
        _tables(_models(5, loss_ood_a=lambda rng, z, r, m: 6 + z), agreement=_agreement()), SEC
    )
    assert d.status == PARTLY and any(v.status == INCONCLUSIVE for v, _ in d.checks)


# ---------------------------------------------------------------------------------------------
# The rows, the section
# ---------------------------------------------------------------------------------------------


def _v1_v2_tables() -> dict:
    """v1 and v2 tables with known verdicts: v1 B1 R² 0.3 [0.2, 0.4] (reproduced), v2 B1 R²
    within 0.75 [0.6, 0.84] (not reproduced), v1 B2 gap 0.5 [0.4, 0.6] (reproduced); one
    interval of ten excludes its estimate."""
    pred = pd.DataFrame(
        {"outcome": ["loss_id_test", "loss_ood_mean"], "predictor": ["w_erank", "w_erank"]}
    ).assign(
        r2=[0.3, 0.1],
        r2_ci_low=[0.2, 0.15],  # the second excludes its estimate
        r2_ci_high=[0.4, 0.2],
        partial_spearman=[np.nan, 0.05],
        partial_spearman_ci_low=[np.nan, -0.1],
        partial_spearman_ci_high=[np.nan, 0.2],
    )
    within = pred.assign(r2=[0.75, 0.1], r2_ci_low=[0.6, 0.0], r2_ci_high=[0.84, 0.2])
    gap = pd.DataFrame(
        {"outcome": ["loss_ood_a"], "r2_gap": [0.5], "ci_low": [0.4], "ci_high": [0.6]}
    )
    return {
        "prediction": pred,
        "within": within,
        "r2_gap": gap,
        "r2_gap_alternatives": gap,
        "agreement": _agreement(),
    }


def test_verdicts_rows_keep_v1_and_v2_beside_v3():
    models = _b7_models(60).assign(w_erank_per_width=lambda t: t.w_erank / 64)
    rows = {c.claim_id: c for c in gp.budget_verdicts(_tables(models, **_v1_v2_tables()), SEC)}
    assert list(rows) == ["B1", "B2", "B7"]
    b1 = rows["B1"]
    assert (b1.rule_v1, b1.rule_v2) == (REPRODUCED, NOT_REPRODUCED)
    assert b1.decided == PROSPECTIVE and b1.revision == "the sign" and b1.anchor == "verdict-b1"
    assert b1.unit == "trained models that learned (120 of 120), size held fixed"
    assert "Spearman ρ(erank W, ID test loss) per size: M " in b1.detail
    excluded = (
        "1 of 10 intervals in the tables exclude their estimate "
        "(prediction.csv r2 [r2_ci_low, r2_ci_high]: 1 of 2)"
    )
    assert excluded in b1.detail
    assert rows["B2"].rule_v1 == REPRODUCED
    # over all models, the sizes' step in rank and in loss decides (Simpson's paradox)
    assert b1.status == INCONCLUSIVE  # within size, rank is unrelated to loss here
    assert b1.robust == "fragile: rank / width over all models → not reproduced"
    assert rows["B2"].status == REPRODUCED
    assert rows["B2"].robust == "fragile: over all models (v2) → not reproduced"
    no_width = gp.alternatives(_tables(models.drop(columns="w_erank_per_width")), SEC, "B1")
    assert no_width == {"rank / width over all models": NOT_RUN}


def test_b7_v1_and_v2_read_the_rows_their_declarations_name():
    """B7's v1: agreement (the first row of agreement.csv), no prediction of OOD loss beyond ID
    loss (each W metric but rank / width, rows without a partial ρ passed over) and H varies
    less (the second row); v2: the same within size, after the premise that OOD loss varies."""
    models = _b7_models(60).assign(w_erank_per_width=lambda t: t.w_erank / 64)
    partial = ["partial_spearman", "partial_spearman_ci_low", "partial_spearman_ci_high"]
    pred = pd.DataFrame(
        [
            ("loss_id_test", "w_erank", 0.3, 0.2, 0.4, np.nan, np.nan, np.nan),
            ("loss_ood_mean", "w_erank", 0.1, 0.0, 0.2, 0.05, -0.1, 0.2),
            ("loss_ood_mean", "w_erank_per_width", 0.1, 0.0, 0.2, 0.9, 0.8, 0.95),  # not v1's
            ("loss_ood_mean", "loss_id_test", 0.5, 0.4, 0.6, np.nan, np.nan, np.nan),
        ],
        columns=["outcome", "predictor", "r2", "r2_ci_low", "r2_ci_high", *partial],
    )
    within = pred.iloc[[0, 1]].copy()
    within.loc[len(within)] = ("loss_ood_mean", "w_isoscore", 0.1, 0.0, 0.2, np.nan, np.nan, np.nan)
    t = {**_v1_v2_tables(), "prediction": pred, "within": within}
    outcomes = [c for c in models.columns if c.startswith("loss_")]
    ratio = [1.0 if o == "loss_ood_mean" else 5.0 for o in outcomes]
    quiet = pd.DataFrame({"seed_sd": 0.01, "ratio": ratio}, index=outcomes)
    b7 = {c.claim_id: c for c in gp.budget_verdicts(_tables(models, spread=quiet, **t), SEC)}["B7"]
    assert b7.rule_v1 == REPRODUCED
    assert b7.detail.endswith(
        "v1: median |ρ| between W metrics: 0.8 [0.7, 0.9] → reproduced; "
        "partial ρ(w_erank, OOD | ID): 0.05 [-0.1, 0.2] → reproduced; "
        "CV(erank H) / CV(erank W): 0.5 [0.3, 0.7] → reproduced"
    )
    assert b7.rule_v2 == PARTLY  # OOD loss varies too little: its within-size check decides nothing
    varies = {c.claim_id: c for c in gp.budget_verdicts(_tables(models, **t), SEC)}["B7"]
    assert varies.rule_v2 == REPRODUCED


def test_every_row_is_inconclusive_where_w_has_not_settled_and_shows_the_turn_alone():
    models = _b7_models(60).assign(w_erank_per_width=lambda t: t.w_erank / 64)
    t = _tables(models, **_v1_v2_tables(), study=study(settled_at=None))
    rows = {c.claim_id: c for c in gp.budget_verdicts(t, SEC)}
    b2 = rows["B2"]  # reproduced where the premise holds (above)
    assert b2.status == INCONCLUSIVE
    assert b2.key_number.endswith("(premise fails: W has not settled)")
    assert b2.robust == "fragile: W past its rank's turn, settling not required → reproduced"
    assert "Premise W left its random start and settled: fails (M at 2.5 tokens per" in b2.detail
    assert all(r.status == INCONCLUSIVE for r in rows.values())
    assert b2.scale.endswith("; the paper: 10^3 tokens per parameter")
    # before the turn: the alternative is inconclusive too
    early = _tables(models, **_v1_v2_tables(), study=study(settled_at=None, turn_at=10.0))
    b2 = {c.claim_id: c for c in gp.budget_verdicts(early, SEC)}["B2"]
    assert b2.key_number.endswith("(premise fails: W has not left its random start)")
    assert b2.robust == "yes"


def test_the_committed_section_parses_and_bad_sections_are_named():
    params = stage_params("params.yaml", "geometry_performance")
    section = gp.Section.from_params(params, stage_params("params.yaml", "verdicts"))
    assert section.learned_margin == 0.25 and section.b1_v3["sign"]["direction"] == "below"
    with pytest.raises(ValueError, match="learned_margin"):
        gp.Section.from_params(SECTION)
    with pytest.raises(ValueError, match="b2_v3.revision is missing"):
        gp.Section.from_params({k: v for k, v in SECTION.items() if k != "b2_v3"}, VERDICTS)
    bad = {**SECTION, "b1_v3": {**SECTION["b1_v3"], "sign": {"rule": "threshold", "reason": "x"}}}
    with pytest.raises(ValueError, match=r"b1_v3\.sign: rule 'threshold': missing field"):
        gp.Section.from_params(bad, VERDICTS)
    with pytest.raises(ValueError, match=r"n_boot must be in \[100, inf\]: 10"):
        gp.Section.from_params({**SECTION, "n_boot": 10}, VERDICTS)
    with pytest.raises(ValueError, match="revision"):
        gp.Section.from_params({**SECTION, "b7_v3": {"alternatives": {"a": {}}}}, VERDICTS)


def test_partials_on_a_handful_of_models_are_computed_without_error():
    """Five models: the BCa jackknife leaves one out, four, the fewest a partial correlation
    needs; a resample of one size is undefined there (NaN), not an error, and the table has a
    row per W metric."""
    t = _tables(_models(3, loss_ood_a=lambda rng, z, r, m: 6 + z), agreement=_agreement())
    kept = list(t.sweep.models["name"])[:5]
    got = gp.partials(t, SEC, kept)
    assert len(got) > 0 and set(got.columns) == {"predictor", "partial", "low", "high"}
    three = np.arange(3.0)
    assert np.isnan(gp._partial_within(three, three, three, np.array([0, 0, 1])))  # too few
    assert np.isnan(gp._partial(np.arange(3.0), np.arange(3.0), np.arange(3.0)))


def test_r2_gaps_and_partials_of_too_few_models_are_empty_tables():
    """Three or four learned models (the rehearsal profile's): no interval over models is
    drawn; the tables keep their columns (the verdicts' premise already needs more)."""
    t = _tables(_models(2, loss_ood_a=lambda rng, z, r, m: 6 + z), agreement=_agreement())
    kept = list(t.sweep.models["name"])[:3]
    assert gp.r2_gaps(t, SEC, kept).empty and gp.partials(t, SEC, kept).empty
    assert list(gp.r2_gaps(t, SEC, kept).columns) == ["outcome", "r2_gap", "ci_low", "ci_high"]


# --- v4: each row at two budgets -------------------------------------------------------------

V4_B1 = {
    "factors": ["size"],
    "decide": rule_params(rule="threshold", threshold=0.05, direction="below"),
    "alternatives": {"within-size R² (v3)": {"rule": "b1_v3"}},
}
V4 = gp.V4("v4 because.", V4_B1)


def test_b1_v4_decides_on_what_rank_adds_beyond_the_configuration():
    models = _b7_models(60)  # rank independent of loss within size
    verdict, key = gp.b1_v4(_tables(models), SEC, V4)
    assert verdict.status == REPRODUCED and key.startswith("ΔR² (held out) of w_erank")
    tracking = models.assign(w_erank=models.w_erank + 50 * models.loss_id_test)
    assert gp.b1_v4(_tables(tracking), SEC, V4)[0].status == NOT_REPRODUCED
    # the declared alternative is v3's rule on the same models
    v3 = gp.b1(_tables(models), SEC)
    assert gp.b1_v4(_tables(models), SEC, V4, {"rule": "b1_v3"}) == (v3.verdict, v3.key_number)


def test_v4_rows_join_both_budgets_and_keep_v3():
    models = _b7_models(60).assign(w_erank_per_width=lambda t: t.w_erank / 64)
    t = _tables(models, **_v1_v2_tables())
    assert gp.settled(t, SEC).past_turn  # the fixture's study: W past its turn
    v3 = {c.claim_id: c for c in gp.budget_verdicts(t, SEC)}
    rows = {c.claim_id: c for c in gp.verdicts({"D": t, "2D": t}, replace(SEC, v4=V4))}
    assert list(rows) == ["B1", "B2", "B7"]
    for claim, row in rows.items():
        assert row.rule_v3 == v3[claim].status and row.decided == PROSPECTIVE
        assert row.key_number.startswith("D: ") and "; 2D: " in row.key_number
    assert rows["B1"].status == REPRODUCED and rows["B1"].rule.startswith("v4, learned models")
    assert rows["B2"].status == gp.DECIDE["B2"][1](t, SEC, None).verdict.status
    # the same rows on models whose rank tracks loss at 2D: B1 depends on training length
    tracking = models.assign(w_erank=models.w_erank + 50 * models.loss_id_test)
    tracking = _tables(tracking, **_v1_v2_tables())
    b1 = gp.verdicts({"D": t, "2D": tracking}, replace(SEC, v4=V4))[0]
    assert b1.status == INCONCLUSIVE and "still depends on training length" in b1.key_number
