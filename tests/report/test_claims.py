"""geolib.report.claims: every branch of every rule on made-up numbers (boundaries included), the
combination of evidence rows, and the table."""

import json

import numpy as np
import pytest

from geolib.report.claims import (
    Claim,
    claims_markdown,
    main,
    read_claims,
    scale_of_runs,
    scale_text,
    write_claims,
)
from geolib.report.rules import (
    CLAIMS,
    NOT_RUN,
    Beyond,
    Fraction,
    Identity,
    Threshold,
    WithinTolerance,
    combine_statuses,
    rule_from_params,
)

WHY = "the paper's law"

# ------------------------------------------------------------------------------------------
# within_tolerance
# ------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------
# threshold
# ------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------
# fraction and identity
# ------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------
# rules from params.yaml
# ------------------------------------------------------------------------------------------


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
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "rule" in node:
                found.append(rule_from_params(node))
            else:
                for v in node.values():
                    walk(v)

    walk(params)
    assert found, "no verdict rule in params.yaml"
    assert all(r.reason for r in found)


# ------------------------------------------------------------------------------------------
# combining evidence
# ------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------
# the table
# ------------------------------------------------------------------------------------------


def test_every_claim_has_one_row_even_without_evidence(tmp_path):
    """The table shows untested claims as not yet run, each claim exactly once, in order."""
    evidence = [Claim("B3", "partly", "x", "sweep", anchor="verdict-b3", scale="2 models")]
    table = read_claims([write_claims(tmp_path / "s.json", evidence)])
    assert list(table) == list(CLAIMS)
    md = claims_markdown(table)
    lines = [line for line in md.splitlines() if line.startswith("| **")]
    heads = [line.split("|")[1].strip() for line in lines]
    assert [h.split(":")[0] for h in heads] == [f"**{cid}" for cid in CLAIMS]
    assert all(h.endswith(CLAIMS[cid]) for cid, h in zip(CLAIMS, heads, strict=True))
    assert all(line.count("|") == 5 for line in lines)  # four columns
    status = {
        cid: h.split(":")[1].split("**")[0].strip() for cid, h in zip(CLAIMS, heads, strict=True)
    }
    assert status.pop("B3") == "partly"
    assert set(status.values()) == {NOT_RUN}


def test_roundtrip_and_defaults(tmp_path):
    row = Claim("A2", "reproduced", "slope 2.0", "chord_arc", anchor="verdict-a2")
    table = read_claims([write_claims(tmp_path / "s.json", [row])])
    assert table["A2"] == [row]
    assert table["A1"] == []
    assert len(table) == len(CLAIMS)


def test_several_evidence_rows_per_claim(tmp_path):
    a = write_claims(
        tmp_path / "a.json", [Claim("A1", "reproduced", "x", "variance_collapse", scale="s1")]
    )
    b = write_claims(
        tmp_path / "b.json", [Claim("A1", "not reproduced", "y", "probes", scale="s2")]
    )
    table = read_claims([a, b])
    assert [c.chapter for c in table["A1"]] == ["probes", "variance_collapse"]
    md = claims_markdown(table)
    a1 = [
        line
        for line in md.splitlines()
        if line.startswith("|") and ("probes" in line or "variance collapse" in line)
    ]
    assert len(a1) == 2
    assert "**A1: partly**" in a1[0]  # combined status on the claim's first row
    assert a1[0].rstrip(" |").endswith("s2") and a1[1].startswith("| | ")
    assert "| | variance collapse: reproduced | x | s1 |" in md  # a name that wraps
    assert "  - probes, s2: no further detail" in md


def test_one_chapter_may_give_a_claim_rows_of_two_scales(tmp_path):
    rows = [
        Claim("A4", "reproduced", "x", "gradient_energy", scale="9 models", unit="layers"),
        Claim("A4", "not reproduced", "y", "gradient_energy", scale="released model"),
    ]
    table = read_claims([write_claims(tmp_path / "a.json", rows)])
    assert [c.scale for c in table["A4"]] == ["9 models", "released model"]
    md = claims_markdown(table)
    assert "**A4: partly**" in md and "  - gradient_energy, 9 models: unit: layers" in md
    with pytest.raises(ValueError, match="written by both"):
        read_claims([write_claims(tmp_path / "b.json", rows[:1]), tmp_path / "a.json"])


