"""Execute one pipeline notebook with papermill (the command of every notebook DVC stage).

    python scripts/run_notebook.py NAME [--params params.yaml] [-y "overrides: {k: v}"]

Runs ``notebooks/NAME.ipynb`` from the repository root into ``book/chapters/NAME.ipynb``,
then prepares that copy for the book (``geolib.report.book.present``: code folded, claim abstract).
The notebook reads its own section of the parameters file (or the one it shares:
``geolib.verdicts.sections.section_of``). With overrides (checked against
that section's keys and kinds, and its fields against their bounds, before the notebook
starts) or another parameters file, the
executed copy and everything the chapter writes go to an exploration folder
(``geolib.report.outputs``), printed at the end: the pipeline's results change only through
``dvc repro``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path

import papermill as pm
import yaml

from geolib.config import stage_params
from geolib.files import write_text_atomic
from geolib.report.book import present
from geolib.report.outputs import check_overrides, stage_outputs
from geolib.verdicts.schema import check_section
from geolib.verdicts.sections import section_of

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="notebook name, without .ipynb")
    parser.add_argument("--params", default="params.yaml", help="parameters file (repo-relative)")
    parser.add_argument("-y", "--overrides", default="", help="YAML mapping of parameter overrides")
    parser.add_argument("--out-dir", help="where the executed copy goes (default: book/chapters)")
    args = parser.parse_args(argv)
    os.chdir(ROOT)  # every path below and in the notebooks is repository-relative

    source = ROOT / "notebooks" / f"{args.name}.ipynb"
    if not source.is_file():
        parser.error(f"no notebook {source}")
    overrides = yaml.safe_load(args.overrides) if args.overrides else {}
    if not isinstance(overrides, dict):
        parser.error(f"-y must be a YAML mapping, got {overrides!r}")
    # kinds checked before the notebook starts: a list where a number belongs would run no check;
    # then every field within its bounds, together (geolib.verdicts.schema). A chapter's module
    # reads its whole section (its schema, its rules, its earlier rules: interface's
    # read_section); it is imported by name, so that a notebook that is no chapter does not
    # depend on the chapters
    section = section_of(args.name)
    check_overrides(stage_params(args.params, section), overrides)
    module = f"geolib.verdicts.chapters.{args.name}"
    if importlib.util.find_spec(module) is not None:
        importlib.import_module(module).read_section(args.params, overrides)
    else:
        check_section(section, stage_params(args.params, section, overrides))
    # Made here too because papermill writes the executed copy before the first cell runs.
    out = stage_outputs(args.name, overrides, create=False, params_path=args.params)
    out_dir = Path(args.out_dir or (out.root if out.exploring else "book/chapters"))
    (ROOT / out_dir).mkdir(parents=True, exist_ok=True)
    executed = ROOT / out_dir / f"{args.name}.ipynb"
    pm.execute_notebook(
        str(source),
        str(executed),
        parameters={"params_path": args.params, "overrides": overrides},
        cwd=str(ROOT),
        kernel_name="python3",
        progress_bar=sys.stderr.isatty(),
        log_output=False,
    )
    # as the book shows it: code folded, the claim abstract under the title (geolib.report.book)
    nb = present(json.loads(executed.read_text()), out.claims)
    write_text_atomic(executed, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    if out.exploring:
        print(f"exploration ({args.params}, overrides {overrides}): outputs in {out.root}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
