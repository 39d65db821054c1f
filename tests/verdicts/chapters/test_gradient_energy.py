"""geolib.verdicts.chapters.gradient_energy: every branch of the A4, A6 and A7 v3 verdicts on small
hand-made tables (a few models, layers and checkpoints), with the numbers checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from geolib.measure import energy_per_model as em
from geolib.verdicts.chapters import energy_tables as et
from geolib.verdicts.chapters import gradient_energy as ge
from geolib.verdicts.rules import INCONCLUSIVE, NOT_REPRODUCED, PARTLY, REPRODUCED
from tests.verdicts.tables import HISTORY

STEPS = [0, 1, 16, 64, 128, 256, 512, 1000]
SOURCES = [0, 16, 64, 256]
RULE = {"rule": "threshold", "direction": "above", "reason": "as the paper says"}
FRACTION = {"rule": "fraction", "min_fraction": 0.75, "min_units": 4, "reason": "the paper"}
SECTION = {
    "key_rank": 4,
    "early_share": 0.3,
    "ci_level": 0.95,
    "frozen_sources": SOURCES,
    "a4_v3": {"r_bar": 10.0, "no_effect": 1.0, "revision": "why", "alternatives": {}},
    "a6_v3": {"progress": 0.9, "revision": "why", "alternatives": {}},
    "a7_v3": {"no_effect": 1.0, "warmup_steps": 50, "revision": "why", "alternatives": {}},
    "a4_rule_v3": {**RULE, "threshold": 0.5},
    "a6_rule_v3": {**RULE, "threshold": 1.0},
    "a7_rule_v3": {**RULE, "threshold": 0.5},
    "a7_null_rule_v3": {**RULE, "threshold": 0.0},
    "a4_rule": {**RULE, "threshold": 1.0},
    "a6_rule": {**RULE, "threshold": 1.0},
    "a4_rule_v2": {**FRACTION, "min_fraction": 0.5},
    "a7_rule": FRACTION,
    "a7_rule_v2": FRACTION,
}
VERDICTS = {"learned_margin": 0.25, "history": HISTORY}
RELEASED = {**RULE, "threshold": 0.5}


def section(**change):
    return ge.Section.from_params({**SECTION, **change}, VERDICTS)


def loss_curve(step: int, learns: bool) -> float:
    """8 nats at step 0; a learner falls below the unigram entropy (7) from step 16 on and ends
    at 5; a non-learner ends 0.05 below it."""
    if not learns:
        return 8.0 - 1.05 * step / 1000
    return {0: 8.0, 1: 7.9, 16: 6.5, 64: 6.0, 128: 5.6, 256: 5.3, 512: 5.1, 1000: 5.0}[step]


def tables(models: dict[str, dict], layers=("block1", "block2"), ks=(2, 4, 8)):
    """``models``: name -> {decoder, learns, r(step, layer, source) -> R}; ci = R/1.5, R*1.5."""
    rows, losses, runs = [], [], {}
    for i, (name, m) in enumerate(models.items()):
        run = f"runs/{name}"
        runs[run] = {"family": name.split("-")[0], "seed": i, "params": 1000, "tokens": 5000}
        for step in STEPS:
            losses.append(
                {
                    "run": run,
                    "step": step,
                    "eval_loss": loss_curve(step, m.get("learns", True)),
                    "unigram_entropy": 7.0,
                }
            )
            for li, layer in enumerate(["embed", *layers]):
                srcs = ["refit"] + [f"step-{s}" for s in SOURCES if s < step]
                for src in srcs:
                    for k in ks:
                        r = float(m["r"](step, layer, src))
                        rows.append(
                            {
                                "run": run,
                                "decoder": m["decoder"],
                                "step": step,
                                "layer": layer,
                                "layer_index": li,
                                "k": k,
                                "source": src,
                                "r_energy": r,
                                "ci_low": r / 1.5,
                                "ci_high": r * 1.5,
                                "ceiling": m.get("ceiling", 200.0),
                            }
                        )
    summary = {"runs": runs}
    r, lo = pd.DataFrame(rows), pd.DataFrame(losses)
    return et.Tables(r, lo, summary, et.Computed(r, lo, runs))


def info(t, *runs):
    """The stage's run information, of ``runs`` only (all: none given)."""
    return {r: t.summary["runs"][r] for r in runs or t.summary["runs"]}