def test_an_empirical_row_without_its_scale_is_refused_but_a_math_check_needs_none(tmp_path):
    bare = Claim("A4", "reproduced", "x", "gradient_energy")
    with pytest.raises(ValueError, match="A4 from chapter 'gradient_energy'.*scale"):
        claims_markdown(read_claims([write_claims(tmp_path / "a.json", [bare])]))
    math = Claim("A3", "reproduced", "x", "gradient_scaling", evidence="math check")
    md = claims_markdown(read_claims([write_claims(tmp_path / "b.json", [math])]))
    assert "math check: reproduced" in md and "— (a derivation)" in md


def test_scale_text_states_models_sizes_tokens_and_seeds():
    assert (
        scale_text([1_812_000, 1_790_000, 1_650_000], [2_097_152] * 3, 3)
        == "3 models (3 seeds each), 1.65M–1.81M parameters, 2.1M tokens each"
    )
    assert (
        scale_text([900], [262_144], 1) == "1 model (1 seed each), 900 parameters, 262k tokens each"
    )
    with pytest.raises(ValueError, match="one parameter count"):
        scale_text([1, 2], [3], 1)
    with pytest.raises(ValueError, match="seeds"):
        scale_text([1], [3], 0)
    with pytest.raises(ValueError, match="seeds"):
        scale_text([1], [3], (3, 1))
    two = scale_text([1e6, 2e6], [5e5, 5e5], (1, 3))
    assert two == "2 models (1–3 seeds each), 1M–2M parameters, 500k tokens each"


def test_scale_of_runs_counts_seeds_per_family_and_names_hub_checkpoints():
    runs = {
        f"runs/{f}-s{s}": {"family": f, "seed": s, "params": p, "tokens": 2_097_152}
        for f, p in (("pythia", 1_800_000), ("bert", 1_500_000))
        for s in (0, 1, 2)
    }
    assert scale_of_runs(runs) == "6 models (3 seeds each), 1.5M–1.8M parameters, 2.1M tokens each"
    hub = {"EleutherAI/pythia-70m": {"family": "x", "seed": None, "params": None, "tokens": None}}
    assert scale_of_runs({**runs, **hub}).endswith("; released checkpoints EleutherAI/pythia-70m")
    assert scale_of_runs(hub) == "released checkpoints EleutherAI/pythia-70m"
    with pytest.raises(ValueError, match="no runs"):
        scale_of_runs({})
    with pytest.raises(ValueError, match="no recorded size for"):
        scale_of_runs({"runs/pythia": {"family": "pythia", "seed": 0}})


def test_markdown_rows_links_and_escaping(tmp_path):
    path = write_claims(
        tmp_path / "s.json",
        [Claim("B3", "partly", "a | b", "sweeps", anchor="verdict-b3", scale="x")],
    )
    md = claims_markdown(read_claims([path]))
    rows = [line for line in md.splitlines() if line.startswith("| **")]
    assert len(rows) == len(CLAIMS)  # one row per claim here: no claim has two chapters
    assert "{ref}`sweeps <verdict-b3>`" in md
    assert "a \\| b" in md  # pipes escaped so the table stays a table
    assert md.count(": not yet run**") == len(CLAIMS) - 1


def test_cli_writes_table(tmp_path):
    path = write_claims(tmp_path / "s.json", [Claim("A1", "not reproduced", "x", "c", scale="s")])
    assert main([str(tmp_path / "out.md"), str(path)]) == 0
    assert "not reproduced" in (tmp_path / "out.md").read_text()


