"""geolib.verdicts.sweep_chapters: what the three chapters' notebooks read first, the sweep tables
loaded for them, the lookups their verdicts read, and v1's checks kept per claim."""

from __future__ import annotations

from dataclasses import fields
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from geolib.models.grid import FACTORS as GRID_FACTORS
from geolib.verdicts.claims import AFTER_DATA, PROSPECTIVE, Claim
from geolib.verdicts.evidence import decide_interval
from geolib.verdicts.rules import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    PARTLY,
    REPRODUCED,
    given_premise,
    rule_from_params,
)
from geolib.verdicts.sections import section_of
from geolib.verdicts.settled_premise import RULE_WORDS as PREMISE_RULE
from geolib.verdicts.settled_premise import WPremise
from geolib.verdicts.sweep_chapters import (
    all_learned,
    cell_models,
    claim_text,
    claims_frame,
    combined,
    compared_models,
    enough_per_size,
    learned_models,
    learned_text,
    listed,
    premised,
    seed_sd_interval,
    share_text,
    sweep_claim,
    varies_among,
)
from geolib.verdicts.sweep_chapters import (
    learned as learned_,
)
from geolib.verdicts.sweep_tables import (
    FACTORS,
    ChapterTables,
    SweepSetup,
    SweepTables,
    excluding,
    excluding_words,
    row_where,
    tables_at_budgets,
    unigram_entropy,
)
from tests.verdicts.tables import two_sizes, with_interval

POINTS = ["S-b8-s0-tD", "S-b128-s0-tD", "S-b8-s1-tD"]


def _tables(folder):
    """The files of geometry_performance_tables, a few rows each (the models out of order)."""
    folder.mkdir()
    models = pd.DataFrame(
        {
            "name": POINTS[::-1],
            "params": [1000, 1000, 1000],
            "tokens": [5000, 5000, 5000],
            "loss_id_test": [4.0, 4.1, 4.2],
            **with_interval(
                "loss_ood_bible", [5.0, 5.1, 5.2], [4.9, 5.0, 5.1], [5.1, 5.2, 5.3], "_ci"
            ),
        }
    )
    models.to_csv(folder / "models.csv", index=False)
    effects = pd.DataFrame(
        {
            "factor": ["batch_size", "lr"],
            "quantity": ["w_erank", "w_erank"],
            "effect_sd": [2.0, -1.5],
            "ci_low": [1.2, -2.0],
            "ci_high": [2.8, -1.0],
            "ci_low_sd": [0.5, -4.0],
            "ci_high_sd": [6.0, -0.2],
        }
    )
    effects.to_csv(folder / "effects.csv", index=False)
    pred = pd.DataFrame(
        {"outcome": ["loss_id_test", "loss_id_test"], "predictor": ["w_erank", "h_erank"]}
    ).assign(r2=[0.3, 0.1])
    pred.to_csv(folder / "prediction.csv", index=False)
    pred.assign(r2=[0.2, 0.05]).to_csv(folder / "prediction_within_size.csv", index=False)
    spread = pd.DataFrame({"outcome": ["loss_id_test", "loss_ood_bible"], "ratio": [3.0, 0.5]})
    spread.to_csv(folder / "spread.csv", index=False)
    for name in (
        "interactions",
        "effects_by_size",
        "u_shape",
        "r2_gap",
        "r2_gap_alternatives",
        "agreement",
        "init_moves",
    ):
        pd.DataFrame({"x": [1]}).to_csv(folder / f"{name}.csv", index=False)
    return folder


def test_tables_load_in_point_order_and_answer_the_lookups(tmp_path):
    t = SweepTables.load(_tables(tmp_path / "gp"), POINTS)
    assert sorted(t.models["name"]) == sorted(POINTS)
    assert t.ood == ["loss_ood_bible"]  # interval columns are not domains
    assert t.effect("lr", "w_erank").effect_sd == -1.5
    assert row_where(t.prediction, outcome="loss_id_test", predictor="w_erank").r2 == 0.3
    assert row_where(t.within, outcome="loss_id_test", predictor="w_erank").r2 == 0.2
    assert t.varies("loss_id_test", 2.0)[0] and t.varies("loss_id_test", 3.0)[0]  # 3x: holds
    holds, why = t.varies("loss_ood_bible", 2.0)
    assert not holds and "only 0.5x its seed-to-seed sd (premise: at least 2x)" in why
    runs = t.scale_runs()
    assert runs["S-b8-s1-tD"] == {"family": "S-b8-tD", "seed": "1", "params": 1000, "tokens": 5000}
    with pytest.raises(KeyError, match=r"0 rows for \{'factor': 'wd'"):
        t.effect("wd", "w_erank")


