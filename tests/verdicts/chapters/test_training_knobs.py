"""geolib.verdicts.chapters.training_knobs: B3, B4 and B5 decided by their v3 rules on small
hand-made sweep tables, every branch, the numbers checked against closed forms."""

from __future__ import annotations

import itertools
from dataclasses import fields, replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from geolib.config import stage_params
from geolib.verdicts.chapters import training_knobs as tk
from geolib.verdicts.claims import PROSPECTIVE
from geolib.verdicts.rules import INCONCLUSIVE, NOT_REPRODUCED, NOT_RUN, PARTLY, REPRODUCED
from geolib.verdicts.sweep_tables import (
    SweepTables,
)
from geolib.verdicts.sweep_v4 import V4
from tests.verdicts.chapters.sweep_params import SHARED, VERDICTS, rule_params, study

SIDES = {"seed sd treated as known": {"seed_sd": "known"}, "sigma^2": {"quantity": "w_erank_sq"}}
SECTION = {
    **SHARED,
    "verdict": {
        "b3_batch_rank": rule_params(rule="threshold", threshold=1.0),
        "b3_u_shape": rule_params(rule="fraction", min_fraction=0.75, min_units=6),
        "b4_wd_rank": rule_params(rule="threshold", threshold=1.0),
        "b4_wd_loss_by_size": rule_params(rule="beyond", target=0.0, tol=1.0),
        "b5_lr_loss": rule_params(rule="beyond", target=0.0, tol=1.0),
        "b5_lr_rank": rule_params(rule="within_tolerance", target=0.0, tol=1.0),
    },
    "v2": {
        "premise_min_sd_ratio": 2.0,
        "paper_weight_decay": [0.01, 0.1],
        "min_init_move_share": 0.5,
        "seed_sd_after_data": "the sd's own uncertainty since v2",
        "B3": {},
        "B4": {},
        "B5": {"decide": rule_params(rule="fraction", min_fraction=0.5, min_units=2)},
    },
    "b3_v3": {
        "u_shape": rule_params(rule="threshold", threshold=0.5, no_effect=0.3333),
        "revision": "premise for both halves",
        "alternatives": SIDES,
    },
    "b4_v3": {"revision": "learned", "alternatives": SIDES},
    "b5_v3": {"revision": "learned", "alternatives": SIDES},
}
SEC = tk.Section.from_params(SECTION, VERDICTS)
ENTROPY = 6.0  # a loss of 5 learned (margin 0.25)


def _name(size, b, wd, lr, f=0.1, seed=0) -> str:
    return f"{size}-b{b}-wd{wd:g}-lr{lr:g}-f{f:g}-s{seed}-tD"


def _models(wd=(0.01, 0.1), not_learned=()) -> pd.DataFrame:
    """The factorial (2 sizes x 3 batch sizes x 2 weight decays x 2 lr), an annealing point and
    a seed replicate per size; ``not_learned``: names whose loss is above the bar."""
    rows = [
        (size, b, w, lr, 0.1, 0)
        for size, b, w, lr in itertools.product("SM", (8, 32, 128), wd, (0.001, 0.004))
    ]
    for size in "SM":
        rows += [(size, 32, wd[1], 0.004, 0.0, 0), (size, 32, wd[1], 0.004, 0.1, 1)]
    models = pd.DataFrame(
        rows, columns=["size", "batch_size", "weight_decay", "lr", "final_lr_ratio", "seed"]
    )
    models["name"] = [_name(*r) for r in rows]
    models["loss_id_test"] = np.where(models["name"].isin(not_learned), 5.9, 5.0)
    return models.assign(params=1000, tokens=5000)


def _effect(factor, low, high, quantity, est=3.0, known=(2.5, 3.5), sd=(2.0, 4.0), n=8):
    return {
        "factor": factor,
        "low": low,
        "high": high,
        "quantity": quantity,
        "effect_sd": est,
        "ci_low": known[0],
        "ci_high": known[1],
        "ci_low_sd": sd[0],
        "ci_high_sd": sd[1],
        "n_pairs": n,
    }


