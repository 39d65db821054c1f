"""geolib.verdicts.rules: every branch of every rule on made-up numbers (boundaries included), the
combination of evidence rows, premises, seeds, robustness, learned models."""

import numpy as np
import pytest

from geolib.verdicts.rules import (
    Beyond,
    Fraction,
    Identity,
    KeyNumber,
    Threshold,
    WithinTolerance,
    combine_statuses,
    decide_if_defined,
    premise_fails,
    rule_from_params,
)

WHY = "the paper's law"


@pytest.mark.parametrize(
    ("est", "low", "high", "status"),
    [
        (2.0, 1.95, 2.05, "reproduced"),
        (2.0, 1.9, 2.1, "reproduced"),  # boundary: interval exactly the band
        (1.8, 1.7, 1.85, "not reproduced"),  # entirely below
        (2.3, 2.15, 2.4, "not reproduced"),  # entirely above
        (1.9, 1.85, 1.95, "inconclusive"),  # straddles the lower edge
        (2.0, 1.5, 2.5, "inconclusive"),  # wider than the band
        (2.15, 2.1, 2.2, "inconclusive"),  # touches the upper edge: not entirely outside
    ],
)
def test_within_tolerance_branches(est, low, high, status):
    v = WithinTolerance(2.0, 0.1, WHY).decide(est, low, high)
    assert v.status == status
    assert "2 ± 0.1" in v.rule and WHY in v.rule


@pytest.mark.parametrize(
    ("est", "low", "high", "status"),
    [
        (0.5, 0.3, 0.7, "reproduced"),  # entirely above the band
        (-0.5, -0.7, -0.2, "reproduced"),  # entirely below: either sign counts
        (0.0, -0.05, 0.1, "not reproduced"),  # inside
        (0.0, -0.1, 0.1, "not reproduced"),  # exactly the band
        (0.1, 0.0, 0.3, "inconclusive"),  # straddles the upper edge
        (0.0, -0.5, 0.5, "inconclusive"),  # wider than the band
    ],
)
def test_beyond_branches(est, low, high, status):
    v = Beyond(0.0, 0.1, WHY).decide(est, low, high)
    assert v.status == status and "either side" in v.rule and WHY in v.rule


def test_beyond_bad_input():
    with pytest.raises(ValueError, match="tol must be > 0"):
        Beyond(0.0, 0.0, WHY)
    with pytest.raises(ValueError, match="low <= estimate <= high"):
        Beyond(0.0, 0.1, WHY).decide(0.5, 0.6, 0.7)
    assert isinstance(
        rule_from_params({"rule": "beyond", "target": 0, "tol": 1, "reason": WHY}), Beyond
    )


def test_within_tolerance_bad_input():
    rule = WithinTolerance(-1.0, 0.05, WHY)
    with pytest.raises(ValueError, match="low <= estimate <= high"):
        rule.decide(-1.0, -0.9, -1.1)
    with pytest.raises(ValueError, match="finite"):
        rule.decide(float("nan"), -1.1, -0.9)
    with pytest.raises(ValueError, match="tol"):
        WithinTolerance(1.0, 0.0, WHY)
    with pytest.raises(ValueError, match="reason"):
        WithinTolerance(1.0, 0.1, "  ")


@pytest.mark.parametrize(
    ("est", "low", "high", "status"),
    [
        (20.0, 12.0, 30.0, "reproduced"),
        (10.5, 10.0, 11.0, "inconclusive"),  # boundary: near bound on the threshold
        (9.0, 5.0, 12.0, "inconclusive"),
        (3.0, 2.0, 4.0, "partly"),  # short of 10 but excludes the null 1
        (1.0, 0.8, 1.3, "not reproduced"),  # short of 10 and contains the null
        (9.0, 8.0, 9.99, "partly"),
    ],
)
def test_threshold_above_branches(est, low, high, status):
    assert Threshold(10.0, WHY, no_effect=1.0).decide(est, low, high).status == status


