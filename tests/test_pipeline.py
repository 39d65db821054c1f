"""Consistency of the pipeline wiring: notebooks ↔ dvc.yaml ↔ params.yaml ↔ book."""

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
TOC = (ROOT / "book" / "_toc.yml").read_text()


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_a_stage_a_chapter_and_clean(nb_path):
    name = nb_path.stem
    nb = json.loads(nb_path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert not any(c.get("outputs") or c.get("execution_count") for c in code), "outputs committed"
    params_cells = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params_cells) == 1, "exactly one cell tagged 'parameters'"
    src = "".join(params_cells[0]["source"])
    assert "params_path" in src and "overrides" in src
    body = "".join("".join(c["source"]) for c in code)
    assert f'stage_params(params_path, "{name}", overrides)' in body
    assert nb["cells"][0]["cell_type"] == "markdown" and "".join(
        nb["cells"][0]["source"]
    ).startswith("# ")

    stage = DVC[name]
    assert stage["cmd"] == f"python scripts/run_notebook.py {name}"
    assert f"notebooks/{name}.ipynb" in stage["deps"]
    assert name in stage["params"] and name in PARAMS
    outs = [o if isinstance(o, str) else next(iter(o)) for o in stage["outs"]]
    assert f"book/chapters/{name}.ipynb" in outs
    assert f"file: chapters/{name}" in TOC


def test_book_stage_depends_on_every_notebook_output_but_no_executed_notebook():
    book_deps = set(DVC["book"]["deps"])
    for name, stage in DVC.items():
        if name == "book":
            continue
        for out in stage.get("outs", []):
            path = out if isinstance(out, str) else next(iter(out))
            if path.endswith(".ipynb"):
                assert path not in book_deps
            elif path.startswith(("figures/", "data/results/", "data/claims/")):
                assert path in book_deps, f"book stage does not depend on {path}"
    for stage in DVC.values():
        assert not any(str(d).startswith("book/chapters") for d in stage.get("deps", []))


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_claim_anchors_exist_in_the_chapter(nb_path):
    """Every claim row a chapter writes links to a MyST target in that chapter's markdown."""
    nb = json.loads(nb_path.read_text())
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    markdown = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    if "write_claims(" not in code:
        return
    anchors = re.findall(r'anchor="([^"]+)"', code)
    assert anchors, "a chapter that writes claims must give each row an anchor"
    for anchor in anchors:
        assert f"({anchor})=" in markdown, f"no MyST target ({anchor})= in {nb_path.name}"
    assert "rule_from_params(" in code, "verdicts come from a geolib.claims rule"
