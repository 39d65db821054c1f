"""Consistency of the pipeline wiring: notebooks ↔ dvc.yaml ↔ params.yaml ↔ book."""

import copy
import csv
import hashlib
import html
import importlib
import io
import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from geolib.verdicts.sections import section_of

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# A ``foreach`` stage is checked through its template (``do``): every expansion shares it.
DVC = {
    name: stage["do"] if "foreach" in stage else stage
    for name, stage in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].items()
}
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
    section = section_of(name)  # its own section, or the one it shares
    reads = f'stage_params(params_path, "{name}", overrides)' in body and section == name
    assert reads or f'stage_params(params_path, section_of("{name}"), overrides)' in body
    assert f'stage_outputs("{name}", overrides, params_path=params_path)' in body
    assert nb["cells"][0]["cell_type"] == "markdown" and "".join(
        nb["cells"][0]["source"]
    ).startswith("# ")

    stage = DVC[name]
    assert stage["cmd"] == f"python scripts/run_notebook.py {name}"
    assert f"notebooks/{name}.ipynb" in stage["deps"]
    assert section in stage["params"] and section in PARAMS
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
                # the path itself, or the folder that holds it (a foreach stage's outputs)
                held = path in book_deps or any(path.startswith(f"{d}/") for d in book_deps)
                assert held, f"book stage does not depend on {path}"
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
    module = ROOT / "geolib" / "verdicts" / "chapters" / f"{nb_path.stem}.py"
    if module.exists():  # the rows are built by the chapter's module: its anchors
        anchors += re.findall(r'"(verdict-[a-z0-9-]+)"', module.read_text())
        chapter = importlib.import_module(f"geolib.verdicts.chapters.{nb_path.stem}")
        anchors += list(getattr(chapter, "ANCHORS", {}).values())
    assert anchors, "a chapter that writes claims must give each row an anchor"
    for anchor in anchors:
        assert f"({anchor})=" in markdown, f"no MyST target ({anchor})= in {nb_path.name}"
    decided_in_library = "rule_from_params(" in code or "geolib.verdicts.chapters" in code
    assert decided_in_library, "verdicts come from a geolib.report rule or chapter module"
    # no verdict, check or decision function defined in the notebook: they live in a tested
    # chapter module (geolib.verdicts.chapters)
    defs = re.findall(r"^\s*def (\w*(?:verdict|check|decide)\w*)\(", code, flags=re.M)
    assert not defs, f"{nb_path.name} defines {defs}: move them into its chapter module"


def _markdown(name: str) -> str:
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    return "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_scale_figures_have_the_targets_the_claims_table_and_the_chapters_link_to():
    """The trend-with-size cells link to ``scale-<claim>`` (the Scale chapter builds the anchor
    from the claim id); each claim's chapter links to the figures of its claims."""
    scale = _markdown("scale")
    for claim in ("a1", "a4", "a5", "a7"):
        assert f"(scale-{claim})=" in scale
    for chapter in ("gradient_energy", "residual_isotropy", "frequency_collapse"):
        for target in re.findall(r"\{ref\}`(scale-[a-z0-9-]+)`", _markdown(chapter)):
            assert f"({target})=" in scale, f"{chapter} links to a missing {target}"
    linked = re.findall(
        r"\{ref\}`(scale-a\d)`",
        "".join(map(_markdown, ("gradient_energy", "residual_isotropy", "frequency_collapse"))),
    )
    assert sorted(linked) == ["scale-a1", "scale-a4", "scale-a5", "scale-a7"]


# ------------------------------------------------------------------------------------------
# Stage dependencies cannot drift: every geolib module a stage's code reaches is a dep
# ------------------------------------------------------------------------------------------


def _imported_modules(source: str) -> set[str]:
    """``geolib`` modules named by the import statements of ``source`` (any depth, so imports
    inside functions count: they run on some path of the stage)."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "geolib"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "geolib":
                continue
            found.add(node.module)
            # ``from geolib import theory`` / ``from geolib.theory import curvature``: submodules
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if _module_file(candidate) is not None:
                    found.add(candidate)
    return found


def _module_file(module: str) -> Path | None:
    base = ROOT / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _is_marker(path: Path) -> bool:
    """A package ``__init__`` holding only a docstring and dunder constants (``__version__``):
    importing it cannot change a result."""
    import ast

    def inert(n: ast.stmt) -> bool:
        if isinstance(n, ast.Expr):
            return isinstance(n.value, ast.Constant)
        return (
            isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant)
            and all(isinstance(t, ast.Name) and t.id.startswith("__") for t in n.targets)
        )

    return path.name == "__init__.py" and all(inert(n) for n in ast.parse(path.read_text()).body)


def _code_of_notebook(path: Path) -> str:
    nb = json.loads(path.read_text())
    return "\n".join(
        "".join(line for line in c["source"] if not line.lstrip().startswith(("%", "!")))
        for c in nb["cells"]
        if c["cell_type"] == "code"
    )


def _entry_modules(cmd: str) -> list[str]:
    """The geolib modules a ``python -m`` command runs first: the module (for the geolib
    command, ``python -m geolib measure …``, its ``__main__``, whose subcommands import what
    they run; for the design command line, also the design's module, which it imports by
    name). None for other commands; an unknown subcommand or design is an error."""
    m = re.match(r"python -m (geolib[\w.]*)(?: (\w+))?", cmd)
    if m is None:
        return []
    if m.group(1) == "geolib":
        from geolib.__main__ import COMMANDS

        assert m.group(2) in COMMANDS, f"no geolib subcommand {m.group(2)!r}: {cmd}"
        return ["geolib.__main__"]
    if m.group(1) == "geolib.models.designs":
        from geolib.models.designs import DESIGNS

        assert m.group(2) in DESIGNS, f"no design {m.group(2)!r}: {cmd}"
        return [m.group(1), DESIGNS[m.group(2)].module]  # imported by name when asked for
    return [m.group(1)]


def _stage_entry_sources(stage: dict) -> list[str]:
    """The code a stage's command runs first: a notebook (and its runner), a ``python -m``
    module (:func:`_entry_modules`) or a script."""
    cmd = stage["cmd"]
    m = re.match(r"python scripts/run_notebook\.py (\w+)", cmd)
    if m:
        return [
            _code_of_notebook(ROOT / "notebooks" / f"{m.group(1)}.ipynb"),
            (ROOT / "scripts" / "run_notebook.py").read_text(),
        ]
    if modules := _entry_modules(cmd):
        return [_module_file(module).read_text() for module in modules]
    m = re.match(r"python (scripts/\w+\.py)", cmd)
    if m:
        return [(ROOT / m.group(1)).read_text()]
    raise AssertionError(f"unrecognised stage command: {cmd}")


def reached_modules(stage: dict) -> set[Path]:
    """Files of every geolib module the stage's code imports, transitively."""
    todo = set().union(*(_imported_modules(s) for s in _stage_entry_sources(stage)))
    todo |= set(_entry_modules(stage["cmd"]))
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo |= {".".join(parts[:i]) for i in range(1, len(parts))}  # parent packages run too
        path = _module_file(module)
        if path is not None:
            todo |= _imported_modules(path.read_text()) - seen
    files = {_module_file(mod) for mod in seen}
    return {f.relative_to(ROOT) for f in files if f is not None and not _is_marker(f)}