def const(value):
    return lambda step, layer, source: value


def decoders(r, n=3, **kw):
    return {f"dec-s{i}": {"decoder": True, "r": r, **kw} for i in range(n)}


# --- A4 --------------------------------------------------------------------------------------


def test_a4_units_are_learned_early_checkpoints_and_the_share_is_over_models():
    t = tables(decoders(const(30.0)))
    per = em.a4_per_model(
        t.r_energy, t.losses, info(t), k=4, early_share=0.3, margin=0.25, r_bar=10, no_effect=1
    )
    # learned (loss <= 6.75) and early (<= 300): steps 16, 64, 128, 256; two block layers
    assert per["steps"].tolist() == ["16, 64, 128, 256"] * 3
    assert per["units"].tolist() == [8, 8, 8] and per["hits"].tolist() == [8, 8, 8]
    assert per["step0_units"].tolist() == [2, 2, 2]
    out = ge.a4_v3(t, section())
    assert out.verdict.status == REPRODUCED
    # the share's interval by hand: logit (8.5/0.5), floor z * sqrt(v / 3)
    lg, v = math.log(8.5 / 0.5), 1 / 8.5 + 1 / 0.5
    low = 1 / (1 + math.exp(-(lg - 1.959964 * math.sqrt(v / 3))))
    assert f"[{low:.3g}," in out.key_number


def test_a4_and_a6_read_the_declared_verdict_steps_and_every_step_as_an_alternative():
    t = tables(decoders(const(30.0)))
    steps = [0, 1, 64, 256, 1000]  # of the early learned ones (16, 64, 128, 256): 64 and 256
    out = ge.a4_v3(t, section(verdict_steps=steps))
    assert "dec-s0 4/4" in out.detail  # two steps x two block layers
    every = ge.a4_v3(t, section(verdict_steps=steps), {"steps": "all"})
    assert "dec-s0 8/8" in every.detail
    assert et.on_steps(t, None) is t
    assert set(et.on_steps(t, tuple(steps)).losses["step"]) == set(steps)
    for bad in ([1, 1], [-1], "all"):
        with pytest.raises(ValueError, match="verdict_steps"):
            section(verdict_steps=bad)


def test_a4_not_reproduced_inconclusive_and_premise():
    below = ge.a4_v3(tables(decoders(const(3.0))), section())  # R >> 1 but never above 10
    assert below.verdict.status == NOT_REPRODUCED

    def half(step, layer, source):  # one layer above 10, the other not: a share of one half
        return 30.0 if layer == "block1" else 3.0

    knife = ge.a4_v3(tables(decoders(half)), section())
    assert knife.verdict.status == INCONCLUSIVE and "premise" not in knife.verdict.reason
    flat = ge.a4_v3(tables(decoders(const(1.2))), section())  # lower bound 0.8: no effect
    assert flat.verdict.status == INCONCLUSIVE and "premise fails" in flat.verdict.reason


def test_a4_leaves_a_non_learner_out_and_names_it():
    models = decoders(const(30.0), n=2)
    models["dec-bad"] = {"decoder": True, "r": const(1.0), "learns": False}
    out = ge.a4_v3(tables(models), section())
    assert out.verdict.status == REPRODUCED
    assert out.per_model["model"].tolist() == ["dec-s0", "dec-s1"]
    assert "runs/dec-bad (0.05)" in out.detail


def test_a4_alternatives_and_a_rank_not_measured():
    t = tables(decoders(const(12.0)))  # lower bound 8: above 10 only by the point estimate
    alts = {"point": {"bound": "r_energy"}, "k = 16": {"k": 16}}
    out = ge.with_alternatives(ge.a4_v3(t, section()), lambda c: ge.a4_v3(t, section(), c), alts)
    assert out.verdict.status == NOT_REPRODUCED
    assert out.alternatives == {"point": REPRODUCED, "k = 16": "not yet run"}


# --- A6 --------------------------------------------------------------------------------------