def test_threshold_without_null_and_below():
    assert Threshold(10.0, WHY).decide(3.0, 2.0, 4.0).status == "not reproduced"
    below = Threshold(0.3, WHY, direction="below", no_effect=1.0)
    assert below.decide(0.1, 0.05, 0.2).status == "reproduced"
    assert below.decide(0.5, 0.4, 0.6).status == "partly"  # short of 0.3, excludes 1
    assert below.decide(0.9, 0.6, 1.2).status == "not reproduced"
    assert below.decide(0.3, 0.2, 0.4).status == "inconclusive"
    assert "< 0.3" in below.describe()


def test_threshold_bad_input():
    with pytest.raises(ValueError, match="direction"):
        Threshold(1.0, WHY, direction="sideways")
    with pytest.raises(ValueError, match="no-effect side"):
        Threshold(10.0, WHY, no_effect=20.0)


@pytest.mark.parametrize(
    ("k", "n", "status"),
    [
        (3, 3, "reproduced"),
        (8, 10, "reproduced"),  # boundary: exactly 80%
        (7, 10, "not reproduced"),
        (2, 2, "inconclusive"),  # fewer units than min_units
        (0, 3, "not reproduced"),
    ],
)
def test_fraction_branches(k, n, status):
    assert Fraction(0.8, 3, WHY).decide(k, n).status == status


def test_fraction_bad_input():
    with pytest.raises(ValueError, match="exceed"):
        Fraction(0.8, 3, WHY).decide(4, 3)
    with pytest.raises(ValueError, match="min_fraction"):
        Fraction(0.0, 3, WHY)
    with pytest.raises(ValueError, match="min_units"):
        Fraction(0.5, 0, WHY)


@pytest.mark.parametrize(
    ("dev", "status"), [(0.0, "reproduced"), (1e-10, "reproduced"), (2e-10, "not reproduced")]
)
def test_identity_branches(dev, status):
    assert Identity(1e-10, WHY).decide(dev).status == status


def test_identity_bad_input():
    with pytest.raises(ValueError):
        Identity(1e-10, WHY).decide(-1.0)
    with pytest.raises(ValueError):
        Identity(1e-10, WHY).decide(float("inf"))


def test_rule_from_params_builds_each_kind():
    r = rule_from_params({"rule": "within_tolerance", "target": 2, "tol": 0.1, "reason": WHY})
    assert r == WithinTolerance(2.0, 0.1, WHY)
    assert isinstance(rule_from_params({"rule": "identity", "tol": 1e-12, "reason": WHY}), Identity)
    t = rule_from_params({"rule": "threshold", "threshold": 10, "no_effect": 1, "reason": WHY})
    assert t.direction == "above" and t.no_effect == 1.0
    f = rule_from_params({"rule": "fraction", "min_fraction": 0.8, "min_units": 3, "reason": WHY})
    assert f.min_units == 3


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"rule": "vibes"}, "unknown rule"),
        ({"target": 2}, "unknown rule"),
        ({"rule": "within_tolerance", "target": 2, "reason": WHY}, "missing field.*tol"),
        ({"rule": "identity", "tol": 1e-9, "reason": WHY, "tolerance": 1}, "unknown field"),
        ({"rule": "identity", "tol": 1e-9}, "missing field.*reason"),
        ([1, 2], "mapping"),
    ],
)
def test_rule_from_params_errors(spec, match):
    with pytest.raises(ValueError, match=match):
        rule_from_params(spec)


