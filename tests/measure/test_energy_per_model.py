"""Each model's A4, A6, A7 numbers: the peak's bracketing checkpoints and the views (the
arguments each declared alternative's table is computed with). The per-model numbers
themselves are checked through the chapter (``tests/verdicts/chapters/test_gradient_energy.py``)."""

import json

import pytest

from geolib.measure.energy_per_model import bracket, declared_views, view

DENSE = [1, 2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 200, 1000]
SECTION = {
    "key_rank": 4,
    "early_share": 0.3,
    "verdict_steps": [16, 0, 64],
    "frozen_sources": [0, 16, 64],
    "a4_v3": {"r_bar": 10, "no_effect": 1, "alternatives": {"k = 2": {"k": 2}}},
    "a6_v3": {"progress": 0.9, "alternatives": {"half": {"progress": 0.5}}},
    "a7_v3": {"warmup_steps": 50, "alternatives": {"often": {"threshold": 0.6}}},
}


def test_bracket_names_the_neighbouring_checkpoints():
    b = bracket(DENSE, 64)
    assert (b.before, b.after, b.bracketed) == (48, 80, True)
    assert b.words() == "64 (48 | 80)"
    first, last = bracket(DENSE, 1), bracket(DENSE, 1000)
    assert (first.before, first.bracketed) == (None, False)
    assert (last.after, last.bracketed) == (None, False)
    assert last.words() == "1000 (200 | none)"
    assert bracket([64, 8, 32, 8], 32).words() == "32 (8 | 64)"  # unsorted, repeated: same steps
    with pytest.raises(ValueError, match="not one of the searched steps"):
        bracket(DENSE, 60)


def test_a_view_is_the_sections_numbers_with_one_change():
    a4 = view("A4", SECTION, 0.25)
    assert a4 == {
        "k": 4,
        "early_share": 0.3,
        "margin": 0.25,
        "r_bar": 10.0,
        "no_effect": 1.0,
        "bound": "ci_low",
        "steps": [0, 16, 64],  # sorted
    }
    assert view("A4", SECTION, 0.25, {"steps": "all", "k": 8})["steps"] is None
    assert view("A4", SECTION, 0.25, {"steps": "all", "k": 8})["k"] == 8
    assert view("A6", SECTION, 0.25, {"progress": 1}) == {
        "k": 4,
        "progress": 1.0,
        "steps": [0, 16, 64],
    }
    a7 = view("A7", SECTION, 0.25, {"null_source": 0, "after_warmup": 2})
    assert (a7["null_source"], a7["after_warmup"], a7["warmup_steps"]) == (0, 2.0, 50)
    assert view("A7", {k: v for k, v in SECTION.items() if k != "verdict_steps"}, 0.25)["k"] == 4
    # what the stage writes in views.json reads back as the same arguments
    assert json.loads(json.dumps(a7)) == a7
    # a change of the rule alone leaves the arguments as they are
    assert view("A4", SECTION, 0.25, {"threshold": 0.6}) == a4


def test_declared_views_name_the_primary_and_each_alternative():
    views = declared_views(SECTION, 0.25)
    assert sorted(views["A4"]) == ["k = 2", "primary"] and views["A4"]["k = 2"]["k"] == 2
    assert views["A6"]["half"]["progress"] == 0.5
    assert views["A7"]["often"] == views["A7"]["primary"]


def test_a_view_refuses_an_unknown_claim_and_a_bad_margin():
    with pytest.raises(ValueError, match="claim must be one of"):
        view("A5", SECTION, 0.25)
    with pytest.raises(ValueError, match="margin"):
        view("A4", SECTION, -1.0)