def test_bad_claims(tmp_path):
    with pytest.raises(ValueError, match="unknown claim"):
        Claim("C9", "reproduced", chapter="c")
    with pytest.raises(ValueError, match="status"):
        Claim("A1", "maybe", chapter="c")
    with pytest.raises(ValueError, match="chapter"):
        Claim("A1", "reproduced")
    a = write_claims(tmp_path / "a.json", [Claim("A1", "partly", chapter="c")])
    b = write_claims(tmp_path / "b.json", [Claim("A1", "reproduced", chapter="c")])
    with pytest.raises(ValueError, match="written by both"):
        read_claims([a, b])
    (tmp_path / "c.json").write_text(json.dumps([{"claim_id": "A1", "status": "??"}]))
    with pytest.raises(ValueError):
        read_claims([tmp_path / "c.json"])
    (tmp_path / "d.json").write_text(json.dumps({"claim_id": "A1"}))
    with pytest.raises(ValueError, match="JSON list"):
        read_claims([tmp_path / "d.json"])
    (tmp_path / "e.json").write_text(json.dumps([{"claim_id": "A1", "colour": "red"}]))
    with pytest.raises(ValueError, match="bad claim row"):
        read_claims([tmp_path / "e.json"])


def test_decide_if_defined():
    from geolib.report.rules import decide_if_defined

    rule = rule_from_params(
        {"rule": "threshold", "threshold": 0.5, "no_effect": 0.0, "reason": "r"}
    )
    assert decide_if_defined(rule, 0.8, 0.6, 0.9, "x").status == "reproduced"
    assert decide_if_defined(rule, 0.3, 0.1, 0.4, "x").status == "partly"
    v = decide_if_defined(rule, float("nan"), float("nan"), float("nan"), "nothing to explain")
    assert v.status == "inconclusive" and v.reason == "undefined: nothing to explain"
    assert decide_if_defined(rule, 0.8, None, 0.9, "x").status == "inconclusive"


def test_claim_rows_are_validated_when_written_and_escaped_when_rendered(tmp_path):
    from geolib.report.claims import Claim, claims_markdown, read_claims, write_claims

    with pytest.raises(ValueError, match="key_number.*must be a string, got float"):
        Claim("A1", "reproduced", 0.5, "chapter")
    path = write_claims(
        tmp_path / "c.json", [Claim("A1", "reproduced", "a | b\nc", "ch", scale="s")]
    )
    md = claims_markdown(read_claims([path]))
    row = next(line for line in md.splitlines() if line.startswith("| **A1:"))
    assert "a \\| b c" in row and row.count("\n") == 0
    bad = tmp_path / "bad.json"
    bad.write_text('[{"claim_id": "A1", "status": "reproduced", "key_number": 3, "chapter": "x"}]')
    with pytest.raises(ValueError, match=rf"{bad}: bad claim row"):
        read_claims([bad])
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    with pytest.raises(ValueError, match=rf"{broken}: cannot read the claim rows"):
        read_claims([broken])


# ------------------------------------------------------------------------------------------
# premise, seeds, robustness, math checks and the rule's history
# ------------------------------------------------------------------------------------------


def test_a_failed_premise_is_inconclusive_whatever_the_numbers_say():
    from geolib.report.rules import given_premise

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
    from geolib.report.rules import seed_statuses, seeds_agreeing

    summary = {"x": 5, "by_seed": {"0": {"x": 5}, "1": {"x": 20}, "2": {"x": 7}}}
    decide = lambda s: "reproduced" if s["x"] < 10 else "not reproduced"  # noqa: E731
    statuses = seed_statuses(summary, decide)
    assert statuses == {"0": "reproduced", "1": "not reproduced", "2": "reproduced"}
    assert seeds_agreeing(statuses.values(), decide(summary)) == "2 of 3"
    assert seed_statuses({"x": 50}, decide) == {"all": "not reproduced"}  # one seed


def test_over_seeds_is_students_t_over_the_seed_values():
    from scipy import stats as st

    from geolib.report.rules import over_seeds

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
    from geolib.report.rules import robustness, seeds_agreeing

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


