"""geolib.report.findings: one plain paragraph per claim from the claim rows."""

import pytest

from geolib.report.findings import PAPER_SAYS, finding, findings_markdown, main
from geolib.verdicts.claims import AFTER_DATA, PROSPECTIVE, Claim, read_claims, write_claims
from geolib.verdicts.markup import plain
from geolib.verdicts.rules import CLAIMS, DESCRIPTION, MATH_CHECK


def _row(cid: str, status: str, chapter: str = "ch", **kw) -> Claim:
    return Claim(cid, status, chapter=chapter, scale=kw.pop("scale", "3 models"), **kw)


def test_every_claim_has_the_papers_words():
    assert list(PAPER_SAYS) == list(CLAIMS)


def test_a_paragraph_says_the_paper_the_status_the_number_the_scale_and_how_sure():
    row = _row(
        "A4",
        "not reproduced",
        "gradient_energy",
        key_number="median R_energy 1.1 [0.9, 1.3]",
        scale="9 models (3 seeds each), 1.2M parameters",
        seeds_agreeing="3 of 3",
        robust="yes",
        decided=PROSPECTIVE,
    )
    text = finding("A4", [row])
    assert text.startswith("**A4: not reproduced.** The paper says the energy of real gradients")
    number, scale = plain(row.key_number), plain(row.scale)
    assert f"Here it did not hold — in the gradient energy chapter: {number}, on {scale} (" in text
    assert "(seeds agreeing 3 of 3; survives the declared alternatives; " in text
    assert "rule committed before these data were made" in text
    assert "exploratory" not in text
    seen = finding("A4", [_row("A4", "partly", "gradient_energy", decided=PROSPECTIVE,
                               exploratory="reproduced on seeds 0, 1, 2 (0.7)")])  # fmt: skip
    assert "made; exploratory, on the seeds the rule had seen: reproduced on seeds 0, 1, 2" in seen


def test_rows_that_disagree_combine_as_the_claims_table_does():
    rows = [
        _row("B1", "reproduced", "a", decided=AFTER_DATA),
        _row("B1", "inconclusive", "b"),
    ]
    text = finding("B1", rows)
    assert text.startswith("**B1: partly.**") and "Here it held in part — in the a chapter" in text
    assert "rule set after seeing these data" in text
    assert "in the a chapter (reproduced)" in text and "in the b chapter (inconclusive)" in text
    fragile = finding("B1", [_row("B1", "reproduced", robust="fragile: k = 2 → partly")])
    assert "(fragile to the declared alternatives (k = 2 → partly))" in fragile


def test_math_checks_and_descriptions_never_decide():
    math = Claim("A2", "reproduced", "slope 2.0", "chord_arc", evidence=MATH_CHECK)
    text = finding("A2", [math])
    assert text.startswith("**A2: no empirical test.**")
    assert "No experiment here decides it. A math check of the derivation" in text
    assert "(chord arc: reproduced; slope 2.0) does not decide it." in text
    desc = _row("A7", "reproduced", "ge", evidence=DESCRIPTION, scale="SmolLM2-135M")
    both = finding("A7", [_row("A7", "inconclusive", "ge"), desc])
    assert both.startswith("**A7: inconclusive.**")
    assert f"A description of {plain('SmolLM2-135M')} (ge: reproduced; reproduced) does not" in both


def test_an_untested_claim_says_so():
    assert "Here it has not been tested yet." in finding("B6", [])
    with pytest.raises(ValueError, match="unknown claim"):
        finding("C1", [])


def test_the_page_counts_statuses_and_lists_every_claim_once(tmp_path):
    rows = [
        _row("A4", "reproduced"),
        _row("B1", "inconclusive"),
        _row("B2", "inconclusive"),
        Claim("A2", "reproduced", "s", "chord_arc", evidence=MATH_CHECK),
    ]
    files = [write_claims(tmp_path / "a.json", rows)]
    md = findings_markdown(read_claims(files))
    # A2 has only a math check: not counted among the claims with an experiment
    assert "Of the 14 claims with an experiment here: 1 reproduced, 2 inconclusive, " in md
    assert "11 not yet run." in md
    items = [line for line in md.splitlines() if line.startswith("- **")]
    assert [line[4:6] for line in items] == list(CLAIMS)
    assert md.index("## Paper A") < md.index("- **A1") < md.index("## Paper B") < md.index("- **B1")
    out = tmp_path / "findings.md"
    assert main([str(out), *map(str, files)]) == 0 and out.read_text() == md
    with pytest.raises(ValueError, match="lacks"):
        findings_markdown({"A1": []})


def test_text_from_the_rows_is_shown_as_written_never_as_markup():
    row = _row("B3", "partly", key_number="*bold* <b>x</b>")
    text = finding("B3", [row])
    assert "<b>" not in text and "*bold*" not in text and plain(row.key_number) in text