@pytest.mark.parametrize("name", sorted(DVC), ids=str)
def test_stage_depends_on_every_module_it_reaches(name):
    stage = DVC[name]
    deps = [Path(str(d)) for d in stage.get("deps", [])]
    missing = [
        str(f)
        for f in sorted(reached_modules(stage))
        if not any(f == d or d in f.parents for d in deps)
    ]
    assert not missing, f"stage {name!r} reaches {missing} but does not depend on them"


def test_the_geolib_command_reaches_its_subcommand_modules():
    """A stage running ``python -m geolib measure`` reaches what the measure module imports
    and the figure it draws (imported inside the subcommand's function)."""
    stage = {"cmd": "python -m geolib measure MODEL --out x", "deps": []}
    reached = reached_modules(stage)
    assert Path("geolib/__main__.py") in reached
    assert {
        Path("geolib/experiments/measure_model.py"),
        Path("geolib/measure/probes.py"),
        Path("geolib/report/measure_figure.py"),
        Path("geolib/report/plotting.py"),
    } <= reached


def test_dependency_check_catches_a_removed_dep():
    """The check fails when a reached module is dropped from a stage's deps."""
    stage = dict(DVC["chord_arc"])
    reached = reached_modules(stage)
    assert Path("geolib/theory/curvature.py") in reached
    assert Path("geolib/measure/stats.py") in reached  # through the theory modules
    stage["deps"] = [d for d in stage["deps"] if d != "geolib/measure/stats.py"]
    with pytest.raises(AssertionError, match="geolib/measure/stats.py"):
        DVC["__probe__"] = stage
        try:
            test_stage_depends_on_every_module_it_reaches("__probe__")
        finally:
            del DVC["__probe__"]


# ------------------------------------------------------------------------------------------
# Files: a notebook writes only through geolib.report.outputs; what stages open is declared
# ------------------------------------------------------------------------------------------

OUTPUT_PREFIXES = ("figures/", "data/results/", "data/claims/")


def _string_literals(source: str) -> list[str]:
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node.value)
        elif isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant):
                found.append(first.value)
    return found


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_writes_only_through_stage_outputs(nb_path):
    """No output path is spelled out in a notebook: they come from ``stage_outputs`` (so an
    override run goes to ``explore/``), and each kind the notebook writes is a stage out."""
    from geolib.report.outputs import stage_outputs

    name = nb_path.stem
    code = _code_of_notebook(nb_path)
    # the chapter run's provenance record is written with its outputs (no figure without it)
    assert f'OUT = stage_outputs("{name}", overrides, params_path=params_path)' in code
    spelled = [s for s in _string_literals(code) if s.startswith(OUTPUT_PREFIXES)]
    assert not spelled, f"{name}: output paths spelled out instead of OUT.*: {spelled}"
    assert "savefig(" not in code and "plt.show()" not in code, "figures go through show()"
    out = stage_outputs(name, create=False)
    outs = {o if isinstance(o, str) else next(iter(o)) for o in DVC[name]["outs"]}
    if "show(" in code:
        assert str(out.figures) in outs
    if ".to_csv(" in code:
        assert str(out.results) in outs
    if "write_claims(" in code:
        assert "write_claims(OUT.claims" in code and str(out.claims) in outs


def _load_script(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_io_check_flags_undeclared_reads_and_writes():
    check = _load_script("check_io")
    stages = {
        "a": {"deps": ["data/in", "geolib/x.py"], "outs": ["data/out", {"book/x.ipynb": {}}]},
        "book": {"deps": ["notebooks"], "outs": ["book/_build/html"]},
        "run": {"foreach": ["p1", "p2"], "do": {"deps": ["data/in"], "outs": ["runs/${item}"]}},
        "get": {  # a foreach over a mapping: ${key}
            "foreach": {"m1": {"f": "x"}, "m2": {"f": "y"}},
            "do": {"deps": ["data/raw/${key}"], "outs": ["data/got/${key}"]},
        },
    }
    ok = [
        {"stage": "a", "path": "data/in/f.csv", "write": False},
        {"stage": "a", "path": "data/out/t.csv", "write": True},
        {"stage": "a", "path": "data/out/t.csv", "write": False},  # reads back its own out
        {"stage": "a", "path": "book/x.ipynb", "write": True},
        {"stage": "a", "path": "params.yaml", "write": False},
        {"stage": "a", "path": "geolib/y.py", "write": False},  # sources: the import test's job
        {"stage": "book", "path": "book/chapters/a.ipynb", "write": False},  # stated exemption
        {"stage": "book", "path": "logs/lanes.csv", "write": False},  # the run log: its reader
        {"stage": "run@p1", "path": "runs/p1/w.bin", "write": True},  # a foreach expansion
        {"stage": "run@p1", "path": "data/in/f.csv", "write": False},
        {"stage": "a", "path": "book/.x.tmp.ipynb", "write": True},  # an atomic write of an out
        {"stage": "get@m1", "path": "data/raw/m1/w.whl", "write": False},
        {"stage": "get@m1", "path": "data/got/m1/m.gguf", "write": True},
    ]
    assert check.undeclared_io(ok, stages) == []
    bad = [
        {"stage": "a", "path": "data/inside.csv", "write": False},  # a sibling, not under data/in
        {"stage": "a", "path": "data/in/f.csv", "write": True},  # writing a dep
        {"stage": "b", "path": "x", "write": False},
        {"stage": "run@p1", "path": "runs/p2/w.bin", "write": True},  # another point's out
        {"stage": "a", "path": "book/.y.tmp.ipynb", "write": True},  # the temporary of a non-out
        {"stage": "a", "path": "logs/lanes.csv", "write": False},  # not a reader of the run log
        {"stage": "get@m1", "path": "data/got/m2/m.gguf", "write": True},  # the other model's
    ]
    problems = check.undeclared_io(bad, stages)
    assert problems == [
        "b: not a stage of dvc.yaml (opened x)",
        "stage 'a' reads data/inside.csv, which is not among its deps",
        "stage 'a' reads logs/lanes.csv, which is not among its deps",
        "stage 'a' writes book/.y.tmp.ipynb, which is not under its outs",
        "stage 'a' writes data/in/f.csv, which is not under its outs",
        "stage 'get@m1' writes data/got/m2/m.gguf, which is not under its outs",
        "stage 'run@p1' writes runs/p2/w.bin, which is not under its outs",
    ]


def test_audit_hook_logs_a_stage_processes_reads_and_writes(tmp_path):
    """The start-up hook really sees ``open``/``np.load``/``os.open`` in a child process."""
    import os
    import subprocess
    import sys

    (tmp_path / "in.txt").write_text("x")
    script = (
        "import os, numpy as np\n"
        "open('in.txt').read()\n"
        "np.save('out.npy', np.zeros(2))\n"
        "np.load('out.npy')\n"
        "os.close(os.open('raw.bin', os.O_WRONLY | os.O_CREAT))\n"
        "open('/etc/hostname' if os.path.exists('/etc/hostname') else 'in.txt').close()\n"
    )
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT / "scripts" / "audit"),
        DVC_STAGE="s",
        GEOLIB_AUDIT_DIR=str(tmp_path / "audit"),
        GEOLIB_AUDIT_ROOT=str(tmp_path),
    )
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, check=True)
    records = _load_script("check_io").read_records(str(tmp_path / "audit"))
    got = {(r["path"], r["write"]) for r in records}
    assert got == {
        ("in.txt", False),
        ("out.npy", True),
        ("out.npy", False),
        ("raw.bin", True),
    }, got
    assert {r["stage"] for r in records} == {"s"}


