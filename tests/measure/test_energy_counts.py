"""Tests of geolib.measure.energy_counts: the units of A4's and A7's rules (v2), counted by hand
on small tables."""

import pandas as pd
import pytest

from geolib.measure import energy_counts as ec


def _table(rows):
    cols = ["run", "decoder", "step", "layer", "k", "source", "r_energy", "ci_low", "ceiling"]
    return pd.DataFrame([dict(zip(cols, r, strict=True)) for r in rows])


def test_a4_count_reads_the_learned_phase_and_the_ceiling():
    table = _table(
        [
            # run, decoder, step, layer, k, source, R, low, ceiling
            ("d", True, 1, "block1", 4, "refit", 1.0, 0.9, 50.0),  # not learned yet
            ("d", True, 8, "block1", 4, "refit", 30.0, 20.0, 50.0),  # hit
            ("d", True, 8, "block2", 4, "refit", 12.0, 8.0, 50.0),  # point > 10, bound not
            ("d", True, 8, "block3", 4, "refit", 6.0, 5.0, 7.0),  # ceiling < 10: left out
            ("d", True, 8, "embed", 4, "refit", 99.0, 90.0, 99.0),  # not a block
            ("d", True, 8, "block1", 2, "refit", 99.0, 90.0, 99.0),  # other rank
            ("d", True, 8, "block1", 4, "step-1", 99.0, 90.0, 99.0),  # frozen T
            ("d", True, 600, "block1", 4, "refit", 99.0, 90.0, 99.0),  # after early_max
            ("e", False, 8, "block1", 4, "refit", 99.0, 90.0, 99.0),  # encoder
        ]
    )
    losses = pd.DataFrame(
        {"run": ["d", "d", "d"], "step": [1, 8, 600], "eval_loss": [7.0, 5.0, 4.0]}
    ).assign(unigram_entropy=6.0)
    kw = dict(k=4, early_max=512, threshold=10.0, no_effect=1.0)
    got = ec.a4_count(table, losses, **kw)
    assert (got["successes"], got["n_units"], got["n_below_ceiling"]) == (1, 2, 1)
    assert got["premise"] and got["per_run"] == {"d": [1, 2]} and got["steps"] == [8]
    early = ec.a4_count(table, losses, phase="early", **kw)
    assert (early["successes"], early["n_units"], early["n_effect"]) == (1, 3, 2)
    assert early["premise"]  # 2 of 3 units above 1
    point = ec.a4_count(table, losses, bound="r_energy", **kw)
    assert point["successes"] == 2
    flat = table.assign(ci_low=0.5)
    assert not ec.a4_count(flat, losses, **kw)["premise"]
    with pytest.raises(ValueError, match="phase"):
        ec.a4_count(table, losses, phase="late", **kw)


def test_a4_on_a_released_model_counts_layers_by_domain_at_its_one_checkpoint():
    rows = [
        # run, decoder, step, layer, k, source, R, low, ceiling  (step -1: released)
        ("m", True, -1, "block1", 4, "refit", 30.0, 20.0, 50.0),  # hit
        ("m", True, -1, "block2", 4, "refit", 1.4, 1.2, 50.0),  # effect, not above 10
        ("m", True, -1, "block3", 4, "refit", 1.1, 0.9, 5.0),  # ceiling < 10: left out
        ("m", True, -1, "embed", 4, "refit", 99.0, 90.0, 99.0),  # not a block
        ("m", True, -1, "block1", 1, "refit", 99.0, 90.0, 99.0),  # other rank
    ]
    table = pd.concat(
        [_table(rows).assign(domain="id"), _table(rows[:2]).assign(domain="ood_bible")]
    )
    got = ec.a4_released_count(table, k=4, threshold=10.0, no_effect=1.0, phase="early")
    assert (got["successes"], got["n_units"], got["n_below_ceiling"], got["n_effect"]) == (
        2,
        4,
        1,
        4,
    )
    assert got["premise"] and got["per_run"] == {"id": [1, 2], "ood_bible": [1, 2]}
    point = ec.a4_released_count(table.assign(ci_low=0.5), k=4, threshold=10.0, no_effect=1.0)
    assert point["successes"] == 0 and not point["premise"]
    assert (
        ec.a4_released_count(table, k=4, threshold=10, no_effect=1, bound="r_energy")["successes"]
        == 2
    )
    with pytest.raises(ValueError, match="bound"):
        ec.a4_released_count(table, k=4, threshold=10.0, no_effect=1.0, bound="median")


def test_a7_count_finds_the_peak_and_what_is_left_at_the_end():
    rows = []
    for layer, peak_step, final_frozen_low in (("block1", 64, 3.0), ("block2", 800, 3.0)):
        for step in (1, 64, 800, 1000):
            r = 20.0 if step == peak_step else 4.0
            rows.append(("d", True, step, layer, 4, "refit", r, r - 1, 50.0))
        rows.append(("d", True, 1000, layer, 4, "step-64", 5.0, final_frozen_low, 50.0))
    for step in (1, 1000):  # a unit with no effect: R never above 1
        rows.append(("d", True, step, "block3", 4, "refit", 1.0, 0.8, 50.0))
    got = ec.a7_count(_table(rows), k=4, early_max=512, a7_source=64, no_effect=1.0)
    assert (got["successes"], got["n_units"], got["n_without_effect"]) == (1, 2, 1)
    by_layer = {u["layer"]: u for u in got["units"]}
    assert by_layer["block1"]["peak_step"] == 64 and by_layer["block1"]["strongest_early"]
    assert by_layer["block2"]["peak_step"] == 800 and not by_layer["block2"]["strongest_early"]
    assert by_layer["block1"]["final_refit"] == 4.0
    later = ec.a7_count(_table(rows), k=4, early_max=1000, a7_source=64, no_effect=1.0)
    assert later["successes"] == 2