def a6_models(dec_r, enc_r, n_enc=2):
    models = {f"dec-s{i}": {"decoder": True, "r": const(r)} for i, r in enumerate(dec_r)}
    models |= {f"enc-s{i}": {"decoder": False, "r": const(r)} for i, r in enumerate(enc_r)}
    return {k: v for k, v in list(models.items())[: len(dec_r) + n_enc]}


def test_a6_welch_interval_matches_scipy():
    a, b = np.log([40.0, 50.0, 30.0]), np.log([10.0, 14.0])
    d, lo, hi = ge.welch(a, b, 0.95)
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert d == pytest.approx(a.mean() - b.mean())
    # our dof is floored to an integer (conservative): at least scipy's width
    assert lo <= ci.low + 1e-12 and hi >= ci.high - 1e-12
    assert hi - lo == pytest.approx(ci.high - ci.low, rel=0.5)


def test_a6_names_every_models_margin_below_the_unigram_entropy():
    models = decoders(const(30.0), n=2)
    models["enc-s0"] = {"decoder": False, "r": const(3.0)}
    models["enc-s1"] = {"decoder": False, "r": const(3.0)}
    models["enc-bad"] = {"decoder": False, "r": const(3.0), "learns": False}
    out = ge.a6_v3(tables(models), section())
    # final loss 5.0 (learners) and 8 - 1.05 = 6.95 (the non-learner) against 7.0
    assert "(nats): dec-s0 2, dec-s1 2, enc-s0 2, enc-s1 2, enc-bad 0.05" in out.detail


def test_a6_branches():
    up = ge.a6_v3(tables(a6_models([40, 50, 30], [10, 14])), section())
    assert up.verdict.status == REPRODUCED
    d, lo, hi = ge.welch(np.log([40.0, 50.0, 30.0]), np.log([10.0, 14.0]), 0.95)
    assert f"{math.exp(d):.3g} [{math.exp(lo):.3g}, {math.exp(hi):.3g}]" in up.key_number
    down = ge.a6_v3(tables(a6_models([10, 11, 12], [40, 44])), section())
    assert down.verdict.status == NOT_REPRODUCED
    tie = ge.a6_v3(tables(a6_models([10, 30, 20], [12, 25])), section())
    assert tie.verdict.status == INCONCLUSIVE
    models = a6_models([40, 50, 30], [10, 14])
    models["enc-s1"]["learns"] = False  # one learned encoder: no interval over encoders
    one = ge.a6_v3(tables(models), section())
    assert one.verdict.status == INCONCLUSIVE and "premise fails" in one.verdict.reason
    none = ge.a6_v3(tables(a6_models([40, 50, 30], [], n_enc=0)), section())  # no encoder run
    assert none.verdict.status == INCONCLUSIVE and "0 learned encoders" in none.verdict.reason
    assert em.a6_per_step(
        tables(a6_models([40, 50], [], n_enc=0)).r_energy, ["runs/dec-s0"], k=4
    ).empty


def test_a6_matched_progress_picks_each_models_step():
    t = tables(a6_models([40], [10], n_enc=1))
    per = em.a6_per_model(t.r_energy, t.losses, info(t), k=4, progress=0.9)
    # loss drop 8 -> 5: 90% reached at 5.3 (step 256); half at 6.5 (step 16); final 1000
    assert per["step"].tolist() == [256, 256]
    assert em.a6_per_model(t.r_energy, t.losses, info(t, "runs/dec-s0"), k=4, progress=0.5)[
        "step"
    ].tolist() == [16]
    assert em.a6_per_model(t.r_energy, t.losses, info(t, "runs/dec-s0"), k=4, progress=1.0)[
        "step"
    ].tolist() == [1000]
    with pytest.raises(ValueError, match="progress"):
        em.a6_per_model(t.r_energy, t.losses, info(t, "runs/dec-s0"), k=4, progress=1.5)
    steps = em.a6_per_step(t.r_energy, list(t.summary["runs"]), k=4)
    assert steps["ratio"].tolist() == pytest.approx([4.0] * (len(STEPS) - 1))


# --- A7 --------------------------------------------------------------------------------------


