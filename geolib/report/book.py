"""An executed chapter as the book shows it: code folded away, a claim abstract on top.

:func:`present` rewrites the notebook papermill executed (the chapter stage's own output in
``book/chapters/``; the source notebook is not touched):

* the parameters cell and the one papermill injects are removed from the page;
* the setup cell (imports, style, parameters: the first code cell after them) shows only its
  output; every other code cell is folded behind a "show code" toggle (Jupyter Book's
  ``remove-cell``, ``remove-input`` and ``hide-input`` tags). Prose, figures, tables and
  verdicts stay visible;
* an abstract is inserted under the title: for each claim the chapter decided, its statement,
  verdict and key number with its interval, read from the chapter's claims file (the same row
  as the claims table, not retyped), linking to the verdict section.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from geolib.verdicts.claims import read_claims
from geolib.verdicts.markup import plain
from geolib.verdicts.rules import CLAIMS, EMPIRICAL

REMOVE, REMOVE_INPUT, HIDE_INPUT = "remove-cell", "remove-input", "hide-input"
ABSTRACT_TAG = "abstract"


def _tags(cell: dict[str, Any]) -> list[str]:
    return cell.setdefault("metadata", {}).setdefault("tags", [])


def _add(cell: dict[str, Any], tag: str) -> None:
    tags = _tags(cell)
    if tag not in tags:
        tags.append(tag)


def abstract_markdown(claims_file: str | Path) -> str | None:
    """The abstract of a chapter from its claims file (``None`` if it decides no claim)."""
    path = Path(claims_file)
    if not path.is_file():
        return None
    rows = [c for found in read_claims([path]).values() for c in found]
    if not rows:
        return None
    lines = []
    for c in rows:
        link = f" ([verdict](#{c.anchor}))" if c.anchor else ""
        status = c.status if c.evidence == EMPIRICAL else f"{c.evidence}: {c.status}"
        revised = f" (rule v1: {c.rule_v1})" if c.rule_v1 else ""
        scale = f" At {plain(c.scale)}:" if c.scale else ""
        lines.append(
            f"- **{c.claim_id}** — {CLAIMS[c.claim_id]}: **{status}**{revised}.{scale} "
            f"{plain(c.key_number)}{link}"
        )
    return "```{admonition} Abstract\n:class: tip\n" + "\n".join(lines) + "\n```\n"


def present(nb: dict[str, Any], claims_file: str | Path | None = None) -> dict[str, Any]:
    """Tag the cells of an executed notebook ``nb`` (nbformat JSON as a dict) and insert its
    abstract (module docstring); returns ``nb``, changed in place. Idempotent."""
    cells = nb["cells"]
    for i, c in enumerate(cells):  # undo an earlier present(): drop its abstract, rejoin the title
        tags = c.get("metadata", {}).get("tags", [])
        if ABSTRACT_TAG + "-split" in tags and i >= 2:
            head = cells[i - 2]["source"]
            head = "".join(head) if isinstance(head, list) else head
            cells[i - 2]["source"] = head + "\n" + "".join(c["source"])
    cells[:] = [
        c
        for c in cells
        if not {ABSTRACT_TAG, ABSTRACT_TAG + "-split"} & set(c.get("metadata", {}).get("tags", []))
    ]
    setup_done = False
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        tags = _tags(cell)
        if "parameters" in tags or "injected-parameters" in tags:
            _add(cell, REMOVE)
        elif not setup_done:
            _add(cell, REMOVE_INPUT)
            setup_done = True
        elif REMOVE not in tags and REMOVE_INPUT not in tags:
            _add(cell, HIDE_INPUT)
    text = abstract_markdown(claims_file) if claims_file is not None else None
    if text is None:
        return nb
    first = next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown"), None)
    abstract = {
        "cell_type": "markdown",
        "id": "abstract",
        "metadata": {"tags": [ABSTRACT_TAG]},
        "source": text,
    }
    if first is None:
        cells.insert(0, abstract)
        return nb
    source = cells[first]["source"]
    source = "".join(source) if isinstance(source, list) else source
    heading, _, rest = source.partition("\n")
    if heading.startswith("# ") and rest.strip():  # the abstract goes right under the title
        cells[first]["source"] = heading + "\n"
        body = {
            "cell_type": "markdown",
            "id": "introduction",
            "metadata": {"tags": [ABSTRACT_TAG + "-split"]},
            "source": rest.lstrip("\n"),
        }
        cells[first + 1 : first + 1] = [abstract, body]
    else:
        cells.insert(first + 1, abstract)
    return nb
