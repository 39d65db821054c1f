"""A local Sphinx extension: each chapter page ends with its "Compute" section.

``scripts/build_book.py`` writes ``_generated/compute.json`` (``{"chapters": {docname:
markdown}}``, from the run log and ``dvc.lock``: ``geolib.report.compute``) before it builds;
here each chapter's executed notebook gets that markdown as a last cell as it is read. The
notebooks themselves (DVC outputs of the chapter stages) are not touched, and a build without
the file (``jupyter-book build`` by hand) shows no section rather than a stale one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _append(app: Any, docname: str, source: list[str]) -> None:
    path = Path(app.srcdir) / "_generated" / "compute.json"
    if not str(app.env.doc2path(docname)).endswith(".ipynb") or not path.is_file():
        return
    text = json.loads(path.read_text())["chapters"].get(docname)
    if text is None:
        return
    nb = json.loads(source[0])
    cell = {"cell_type": "markdown", "id": "compute-section", "metadata": {}, "source": text}
    nb["cells"].append(cell)
    source[0] = json.dumps(nb)


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", _append)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