def test_a_missing_point_or_a_duplicated_row_is_an_error(tmp_path):
    folder = _tables(tmp_path / "gp")
    with pytest.raises(ValueError, match="S-b32-s0-tD"):
        SweepTables.load(folder, [*POINTS, "S-b32-s0-tD"])
    table = pd.DataFrame({"outcome": ["a", "a"], "predictor": ["p", "p"]})
    with pytest.raises(KeyError, match="2 rows"):
        row_where(table, outcome="a", predictor="p")


def test_the_seed_sd_interval_and_its_declared_alternative():
    row = pd.Series({"ci_low": 1.2, "ci_high": 2.8, "ci_low_sd": 0.5, "ci_high_sd": 6.0})
    assert seed_sd_interval(row) == (0.5, 6.0)  # carrying the sd's own uncertainty
    assert seed_sd_interval(row, {"seed_sd": "known"}) == (1.2, 2.8)


def test_checks_are_listed_in_words_each_with_its_status():
    rule = rule_from_params({"rule": "threshold", "threshold": 1.0, "reason": "B3: above one"})
    checks = [
        decide_interval(rule, 2.0, 1.5, 2.5, "erank W"),
        decide_interval(rule, 2.0, np.nan, np.nan, "erank H"),
    ]
    assert listed(checks) == (
        "erank W: 2 [1.5, 2.5] → reproduced; erank H: 2 [nan, nan] → inconclusive"
    )
    assert listed([]) == ""


def test_the_sweep_chapters_share_one_section():
    assert section_of("training_knobs") == section_of("forgetting_quantization")
    assert section_of("training_knobs") == "geometry_performance"
    assert section_of("scale") == "scale"  # every other chapter reads its own


SWEEP = {
    "base": {"seq_len": 64, "token_budget": 262144},
    "sizes": {"S": {"d_model": 64, "n_layers": 2}, "M": {"d_model": 128, "n_layers": 3}},
    "factorial": {
        "batch_size": [8, 128],
        "weight_decay": [0.0, 2.0],
        "lr": [0.004],
        "final_lr_ratio": [0.1],
    },
    "center": {"batch_size": 8, "seed": 0},
    "vary": {"final_lr_ratio": [0.0]},
    "replicate_seeds": [1],
    "points": ["S-b8-s0-tD", "S-b128-s0-tD"],
}


def test_a_notebook_reads_its_sections_once_and_words_the_grid(tmp_path):
    path = tmp_path / "params.yaml"
    params = {
        "common": {"seed": 7},
        "verdicts": {"learned_margin": 0.25},
        "sweep": SWEEP,
        "forgetting": {"out_dir": "data/results/forgetting"},
    }
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    setup = SweepSetup.read(path, "forgetting")
    # each section with common merged in, as stage_params reads it
    assert setup.verdicts == {"seed": 7, "learned_margin": 0.25}
    assert setup.sweep == {"seed": 7, **SWEEP}
    assert setup.stages == {"forgetting": {"seed": 7, "out_dir": "data/results/forgetting"}}
    assert SweepSetup.read(path).stages == {}
    with pytest.raises(KeyError, match="no section 'quantization'"):
        SweepSetup.read(path, "forgetting", "quantization")

    models = pd.DataFrame({"name": SWEEP["points"], "vocab_size": [4096, 4096]})
    assert setup.grid_words(models) == (
        "**This run's grid.** 2 models. Sizes S (d = 64, 2 layers), M (d = 128, 3 layers); "
        "vocabulary 4096. Batch sizes [8, 128] sequences of 64 tokens; weight decay [0.0, 2.0]; "
        "peak learning rate [0.004]; schedule cosine, annealed to [0.1] of the peak; each point "
        "at D = 262,144 "
        "tokens per model (rules v4 decide every row at each), so steps by batch size at D 8: "
        "512, 128: 32. Centre {'batch_size': 8, 'seed': 0}, varied "
        "{'final_lr_ratio': [0.0]}; seed replicates [1]."
    )
    scaled = SweepSetup(
        setup.verdicts,
        {
            **SWEEP,
            "base": {**SWEEP["base"], "lr_scaling": {"reference_batch": 32, "exponent": 0.5}},
        },
    )
    assert "peak learning rate [0.004] at batch 32, times (batch / 32)^0.5; schedule" in (
        scaled.grid_words(models)
    )
    wsd = SweepSetup(
        setup.verdicts,
        {**SWEEP, "base": {**SWEEP["base"], "schedule": "wsd", "decay_fraction": 0.2}},
    )
    assert (
        "schedule warmup-stable-decay, the last 20% of each run's steps decaying linearly (each "
        "smaller budget a cooldown branch of the largest), annealed to [0.1] of the peak"
    ) in wsd.grid_words(models)