def test_every_rule_in_params_yaml_builds():
    """Each chapter's verdict rules in params.yaml are valid and carry a reason."""
    from pathlib import Path

    import yaml

    params = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    found, references = [], []

    def walk(node, section):
        if isinstance(node, dict):
            # an alternative may name an earlier revision's rule section ({rule: b1_v3})
            ref = node.get("rule")
            if set(node) == {"rule"} and isinstance(ref, str) and section and ref in section:
                references.append(section[ref])
            elif isinstance(ref, dict):  # an alternative's own rule ({statistic: …, rule: {…}})
                walk(ref, section)
            elif "rule" in node:
                found.append(rule_from_params(node))
            else:
                for v in node.values():
                    walk(v, node if section is None else section)

    for chapter in params.values():
        walk(chapter, chapter if isinstance(chapter, dict) else None)
    assert found, "no verdict rule in params.yaml"
    assert all(r.reason for r in found)
    assert all(isinstance(r, dict) for r in references)


@pytest.mark.parametrize(
    ("rows", "combined"),
    [
        ([], "not yet run"),
        (["not yet run"], "not yet run"),
        (["reproduced"], "reproduced"),
        (["reproduced", "reproduced", "not yet run"], "reproduced"),
        (["reproduced", "not reproduced"], "partly"),
        (["reproduced", "inconclusive"], "partly"),
        (["partly", "not reproduced"], "partly"),
        (["inconclusive", "inconclusive"], "inconclusive"),
        (["inconclusive", "not reproduced"], "not reproduced"),
        (["not reproduced", "not reproduced"], "not reproduced"),
    ],
)
def test_combine_statuses(rows, combined):
    assert combine_statuses(rows) == combined


def test_combine_statuses_rejects_unknown():
    with pytest.raises(ValueError, match="status"):
        combine_statuses(["reproduced", "maybe"])


def test_decide_if_defined():
    from geolib.verdicts.rules import decide_if_defined

    rule = rule_from_params(
        {"rule": "threshold", "threshold": 0.5, "no_effect": 0.0, "reason": "r"}
    )
    assert decide_if_defined(rule, 0.8, 0.6, 0.9, "x").status == "reproduced"
    assert decide_if_defined(rule, 0.3, 0.1, 0.4, "x").status == "partly"
    v = decide_if_defined(rule, float("nan"), float("nan"), float("nan"), "nothing to explain")
    assert v.status == "inconclusive" and v.reason == "undefined: nothing to explain"
    assert decide_if_defined(rule, 0.8, None, 0.9, "x").status == "inconclusive"


def test_a_failed_premise_is_inconclusive_whatever_the_numbers_say():
    from geolib.verdicts.rules import given_premise

    rule = Threshold(10.0, WHY)
    decide = lambda: rule.decide(50.0, 40.0, 60.0)  # noqa: E731
    assert given_premise(rule, True, "x", decide).status == "reproduced"
    v = given_premise(rule, False, "no run degrades (best = final in 8 of 8)", decide)
    assert v.status == "inconclusive" and v.reason.startswith("premise fails: no run degrades")
    with pytest.raises(ValueError, match="True or False"):
        given_premise(rule, "yes", "x", decide)
    with pytest.raises(ValueError, match="reason"):
        given_premise(rule, False, " ", decide)


def test_seed_statuses_decide_each_seed_group():
    from geolib.verdicts.rules import seed_statuses, seeds_agreeing

    summary = {"x": 5, "by_seed": {"0": {"x": 5}, "1": {"x": 20}, "2": {"x": 7}}}
    decide = lambda s: "reproduced" if s["x"] < 10 else "not reproduced"  # noqa: E731
    statuses = seed_statuses(summary, decide)
    assert statuses == {"0": "reproduced", "1": "not reproduced", "2": "reproduced"}
    assert seeds_agreeing(statuses.values(), decide(summary)) == "2 of 3"
    assert seed_statuses({"x": 50}, decide) == {"all": "not reproduced"}  # one seed