def imprinted(step, layer, source):
    """Refit R peaks at step 64 (40) and ends at 10; T frozen at 64 keeps 20 at the end, T
    frozen before learning (steps 0, 16) only 2."""
    if source == "refit":
        return {0: 1.0, 1: 1.0, 16: 5.0, 64: 40.0, 128: 20.0}.get(step, 10.0)
    return 20.0 if source in ("step-64", "step-256") else 2.0


def test_a7_reproduced_when_early_peak_and_the_null_is_beaten():
    t = tables(decoders(imprinted))
    per = em.a7_per_model(
        t.r_energy, t.losses, info(t), k=4, early_share=0.3, margin=0.25, frozen_sources=SOURCES
    )
    assert per["peak_step"].tolist() == [64] * 3 and per["strongest_early"].all()
    # conservative bounds: (40/1.5)/(10*1.5) and (40*1.5)/(10/1.5)
    assert per["ratio_low"].iloc[0] == pytest.approx(40 / 1.5 / 15)
    # null: the last source step not learned is 0 (step 16 has learned: 6.5 <= 6.75); early: 16
    assert per["null_source"].tolist() == [0] * 3 and per["early_source"].tolist() == [16] * 3
    out = ge.a7_v3(t, section())
    # T frozen at 16 ends at 2, as T frozen at 0: no gain, the null check cannot pass
    assert out.verdict.status != REPRODUCED


def test_a7_null_beaten_and_not_beaten():
    """Six decoders (Clopper-Pearson on 6 of 6 clears one half; on 3 of 3 it cannot), each
    with its own end value of T frozen early in learning; the gain's t interval by hand."""
    ends = [20.0, 16.0, 25.0, 18.0, 30.0, 22.0]

    def model(end):
        def r(step, layer, source):
            return end if source in ("step-64", "step-256") else imprinted(step, layer, source)

        return {"decoder": True, "r": r}

    sources = [0, 64, 256]
    t = tables({f"dec-s{i}": model(e) for i, e in enumerate(ends)})
    ok = ge.a7_v3(t, section(frozen_sources=sources))
    assert ok.verdict.status == REPRODUCED, ok.verdict.reason
    gains = np.log(ends) - np.log(2.0)
    h = stats.t.ppf(0.975, 5) * gains.std(ddof=1) / math.sqrt(6)
    m = gains.mean()
    assert f"{m:.3g} [{m - h:.3g}, {m + h:.3g}] over 6 models" in ok.key_number
    early, null = ok.verdict.numbers  # each check's number, named, for the findings figure
    assert (early.label, early.estimate, early.bar) == ("peaks early", 1.0, 0.5)
    assert null.label == "beyond the null" and null.bar == 0.0
    assert (null.estimate, null.low, null.high) == pytest.approx((m, m - h, m + h))
    # how the null fared: T frozen at step 0 ends at 2, T frozen at 64 at the median of the ends
    assert "T frozen before learning (step 0) ends with median R_energy 2" in ok.detail
    assert f"T frozen early in learning (step 64) with {np.median(ends):.3g}" in ok.detail
    three = ge.a7_v3(tables(decoders(imprinted)), section(frozen_sources=sources))
    assert three.verdict.status != REPRODUCED and "3 of 3" in three.key_number
    flat = {f"dec-s{i}": model(2.0) for i in range(6)}  # T frozen early ends where the null does
    no = ge.a7_v3(tables(flat), section(frozen_sources=sources))
    assert no.verdict.status != REPRODUCED
    assert "beyond the null" in no.detail


def test_a7_late_peak_is_not_strongest_early():
    def late(step, layer, source):
        return 80.0 if (source == "refit" and step == 512) else imprinted(step, layer, source)

    out = ge.a7_v3(tables(decoders(late, n=6)), section(frozen_sources=[0, 64, 256]))
    assert out.per_model["peak_step"].tolist() == [512] * 6
    # strongest early fails (0 of 6: Clopper-Pearson [0, 0.459] below one half) while the null
    # is beaten (T frozen at 64 ends at 20 against 2): part of the claim holds, and the row's
    # deciding number is the check that failed
    assert out.verdict.status == PARTLY
    assert out.verdict.reason.startswith("0 of 6 learned decoders")
    three = ge.a7_v3(tables(decoders(late)), section(frozen_sources=[0, 64, 256]))
    assert "0 of 3" in three.key_number and "[0, 0.708]" in three.key_number


