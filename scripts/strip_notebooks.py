"""Remove outputs and execution counts from source notebooks (``notebooks/*.ipynb``).

python scripts/strip_notebooks.py [--check]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    dirty = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        changed = False
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            if cell.get("outputs") or cell.get("execution_count") is not None:
                cell["outputs"], cell["execution_count"] = [], None
                changed = True
        if changed:
            dirty.append(path.name)
            if not check:
                path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    if dirty:
        print(("outputs found in: " if check else "stripped: ") + ", ".join(dirty))
    return 1 if (check and dirty) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