def test_over_seeds_is_students_t_over_the_seed_values():
    from scipy import stats as st

    from geolib.verdicts.rules import over_seeds

    x = [0.5, 0.6, 0.7]
    half = st.t.ppf(0.975, 2) * np.std(x, ddof=1) / np.sqrt(3)
    assert over_seeds({"0": 0.5, "1": 0.6, "2": 0.7}) == (
        f"0.6 [{0.6 - half:.3g}, {0.6 + half:.3g}] over 3 seeds (t)"
    )
    assert over_seeds({"all": 2.5}) == "2.5 (one seed)"
    nan = float("nan")
    assert over_seeds({"0": nan, "1": 1.0}) == "1 (one seed; undefined for seed 0)"
    assert over_seeds({"0": 0.5, "1": nan, "2": 0.7}).endswith(
        "over 2 seeds (t; undefined for seed 1)"
    )
    assert over_seeds({"0": nan}) == "undefined for every seed"
    for bad in ({}, {"0": float("inf"), "1": 1.0}):
        with pytest.raises(ValueError, match="over_seeds"):
            over_seeds(bad)


def test_seeds_agreeing_and_robustness():
    from geolib.verdicts.rules import robustness, seeds_agreeing

    assert seeds_agreeing(["reproduced", "reproduced", "not reproduced"], "reproduced") == "2 of 3"
    with pytest.raises(ValueError, match="no per-seed"):
        seeds_agreeing([], "reproduced")
    with pytest.raises(ValueError, match="status must be"):
        seeds_agreeing(["fine"], "reproduced")
    assert robustness("reproduced", {"k = 2": "reproduced", "σ²": "reproduced"}) == "yes"
    assert (
        robustness("reproduced", {"k = 2": "reproduced", "σ²": "partly", "ζ = 0": "inconclusive"})
        == "fragile: σ² → partly; ζ = 0 → inconclusive"
    )
    with pytest.raises(ValueError, match="no alternatives"):
        robustness("reproduced", {})
    assert robustness("partly", {"k = 2": "partly", "k = 8": "not yet run"}) == (
        "yes (not run here: k = 8)"
    )
    assert robustness("partly", {"k = 8": "not yet run"}) == "untested (not run here: k = 8)"


def test_rule_with_changes_only_the_rules_own_fields():
    from geolib.verdicts.rules import rule_with

    spec = {"rule": "fraction", "min_fraction": 0.5, "min_units": 4, "reason": WHY}
    assert rule_with(spec, {"min_fraction": 0.34, "k": 2}) == Fraction(0.34, 4, WHY)
    assert rule_with(spec, {}) == Fraction(0.5, 4, WHY)
    with pytest.raises(ValueError, match="unknown rule"):
        rule_with({"rule": "vibes"}, {})


def test_deciding_check_is_the_one_that_failed():
    from geolib.verdicts.rules import Verdict, deciding_check

    ok, no, unsure = (
        Verdict(s, "r", "x") for s in ("reproduced", "not reproduced", "inconclusive")
    )
    assert deciding_check([(ok, "a"), (ok, "b")]) == ("reproduced", "a")
    assert deciding_check([(ok, "a"), (no, "b"), (unsure, "c")]) == ("partly", "b")
    assert deciding_check([(unsure, "a"), (no, "b")]) == ("not reproduced", "b")
    assert deciding_check([(ok, "a"), (unsure, "b"), (no, "c")]) == ("partly", "c")
    assert deciding_check([(unsure, "a"), (unsure, "b")]) == ("inconclusive", "a")
    with pytest.raises(ValueError, match="no checks"):
        deciding_check([])


def test_shares_over_seeds_is_bounded_and_names_a_seed_without_units():
    from geolib.measure.stats import share_over_models
    from geolib.verdicts.rules import shares_over_seeds

    got = shares_over_seeds({"0": (0, 12), "1": (0, 12), "2": (7, 12)})
    iv = share_over_models([0, 0, 7], [12, 12, 12], unit="seed")
    assert got == f"{iv.value:.3g} [{iv.low:.3g}, {iv.high:.3g}] over 3 seeds (logit-t)"
    assert 0 < iv.low < iv.high < 1
    assert "no units for seed 1" in shares_over_seeds({"0": (3, 4), "1": (0, 0)})
    assert shares_over_seeds({"0": (0, 0)}) == "undefined for every seed"
    with pytest.raises(ValueError):
        shares_over_seeds({})


