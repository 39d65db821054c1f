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


def _stage_entry_sources(stage: dict) -> list[str]:
    """The code a stage's command runs first: a notebook (and its runner), a ``python -m``
    module or a script."""
    cmd = stage["cmd"]
    m = re.match(r"python scripts/run_notebook\.py (\w+)", cmd)
    if m:
        return [
            _code_of_notebook(ROOT / "notebooks" / f"{m.group(1)}.ipynb"),
            (ROOT / "scripts" / "run_notebook.py").read_text(),
        ]
    m = re.match(r"python -m (geolib[\w.]*)", cmd)
    if m:
        return [_module_file(m.group(1)).read_text()]
    m = re.match(r"python (scripts/\w+\.py)", cmd)
    if m:
        return [(ROOT / m.group(1)).read_text()]
    raise AssertionError(f"unrecognised stage command: {cmd}")


def reached_modules(stage: dict) -> set[Path]:
    """Files of every geolib module the stage's code imports, transitively."""
    todo = set().union(*(_imported_modules(s) for s in _stage_entry_sources(stage)))
    m = re.match(r"python -m (geolib[\w.]*)", stage["cmd"])
    if m:
        todo.add(m.group(1))
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


def test_dependency_check_catches_a_removed_dep():
    """The check fails when a reached module is dropped from a stage's deps."""
    stage = dict(DVC["chord_arc"])
    reached = reached_modules(stage)
    assert Path("geolib/theory/curvature.py") in reached
    assert Path("geolib/stats.py") in reached  # through the theory modules
    stage["deps"] = [d for d in stage["deps"] if d != "geolib/stats.py"]
    with pytest.raises(AssertionError, match="geolib/stats.py"):
        DVC["__probe__"] = stage
        try:
            test_stage_depends_on_every_module_it_reaches("__probe__")
        finally:
            del DVC["__probe__"]