def _tables(
    *,
    wd=(0.01, 0.1),
    not_learned=(),
    effects=None,
    interaction=(3.0, (2.5, 3.5), (2.0, 4.0)),
    by_size=None,
    u_shaped=(True,) * 8,
    move_share=0.8,
) -> tk.Tables:
    """Hand-made tables; ``effects``: (factor, quantity) → keyword overrides of :func:`_effect`;
    ``by_size``: size → (estimate, (low, high)) of the lr effect on W's rank (sd interval)."""
    ends = {"batch_size": (8, 128), "weight_decay": wd, "lr": (0.001, 0.004)}
    rows = [
        _effect(f, *ends[f], q, **(effects or {}).get((f, q), {}))
        for f in ends
        for q in ("w_erank", "loss_id_test", "w_erank_sq", "w_erank_centered")
    ]
    est, known, sd = interaction
    inter = pd.DataFrame(
        [
            {
                "factor": "weight_decay",
                "levels": "M − S",
                "interaction_sd": est,
                "ci_low": known[0],
                "ci_high": known[1],
                "ci_low_sd": sd[0],
                "ci_high_sd": sd[1],
            }
        ]
    )
    per = by_size or {"S": (0.5, (-1.0, 2.0)), "M": (2.0, (1.0, 3.0))}
    by = pd.DataFrame(
        [
            {"size": s, **_effect("lr", 0.001, 0.004, q, est=e, known=lim, sd=lim, n=6)}
            for s, (e, lim) in per.items()
            for q in ("w_erank", "loss_id_test")
        ]
    )
    cells = pd.DataFrame(
        [(s, w, lr, 0.1, 0) for s, w, lr in itertools.product("SM", wd, (0.001, 0.004))],
        columns=["size", "weight_decay", "lr", "final_lr_ratio", "seed"],
    )
    cells = cells.iloc[: len(u_shaped)].assign(u_shaped=list(u_shaped))
    moves = pd.DataFrame(
        [(s, b, 4, share) for s in "SM" for b, share in ((8, 1.0), (32, 0.9), (128, move_share))],
        columns=["size", "batch_size", "n_points", "share_of_smallest_batch"],
    )
    t = {
        "models": _models(wd, not_learned),
        "effects": pd.DataFrame(rows),
        "interactions": inter,
        "effects_by_size": by,
        "u_shape": cells,
        "init_moves": moves,
    }
    sweep = SweepTables(**{f.name: t.get(f.name) for f in fields(SweepTables)})
    return tk.Tables(sweep, ENTROPY, t.get("study", study()))


# ---------------------------------------------------------------------------------------------
# B3
# ---------------------------------------------------------------------------------------------


def test_b3_reproduced_rank_higher_at_large_batch_and_most_cells_u_shaped():
    d = tk.b3(_tables(), SEC)
    assert d.status == REPRODUCED
    low = stats.beta.ppf(0.025, 8, 1)  # Clopper-Pearson, 8 of 8: 0.025 ** (1/8)
    assert low == pytest.approx(0.025 ** (1 / 8))
    assert d.checks[1][1] == f"share of U-shaped cells (8 of 8, Clopper–Pearson): 1 [{low:.3g}, 1]"
    assert d.checks[0][1] == "w_erank, batch_size 8→128 (seed sd): 3 [2, 4]"  # the sd interval


def test_b3_both_halves_inconclusive_when_w_did_not_leave_its_start():
    d = tk.b3(_tables(move_share=0.2), SEC)
    assert d.status == INCONCLUSIVE and all(v.status == INCONCLUSIVE for v, _ in d.checks)
    assert "moved from its random start only 0.20 of the move" in d.key_number


def test_b3_a_compared_model_that_did_not_learn_makes_it_inconclusive():
    gone = _name("M", 128, 0.1, 0.004)
    d = tk.b3(_tables(not_learned=[gone]), SEC)
    assert d.status == INCONCLUSIVE and f"1 of which did not learn ({gone};" in d.key_number
    # a model outside the batch comparison (the annealing point) does not matter
    d = tk.b3(_tables(not_learned=[_name("S", 32, 0.1, 0.004, f=0.0)]), SEC)
    assert d.status == REPRODUCED


