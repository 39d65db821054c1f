"""geolib.verdicts.claims: the evidence rows, their files, the scale, and the table."""

import json

import pytest

from geolib.verdicts.claims import (
    Claim,
    claims_markdown,
    main,
    read_claims,
    scale_of_runs,
    scale_text,
    write_claims,
)
from geolib.verdicts.rules import CLAIMS, NOT_RUN


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
        == "3 models (3 seeds each), 1.65M–1.81M parameters, 2.1M tokens each, "
        "1.16–1.27 tokens per parameter"
    )
    assert (
        scale_text([900], [262_144], 1)
        == "1 model (1 seed each), 900 parameters, 262k tokens each, 291 tokens per parameter"
    )
    with pytest.raises(ValueError, match="positive"):
        scale_text([0], [3], 1)
    with pytest.raises(ValueError, match="one parameter count"):
        scale_text([1, 2], [3], 1)
    with pytest.raises(ValueError, match="seeds"):
        scale_text([1], [3], 0)
    with pytest.raises(ValueError, match="seeds"):
        scale_text([1], [3], (3, 1))
    two = scale_text([1e6, 2e6], [5e5, 5e5], (1, 3))
    assert two == (
        "2 models (1–3 seeds each), 1M–2M parameters, 500k tokens each, "
        "0.25–0.5 tokens per parameter"
    )


def test_scale_of_runs_counts_seeds_per_family_and_names_hub_checkpoints():
    runs = {
        f"runs/{f}-s{s}": {"family": f, "seed": s, "params": p, "tokens": 2_097_152}
        for f, p in (("pythia", 1_800_000), ("bert", 1_500_000))
        for s in (0, 1, 2)
    }
    assert scale_of_runs(runs) == (
        "6 models (3 seeds each), 1.5M–1.8M parameters, 2.1M tokens each, "
        "1.17–1.4 tokens per parameter"
    )
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


def test_claim_rows_are_validated_when_written_and_escaped_when_rendered(tmp_path):
    from geolib.verdicts.claims import Claim, claims_markdown, read_claims, write_claims

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


def test_history_shows_v1_and_v2_beside_v3_and_how_it_was_decided(tmp_path):
    from geolib.verdicts.claims import AFTER_DATA, PROSPECTIVE, history

    row = Claim(
        "A4",
        "inconclusive",
        "share 0.5 [0.4, 0.6]",
        "gradient_energy",
        rule_v1="partly",
        rule_v2="reproduced",
        revision="the model is the unit",
        scale="6 models",
        decided=AFTER_DATA,
    )
    assert history(row) == (
        "v1 partly → v2 reproduced → v3 inconclusive: the model is the unit "
        "(decided after seeing data)"
    )
    fresh = Claim("B1", "reproduced", chapter="x", scale="s", decided=PROSPECTIVE)
    assert "prospective" in history(fresh) and "v1" not in history(fresh)
    md = claims_markdown(read_claims([write_claims(tmp_path / "c.json", [row, fresh])]))
    assert "v1 partly → v2 reproduced → v3 inconclusive" in md
    with pytest.raises(ValueError, match="v1 verdict before"):
        Claim("A4", "partly", chapter="x", rule_v2="partly", revision="r")
    v4 = Claim(
        "B3",
        "reproduced",
        chapter="x",
        scale="s",
        rule_v1="partly",
        rule_v2="partly",
        rule_v3="inconclusive",
        revision="two budgets",
        decided=PROSPECTIVE,
    )
    assert history(v4).startswith("v1 partly → v2 partly → v3 inconclusive → v4 reproduced: two")
    with pytest.raises(ValueError, match="v2 verdict before"):
        Claim("A4", "partly", chapter="x", rule_v1="partly", rule_v3="partly", revision="r")
    with pytest.raises(ValueError, match="rule_v3 must be"):
        Claim(
            "A4",
            "partly",
            chapter="x",
            rule_v1="partly",
            rule_v2="partly",
            rule_v3="x",
            revision="r",
        )
    with pytest.raises(ValueError, match="decided"):
        Claim("A4", "partly", chapter="x", decided="maybe")


def test_a_description_row_is_shown_but_never_combined(tmp_path):
    rows = [
        Claim("A4", "not reproduced", "0 of 6", "ours", scale="6 models"),
        Claim("A4", "reproduced", "R > 1", "ours", evidence="description", scale="released"),
    ]
    md = claims_markdown(read_claims([write_claims(tmp_path / "c.json", rows)]))
    assert "**A4: not reproduced**" in md
    assert "description, not a verdict (reproduced on what it can speak to)" in md


def _seen_table():
    from geolib.verdicts.claims import AFTER_DATA

    row = Claim(
        "A4", "reproduced", "share 0.7 [0.55, 0.82]", "gradient_energy", anchor="verdict-a4",
        scale="9 models", unit="trained model (n = 6)", decided=AFTER_DATA,
    )  # fmt: skip
    released = Claim(
        "A4", "reproduced", "95 of 120", "gradient_energy", anchor="verdict-a4",
        scale="released model X", evidence="description", decided=AFTER_DATA,
    )  # fmt: skip
    other = Claim("A4", "partly", "0.6", "scale", anchor="a", scale="9 models", decided=AFTER_DATA)
    return {"A4": [row, released, other], "A5": []}


