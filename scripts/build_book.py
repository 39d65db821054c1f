"""Build the Jupyter Book (the last DVC stage).

    python scripts/build_book.py

0. Refuses to build when a file it renders — the claims, the result tables, the executed
   chapters — differs from what ``dvc.lock`` recorded its stage writing (a hand edit, a partial
   copy), naming the file and the stage.
1. Renders the claims table from ``data/claims/*.json`` (and the trend-with-size column from
   ``data/results/scale/trends.json``) into ``book/_generated/claims.md``, and the findings
   page (one plain paragraph per claim, the book's first page) into
   ``book/_generated/findings.md``, with the figure it opens with (every claim's deciding
   number against its bar: ``geolib.report.findings_figure``) as
   ``book/_generated/findings_forest.png``.
   Writes the compute behind the book (``geolib.report.compute``: the stages' latest runs in
   ``logs/lanes.csv``, the run log of ``make all``, a record rather than a dependency) into
   ``book/_generated/``: the introduction's "Compute" section, each chapter's (appended to its
   page by ``book/_ext/compute_sections.py``) and every stage's row (shipped as
   ``_data/compute.csv``).
2. Vendors MathJax 3.2.2 (PyPI ``django-static-mathjax``) into ``book/_mathjax`` so the book
   typesets math with no network.
3. Runs ``jupyter-book build book/`` on the notebooks papermill already executed.
4. Ships the result tables (``data/results/**`` CSV, Parquet, JSON) in the built book under
   ``_data/``, where the chapters' table links point (``geolib.report.plotting.show_table``).
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import yaml

from geolib.report import compute, findings, findings_figure
from geolib.verdicts import claims

ROOT = Path(__file__).resolve().parents[1]

BOOK = ROOT / "book"
#: the run log that scripts/lanes.py appends a row to per stage run
RUN_LOG = ROOT / "logs" / "lanes.csv"


#: what the book renders or ships, checked against dvc.lock before it is built
CHECKED = ("data/claims", "data/results", "book/chapters")


def md5_file(path: Path) -> str:
    h = hashlib.md5()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def dir_md5(folder: Path) -> str:
    """DVC 3's hash of a directory output: the md5 of its sorted ``[{"md5", "relpath"}]`` list
    as JSON (``dvc_data.hashfile.tree.Tree``), with DVC's ``.dir`` suffix."""
    entries = sorted(
        (
            {"md5": md5_file(f), "relpath": f.relative_to(folder).as_posix()}
            for f in folder.rglob("*")
            if f.is_file()
        ),
        key=lambda e: e["relpath"],
    )
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


def read_yaml(path: Path) -> Any:
    """A YAML file, with the C loader where PyYAML has it (the lock is ~17,800 lines)."""
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader)


def lock_mismatches(root: Path, checked: tuple[str, ...] = CHECKED) -> list[str]:
    """Every output under ``checked`` whose content is not what ``dvc.lock`` recorded, as
    ``"path (stage): why"``; empty when everything matches. Only the entries of the stages
    ``dvc.yaml`` defines with these parameters count: a profile's run may define fewer (a
    released model the smoke profile leaves out) than the lock it copied records."""
    stages = compute.pipeline_stages(read_yaml(root / "dvc.yaml"), read_yaml(root / "params.yaml"))
    lock = compute.pipeline_lock(read_yaml(root / "dvc.lock"), stages)
    problems = []
    for stage, entry in lock.get("stages", {}).items():
        for out in entry.get("outs", []):
            path, want = out["path"], out.get("md5", "")
            if not any(path == c or path.startswith(c + "/") for c in checked):
                continue
            target = root / path
            if not target.exists():
                problems.append(f"{path} ({stage}): missing")
                continue
            got = dir_md5(target) if want.endswith(".dir") else md5_file(target)
            if got != want:
                problems.append(f"{path} ({stage}): changed since the stage wrote it")
    outs = [o["path"] for e in lock.get("stages", {}).values() for o in e.get("outs", [])]
    for c in checked:  # a file no stage wrote (left over, or put there by hand)
        for f in sorted((root / c).rglob("*")) if (root / c).is_dir() else []:
            rel = f.relative_to(root).as_posix()
            if f.name == ".gitignore":  # DVC's own, listing the outputs beside it
                continue
            if f.is_file() and not any(rel == o or rel.startswith(o + "/") for o in outs):
                problems.append(f"{rel}: written by no stage of dvc.lock")
    return problems


def page_title(notebook: Path) -> str:
    """A notebook's first ``# `` heading (its page title in the book), else its file name."""
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return notebook.stem