def test_b3_no_u_shape_is_not_reproduced_and_the_rank_half_alone_is_partly():
    d = tk.b3(_tables(u_shaped=(False,) * 8), SEC)
    assert d.checks[1][0].status == NOT_REPRODUCED  # [0, 0.37]: short of 0.5, not beyond 1/3
    assert d.status == PARTLY and d.key.startswith("share of U-shaped cells (0 of 8")
    straddle = tk.b3(_tables(u_shaped=(True,) + (False,) * 7), SEC)  # [0.003, 0.53]
    assert straddle.checks[1][0].status == INCONCLUSIVE
    none = tk.b3(_tables(u_shaped=()), SEC)
    assert none.checks[1][0].reason == "no cell of the design has three batch sizes"


def test_b3_rank_straddle_is_inconclusive_unless_the_seed_sd_is_taken_as_known():
    t = _tables(effects={("batch_size", "w_erank"): {"known": (1.5, 2.5), "sd": (0.5, 4.0)}})
    assert tk.b3(t, SEC).checks[0][0].status == INCONCLUSIVE
    assert tk.b3(t, SEC, {"seed_sd": "known"}).checks[0][0].status == REPRODUCED
    assert tk.alternatives(t, SEC, "B3") == {
        "seed sd treated as known": REPRODUCED,
        "sigma^2": REPRODUCED,
    }


# ---------------------------------------------------------------------------------------------
# B4, B5
# ---------------------------------------------------------------------------------------------


def test_b4_in_the_papers_range_reproduced_outside_it_inconclusive():
    assert tk.b4(_tables(), SEC).status == REPRODUCED
    d = tk.b4(_tables(wd=(0.0, 2.0)), SEC)
    assert d.status == INCONCLUSIVE
    assert "compares weight decay 0 with 2, outside the paper's 0.01-0.1" in d.key_number
    same = tk.b4(_tables(interaction=(0.1, (-0.3, 0.5), (-0.5, 0.7))), SEC)
    assert same.status == PARTLY and same.key.startswith("wd effect on ID loss, M − S")
    gone = tk.b4(_tables(not_learned=[_name("S", 8, 0.01, 0.001)]), SEC)
    assert gone.status == INCONCLUSIVE and "the weight_decay effect" in gone.key_number


def test_b5_loss_moves_and_rank_weak_in_some_size():
    d = tk.b5(_tables(), SEC)
    assert d.status == REPRODUCED
    weak = d.checks[1][1]
    assert "S 0.5 [-1, 2], M 2 [1, 3]" in weak and "weak in 1 of 2 (0.5 [0.013, 0.99]" in weak
    strong = tk.b5(_tables(by_size={"S": (2.0, (1.0, 3.0)), "M": (2.0, (1.0, 3.0))}), SEC)
    assert strong.status == PARTLY and strong.checks[1][0].status == NOT_REPRODUCED
    flipped = tk.b5(_tables(by_size={"S": (-2.0, (-3.0, -1.0)), "M": (2.0, (1.0, 3.0))}), SEC)
    assert flipped.checks[1][0].status == REPRODUCED  # a sign against the pooled effect's
    quiet = tk.b5(_tables(effects={("lr", "loss_id_test"): {"sd": (-0.5, 0.5)}}), SEC)
    assert quiet.checks[0][0].status == NOT_REPRODUCED  # inside ±1 seed sd
    gone = tk.b5(_tables(not_learned=[_name("M", 8, 0.1, 0.004)]), SEC)
    assert gone.status == INCONCLUSIVE
    assert tk.alternatives(_tables(), SEC, "B5")["sigma^2"] == NOT_RUN  # no per-size effects


# ---------------------------------------------------------------------------------------------
# The rows, the section
# ---------------------------------------------------------------------------------------------