def test_lock_prune_removes_only_the_entries_of_removed_stages():
    """DVC leaves a removed stage's entry in dvc.lock; the prune drops exactly those lines."""
    check = _load_script("check_lock")
    text = (
        "schema: '2.0'\nstages:\n"
        "  a:\n    cmd: python a.py\n    deps:\n    - path: a.py\n      md5: 1\n"
        "  old@x:\n    cmd: python old.py x\n    outs:\n    - path: runs/x\n"
        "  b:\n    cmd: python b.py\n"
    )
    assert check.lock_stage_blocks(text) == {"a": (2, 7), "old@x": (7, 11), "b": (11, 13)}
    pruned = check.without_stages(text, {"old@x"})
    assert pruned == text.replace(
        "  old@x:\n    cmd: python old.py x\n    outs:\n    - path: runs/x\n", ""
    )
    assert yaml.safe_load(pruned)["stages"].keys() == {"a", "b"}
    assert check.without_stages(text, set()) == text
    with pytest.raises(ValueError, match="stages:"):
        check.lock_stage_blocks("schema: '2.0'\n")
    # the committed lock: an entry for every stage of dvc.yaml and for nothing else
    names = set(check.lock_stage_blocks((ROOT / "dvc.lock").read_text()))
    from geolib.report import compute

    stages = compute.pipeline_stages(yaml.safe_load((ROOT / "dvc.yaml").read_text()), PARAMS)
    assert names == stages, sorted(names ^ stages)


def test_lock_check_flags_stale_sources_and_params_but_not_missing_outputs():
    check = _load_script("check_lock")
    stages = {
        "a": {"outs": ["data/a"]},
        "b": {"deps": ["data/a", "geolib/b.py", "runs/s"], "outs": []},
        "s": {"foreach": ["x", "y"], "do": {"outs": ["runs/s/${item}"]}},
    }
    produced = check.produced_paths(stages)
    fresh_clone = {
        "b": [
            {
                "changed deps": {
                    "data/a": "deleted",
                    "data/a/x.csv": "modified",
                    "runs/s": "deleted",
                    "runs/s/x": "deleted",
                    "runs/s/y/run.json": "modified",
                }
            },
            {"changed outs": {"data/b": "not in cache"}},
        ]
    }
    assert check.stale_entries(fresh_clone, produced) == []
    stale = {
        "b": [
            {
                "changed deps": {
                    "geolib/b.py": "modified",
                    "params.yaml": {"b": "modified"},
                    "runsx/s": "deleted",
                }
            },
            "changed command",
        ]
    }
    assert check.stale_entries(stale, produced) == [
        "b: changed deps: geolib/b.py modified",
        'b: changed deps: params.yaml {"b": "modified"}',
        "b: changed deps: runsx/s deleted",
        "b: changed command",
    ]


def test_figures_have_fresh_provenance():
    """Every figure of the default results has a provenance record whose files and parameters
    are current (CI, on a fresh clone with no results, checks the smoke run's figures with
    ``python -m geolib.report.outputs check``)."""
    from geolib.report.outputs import check

    assert check(ROOT / "figures", ROOT / "params.yaml") == []


def test_reader_check_flags_code_first_bare_figures_and_dead_table_links(tmp_path):
    check_book = _load_script("check_book")
    (tmp_path / "_data").mkdir()
    (tmp_path / "_data" / "t.csv").write_text("a\n1\n")
    page = Path("chapters/x.html")
    folded = (
        '<div class="cell tag_hide-input"><details class="hide above-input">'
        '<div class="cell_input">code</div></details>'
        '<div class="cell_output"><img src="a.png"><div class="provenance">p</div></div></div>'
    )
    link = '<a class="table-download" href="../_data/t.csv">t.csv</a>'
    ends = "".join(f'<section id="{s}"><h2>{s}</h2></section>' for s in check_book.CHAPTER_SECTIONS)
    good = f"<h1>T</h1><p>prose</p>{folded}{link}{ends}"
    assert check_book.reader_problems(good, page, tmp_path) == []
    code_first = '<h1>T</h1><div class="cell"><div class="cell_input">x</div></div><p>prose</p>'
    assert (
        "visible before the first prose"
        in check_book.reader_problems(code_first, page, tmp_path)[0]
    )
    bare = good.replace('<div class="provenance">p</div>', "")
    assert "1 figure(s), 0 provenance" in check_book.reader_problems(bare, page, tmp_path)[0]
    dead = good.replace('t.csv"', 'missing.csv"')
    assert "does not resolve" in check_book.reader_problems(dead, page, tmp_path)[0]
    stray = good.replace("<img", "<pre>PosixPath(&#39;figures/a.png&#39;)</pre><img")
    assert check_book.reader_problems(stray, page, tmp_path) == [
        "a stray output box shows PosixPath('figures/a.png')"
    ]
    in_code = good.replace(">code<", ">show(fig, Path('figures/a'))<")  # source, not output
    assert check_book.reader_problems(in_code, page, tmp_path) == []
    no_compute = good.replace('<section id="compute">', '<section id="computation">')
    assert check_book.reader_problems(no_compute, page, tmp_path) == ["no 'compute' section"]


