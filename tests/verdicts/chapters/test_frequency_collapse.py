"""geolib.verdicts.chapters.frequency_collapse: every branch of the A1 v3 verdict (trained models)
on small hand-made tables, with the bounded intervals over models checked against closed
forms."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from geolib.experiments.frequency_collapse import a1_per_model
from geolib.verdicts.chapters import frequency_collapse as fc
from geolib.verdicts.claims import AFTER_DATA
from geolib.verdicts.rules import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, PARTLY, REPRODUCED
from tests.verdicts.tables import HISTORY

V3 = {"rule": "threshold", "threshold": 0.5, "direction": "above", "reason": "the paper"}
V1 = {"rule": "fraction", "min_fraction": 0.75, "reason": "the paper"}
ALTS = {"SGD instead of AdamW": {"optimizer": "sgd"}}
SECTION = {
    "ci_level": 0.95,
    "a1_states_rule": {**V1, "min_units": 4},
    "a1_rows_rule": {**V1, "min_units": 3},
    "a1_v2": {"alternatives": ALTS},
    "a1_v3": {"min_decades": 2.0, "revision": "why v3", "alternatives": ALTS},
    "a1_states_rule_v3": V3,
    "a1_rows_rule_v3": V3,
}
VERDICTS = {"learned_margin": 0.25, "history": HISTORY}
LAYERS = ["block1", "block2", "block3", "block4"]


def section(**change):
    return fc.Section.from_params({**SECTION, **change}, VERDICTS)


def fit(run, opt, measure, layer, high):
    return {
        "run": run,
        "optimizer": opt,
        "measure": measure,
        "layer": layer,
        "estimate": high - 0.3,
        "low": high - 0.6,
        "high": high,
        "n_types": 50,
    }


def tables(models):
    """``models``: name -> {falls (of 4 block layers whose slope interval is below 0), rows
    (True: jitter and settle below 0; False: settle not; None: no settle fit), optimizer,
    learns, decades (span of the state fits' training counts), loss (False: not recorded)}."""
    fits, states, rows, losses, runs = [], [], [], [], {}
    for i, (name, m) in enumerate(models.items()):
        run, opt = f"runs/{name}", m.get("optimizer", "adamw")
        runs[run] = {"family": name.split("-")[0], "seed": i % 3, "params": 1000, "tokens": 5000}
        fits.append(fit(run, opt, "states", "embed", -0.1))  # the embedding layer never counts
        for li, layer in enumerate(LAYERS):
            fits.append(fit(run, opt, "states", layer, -0.2 if li < m["falls"] else 0.2))
            for count in (10, int(10 * 10 ** m.get("decades", 3.0))):
                states.append({"run": run, "layer": layer, "type": count, "train_count": count})
        fits.append(fit(run, opt, "jitter", "embed", -0.1))
        if m["rows"] is not None:
            fits.append(fit(run, opt, "settle", "embed", -0.1 if m["rows"] else 0.1))
        rows += [{"run": run, "type": c, "train_count": c} for c in (1, 10_000)]
        if m.get("loss", True):
            end = 5.0 if m.get("learns", True) else 6.9
            losses += [
                {"run": run, "step": 0, "eval_loss": 8.0, "unigram_entropy": 7.0},
                {"run": run, "step": 1000, "eval_loss": end, "unigram_entropy": 7.0},
            ]
    f = pd.DataFrame(fits)
    summary = {"runs": runs, **fc_counts(f)}
    states, rows = pd.DataFrame(states), pd.DataFrame(rows)
    models = a1_per_model(f, states, rows)  # as the stage computes them
    return fc.Tables(states, rows, f, models, summary, pd.DataFrame(losses))


def fc_counts(f):
    """The stage's v1 counts per optimizer (pooled units), as its summarise writes them."""
    out = {}
    for opt, g in f.groupby("optimizer"):
        st = g[(g["measure"] == "states") & (g["layer"] != "embed")]
        settle = g[g["measure"] == "settle"]
        out[opt] = {
            "states": {"successes": int((st["high"] < 0).sum()), "n_units": len(st)},
            "rows": {"successes": int((settle["high"] < 0).sum()), "n_units": len(settle)},
        }
    return out


def adamw(n=6, **kw):
    return {f"{'olmo' if i < 3 else 'pythia'}-s{i % 3}": dict(kw) for i in range(n)}


def share_by_hand(falls, layers=4, level=0.95):
    """The logit-scale share over models, computed independently."""
    k, n = np.asarray(falls, float), float(layers)
    lg = np.log((k + 0.5) / (n - k + 0.5))
    v = 1 / (k + 0.5) + 1 / (n - k + 0.5)
    z = stats.norm.ppf(0.5 + level / 2) * math.sqrt(v.mean() / k.size)
    t = stats.t.ppf(0.5 + level / 2, k.size - 1) * lg.std(ddof=1) / math.sqrt(k.size)
    h = max(z, t)

    def expit(x):
        return 1 / (1 + math.exp(-x))

    return expit(lg.mean()), expit(lg.mean() - h), expit(lg.mean() + h)


def test_reproduced_when_both_shares_clear_one_half():
    out = fc.a1_v3(tables(adamw(falls=4, rows=True)), section())
    assert out.verdict.status == REPRODUCED
    s, lo, hi = share_by_hand([4] * 6)
    assert lo > 0.5
    assert f"{s:.3g} [{lo:.3g}, {hi:.3g}] over 6 learned models (logit-z" in out.key_number
    # rows: 6 of 6, Clopper-Pearson lower bound 0.025 ** (1 / 6) = 0.541
    assert f"[{0.025 ** (1 / 6):.3g}, 1]" in out.key_number
    states, rows = out.verdict.numbers  # both halves, named, for the findings figure
    assert (states.label, rows.label) == ("states", "rows")
    assert (states.estimate, states.low, states.high) == pytest.approx((s, lo, hi))
    assert (rows.estimate, rows.low, rows.high) == pytest.approx((1.0, 0.025 ** (1 / 6), 1.0))


def test_the_share_over_models_matches_the_closed_form_with_unequal_models():
    models = {f"m-s{i}": {"falls": f, "rows": True} for i, f in enumerate([4, 3, 2, 4, 3, 4])}
    v, words = fc.states_v3(fc.per_model(tables(models), "adamw", 0.25), section())
    s, lo, hi = share_by_hand([4, 3, 2, 4, 3, 4])
    assert f"{s:.3g} [{lo:.3g}, {hi:.3g}]" in words and "20 of 24 layers" in words
    assert v.status == (REPRODUCED if lo > 0.5 else INCONCLUSIVE)


def test_not_reproduced_when_both_shares_fall_short():
    out = fc.a1_v3(tables(adamw(falls=0, rows=False)), section())
    assert out.verdict.status == NOT_REPRODUCED
    # rows: 0 of 6, upper bound 1 - 0.025 ** (1 / 6) = 0.459 < 0.5
    assert f"[0, {1 - 0.025 ** (1 / 6):.3g}]" in out.key_number
    assert share_by_hand([0] * 6)[2] < 0.5


def test_a_straddling_half_is_inconclusive_and_the_row_partly():
    out = fc.a1_v3(tables(adamw(falls=2, rows=True)), section())
    assert "States: inconclusive" in out.detail and "rows: reproduced" in out.detail
    assert out.verdict.status == PARTLY
    assert out.verdict.reason.startswith("share of block layers")  # the check that failed


def test_premise_fails_when_the_fits_span_too_few_decades():
    out = fc.a1_v3(tables(adamw(falls=4, rows=True, decades=1.0)), section())
    assert "States: inconclusive (premise fails: fits spanning fewer than 2 decades" in out.detail
    assert "olmo-s0 (1)" in out.detail
    assert out.verdict.status == PARTLY  # the rows half still reproduced


def test_a_non_learner_is_left_out():
    models = adamw(falls=4, rows=True)
    models["bert-s0"] = {"falls": 0, "rows": False, "learns": False}
    out = fc.a1_v3(tables(models), section())
    assert out.verdict.status == REPRODUCED  # as without the non-learner
    s, lo, hi = share_by_hand([4] * 6)
    assert f"{s:.3g} [{lo:.3g}, {hi:.3g}] over 6 learned models" in out.key_number
    assert out.learners.left_out == {"runs/bert-s0": pytest.approx(0.1)}
    none = {k: {**m, "learns": False} for k, m in models.items()}
    out = fc.a1_v3(tables(none), section())
    assert out.verdict.status == INCONCLUSIVE
    assert "no learned model has a state fit" in out.detail


def test_the_sgd_alternative_is_not_run_without_recorded_losses():
    models = adamw(falls=4, rows=True)
    models["olmo_sgd-s0"] = {"falls": 0, "rows": False, "optimizer": "sgd", "loss": False}
    t = tables(models)
    alt = fc.a1_v3(t, section(), {"optimizer": "sgd"})
    assert alt.verdict.status == NOT_RUN and "whether they learned is unknown" in alt.verdict.reason
    (row,) = fc.verdicts(t, section())
    assert row.robust == "untested (not run here: SGD instead of AdamW)"
    # with its loss recorded, the SGD run is decided: one model's intervals are wide (states
    # 0 of 4: expit(-2.20 ± 1.96 * 1.49) = [0.005, 0.67]; rows 0 of 1: [0, 0.975]): inconclusive
    models["olmo_sgd-s0"]["loss"] = True
    sgd = fc.a1_v3(tables(models), section(), {"optimizer": "sgd"})
    assert sgd.verdict.status == INCONCLUSIVE and "1 learned model (" in sgd.key_number
    assert fc.a1_v3(t, section(), {"optimizer": "lion"}).verdict.status == NOT_RUN


def test_missing_settle_fit_leaves_the_model_out_of_the_rows_half():
    models = adamw(falls=4, rows=True)
    models["olmo-s0"]["rows"] = None
    per = fc.per_model(tables(models), "adamw", 0.25)
    assert per["rows_settle"].isna().sum() == 1
    _, words = fc.rows_v3(per, section())
    assert "5 of 5 learned models" in words


def test_the_stages_per_model_table_reads_back_as_computed(tmp_path):
    """What the stage writes (``a1_per_model.csv``, every digit) is what the chapter decides on:
    the same models, numbers and verdict as computed in memory."""
    models = adamw(falls=3, rows=True)
    models["olmo-s0"]["rows"] = None
    t = tables(models)
    for name, frame in (("states", t.states), ("rows", t.rows), ("fits", t.fits)):
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
    t.models.to_csv(tmp_path / "a1_per_model.csv", index=False)
    (tmp_path / "summary.json").write_text(json.dumps(t.summary))
    t.losses.to_csv(tmp_path / "losses.csv", index=False)
    read = fc.load_tables(tmp_path, tmp_path / "losses.csv")
    want = fc.per_model(t, "adamw", 0.25)
    pd.testing.assert_frame_equal(fc.per_model(read, "adamw", 0.25), want, check_exact=True)
    assert want["rows_settle"].tolist()[:2] == [None, True]
    a, b = fc.a1_v3(read, section()), fc.a1_v3(t, section())
    assert (str(a.verdict), a.key_number, a.detail) == (str(b.verdict), b.key_number, b.detail)


def test_v1_seeds_and_the_claim_row():
    t = tables(adamw(falls=4, rows=True))
    # v1: pooled 24 of 24 layers and 6 of 6 runs, both >= 75%
    assert section().history.statuses(t.summary)["A1"] == {"v1": REPRODUCED, "v2": REPRODUCED}
    gone = {k: v for k, v in t.summary.items() if k != "adamw"}
    assert section().history.statuses(gone)["A1"] == {"v1": NOT_RUN, "v2": NOT_RUN}
    (row,) = fc.verdicts(t, section())
    assert row.claim_id == "A1" and row.status == REPRODUCED
    assert (row.rule_v1, row.rule_v2, row.revision) == (REPRODUCED, REPRODUCED, "why v3")
    assert row.decided == AFTER_DATA and row.anchor == "verdict-a1-trained"
    # each seed holds two models: rows 2 of 2 cannot clear one half (CP [0.158, 1])
    assert row.seeds_agreeing == "0 of 3"
    assert "fits.csv: states 0 of 30, jitter 0 of 6, settle 0 of 6" in row.detail
    assert "n = 6" in row.unit


def test_excluding_counts_fits_whose_interval_misses_the_estimate():
    t = tables(adamw(n=3, falls=4, rows=True))
    f = t.fits.copy()
    f.loc[0, "estimate"] = 5.0
    got = fc.excluding(f).set_index("measure")
    assert got.loc["states"].tolist() == [1, 15] and got.loc["settle"].tolist() == [0, 3]


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="a1_rows_rule_v3 is missing"):
        fc.Section.from_params(
            {k: v for k, v in SECTION.items() if k != "a1_rows_rule_v3"}, VERDICTS
        )
    with pytest.raises(ValueError, match="learned_margin"):
        fc.Section.from_params(SECTION, None)
    with pytest.raises(ValueError, match="min_decades"):
        section(a1_v3={**SECTION["a1_v3"], "min_decades": 0})
    with pytest.raises(ValueError, match="may change the optimizer or the bar only"):
        section(a1_v3={**SECTION["a1_v3"], "alternatives": {"x": {"zeta": 0}}})
    with pytest.raises(ValueError, match="missing field"):
        section(a1_states_rule_v3={"rule": "threshold", "reason": "r"})


def test_the_bar_alternative_decides_both_halves_against_three_quarters():
    """Six models at 4 of 4 falling layers: the states share's lower bound clears one half but
    not three quarters, which the declared alternative (v1's bar) asks."""
    t = tables(adamw(falls=4, rows=True))
    _, lo, _ = share_by_hand([4] * 6)
    assert 0.5 < lo < 0.75
    bar = {"threshold": 0.75}
    assert fc.a1_v3(t, section()).verdict.status == REPRODUCED
    assert fc.a1_v3(t, section(), bar).verdict.status == INCONCLUSIVE