def test_verdicts_rows_keep_v1_and_v2_beside_v3():
    t = _tables(
        move_share=0.2,
        effects={("lr", "w_erank_centered"): {"est": 3.0, "sd": (3.5, 4.0)}},  # excludes
    )
    rows = {c.claim_id: c for c in tk.budget_verdicts(t, SEC)}
    b3 = rows["B3"]
    # v1: both halves reproduced; v2: the rank half after its premise, the U half as v1; v3:
    # both halves after the premise
    assert (b3.rule_v1, b3.rule_v2, b3.status) == (REPRODUCED, PARTLY, INCONCLUSIVE)
    assert b3.decided == PROSPECTIVE and b3.revision == "premise for both halves"
    assert b3.unit == "matched pairs of trained models (n = 8); cells of three batch sizes (n = 8)"
    assert b3.post_hoc == "the sd's own uncertainty since v2"
    assert (
        "1 of 34 intervals in the tables exclude their estimate "
        "(effects.csv effect_sd [ci_low_sd, ci_high_sd]: 1 of 12)"
    ) in b3.detail
    assert [c.anchor for c in rows.values()] == ["verdict-b3", "verdict-b4", "verdict-b5"]
    assert rows["B4"].status == REPRODUCED and rows["B4"].robust == "yes"
    # B4: both effects 3 [2.5, 3.5] beyond their bars, v2 on the sd's interval 3 [2, 4] too
    b4 = rows["B4"]
    assert (b4.rule_v1, b4.rule_v2) == (REPRODUCED, REPRODUCED)
    assert b4.detail.endswith(
        "v1: w_erank, weight_decay 0.01→0.1 (seed sd): 3 [2.5, 3.5] → reproduced; "
        "wd effect on ID loss, M − S (seed sd): 3 [2.5, 3.5] → reproduced"
    )
    # B5: v1 asked the lr to leave W's rank within ±1 seed sd (3 [2.5, 3.5] is not); v2 asks
    # that the effect be weak in at least half of the sizes (S's interval holds 0: 1 of 2)
    b5 = rows["B5"]
    assert (b5.rule_v1, b5.rule_v2) == (PARTLY, REPRODUCED)
    assert b5.detail.endswith(
        "v1: loss_id_test, lr 0.001→0.004 (seed sd): 3 [2.5, 3.5] → reproduced; "
        "w_erank, lr 0.001→0.004 (seed sd): 3 [2.5, 3.5] → not reproduced"
    )
    strong = _tables(by_size={"S": (2.0, (1.0, 3.0)), "M": (2.0, (1.0, 3.0))})
    assert {c.claim_id: c for c in tk.budget_verdicts(strong, SEC)}["B5"].rule_v2 == PARTLY
    # outside the paper's weight decays v1 still decides; v2's premise fails
    outside = {c.claim_id: c for c in tk.budget_verdicts(_tables(wd=(0.0, 2.0)), SEC)}["B4"]
    assert (outside.rule_v1, outside.rule_v2) == (REPRODUCED, INCONCLUSIVE)


def test_the_committed_section_parses_and_bad_sections_are_named():
    params = stage_params("params.yaml", "geometry_performance")
    section = tk.Section.from_params(params, stage_params("params.yaml", "verdicts"))
    assert section.b3_v3["u_shape"]["no_effect"] == pytest.approx(1 / 3, abs=1e-3)
    margin = VERDICTS
    with pytest.raises(ValueError, match="paper_weight_decay"):
        tk.Section.from_params(
            {**SECTION, "v2": {**SECTION["v2"], "paper_weight_decay": [0.1]}}, margin
        )
    with pytest.raises(ValueError, match="b5_v3.revision is missing"):
        tk.Section.from_params({k: v for k, v in SECTION.items() if k != "b5_v3"}, margin)
    with pytest.raises(ValueError, match=r"b3_v3\.u_shape: rule 'threshold': unknown field"):
        u = {**SECTION["b3_v3"]["u_shape"], "tol": 1}
        tk.Section.from_params({**SECTION, "b3_v3": {**SECTION["b3_v3"], "u_shape": u}}, margin)
    with pytest.raises(ValueError, match="ci_level"):
        tk.Section.from_params({**SECTION, "ci_level": 1.5}, margin)


def test_v4_rows_read_each_budget_with_v3s_rule_and_keep_v3():
    t = _tables()
    v4 = V4("v4 because.", {})
    v3 = {c.claim_id: c for c in tk.budget_verdicts(t, SEC)}
    rows = {c.claim_id: c for c in tk.verdicts({"D": t, "2D": t}, replace(SEC, v4=v4))}
    assert list(rows) == ["B3", "B4", "B5"]
    past = tk.settled(t, SEC).past_turn
    for claim, row in rows.items():
        expected = tk.DECIDE[claim][1](t, SEC, None).verdict.status if past else INCONCLUSIVE
        assert row.status == expected and row.rule_v3 == v3[claim].status
        assert row.decided == PROSPECTIVE and row.key_number.startswith("D: ")
        assert "v4: v4 because." in row.revision and "(retired in v4)" in row.revision