def test_a_dirty_provenance_line_is_flagged_only_when_the_tree_is_clean():
    check_book = _load_script("check_book")
    line = '<div class="provenance"><small>commit <code>abc + uncommitted changes to x.py</code>'
    dom = f"{line}</small></div>"
    assert check_book.unpinned_provenance(dom, tree_clean=True) == [
        "1 provenance line(s) name uncommitted changes in a clean tree"
    ]
    assert check_book.unpinned_provenance(dom, tree_clean=False) == []
    pinned = '<div class="provenance"><small>commit <code>abc1234</code></small></div>'
    assert check_book.unpinned_provenance(pinned, tree_clean=True) == []


def test_the_layout_page_frames_the_book_page_at_each_width_and_reports_back(tmp_path):
    check_book = _load_script("check_book")
    page = check_book.layout_page("intro.html")
    assert page.count('src="/intro.html"') == len(check_book.LAYOUT_WIDTHS) == 2
    assert 'data-width="1024"' in page and "claims-table" in page
    report = '<pre id="layout-report">["at 1024 px: table 1 is 886 px wide"]</pre>'
    assert check_book.layout_problems(report) == ["at 1024 px: table 1 is 886 px wide"]
    assert check_book.layout_problems('<pre id="layout-report">[]</pre>') == []
    assert (
        "not measured"
        in check_book.layout_problems('<pre id="layout-report">not measured</pre>')[0]
    )
    # figures: the layout page reports drawn and shown widths; the scale is their ratio
    assert 'id="figure-report"' in page
    figs = [{"src": "../_images/a.png", "natural": 2000, "shown": 690},
            {"src": "../_images/b.png", "natural": 690, "shown": 690}]  # fmt: skip
    dom = f'<pre id="figure-report">{html.escape(json.dumps(figs))}</pre>'
    scales = check_book.figure_scales(dom)
    assert [f["scale"] for f in scales] == [0.345, 1.0]
    summary = check_book.figure_summary([f | {"page": "chapters/x.html"} for f in scales])
    assert "2, display scale 0.34–1.00" in summary and "1 below 0.6" in summary
    assert "0.34  2000 px shown at 690 px  chapters/x.html: a.png" in summary
    assert check_book.figure_summary([]) == "figures: none found"
    # the book names an image by the SHA-256 of its bytes: mapped back to the figure's file
    png = tmp_path / "figures" / "stage" / "plot.png"
    png.parent.mkdir(parents=True)
    png.write_bytes(b"not really a png")
    names = check_book.figure_files(tmp_path)
    digest = hashlib.sha256(b"not really a png").hexdigest()
    assert names == {digest: "figures/stage/plot.png"}
    fig = {"src": f"../_images/{digest}.png", "natural": 2000, "shown": 676, "page": "p.html"}
    summary = check_book.figure_summary([fig | {"scale": 0.3, "drawn": 2000}], names)
    assert "p.html: figures/stage/plot.png" in summary