def test_a7_warmup_alternative_moves_the_peak_search_past_the_warmup():
    t = tables(decoders(imprinted))
    per = em.a7_per_model(
        t.r_energy,
        t.losses,
        info(t),
        k=4,
        early_share=0.3,
        margin=0.25,
        frozen_sources=SOURCES,
        after_warmup=2,
        warmup_steps=50,
    )
    assert per["peak_step"].tolist() == [128] * 3  # step 64 < 100 is not searched


def test_a7_names_the_checkpoints_around_each_peak_and_the_learned_step():
    t = tables(decoders(imprinted))
    per = em.a7_per_model(
        t.r_energy, t.losses, info(t), k=4, early_share=0.3, margin=0.25, frozen_sources=SOURCES
    )
    # searched steps >= 1: 1, 16, 64, 128, ...; the loss is 6.5 <= 7 - 0.25 from step 16 on
    assert per[["before_peak", "after_peak"]].values.tolist() == [[16, 128]] * 3
    assert per["bracketed"].all() and per["learned_step"].tolist() == [16] * 3
    assert per["seed"].tolist() == [0, 1, 2]
    out = ge.a7_v3(t, section())
    assert (
        "dec-s0 64 (16 | 128)" in out.detail
        and "3 of 3 with a checkpoint on each side" in out.detail
    )
    assert "Warm-up alternative" not in out.detail  # not declared here


WARMUP = {"family": "dec", "shift_steps": 50, "tolerance": 16, "min_pairs": 2, "reason": "r"}


def test_a7_reads_the_warmup_alternative_by_seed_without_changing_the_status():
    def later(step, layer, source):  # the peak one checkpoint later, at 128
        if source == "refit":
            return {0: 1.0, 1: 1.0, 16: 5.0, 64: 20.0, 128: 40.0}.get(step, 10.0)
        return imprinted(step, layer, source)

    base = tables(decoders(imprinted))
    longer = tables({f"dec-s{i}": {"decoder": True, "r": later} for i in range(2)})
    both = et.Tables(base.r_energy, base.losses, base.summary, base.models, longer)
    out = ge.a7_v3(both, section(a7_warmup=WARMUP))
    assert out.verdict.status == ge.a7_v3(base, section()).verdict.status
    # peak 64 -> 128 (+64), learned 16 -> 16 (+0): 14 from the warm-up's 50, 64 from learning's
    assert "seed 0: peak 64 → 128 (shift +64)" in out.detail
    assert "The peak follows the schedule" in out.detail
    assert "dec-s1 128 (64 | 256)" in out.detail
    assert (
        ge.a7_v3(both, section(a7_warmup={**WARMUP, "min_pairs": 3})).detail.count("cannot tell")
        == 1
    )
    with pytest.raises(ValueError, match="a7_warmup.shift_steps is missing"):
        section(a7_warmup={"family": "dec"})
    # the alternative's models never learned: no pair, "cannot tell", and no error
    idle = tables({f"dec-s{i}": {"decoder": True, "r": later, "learns": False} for i in range(2)})
    out = ge.a7_v3(
        et.Tables(base.r_energy, base.losses, base.summary, base.models, idle),
        section(a7_warmup=WARMUP),
    )
    assert "0 learned pair(s)" in out.detail and "cannot tell" in out.detail
    default, longer, _ = ge.warmup_per_model(both, section(a7_warmup=WARMUP), None, 4)
    assert default.empty and list(default.columns) == ["model", "seed", "peak_step", "learned_step"]


# --- the section, the rows ----------------------------------------------------------------


