import json

import pytest

from geolib.claims import CLAIMS, Claim, claims_markdown, main, read_claims, write_claims


def test_all_claims_listed_once():
    assert list(CLAIMS) == [f"A{i}" for i in range(1, 8)] + [f"B{i}" for i in range(1, 9)]


def test_roundtrip_and_defaults(tmp_path):
    path = write_claims(tmp_path / "s.json", [Claim("A2", "reproduced", "slope 2.0", "chord_arc")])
    table = read_claims([path])
    assert table["A2"].status == "reproduced"
    assert table["A1"].status == "not yet run"
    assert len(table) == len(CLAIMS)


def test_markdown_has_one_row_per_claim_and_links(tmp_path):
    path = write_claims(tmp_path / "s.json", [Claim("B3", "partly", "a | b", "sweeps")])
    md = claims_markdown(read_claims([path]))
    rows = [line for line in md.splitlines() if line.startswith("| **")]
    assert len(rows) == len(CLAIMS)
    assert "[sweeps](chapters/sweeps.ipynb)" in md
    assert "a \\| b" in md  # pipes escaped so the table stays a table


def test_cli_writes_table(tmp_path):
    path = write_claims(tmp_path / "s.json", [Claim("A1", "not reproduced", "x", "c")])
    assert main([str(tmp_path / "out.md"), str(path)]) == 0
    assert "not reproduced" in (tmp_path / "out.md").read_text()


def test_bad_claims(tmp_path):
    with pytest.raises(ValueError, match="unknown claim"):
        Claim("C9", "reproduced")
    with pytest.raises(ValueError, match="status"):
        Claim("A1", "maybe")
    a = write_claims(tmp_path / "a.json", [Claim("A1", "partly")])
    b = write_claims(tmp_path / "b.json", [Claim("A1", "reproduced")])
    with pytest.raises(ValueError, match="written by both"):
        read_claims([a, b])
    (tmp_path / "c.json").write_text(json.dumps([{"claim_id": "A1", "status": "??"}]))
    with pytest.raises(ValueError):
        read_claims([tmp_path / "c.json"])