def test_learners_keep_models_a_margin_below_the_unigram_entropy():
    from geolib.verdicts.learners import learners

    got = learners({"a": 5.0, "b": 6.95, "c": 6.75}, {"a": 7.0, "b": 7.0, "c": 7.0}, 0.25)
    assert got.kept == ("a", "c")  # c exactly at the margin counts
    assert got.left_out == pytest.approx({"b": 0.05})
    assert "b (0.05)" in got.words() and "margin 0.25" in got.words()
    assert "every model learned" in learners({"a": 1.0}, {"a": 7.0}, 0.25).words()
    with pytest.raises(ValueError, match="one loss and one unigram entropy"):
        learners({"a": 1.0}, {"b": 7.0}, 0.25)
    with pytest.raises(ValueError):
        learners({"a": float("nan")}, {"a": 7.0}, 0.25)
    with pytest.raises(ValueError):
        learners({"a": 1.0}, {"a": 7.0}, -1.0)


# ---------------------------------------------------------------------------------------------
# The numbers a verdict carries
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("est", "low", "high", "status"),
    [(0.8, 0.6, 0.9, "reproduced"), (0.5, 0.3, 0.7, "inconclusive"), (0.2, 0.1, 0.3, "partly")],
)
def test_a_threshold_verdict_carries_the_number_it_decided(est, low, high, status):
    rule = Threshold(0.4, "the paper says so", no_effect=0.0)
    v = rule.decide(est, low, high)
    assert v.status == status
    assert v.numbers == (KeyNumber("", status, est, low, high, 0.4),)
    below = Threshold(0.4, "the paper says so", direction="below").decide(0.2, 0.1, 0.3)
    assert below.numbers[0].bar == 0.4 and below.numbers[0].status == "reproduced"


def test_a_band_verdict_carries_its_centre_and_half_width():
    v = WithinTolerance(1.0, 0.1, "slope one").decide(1.02, 0.95, 1.05)
    assert v.numbers == (KeyNumber("", v.status, 1.02, 0.95, 1.05, 1.0, band=0.1),)
    out = Beyond(0.0, 0.2, "an effect").decide(0.5, 0.3, 0.7)
    assert out.numbers == (KeyNumber("", "reproduced", 0.5, 0.3, 0.7, 0.0, band=0.2),)


def test_counts_identities_and_premises_carry_no_number():
    assert Fraction(0.5, 2, "most").decide(3, 4).numbers == ()
    assert Identity(1e-6, "chain rule").decide(1e-9).numbers == ()
    assert premise_fails(Threshold(0.4, "x"), "nothing varies").numbers == ()
    undefined = decide_if_defined(Threshold(0.4, "x"), float("nan"), 0.0, 1.0, "too few")
    assert undefined.numbers == ()


def test_key_numbers_are_checked_and_labelled():
    n = KeyNumber("", "partly", 0.5, 0.4, 0.6, 0.5)
    assert n.labelled("states") == KeyNumber("states", "partly", 0.5, 0.4, 0.6, 0.5)
    assert n.labelled("states").labelled("D").label == "D: states"
    v = Threshold(0.4, "x").decide(0.8, 0.6, 0.9)
    assert [m.label for m in v.labelled("rows")] == ["rows"]
    with pytest.raises(ValueError, match="low <= estimate <= high"):
        KeyNumber("", "partly", 0.7, 0.4, 0.6, 0.5)
    with pytest.raises(ValueError, match="status must be one of"):
        KeyNumber("", "held", 0.5, 0.4, 0.6, 0.5)
    with pytest.raises(ValueError, match="finite"):
        KeyNumber("", "partly", 0.5, 0.4, float("inf"), 0.5)
    with pytest.raises(ValueError, match="band must be >= 0"):
        KeyNumber("", "partly", 0.5, 0.4, 0.6, 0.5, band=-1)