def test_figure_scale_and_text_size_are_read_from_the_saved_png(tmp_path):
    """A figure saved by the style at 2× counts as drawn at half its pixel width, and its
    recorded smallest font, times the display scale, is the text size the reader sees."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from geolib.report import plotting

    check_book = _load_script("check_book")
    plotting.use_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    png = plotting.savefig(fig, tmp_path / "_images" / "f")[0]
    font = plotting.min_font_px(fig)
    plt.close(fig)
    drawn, recorded, problems = check_book.saved_figure(png)
    assert problems == ""
    from PIL import Image

    with Image.open(png) as im:
        assert drawn == im.width / plotting.SAVE_SCALE
    assert recorded == pytest.approx(font, abs=0.01)
    figs = [{"src": "../_images/f.png", "natural": int(2 * drawn), "shown": int(drawn)}]
    dom = f'<pre id="figure-report">{html.escape(json.dumps(figs))}</pre>'
    (tmp_path / "chapters").mkdir()  # the page's folder: src is relative to it
    (shown,) = check_book.figure_scales(dom, Path("chapters/x.html"), tmp_path)
    assert shown["scale"] == pytest.approx(1.0, abs=0.01)
    assert shown["text_px"] == pytest.approx(font, abs=0.05)
    assert check_book.figure_problems([shown]) == []
    # shown at half its drawn width: the scale is too small and so is its text
    half = shown | {"shown": drawn / 2, "scale": 0.5, "text_px": font / 2}
    problems = check_book.figure_problems([half])
    assert len(problems) == 2 and "shown at 0.50" in problems[0] and "text at" in problems[1]
    # an image the style did not save counts at its pixel width, its text unknown
    other = tmp_path / "_images" / "other.png"
    Image.new("RGB", (300, 100)).save(other)
    assert check_book.saved_figure(other) == (300.0, None, "")
    # a figure saved with problems fails the check, naming them
    fig, _ = plt.subplots(1, 4, figsize=(15, 3))
    wide = plotting.savefig(fig, tmp_path / "_images" / "wide", plotting.figure_problems(fig))[0]
    plt.close(fig)
    assert check_book.saved_figure(wide)[2].startswith("1500 px wide")
    figs = [{"src": "../_images/wide.png", "natural": 3000, "shown": 676}]
    dom = f'<pre id="figure-report">{html.escape(json.dumps(figs))}</pre>'
    (shown,) = check_book.figure_scales(dom, Path("chapters/x.html"), tmp_path)
    assert any(
        "saved with problems: 1500 px wide" in p for p in check_book.figure_problems([shown])
    )


@pytest.mark.parametrize(
    "profile", sorted((ROOT / "profiles").glob("*.yaml")), ids=lambda p: p.stem
)
def test_every_profile_passes_the_design_checks_when_read(profile):
    params = _load_script("run_profile").merged_params(profile)
    assert params["sweep"]["points"]


_MISSING = object()


def _lookup(params: dict, dotted: str):
    """The value at ``dotted`` (``section.key``) in ``params``, or ``_MISSING``."""
    node = params
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


@pytest.mark.parametrize(
    "profile", [None, *sorted((ROOT / "profiles").glob("*.yaml"))], ids=lambda p: p and p.stem
)
def test_every_stage_param_is_in_params_yaml_for_every_foreach_item(profile):
    """DVC refuses a stage whose ``params`` name a missing key (as ``scale.rungs.${item}`` did for
    a seeded rung); check each expansion here, under params.yaml and each profile."""
    params = PARAMS if profile is None else _load_script("run_profile").merged_params(profile)
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    missing = []
    for name, stage in stages.items():
        items: list = [None]  # a list's items (${item}) or a mapping's keys (${key})
        if "foreach" in stage:
            ref = re.fullmatch(r"\$\{([\w.]+)\}", str(stage["foreach"]))
            assert ref, f"{name}: foreach reads a params list (${{section.key}})"
            node = _lookup(params, ref.group(1))
            assert node is not _MISSING, f"{name}: foreach reads a missing {ref.group(1)}"
            items = list(node)
            stage = stage["do"]
        for entry in stage.get("params", []):
            keys = entry if isinstance(entry, str) else None
            if keys is None:  # {file: [keys]}: only params.yaml's are checked here
                keys = entry.get("params.yaml", [])
            for key in [keys] if isinstance(keys, str) else keys:
                for item in items:
                    dotted = key
                    if item is not None:
                        dotted = key.replace("${item}", str(item)).replace("${key}", str(item))
                    if _lookup(params, dotted) is _MISSING:
                        missing.append(f"{name}{'' if item is None else '@' + str(item)}: {dotted}")
    assert not missing, missing


def test_a_profile_with_a_batch_too_large_for_the_budget_is_refused_when_read(tmp_path):
    """Batch 8192 at the default token budget trains 5 steps: refused when the profile is read
    (not when its stage runs, minutes into the pipeline), naming the point."""
    from geolib.models.grid import cells, expand

    sweep = copy.deepcopy(PARAMS["sweep"])
    sweep["factorial"]["batch_size"] = [*sweep["factorial"]["batch_size"], 8192]
    points = [p.name for p in expand(sweep)]
    profile = tmp_path / "big_batch.yaml"
    changed = {"factorial": sweep["factorial"], "points": points, "cells": list(cells(points))}
    profile.write_text(yaml.safe_dump({"sweep": changed}))
    with pytest.raises(SystemExit, match=r"big_batch.yaml: .*-b8192-.*only 5 steps"):
        _load_script("run_profile").merged_params(profile)


def test_every_script_and_module_the_docs_name_exists():
    """Commands in params.yaml, profiles, the README and the Makefile name files and modules
    that exist (a header once pointed to a script that never did)."""
    docs = [ROOT / "params.yaml", ROOT / "README.md", ROOT / "Makefile", ROOT / ".ci" / "run"]
    docs += sorted((ROOT / "profiles").glob("*.yaml")) + [ROOT / "notebooks" / "README.md"]
    missing = []
    for doc in docs:
        text = doc.read_text()
        for script in re.findall(r"\b((?:scripts|benchmarks)/[\w/]+\.py)\b", text):
            if not (ROOT / script).is_file():
                missing.append(f"{doc.name}: {script}")
        for module in re.findall(r"python -m (geolib[\w.]*)", text):
            path = ROOT / Path(*module.split("."))
            if not (path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()):
                missing.append(f"{doc.name}: python -m {module}")
    assert not missing, missing


def _cell(nb_name: str, needle: str) -> str:
    nb = json.loads((ROOT / "notebooks" / f"{nb_name}.ipynb").read_text())
    found = [
        "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "code" and needle in "".join(c["source"])
    ]
    assert len(found) == 1, f"{len(found)} cells of {nb_name} contain {needle!r}"
    return found[0]


def test_gradient_energy_chapter_names_the_released_models_from_their_datasheets():
    code = _cell("gradient_energy", "pretrained_layer_profile")
    assert "SmolLM" not in code and "Gemma" not in code
    assert "model.name" in code and "load_released(" in code


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_geolib_imports_resolve(nb_path):
    """Every ``geolib`` import of a chapter runs (a moved module fails here, not in the book)."""
    import ast

    for node in ast.walk(ast.parse(_code_of_notebook(nb_path))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [getattr(node, "module", None) or ""] + [a.name for a in node.names]
            if any(n.split(".")[0] == "geolib" for n in names):
                exec(ast.unparse(node), {})


def test_io_check_exemptions_name_real_stages_and_their_outs():
    """An exemption for a stage that no longer exists (renamed, split) would exempt nothing."""
    check = _load_script("check_io")
    for stage, roots in check.EXEMPT_READS.items():
        assert stage in DVC, f"check_io exempts reads of {stage!r}, which is not a stage"
        produced = {str(p) for s in DVC.values() for p in _out_paths(s)}
        assert all(any(r == p or p.startswith(r + "/") for p in produced) for r in roots), roots
    assert set(check.LOCK_READERS + check.RUN_LOG_READERS) <= set(DVC)
    assert check.RUN_LOG == _load_script("lanes").LOG.as_posix()  # the log lanes.py writes


def _out_paths(stage: dict) -> list[str]:
    return [o if isinstance(o, str) else next(iter(o)) for o in stage.get("outs", [])]


def test_lanes_run_matched_stages_side_by_side_and_stop_after_a_failure(tmp_path, monkeypatch):
    """scripts/lanes.py against a stand-in `dvc` that records when each stage runs."""
    lanes = _load_script("lanes")
    log = tmp_path / "log"
    fake = tmp_path / "dvc"
    fake.write_text(
        "#!/bin/sh\n"  # args: --wait-for-lock repro --single-item NAME
        f'echo "start $4 $OMP_NUM_THREADS $GEOLIB_JOBS" >> {log}\n'
        'sleep 0.3; case "$4" in bad*) exit 3;; esac\n'
        f'echo "end $4" >> {log}\n'
    )
    fake.chmod(0o755)
    monkeypatch.setattr(lanes, "dvc", lambda: [str(fake)])
    monkeypatch.setattr(lanes.os, "cpu_count", lambda: 4)
    names = ["prepare", "sweep_train@a", "sweep_train@b", "train_x", "training"]
    assert lanes.matching(names, ["sweep_train@*", "train_*"]) == names[1:4]
    # the order of the patterns (longest stages first), a name once
    expected = ["train_x", "sweep_train@a", "sweep_train@b"]
    assert lanes.matching(names, ["train_x", "*_*"]) == expected
    with pytest.raises(SystemExit, match="no stage matches 'tarin_"):
        lanes.matching(names, ["tarin_*"])
    assert lanes.lane_env(2, cores=4)["OMP_NUM_THREADS"] == "2"
    assert lanes.lane_env(4, cores=2)["OMP_NUM_THREADS"] == "1"  # never 0 threads
    env = lanes.lane_env(2, cores=2)
    assert env["MALLOC_MMAP_MAX_"] == "0" and int(env["MALLOC_TRIM_THRESHOLD_"]) >= 1 << 30

    results = lanes.run(["a", "b"], lanes=2, root=tmp_path)
    events = log.read_text().split("\n")
    assert [r[:2] for r in results] == [("a", 0), ("b", 0)]
    assert events[0].startswith("start") and events[1].startswith("start")  # side by side
    assert events[0].split()[2:] == ["2", "2"]  # 4 cores / 2 lanes, GEOLIB_JOBS=2

    log.write_text("")
    results = lanes.run(["bad", "c", "d", "e"], lanes=1, root=tmp_path)
    assert [r[:2] for r in results] == [("bad", 3), ("c", -1), ("d", -1), ("e", -1)]
    assert log.read_text().split() == ["start", "bad", "4", "1"]  # nothing started after it


def test_lanes_record_each_stage_cpu_seconds_of_its_whole_process_tree(tmp_path, monkeypatch):
    """``--log``: one CSV row per stage run; the CPU seconds include the grandchild that does
    the work (the stage's command under DVC), a failed stage is recorded too, and ``ran`` says
    whether DVC ran the command (its "Running stage" line) or skipped it."""
    lanes = _load_script("lanes")
    fake = tmp_path / "dvc"
    burn = "import time; t = time.process_time()\nwhile time.process_time() - t < 0.4: pass"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$4" in skip*) echo "Stage \'$4\' didn\'t change, skipping"; exit 0;; esac\n'
        "echo \"Running stage '$4':\"\n"
        f"{sys.executable} -c '{burn}'\ncase \"$4\" in bad*) exit 3;; esac\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(lanes, "dvc", lambda: [str(fake)])
    log = Path("logs") / "lanes.csv"  # relative: under root
    lanes.run(["a"], lanes=1, root=tmp_path, log=log)
    lanes.run(["bad"], lanes=1, root=tmp_path, log=log)
    lanes.run(["skip"], lanes=1, root=tmp_path, log=log)
    rows = list(csv.DictReader((tmp_path / log).open()))
    assert [(r["stage"], r["exit"], r["ran"]) for r in rows] == [
        ("a", "0", "1"),
        ("bad", "3", "1"),
        ("skip", "0", "0"),
    ]
    for r in rows[:2]:
        assert float(r["cpu_s"]) >= 0.4  # the burner's CPU time, two processes down
        assert float(r["wall_s"]) >= float(r["cpu_s"]) - 0.05  # one core: CPU <= wall
        cpu = float(r["user_s"]) + float(r["system_s"])
        assert abs(float(r["cpu_s"]) - cpu) <= 0.11
        assert 0 < float(r["peak_rss_gib"]) < 4


def test_a_lane_that_fails_itself_stops_the_run_instead_of_hanging_it(tmp_path, monkeypatch):
    """DVC missing, or the log unwritable: the stage counts as failed (-2), nothing new starts,
    and the run returns."""
    lanes = _load_script("lanes")
    monkeypatch.setattr(lanes, "dvc", lambda: [str(tmp_path / "no-such-dvc")])
    results = lanes.run(["a", "b"], lanes=1, root=tmp_path)
    assert [r[:2] for r in results] == [("a", -2), ("b", -1)]


def test_the_book_writes_its_compute_with_and_without_a_run_log(tmp_path):
    """scripts/build_book.write_compute on a two-stage pipeline: the sections and the CSV from
    the log, and a book that says its compute was not recorded when there is no log."""
    book = _load_script("build_book")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"data": {}, "ch": {}}}))
    (tmp_path / "params.yaml").write_text("{}\n")
    lock = {
        "schema": "2.0",
        "stages": {
            "data": {"outs": [{"path": "data/x"}]},
            "ch": {"deps": [{"path": "data/x"}], "outs": [{"path": "book/chapters/ch.ipynb"}]},
            "gone@1": {"outs": [{"path": "runs/1"}]},  # left by a removed stage: not counted
        },
    }
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    (tmp_path / "book" / "chapters").mkdir(parents=True)
    nb = {"cells": [{"cell_type": "markdown", "source": ["# The chapter\n", "text"]}]}
    (tmp_path / "book" / "chapters" / "ch.ipynb").write_text(json.dumps(nb))
    lanes = _load_script("lanes")
    log = tmp_path / "lanes.csv"
    rows = [
        ["2026-12-01T10:00:00Z", "data", 0, 100.0, 90.0, 80.0, 10.0, 0.5, 2, 1],
        ["2026-12-01T10:02:00Z", "ch", 0, 20.0, 18.0, 17.0, 1.0, 0.3, 2, 1],
        ["2026-12-01T10:03:00Z", "gone@1", 0, 999.0, 999.0, 999.0, 0.0, 0.3, 2, 1],
    ]
    with log.open("w", newline="") as f:
        csv.writer(f).writerows([lanes.LOG_COLUMNS, *rows])
    out = tmp_path / "gen"
    build = book.write_compute(tmp_path, ["ch"], log, out)
    assert build.stages == ("ch", "data") and build.wall_s == 120 and build.cpu_s == 108
    intro = (out / "compute.md").read_text()
    assert "The 2 stages behind this book took **1.8 min of CPU time**" in intro
    assert "[The chapter](chapters/ch.ipynb)" in intro
    section = json.loads((out / "compute.json").read_text())["chapters"]["chapters/ch"]
    assert "**2.0 min of wall time and 1.8 min of CPU time**" in section
    table = list(csv.DictReader((out / "compute.csv").open()))
    assert [(r["stage"], r["wall_s"], r["chapters"]) for r in table] == [
        ("ch", "20.0", "ch"),
        ("data", "100.0", "ch"),
    ]
    build = book.write_compute(tmp_path, ["ch"], tmp_path / "no-log.csv", out)
    assert build.recorded == 0 and "not shown" in (out / "compute.md").read_text()
    assert "not shown" in json.loads((out / "compute.json").read_text())["chapters"]["chapters/ch"]
    assert [r["wall_s"] for r in csv.DictReader((out / "compute.csv").open())] == ["", ""]


def test_lanes_upgrade_a_log_from_before_a_column(tmp_path, monkeypatch):
    """An old log gets the new header; its rows keep their values, the new column empty; a
    file with columns of its own is refused rather than rewritten."""
    lanes = _load_script("lanes")
    fake = tmp_path / "dvc"
    fake.write_text("#!/bin/sh\necho \"Running stage '$4':\"\n")
    fake.chmod(0o755)
    monkeypatch.setattr(lanes, "dvc", lambda: [str(fake)])
    log = tmp_path / "lanes.csv"
    old = lanes.LOG_COLUMNS[:-1]
    log.write_text(",".join(old) + "\n2026-12-01T00:00:00Z,x,0,5.0,4.0,3.5,0.5,0.1,2\n")
    lanes.run(["a"], lanes=1, root=tmp_path, log=log)
    rows = list(csv.DictReader(log.open()))
    assert list(rows[0]) == lanes.LOG_COLUMNS
    assert rows[0]["stage"] == "x" and rows[0]["wall_s"] == "5.0" and rows[0]["ran"] == ""
    assert rows[1]["stage"] == "a" and rows[1]["ran"] == "1"
    other = tmp_path / "other.csv"
    other.write_text("when,what\n1,2\n")
    with pytest.raises(SystemExit, match="not a lanes log"):
        lanes.run(["a"], lanes=1, root=tmp_path, log=other)
    assert other.read_text() == "when,what\n1,2\n"


def _path_root(path: str) -> str:
    """A dependency or output path up to its first ``${…}`` (a ``foreach`` stage's item)."""
    return path.split("${")[0].rstrip("/")


def test_lanes_start_a_stage_only_after_its_upstream_and_in_priority_order(tmp_path, monkeypatch):
    """With ``waits``, a stage starts only once every stage it waits for has ended with exit 0;
    a free lane takes the first ready stage; a cycle is an error, not a hang."""
    lanes = _load_script("lanes")
    log = tmp_path / "log"
    fake = tmp_path / "dvc"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "start $4" >> {log}\n'
        'case "$4" in slow*) sleep 0.6;; *) sleep 0.2;; esac\n'
        f'echo "end $4" >> {log}\n'
    )
    fake.chmod(0o755)
    monkeypatch.setattr(lanes, "dvc", lambda: [str(fake)])
    # slow and a start at once; b waits for a, c for b and slow; d is ready from the start
    # but comes last in the order, so it takes the lane a frees only if b cannot
    names = ["slow", "a", "b", "c", "d"]
    waits = {"b": {"a"}, "c": {"b", "slow"}}
    results = lanes.run(names, lanes=2, root=tmp_path, waits=waits)
    assert [r[:2] for r in results] == [(n, 0) for n in names]
    events = log.read_text().split("\n")[:-1]
    at = {e: i for i, e in enumerate(events)}
    assert at["start b"] > at["end a"]
    assert at["start c"] > max(at["end b"], at["end slow"])
    assert at["start b"] < at["start d"]  # b was ready first and comes first in the order
    with pytest.raises(ValueError, match="wait for one another"):
        lanes.run(["x", "y"], lanes=2, root=tmp_path, waits={"x": {"y"}, "y": {"x"}})
    with pytest.raises(ValueError, match="not run"):
        lanes.run(["x"], lanes=2, root=tmp_path, waits={"x": {"nope"}})


def test_lanes_given_stages_wait_for_those_upstream_of_them_at_any_distance():
    lanes = _load_script("lanes")
    # a -> b -> c, and d alone; e's upstream is not listed at all
    upstream = {"a": set(), "b": {"a"}, "c": {"b"}, "d": set(), "e": {"x"}, "x": set()}
    assert lanes.waits_among(upstream, ["c", "a", "d", "e"]) == {
        "c": {"a"},  # through b, which is not run
        "a": set(),
        "d": set(),
        "e": set(),
    }
    assert lanes.waits_among(upstream, ["b", "c"]) == {"b": set(), "c": {"b"}}
    assert lanes.waits_among({}, ["z"]) == {"z": set()}


def test_lanes_run_the_changed_stages_and_everything_downstream():
    lanes = _load_script("lanes")
    upstream = {
        "data": set(),
        "train": {"data"},
        "measure": {"train"},
        "book": {"measure"},
        "theory": set(),
    }
    assert lanes.to_run(upstream, {"train"}) == {"train", "measure", "book"}
    assert lanes.to_run(upstream, {"theory", "data"}) == set(upstream)
    assert lanes.to_run(upstream, set()) == set()


def test_fast_lock_reading_gives_dvc_the_same_lock_to_rewrite(tmp_path):
    """scripts/dvc_fast_lock.py: the committed lock read by the C loader equals the round-trip
    reading, and DVC's own dumper writes it back byte for byte; a text with a comment keeps
    the round-trip reading (its comments survive DVC's rewrite)."""
    from dvc.utils.serialize._yaml import _dump, modify_yaml, parse_yaml_for_update

    fast = _load_script("dvc_fast_lock")
    text = (ROOT / "dvc.lock").read_text()
    assert "#" not in text  # else the fast path is never taken
    data = fast.parse_for_update(text, "dvc.lock")
    assert type(data) is dict  # the C loader's plain types, not ruamel's commented ones
    assert data == parse_yaml_for_update(text, "dvc.lock")
    out = io.StringIO()
    _dump(data, out)
    assert out.getvalue() == text

    commented = "# a note\nschema: '2.0'\nstages: {}\n"
    assert type(fast.parse_for_update(commented, "x")) is not dict
    # patched as when the script runs: DVC's own rewrite keeps the comment
    lock = tmp_path / "dvc.lock"
    lock.write_text(commented)
    import dvc.utils.serialize._yaml as dvc_yaml

    saved = dvc_yaml.parse_yaml_for_update
    dvc_yaml.parse_yaml_for_update = fast.parse_for_update
    try:
        with modify_yaml(str(lock)) as d:
            d["stages"] = {"a": {"cmd": "true"}}
    finally:
        dvc_yaml.parse_yaml_for_update = saved
    assert lock.read_text().startswith("# a note\n") and "cmd: 'true'" in lock.read_text()


def test_lanes_priority_names_real_stages_and_covers_every_stage():
    """Every pattern of the priority list matches a stage of ``dvc.yaml`` (a typo would silently
    reorder the pipeline), and the list's last pattern takes every other stage."""
    lanes = _load_script("lanes")
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    names = [
        f"{n}@{item}" if "foreach" in stage else n
        for n, stage in stages.items()
        for item in (["l", "x"] if "foreach" in stage else [None])
    ]
    order = lanes.matching(names, lanes.PRIORITY)
    assert sorted(order) == sorted(names)
    assert order[-1] == "book"


def test_book_build_refuses_outputs_that_differ_from_dvc_lock(tmp_path):
    """A hand-edited claim or table, a missing output or a stray file stops the book build,
    named; the directory hash is DVC's own (checked against ``dvc_data``'s Tree)."""
    import shutil

    from dvc_data.hashfile.tree import Tree

    book = _load_script("build_book")
    res = tmp_path / "data" / "results" / "ch"
    (res / "sub").mkdir(parents=True)
    (res / "a.csv").write_text("x\n1\n")
    (res / "sub" / "b.json").write_text("{}")
    claim = tmp_path / "data" / "claims" / "ch.json"
    claim.parent.mkdir(parents=True)
    claim.write_text('{"status": "reproduced"}')
    files = sorted(f for f in res.rglob("*") if f.is_file())
    tree = Tree.from_list(
        [{"md5": book.md5_file(f), "relpath": f.relative_to(res).as_posix()} for f in files]
    )
    tree.digest()
    assert book.dir_md5(res).removesuffix(".dir") == tree.hash_info.value.removesuffix(".dir")
    outs = [
        {"path": "data/claims/ch.json", "hash": "md5", "md5": book.md5_file(claim)},
        {"path": "data/results/ch", "hash": "md5", "md5": book.dir_md5(res)},
    ]
    # an entry of a stage this pipeline does not define (a profile's copy of a fuller lock)
    gone = {"cmd": "run x", "outs": [{"path": "data/results/x", "hash": "md5", "md5": "0"}]}
    lock = {"schema": "2.0", "stages": {"ch": {"cmd": "run ch", "outs": outs}, "x@a": gone}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"ch": {"cmd": "run ch"}}}))
    (tmp_path / "params.yaml").write_text("{}\n")
    (tmp_path / "data" / "results" / ".gitignore").write_text("/ch\n")  # DVC writes these
    assert book.lock_mismatches(tmp_path) == []

    claim.write_text('{"status": "not reproduced"}')
    (res / "sub" / "b.json").write_text('{"x": 1}')
    (tmp_path / "data" / "results" / "stray.csv").write_text("y\n")
    assert book.lock_mismatches(tmp_path) == [
        "data/claims/ch.json (ch): changed since the stage wrote it",
        "data/results/ch (ch): changed since the stage wrote it",
        "data/results/stray.csv: written by no stage of dvc.lock",
    ]
    shutil.rmtree(res)
    assert "data/results/ch (ch): missing" in book.lock_mismatches(tmp_path)


