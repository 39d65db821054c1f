"""Execute one pipeline notebook with papermill (the command of every notebook DVC stage).

    python scripts/run_notebook.py NAME [--params params.yaml] [-y "overrides: {k: v}"]

Runs ``notebooks/NAME.ipynb`` from the repository root into ``book/chapters/NAME.ipynb``.
The notebook reads its own section of the parameters file; output folders are created first
because papermill writes the output notebook before the first cell runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import papermill as pm
import yaml

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="notebook name, without .ipynb")
    parser.add_argument("--params", default="params.yaml", help="parameters file (repo-relative)")
    parser.add_argument("-y", "--overrides", default="", help="YAML mapping of parameter overrides")
    parser.add_argument("--out-dir", default="book/chapters", help="where the executed copy goes")
    args = parser.parse_args(argv)

    source = ROOT / "notebooks" / f"{args.name}.ipynb"
    if not source.is_file():
        parser.error(f"no notebook {source}")
    for folder in (
        args.out_dir,
        f"figures/{args.name}",
        f"data/results/{args.name}",
        "data/claims",
    ):
        (ROOT / folder).mkdir(parents=True, exist_ok=True)
    overrides = yaml.safe_load(args.overrides) if args.overrides else {}
    pm.execute_notebook(
        str(source),
        str(ROOT / args.out_dir / f"{args.name}.ipynb"),
        parameters={"params_path": args.params, "overrides": overrides or {}},
        cwd=str(ROOT),
        kernel_name="python3",
        progress_bar=sys.stderr.isatty(),
        log_output=False,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