def test_math_checks_are_kept_out_of_the_empirical_status_and_history_is_shown(tmp_path):
    rows = [
        Claim("A1", "reproduced", "slope -1.00", "variance_collapse", evidence="math check"),
        Claim(
            "A1",
            "not reproduced",
            "0 of 8 layers",
            "frequency_collapse",
            unit="layers of 1 seed",
            seeds_agreeing="1 of 1",
            robust="yes",
            scale="3 models",
        ),
        Claim("A2", "reproduced", "slope 1.99", "chord_arc", evidence="math check"),
        Claim(
            "B6",
            "inconclusive",
            "0 of 4 degrade",
            "saturation",
            rule_v1="not reproduced",
            revision="no run degrades, so the contrast cannot be observed",
            scale="8 models",
        ),
    ]
    md = claims_markdown(read_claims([write_claims(tmp_path / "c.json", rows)]))
    a1 = md.split("| **A1:")[1].split("| **A2:")[0]
    assert a1.startswith(" not reproduced**")  # the math check's "reproduced" does not count
    assert "math check: reproduced" in a1 and "seeds agreeing: 1 of 1" in md
    assert "| **A2: no empirical test**. " + CLAIMS["A2"] + " |" in md
    assert "v1 not reproduced → v2 inconclusive: no run degrades" in md
    with pytest.raises(ValueError, match="evidence must be"):
        Claim("A1", "reproduced", "", "x", evidence="simulation")
    with pytest.raises(ValueError, match="both the first rule's verdict"):
        Claim("A1", "reproduced", "", "x", rule_v1="partly")
    with pytest.raises(ValueError, match="rule_v1 must be a status"):
        Claim("A1", "reproduced", "", "x", rule_v1="fine", revision="r")
    with pytest.raises(ValueError, match="no seeds or robustness"):
        Claim("A2", "reproduced", "", "x", evidence="math check", robust="yes")


def test_rule_with_changes_only_the_rules_own_fields():
    from geolib.report.rules import rule_with

    spec = {"rule": "fraction", "min_fraction": 0.5, "min_units": 4, "reason": WHY}
    assert rule_with(spec, {"min_fraction": 0.34, "k": 2}) == Fraction(0.34, 4, WHY)
    assert rule_with(spec, {}) == Fraction(0.5, 4, WHY)
    with pytest.raises(ValueError, match="unknown rule"):
        rule_with({"rule": "vibes"}, {})


def test_deciding_check_is_the_one_that_failed():
    from geolib.report.rules import Verdict, deciding_check

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


def test_trend_with_size_reads_the_slope_per_decade_and_its_t_interval():
    from scipy import stats as st

    from geolib.report.trends import GROWS, NO_TREND, SHRINKS, trend_with_size

    rng = np.random.default_rng(0)
    params = np.repeat([1e5, 1e6, 1e7, 1e8], 3)  # 4 sizes x 3 seeds, 1000x span
    up = 2.0 + 0.5 * np.log10(params) + 0.05 * rng.standard_normal(params.size)
    t = trend_with_size(params, up)
    fit = st.linregress(np.log10(params), up)
    half = st.t.ppf(0.975, params.size - 2) * fit.stderr
    assert t.words == GROWS and t.slope == pytest.approx(fit.slope)
    assert (t.low, t.high) == pytest.approx((fit.slope - half, fit.slope + half))
    assert t.low <= t.slope <= t.high and t.n_models == 12 and t.n_sizes == 4
    assert trend_with_size(params, -up).words == SHRINKS
    flat = 1.0 + np.tile([0.05, -0.05, 0.0], 4)  # seed scatter, equal means: slope exactly 0
    t0 = trend_with_size(params, flat)
    assert t0.words == NO_TREND and t0.low < 0 < t0.high and t0.slope == pytest.approx(0.0)