def test_rows_on_confirmatory_seeds_are_prospective_with_the_seen_verdicts_beside(tmp_path):
    import json

    from geolib.verdicts.claims import AFTER_DATA, PROSPECTIVE, Claim

    t = tables(decoders(imprinted))  # seeds 0, 1, 2
    seen = [
        {"claim_id": "A7", "chapter": "gradient_energy", "status": "reproduced",
         "key_number": "k", "unit": "u", "seeds_agreeing": "", "decided": AFTER_DATA}
    ]  # fmt: skip
    record = tmp_path / "seen.json"
    record.write_text(json.dumps({"seeds": [7], "source": "commit x", "rows": seen}))
    out = ge.a7_v3(t, section())
    row = Claim("A7", out.verdict.status, out.key_number, "gradient_energy", anchor="verdict-a7",
                scale="3 models", decided=AFTER_DATA)  # fmt: skip
    runs = t.summary["runs"]
    fresh = {"confirmatory_seeds": [0, 1, 2], "exploratory_record": str(record)}
    confirmed = ge.Section.from_params(SECTION, {**VERDICTS, **fresh}).confirmation.apply(row, runs)
    assert confirmed.decided == PROSPECTIVE and confirmed.status == row.status
    assert confirmed.exploratory.startswith(
        "reproduced on seeds 7, which seeds 0, 1, 2 replace here (k; u"
    )
    other = {"confirmatory_seeds": [1, 2, 3], "exploratory_record": str(record)}
    assert (
        ge.Section.from_params(SECTION, {**VERDICTS, **other}).confirmation.apply(row, runs) == row
    )
    assert section().confirmation.apply(row, runs) == row  # none declared
    hub = {"org/model": {"family": "org/model", "seed": None}}
    assert (
        ge.Section.from_params(SECTION, {**VERDICTS, **fresh}).confirmation.apply(row, hub) == row
    )
    with pytest.raises(ValueError, match="go together"):
        ge.Section.from_params(SECTION, {**VERDICTS, "confirmatory_seeds": [0]})
    gone = {"confirmatory_seeds": [0, 1, 2], "exploratory_record": str(tmp_path / "none.json")}
    with pytest.raises(ValueError, match="cannot be read"):
        ge.Section.from_params(SECTION, {**VERDICTS, **gone}).confirmation.apply(row, runs)


def test_section_refuses_missing_rules_and_margin():
    with pytest.raises(ValueError, match="a7_null_rule_v3"):
        ge.Section.from_params(
            {k: v for k, v in SECTION.items() if k != "a7_null_rule_v3"}, VERDICTS
        )
    with pytest.raises(ValueError, match="learned_margin"):
        ge.Section.from_params(SECTION, {})
    with pytest.raises(ValueError, match="early_share"):
        section(early_share=1.5)
    with pytest.raises(ValueError, match="unknown rule"):
        section(a6_rule_v3={"rule": "nonsense"})


def test_released_row_is_a_description_of_r_above_one():
    layers = tuple(f"block{i}" for i in range(1, 7))
    t = tables({"smol": {"decoder": True, "r": const(3.0)}}, layers=layers).r_energy
    t = t[t["step"] == 1000].assign(domain="id")
    row = ge.released_row(t, section(), "SmolLM2", "released, final checkpoint only", RELEASED)
    # 6 of 6 above 1: Clopper-Pearson [0.54, 1] clears one half; none above 10
    assert row.evidence == "description" and row.status == REPRODUCED
    assert "in 6 of 6 block layer x domain units" in row.key_number
    assert "above 10 in 0 of 6" in row.key_number
    few = t[t["layer"].isin(["embed", "block1", "block2"])]
    few_row = ge.released_row(few, section(), "S", "s", RELEASED)
    assert few_row.status == INCONCLUSIVE  # 2 of 2: [0.16, 1]


def test_a7_with_no_checkpoint_past_the_warmup_is_inconclusive():
    t = tables(decoders(imprinted))
    out = ge.a7_v3(t, section(), {"after_warmup": 100})  # 100 x 50 steps: past every checkpoint
    assert out.verdict.status == INCONCLUSIVE and "premise fails" in out.verdict.reason


def test_no_learned_decoder_makes_every_claim_inconclusive():
    t = tables(
        {f"dec-s{i}": {"decoder": True, "r": const(30.0), "learns": False} for i in range(3)}
    )
    for decide in (ge.a4_v3, ge.a6_v3, ge.a7_v3):
        out = decide(t, section())
        assert out.verdict.status == INCONCLUSIVE and "premise fails" in out.verdict.reason