def test_a_chapter_loads_its_tables_at_each_budget_and_the_grid_words_name_both():
    points = ["S-b8-s0-tD", "S-b8-s0-t2D", "S-b128-s0-tD", "S-b128-s0-t2D"]
    sweep = {**SWEEP, "budgets": {"D": 1, "2D": 2}, "points": points}
    setup = SweepSetup({"learned_margin": 0.25}, sweep)
    section = SimpleNamespace(at_budget=lambda b: f"section at {b}")
    tables = tables_at_budgets(sweep, lambda b, pts: (section.at_budget(b), pts))
    assert tables == {
        "D": ("section at D", ["S-b8-s0-tD", "S-b128-s0-tD"]),
        "2D": ("section at 2D", ["S-b8-s0-t2D", "S-b128-s0-t2D"]),
    }
    models = pd.DataFrame({"name": points, "vocab_size": [4096] * 4})
    assert "each point at D = 262,144 and 2D = 524,288 tokens per model" in (
        setup.grid_words(models)
    )


# ---------------------------------------------------------------------------------------------
# What the v3 rules share
# ---------------------------------------------------------------------------------------------


def test_a_decision_names_its_key_and_each_premise_that_failed_once():
    rule = rule_from_params({"rule": "threshold", "threshold": 1.0, "reason": "B3: above one"})
    failed = given_premise(rule, False, "W did not move", lambda: rule.decide(2, 1.5, 3))
    ok = rule.decide(2.0, 1.5, 3.0)
    d = combined([(ok, "rank"), (failed, "U cells")])
    assert d.status == PARTLY and d.key == "U cells"  # the check that did not reproduce
    assert d.key_number == "U cells (premise fails: W did not move)"
    assert d.words() == "rank → reproduced; U cells → inconclusive; premise fails: W did not move"
    assert combined([(ok, "rank")]).key_number == "rank"
    assert d.verdict.numbers == ()  # the deciding check's premise failed: no number
    decided = combined([(ok, "rank")])
    assert decided.verdict.numbers == ok.labelled("rank")  # the deciding check's, named by it


def test_a_decision_on_an_estimate_outside_its_interval_keeps_the_number_it_decided_on():
    rule = rule_from_params({"rule": "threshold", "threshold": 0.5, "reason": "B2: x"})
    v, _ = decide_interval(rule, 0.4, 0.55, 0.9, "R² gap")
    (n,) = v.numbers
    assert (n.estimate, n.low, n.high, n.bar) == (0.55, 0.55, 0.9, 0.5)  # moved to its bound
    d = combined([(v, "R² gap"), (rule.decide(0.2, 0.1, 0.3), "other")])
    assert d.key == "other" and [m.label for m in d.verdict.numbers] == ["other"]


