"""geolib.report.book: executed chapters lose their parameter cells, fold their code, and open with
an abstract read from their claims file."""

from __future__ import annotations

import copy

from geolib.report import book
from geolib.verdicts.claims import Claim, write_claims


def _nb():
    def code(src, tags=None):
        return {"cell_type": "code", "metadata": {"tags": tags or []}, "source": src,
                "outputs": [], "execution_count": 1}  # fmt: skip

    return {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Title\n", "\n", "Prose."]},
            code("params_path = 'params.yaml'", ["parameters"]),
            code("params_path = 'params.yaml'\noverrides = {}", ["injected-parameters"]),
            code("import numpy as np"),
            code("print(1)"),
            {"cell_type": "markdown", "metadata": {}, "source": "(verdict-a1)=\n## Verdict"},
            code("verdict()"),
        ]
    }


def test_cells_are_tagged_for_reading(tmp_path):
    nb = book.present(_nb())
    tags = [c["metadata"].get("tags", []) for c in nb["cells"] if c["cell_type"] == "code"]
    assert "remove-cell" in tags[0] and "remove-cell" in tags[1]  # parameters, twice
    assert tags[2] == ["remove-input"]  # the setup cell: its output only
    assert tags[3] == ["hide-input"] and tags[4] == ["hide-input"]  # folded, not removed


def test_abstract_comes_from_the_claims_file_under_the_title(tmp_path):
    path = tmp_path / "claims.json"
    row = Claim("A1", "partly", "slope −0.9 [−1.0, −0.8]", "demo", anchor="verdict-a1")
    write_claims(path, [row])
    nb = book.present(_nb(), path)
    cells = nb["cells"]
    assert cells[0]["source"] == "# Title\n"
    abstract = cells[1]
    assert abstract["metadata"]["tags"] == ["abstract"]
    assert "**A1** — Frequency-induced variance collapse" in abstract["source"]
    # the key number from data, escaped as literal text (geolib.verdicts.markup.plain)
    assert "**partly**. slope −0.9 \\[−1.0, −0.8\\] ([verdict](#verdict-a1))" in abstract["source"]
    assert cells[2]["source"] == "Prose."
    again = book.present(copy.deepcopy(nb), path)  # idempotent
    assert again == nb
    assert len({c["id"] for c in cells if "id" in c}) == 2  # the new cells have ids


def test_no_claims_file_no_abstract(tmp_path):
    nb = book.present(_nb(), tmp_path / "missing.json")
    assert not any("abstract" in c["metadata"].get("tags", []) for c in nb["cells"])