def test_no_file_under_a_stage_output_is_tracked_by_git():
    """DVC refuses to write an output that git tracks a file of (e.g. a ``.gitignore`` left
    from when the folder held several stages' outputs): the stage fails at its end."""
    import subprocess

    outs = sorted({_path_root(p) for stage in DVC.values() for p in _out_paths(stage)})
    tracked = subprocess.run(
        ["git", "ls-files", "--", *outs], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert not tracked, f"git tracks files inside stage outputs: {tracked}"


def test_check_book_reads_console_errors_from_chromiums_log():
    check_book = _load_script("check_book")
    log = (
        '[1:1:1203/023145.704555:INFO:CONSOLE:1] "Uncaught SyntaxError: Identifier '
        "'THEBE_JS_URL' has already been declared\", source: http://127.0.0.1:9/intro.html (1)\n"
        '[1:1:1203/023145.722389:INFO:CONSOLE:3] "MathJax ready", source: http://x/a.js (3)\n'
        "[1:1:1203/023145.8:WARNING:other.cc(9)] not a console line\n"
        '[1:1:1203/023146.1:INFO:CONSOLE:7] "TypeError: x is undefined\n'
        '    at f (http://x/b.js:7:3)", source: http://x/b.js (7)\n'
        "[1:1:1203/023146.2:INFO:CONSOLE:1] \"Refused to execute script from 'http://x/c' "
        'because its MIME type", source: http://x/p.html (1)\n'
    )
    errors = check_book.console_errors(log)
    assert errors == [
        "Uncaught SyntaxError: Identifier 'THEBE_JS_URL' has already been declared "
        "(http://127.0.0.1:9/intro.html)",
        "TypeError: x is undefined (http://x/b.js)",  # a message over several lines
        "Refused to execute script from 'http://x/c' because its MIME type (http://x/p.html)",
    ]


def test_the_book_extension_keeps_each_script_once():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "dedupe", ROOT / "book" / "_ext" / "dedupe_scripts.py"
    )
    dedupe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dedupe)

    class Script(str):  # Sphinx's JavaScript entries: a str (the file) with attributes
        def __new__(cls, filename, **attributes):
            self = super().__new__(cls, filename)
            self.attributes = attributes
            return self

    inline = Script("", body='const THEBE_JS_URL = "x"')
    context = {
        "script_files": [
            Script("a.js"),
            inline,
            Script("b.js"),
            Script("", body='const THEBE_JS_URL = "x"'),
            Script("a.js"),
            Script("", body="other"),
        ]
    }
    dedupe._dedupe(None, "intro", "page.html", context, None)
    assert [(str(s), s.attributes.get("body", "")) for s in context["script_files"]] == [
        ("a.js", ""),
        ("", 'const THEBE_JS_URL = "x"'),
        ("b.js", ""),
        ("", "other"),
    ]


def test_a_profile_run_names_the_chapters_its_book_lacks(tmp_path):
    run_profile = _load_script("run_profile")
    (tmp_path / "notebooks").mkdir()
    for name in ("corpus", "training"):
        (tmp_path / "notebooks" / f"{name}.ipynb").write_text("{}")
    pages = tmp_path / "book" / "_build" / "html" / "chapters"
    assert run_profile.missing_chapters(tmp_path) == ["corpus", "training"]
    pages.mkdir(parents=True)
    (pages / "corpus.html").write_text("<html></html>")
    assert run_profile.missing_chapters(tmp_path) == ["training"]
    (pages / "training.html").write_text("<html></html>")
    assert run_profile.missing_chapters(tmp_path) == []