def test_the_exploratory_record_keeps_the_seen_empirical_rows_only():
    from geolib.verdicts.claims import exploratory_record

    rec = exploratory_record(_seen_table(), ["A4", "A5"], ["gradient_energy"], seeds=[0, 1, 2],
                             source="commit abc")  # fmt: skip
    assert rec["seeds"] == [0, 1, 2] and rec["source"] == "commit abc"
    assert [(r["claim_id"], r["chapter"], r["status"]) for r in rec["rows"]] == [
        ("A4", "gradient_energy", "reproduced")
    ]
    with pytest.raises(ValueError, match="no empirical row"):
        exploratory_record(_seen_table(), ["A5"], ["gradient_energy"], seeds=[0], source="x")
    doubled = {"A4": _seen_table()["A4"][:1] * 2}
    with pytest.raises(ValueError, match="more than one"):
        exploratory_record(doubled, ["A4"], ["gradient_energy"], seeds=[0], source="x")


def test_a_row_on_confirmatory_seeds_reads_prospective_with_the_seen_verdict_beside_it():
    from geolib.verdicts.claims import (
        AFTER_DATA,
        PROSPECTIVE,
        confirmed,
        exploratory_record,
        history,
    )

    rec = exploratory_record(_seen_table(), ["A4"], ["gradient_energy"], seeds=[0, 1, 2],
                             source="commit abc")  # fmt: skip
    fresh = Claim("A4", "partly", "share 0.5 [0.3, 0.7]", "gradient_energy", anchor="verdict-a4",
                  scale="9 models", decided=AFTER_DATA)  # fmt: skip
    row = confirmed(fresh, [3, 4, 5], [3, 4, 5], rec)
    assert row.decided == PROSPECTIVE and row.status == "partly"
    assert row.exploratory.startswith(
        "reproduced on seeds 0, 1, 2, which seeds 3, 4, 5 replace here (share 0.7 [0.55, 0.82]"
    )
    assert "decided after seeing data; commit abc" in row.exploratory
    assert "exploratory, on the seeds the rule had seen: reproduced" in history(row)
    assert confirmed(fresh, [2, 3], [3, 4, 5], rec) is fresh  # a seen seed among them
    assert confirmed(fresh, [], [3, 4, 5], rec) is fresh
    with pytest.raises(ValueError, match="include seen ones"):
        confirmed(fresh, [2], [2, 3], rec)
    with pytest.raises(ValueError, match="0 exploratory rows"):
        confirmed(fresh, [3], [3], {"seeds": [0], "source": "x", "rows": []})
    with pytest.raises(ValueError, match="exploratory verdict stands beside a prospective"):
        Claim("A4", "partly", "x", "gradient_energy", anchor="a", scale="s", exploratory="y")


@pytest.mark.parametrize(
    ("verdicts", "match"),
    [
        ({"confirmatory_seeds": [3]}, "go together"),
        ({"exploratory_record": "x.json"}, "go together"),
        ({"confirmatory_seeds": ["3"], "exploratory_record": "x.json"}, "integers"),
        ({"confirmatory_seeds": [True], "exploratory_record": "x.json"}, "integers"),
        ({"confirmatory_seeds": 3, "exploratory_record": "x.json"}, "integers"),
    ],
)
def test_a_confirmation_needs_its_seeds_and_its_record(verdicts, match):
    from geolib.verdicts.claims import Confirmation

    with pytest.raises(ValueError, match=match):
        Confirmation.from_params(verdicts)
    assert Confirmation.from_params({"learned_margin": 0.25}) == Confirmation()


def test_a_record_that_is_not_one_is_refused_when_read(tmp_path):
    from geolib.verdicts.claims import Confirmation

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows": []}))
    c = Confirmation.from_params({"confirmatory_seeds": [3], "exploratory_record": str(bad)})
    row = Claim("A4", "partly", "x", "gradient_energy", anchor="a", scale="s")
    with pytest.raises(ValueError, match="not an exploratory record"):
        c.apply(row, {"runs/m": {"seed": 3}})
    assert c.apply(row, {"runs/m": {"seed": 2}}) == row  # not confirmatory: never read


def test_a_rows_numbers_travel_through_its_file_and_a_row_without_has_no_key(tmp_path):
    """The numbers a rule decided on are written with the row and read back as they were; a
    row decided on none is written exactly as before the field existed."""
    from geolib.verdicts.rules import KeyNumber, Threshold

    v = Threshold(0.5, "more than half").decide(0.67, 0.44, 0.84)
    with_numbers = Claim(
        "A4", v.status, "share", "ge", anchor="verdict-a4", scale="6 models",
        numbers=v.labelled("early units"),
    )  # fmt: skip
    without = Claim("A6", "reproduced", "ratio", "ge", anchor="verdict-a6", scale="9 models")
    path = write_claims(tmp_path / "ge.json", [with_numbers, without])
    rows = json.loads(path.read_text())
    assert "numbers" not in rows[1]
    assert rows[0]["numbers"] == [
        {"label": "early units", "status": "inconclusive", "estimate": 0.67, "low": 0.44,
         "high": 0.84, "bar": 0.5, "band": 0.0}
    ]  # fmt: skip
    table = read_claims([path])
    assert table["A4"][0] == with_numbers
    assert table["A4"][0].numbers == (
        KeyNumber("early units", "inconclusive", 0.67, 0.44, 0.84, 0.5),
    )
    assert table["A6"][0].numbers == ()


def test_bad_numbers_on_a_row_are_refused(tmp_path):
    bad = {"claim_id": "A4", "status": "partly", "chapter": "ge", "scale": "1 model"}
    path = tmp_path / "bad.json"
    for numbers, match in [
        ("0.5", "numbers must be a list"),
        ([{"label": "", "status": "partly", "estimate": 0.9, "low": 0.1, "high": 0.2, "bar": 0}],
         "low <= estimate <= high"),
        ([{"label": "", "status": "partly", "estimate": 0.1}], "bad key number"),
        ([0.5], "must be a KeyNumber"),
    ]:  # fmt: skip
        path.write_text(json.dumps([bad | {"numbers": numbers}]))
        with pytest.raises(ValueError, match=match):
            read_claims([path])