@pytest.mark.parametrize(
    "params, why",
    [
        ([1e5, 1e6, 1e7], "3 sizes"),  # too few sizes
        ([1e5, 2e5, 4e5, 8e5], "spanning 8x"),  # too short a ladder
    ],
)
def test_trend_with_size_needs_a_long_enough_ladder(params, why):
    from geolib.report.trends import NO_TREND, trend_with_size

    values = np.log10(params) * 10.0  # a perfect trend: the ladder, not the data, says no
    t = trend_with_size(params, values)
    assert t.words == NO_TREND and why in t.reason and np.isnan(t.slope)


def test_trend_with_size_refuses_bad_input():
    from geolib.report.trends import trend_with_size

    with pytest.raises(ValueError, match="positive"):
        trend_with_size([0.0, 1e6, 1e7, 1e8], [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="finite"):
        trend_with_size([1e5, 1e6, 1e7, 1e8], [1.0, np.nan, 3.0, 4.0])
    with pytest.raises(ValueError, match="one length"):
        trend_with_size([1e5, 1e6, 1e7, 1e8], [1.0, 2.0])


def test_trend_rows_round_trip_and_fill_the_trend_column(tmp_path):
    from geolib.report.trends import GROWS, NO_TREND, TrendRow, read_trends, write_trends

    rows = [
        TrendRow("A4", GROWS, "slope 0.2 [0.1, 0.3]", "scale-a4"),
        TrendRow("A1", NO_TREND, "3 sizes", "scale-a1"),
    ]
    path = write_trends(tmp_path / "t.json", rows)
    assert path.read_bytes() == write_trends(tmp_path / "u.json", rows[::-1]).read_bytes()
    trends = read_trends(path)
    assert trends["A4"] == rows[0]
    claims = write_claims(
        tmp_path / "c.json", [Claim("A4", "partly", "x", "ge", anchor="v", scale="s")]
    )
    md = claims_markdown(read_claims([claims]), trends)
    details = md.split("**Details of each evidence row**")[1]
    a4 = details.split("- **A4**")[1].split("- **")[0]
    assert "  - trend with size: {ref}`grows with size <scale-a4>` (slope 0.2 \\[0.1, 0.3\\])" in a4
    assert "- **A1**\n  - trend with size: {ref}`no trend resolvable <scale-a1>`" in details
    assert "- **B1**" not in details  # neither on the ladder nor tested
    # every row of the table has as many cells as the header
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert {line.count(" | ") for line in [table[0], *table[2:]]} == {3}
    assert main([str(tmp_path / "o.md"), "--trends", str(path), str(claims)]) == 0
    assert "grows with size" in (tmp_path / "o.md").read_text()


def test_bad_trend_rows_are_refused(tmp_path):
    from geolib.report.trends import GROWS, TrendRow, read_trends, write_trends

    with pytest.raises(ValueError, match="unknown claim"):
        TrendRow("C1", GROWS, "", "a")
    with pytest.raises(ValueError, match="trend words"):
        TrendRow("A1", "rises", "", "a")
    with pytest.raises(ValueError, match="anchor"):
        TrendRow("A1", GROWS, "", "")
    with pytest.raises(ValueError, match="one trend row per claim"):
        write_trends(tmp_path / "t.json", [TrendRow("A1", GROWS, "", "a")] * 2)
    (tmp_path / "bad.json").write_text(json.dumps([{"claim_id": "A1", "words": "up"}]))
    with pytest.raises(ValueError, match="bad.json"):
        read_trends(tmp_path / "bad.json")


def test_trend_with_size_of_a_constant_key_number_is_no_trend_with_a_defined_interval():
    from geolib.report.trends import NO_TREND, trend_with_size

    t = trend_with_size([1e4, 1e5, 1e6, 1e7, 1e7], [1.0] * 5)
    assert (t.words, t.slope, t.low, t.high) == (NO_TREND, 0.0, 0.0, 0.0)
    assert "1 on every one of the 5 models" in t.reason


def test_trend_with_size_of_no_defined_model_is_no_trend():
    from geolib.report.trends import NO_TREND, trend_with_size

    t = trend_with_size([], [])
    assert (t.words, t.n_models) == (NO_TREND, 0) and np.isnan(t.slope)
    assert "no model" in t.reason