def write_compute(root: Path, chapters: list[str], log: Path, dest: Path) -> compute.Compute:
    """Write ``compute.md`` (the introduction's section), ``compute.json`` (each chapter's,
    by page) and ``compute.csv`` (every stage) under ``dest``; the whole build's compute.
    ``chapters``: the book's chapter names in page order."""
    stages = compute.pipeline_stages(read_yaml(root / "dvc.yaml"), read_yaml(root / "params.yaml"))
    lock = compute.pipeline_lock(read_yaml(root / "dvc.lock"), stages)
    runs = compute.latest_runs(compute.read_run_log(log))
    upstream = compute.upstream_stages(lock)
    chapter_stages = compute.chapter_stages(lock)
    per_chapter = compute.chapters_compute(upstream, chapter_stages, runs, chapters)
    book_stage = "book"
    build = compute.total((s for s in upstream if s != book_stage), runs)
    titles = {c: page_title(root / "book" / "chapters" / f"{c}.ipynb") for c in chapters}
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "compute.md").write_text(
        compute.intro_markdown(per_chapter, build, "_data/compute.csv", titles)
    )
    sections = {f"chapters/{cc.chapter}": compute.chapter_markdown(cc, runs) for cc in per_chapter}
    (dest / "compute.json").write_text(json.dumps({"chapters": sections}, indent=1))
    rows = compute.stage_rows(runs, upstream, chapter_stages)
    with (dest / "compute.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, compute.STAGE_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return build


def vendor_mathjax(dest: Path) -> Path:
    spec = find_spec("mathjax")
    if spec is None or spec.origin is None:
        raise SystemExit("django-static-mathjax is not installed (pip install -e .)")
    source = Path(spec.origin).parent / "static" / "mathjax" / "es5"
    if not (source / "tex-chtml.js").is_file():
        raise SystemExit(f"MathJax es5 tree not found under {source}")
    target = dest / "mathjax" / "es5"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    return target


def ship_tables(results: Path, dest: Path) -> int:
    """Copy every CSV, Parquet and JSON file under ``results`` to ``dest`` (same layout)."""
    n = 0
    for f in sorted(results.rglob("*")):
        if f.is_file() and f.suffix in (".csv", ".parquet", ".json"):
            target = dest / f.relative_to(results)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, target)
            n += 1
    return n


def main() -> int:
    problems = lock_mismatches(ROOT)
    if problems:
        raise SystemExit(
            "the book renders only what the pipeline wrote; these differ from dvc.lock (rerun "
            "their stages with dvc repro, or restore them):\n  " + "\n  ".join(problems)
        )
    claim_files = sorted((ROOT / "data" / "claims").glob("*.json"))
    # the trend-with-size column, from the Scale chapter (a stage the book depends on)
    trends = ROOT / "data" / "results" / "scale" / "trends.json"
    if not trends.is_file():
        raise SystemExit(f"{trends} missing: run the scale stage first")
    claims.main(
        [str(BOOK / "_generated" / "claims.md"), "--trends", str(trends), *map(str, claim_files)]
    )
    findings.main([str(BOOK / "_generated" / "findings.md"), *map(str, claim_files)])
    findings_figure.main([str(BOOK / "_generated" / "findings_forest"), *map(str, claim_files)])
    vendor_mathjax(BOOK / "_mathjax")
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text())
    chapters = [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])]
    missing = [
        f for f in chapters if f.startswith("chapters/") and not (BOOK / f"{f}.ipynb").is_file()
    ]
    if missing:
        raise SystemExit(f"executed notebooks missing (run their stages first): {missing}")
    names = [f.removeprefix("chapters/") for f in chapters if f.startswith("chapters/")]
    build = write_compute(ROOT, names, RUN_LOG, BOOK / "_generated")
    html = BOOK / "_build" / "html"
    if html.exists():
        shutil.rmtree(html)  # a clean build: no page left over from a removed chapter
    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jb), "build", str(BOOK), "--path-output", str(BOOK), "--all"]
    subprocess.run(cmd, check=True, cwd=ROOT)
    shipped = ship_tables(ROOT / "data" / "results", html / "_data" / "data" / "results")
    shutil.copyfile(BOOK / "_generated" / "compute.csv", html / "_data" / "compute.csv")
    print(
        f"book: {html / 'index.html'} ({shipped} result tables shipped for download; the "
        f"compute of {build.recorded} of {len(build.stages)} stages recorded in {RUN_LOG.name})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