def test_unigram_entropy_of_the_token_counts(tmp_path):
    path = tmp_path / "token_freq.csv"
    pd.DataFrame(
        {"token_id": [0, 1, 2, 3], "token": ["a", ",", '"', "d"], "count": [2, 1, 1, 0]}
    ).to_csv(path, index=False)
    expected = -(0.5 * np.log(0.5) + 2 * 0.25 * np.log(0.25))  # 0 log 0 = 0
    assert unigram_entropy(path) == pytest.approx(expected, rel=1e-12)
    pd.DataFrame({"token_id": [0], "token": ["a"], "count": [0]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match="not all zero"):
        unigram_entropy(path)


def test_learned_models_and_the_premise_of_a_table_over_all_models():
    models = pd.DataFrame({"name": ["a", "b", "c"], "loss_id_test": [5.0, 5.8, 5.7]})
    learned = learned_models(models, 6.0, 0.25)  # learned: at most 5.75
    assert learned.kept == ("a", "c") and learned.left_out == pytest.approx({"b": 0.2})
    assert all_learned(learned, ["a", "c"], "t")[0]
    ok, why = all_learned(learned, ["a", "b"], "effects.csv")
    assert not ok and "over 2 models, 1 of which did not learn (b;" in why
    assert learned_text(learned).startswith("2 of 3 models learned; left out")
    ok, why = enough_per_size(models.assign(size=["S", "S", "M"]), learned, 2)
    assert not ok and why.startswith("too few models learned: 1 in size M, 1 in size S")
    assert enough_per_size(models.assign(size=["S", "S", "M"]), learned, 1)[0]
    tables = ChapterTables(_sweep(models=models), 6.0, pd.DataFrame())
    section = SimpleNamespace(learned_margin=0.25)
    assert learned_(tables, section) == learned  # a chapter's models that learned


def test_a_check_after_its_premises():
    rule = rule_from_params({"rule": "threshold", "threshold": 0.5, "reason": "above a half"})
    decided = decide_interval(rule, 0.8, 0.6, 0.9, "share")
    assert premised(rule, [(True, "-"), (True, "-")], decided) == decided
    v, what = premised(rule, [(True, "-"), (False, "too few"), (False, "flat")], decided)
    assert v.status == INCONCLUSIVE and v.reason == "premise fails: too few"
    assert what == "share: 0.8 [0.6, 0.9]"  # the check's words are kept


def _sweep(**tables) -> SweepTables:
    """SweepTables holding ``tables`` (the others None)."""
    names = [f.name for f in fields(SweepTables)]
    return SweepTables(**{n: tables.get(n) for n in names})


def _grid():
    rows = [
        {
            "size": s,
            "batch_size": b,
            "weight_decay": 0.0,
            "lr": lr,
            "final_lr_ratio": 0.1,
            "seed": 0,
        }
        for s in ("S", "M")
        for b in (8, 32, 128)
        for lr in (0.001, 0.004)
    ]
    rows.append(
        {
            "size": "S",
            "batch_size": 32,
            "weight_decay": 0.0,
            "lr": 0.004,
            "final_lr_ratio": 0.0,
            "seed": 0,
        }
    )
    grid = pd.DataFrame(rows)
    return grid.assign(name=[f"m{i}" for i in range(len(grid))])


def test_the_models_an_effect_compares_and_the_models_of_cells():
    assert FACTORS == GRID_FACTORS
    grid = _grid()
    pairs = compared_models(grid, "batch_size", 8.0, 128.0)  # read back from a CSV as floats
    assert pairs == sorted(grid.loc[grid.batch_size.isin([8, 128]), "name"])  # 8 models
    lr = compared_models(grid, "lr", 0.001, 0.004)
    assert "m12" not in lr and len(lr) == 12  # the annealing point has no lr partner
    with pytest.raises(KeyError, match="not a factor"):
        compared_models(grid, "width", 1, 2)
    cells = pd.DataFrame(
        {"size": ["S"], "weight_decay": [0.0], "lr": [0.001], "final_lr_ratio": [0.1], "seed": [0]}
    )
    assert cell_models(grid, cells) == ["m0", "m2", "m4"]
    assert cell_models(grid, cells.iloc[:0]) == []


def test_an_outcome_varies_among_the_learned_models_against_its_seed_sd():
    models = two_sizes([1.0, 1.0, 4.0, 10.0, 12.0, 14.0])
    t = _sweep(models=models, spread=pd.DataFrame({"seed_sd": [0.5]}, index=["y"]))
    # within size: S deviations -1, -1, 2 (ss 6), M -2, 0, 2 (ss 8); dof 6 - 2 = 4
    sd = np.sqrt(14 / 4)
    ok, why = varies_among(t, "y", list(models.name), 2.0)
    assert ok and f"only {sd / 0.5:.2g}x" in why
    assert not varies_among(t, "y", list(models.name), sd / 0.5 + 0.01)[0]
    ok, why = varies_among(t, "y", ["S-a-s0-tD", "S-b-s0-tD", "M-a-s0-tD"], 1.0)
    assert not ok and "replicates that did not learn: ['S-a-s1-tD']" in why


def test_shares_carry_their_clopper_pearson_interval_and_tables_their_exclusions():
    assert share_text(8, 8, 0.95) == f"8 of 8 (1 [{0.025 ** (1 / 8):.2g}, 1], Clopper–Pearson)"
    assert share_text(0, 0, 0.95) == "no units"
    within = pd.DataFrame(
        {
            "r2": [0.1, 0.5, np.nan],
            "r2_ci_low": [0.2, 0.4, np.nan],  # the first excludes its estimate
            "r2_ci_high": [0.3, 0.6, np.nan],
            "partial_spearman": [0.0, 0.1, 0.2],
            "partial_spearman_ci_low": [-0.1, 0.0, 0.1],
            "partial_spearman_ci_high": [0.1, 0.2, 0.3],
        }
    )
    t = _sweep(within=within)
    counts = excluding(t, ["within"])
    assert counts.to_dict("records") == [
        {
            "table": "prediction_within_size.csv",
            "interval": "r2 [r2_ci_low, r2_ci_high]",
            "excluding": 1,
            "intervals": 2,
        },
        {
            "table": "prediction_within_size.csv",
            "interval": "partial_spearman [partial_spearman_ci_low, partial_spearman_ci_high]",
            "excluding": 0,
            "intervals": 3,
        },
    ]
    assert excluding_words(counts) == (
        "1 of 5 intervals in the tables exclude their estimate "
        "(prediction_within_size.csv r2 [r2_ci_low, r2_ci_high]: 1 of 2)"
    )
    with pytest.raises(KeyError, match="no intervals known"):
        excluding(t, ["models"])


def test_a_claim_row_in_words_and_the_rows_side_by_side():
    row = Claim(
        "B3",
        INCONCLUSIVE,
        "k [1, 2]",
        "training_knobs",
        "d",
        anchor="verdict-b3",
        rule="r",
        unit="u",
        robust="yes",
        rule_v1=REPRODUCED,
        rule_v2=PARTLY,
        revision="why",
        decided=AFTER_DATA,
    )
    text = claim_text([row], "verdict-b3").splitlines()
    assert text[0] == (
        "B3: inconclusive. v1 reproduced → v2 partly → v3 inconclusive: why (decided after "
        "seeing data)"
    )
    assert text[1:] == ["key number: k [1, 2]", "rule: r", "robust: yes", "unit: u", "detail: d"]
    with pytest.raises(KeyError, match="verdict-b4"):
        claim_text([row], "verdict-b4")
    frame = claims_frame([row])
    assert frame.iloc[0].to_dict() == {
        "claim": "B3",
        "v1": REPRODUCED,
        "v2": PARTLY,
        "v3": INCONCLUSIVE,
        "key number": "k [1, 2]",
        "robust": "yes",
    }


def test_a_sweep_claim_row_carries_v3_its_words_and_v1_and_v2():
    rule = {"rule": "threshold", "threshold": 0.5, "reason": "above a half"}
    v1 = [decide_interval(rule_from_params(rule), 0.4, 0.3, 0.45, "share")]
    decision = combined([decide_interval(rule_from_params(rule), 0.8, 0.6, 0.9, "share")])
    models = pd.DataFrame(
        {"name": ["S-b8-s0-tD", "S-b8-s1-tD"], "params": [1000] * 2, "tokens": [5000] * 2}
    )
    who = learned_models(models.assign(loss_id_test=[5.0, 5.0]), 6.0, 0.25)
    row = sweep_claim(
        "B3",
        "training_knobs",
        decision,
        v1,
        v2=PARTLY,
        spec={"revision": " learned\n models "},
        tables=_sweep(models=models),
        who=who,
        premise=WPremise(True, True, "S past"),
        paper_scale="the paper: 10^3 tokens per parameter",
        counts="0 of 4 intervals in the tables exclude their estimate",
        alternatives={"known sd": REPRODUCED},
        anchor="verdict-b3",
        rule="v3: above a half",
        unit="matched pairs (n = 1)",
        extra=" More.",
        post_hoc="the seed sd",
    )
    assert (row.claim_id, row.status, row.key_number) == ("B3", REPRODUCED, "share: 0.8 [0.6, 0.9]")
    assert row.detail == (
        "v3: share: 0.8 [0.6, 0.9] → reproduced. More. Premise W left its random start and "
        "settled: holds (S past). every model learned (at least 0.25 nats "
        "below the unigram entropy). 0 of 4 intervals in the tables exclude their estimate. "
        "v1: share: 0.4 [0.3, 0.45] → not reproduced"
    )
    assert (row.rule_v1, row.rule_v2, row.revision, row.robust) == (
        NOT_REPRODUCED,
        PARTLY,
        "learned models",
        "yes",
    )
    assert (row.anchor, row.rule, row.unit, row.post_hoc, row.decided) == (
        "verdict-b3",
        f"v3: above a half; {PREMISE_RULE}",
        "matched pairs (n = 1)",
        "the seed sd",
        PROSPECTIVE,
    )
    assert row.scale == (
        "2 models (2 seeds each), 1k parameters, 5k tokens each, 5 tokens per parameter; "
        "the paper: 10^3 tokens per parameter"
    )
