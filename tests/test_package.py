"""The shape of the house: the module map in ``geolib/__init__.py`` is complete and true, each
wing imports only the wings the map allows, no experiment imports another, no private name
crosses a module, and an edit to measurement code retrains nothing (read off ``dvc.yaml``)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pytest
import yaml

import geolib

PACKAGE = Path(geolib.__file__).parent
ROOT = PACKAGE.parent
DOC = geolib.__doc__
#: wing → the wings it may import (besides itself), as the module map states them
ALLOWED = {
    "config": set(),
    "files": set(),
    "stage": {"config"},
    "data": {"config", "files", "stage"},
    "models": {"config", "files", "stage", "data"},
    "measure": set(),
    "theory": {"measure"},
    "experiments": {"config", "files", "stage", "data", "models", "measure", "theory"},
    "verdicts": {"config", "files", "measure"},
    "report": {"config", "files", "measure", "verdicts"},
    "__main__": {"experiments", "report"},
}


def _wing_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _modules() -> list[Path]:
    return sorted(
        p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE
    )


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every ``geolib`` import in ``path``, at any depth."""
    return _imports_in(path.read_text())


def _imports_in(source: str) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every ``geolib`` import in Python ``source``, at any depth."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.split(".")[0] == "geolib"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "geolib":
                found.append((node.module, [a.name for a in node.names]))
    return found


def _targets(module: str, names: list[str]) -> list[str]:
    """The ``geolib`` modules an import reaches: ``from geolib.models import runs`` reaches
    ``geolib.models.runs``; ``from geolib.models.runs import x`` reaches ``geolib.models.runs``."""
    if module == "geolib" or (PACKAGE.parent / Path(*module.split("."))).is_dir():
        return [f"{module}.{n}" for n in names] or [module]
    return [module]


def test_module_map_is_complete_and_true():
    wings = re.findall(r"^([a-z0-9_]+)/? {2,}\S", DOC, flags=re.MULTILINE)
    modules = re.findall(r"^    ([a-z0-9_]+/?) +\S", DOC, flags=re.MULTILINE)
    # a package inside a wing (``verdicts/chapters/``) lists its modules one level deeper
    inner = {
        f"{package}{name}"
        for package, block in re.findall(
            r"^    ([a-z0-9_]+/) .*\n((?:        [a-z0-9_]+ .*\n)+)", DOC, flags=re.MULTILINE
        )
        for name in re.findall(r"^        ([a-z0-9_]+) ", block, flags=re.MULTILINE)
    }
    listed = set(wings) | {m.rstrip("/") for m in modules} | inner
    assert len(modules) == len(set(modules)), "a module is listed twice"
    files = [p for p in PACKAGE.rglob("*.py") if p.stem != "__init__"]
    depth = {p: len(p.relative_to(PACKAGE).parts) for p in files}
    actual = {p.stem for p in files if depth[p] <= 2}
    actual |= {f"{p.parent.name}/{p.stem}" for p in files if depth[p] == 3}
    actual |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    actual |= {p.parent.name for p in PACKAGE.glob("*/*/__init__.py")}
    assert listed == actual, (
        f"not on the map: {sorted(actual - listed)}; on the map but missing: "
        f"{sorted(listed - actual)}"
    )
    wings_named = r"\b(config|files|stage|data|models|measure|theory|experiments|verdicts|report)\b"
    for wing, allowed in ALLOWED.items():
        line = re.search(rf"^{wing}/? .*$", DOC, flags=re.MULTILINE).group(0)
        if "imports" not in line:  # a top-level module (config, files, stage), not a wing
            assert not line.startswith(f"{wing}/"), f"the map does not say what {wing} imports"
            continue
        said = line.split("imports", 1)[-1].split(";")[0]
        named = set() if said.strip().startswith("nothing") else set(re.findall(wings_named, said))
        named -= {wing}
        assert named == allowed, f"the map says {wing} imports {sorted(named)}, not {allowed}"


def _violations(
    where: object, imports: list[tuple[str, list[str]]], judge: Callable[[str, str], str | None]
) -> list[str]:
    """``where: message`` for every module the ``imports`` reach that ``judge`` (the target and
    its wing; ``geolib`` for the package root) refuses, and for every private name imported."""
    problems = []
    for module, names in imports:
        for target in _targets(module, names):
            parts = target.split(".")
            message = judge(target, parts[1] if len(parts) > 1 else "geolib")
            if message:
                problems.append(f"{where}: {message}")
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        if private:
            problems.append(f"{where}: imports private {private} from {module}")
    return problems


def import_violations(paths: list[Path]) -> list[str]:
    """Every import that breaks the wings' rules, as ``file: message``."""
    problems = []
    for path in paths:
        wing, own = _wing_of(path), f"geolib.experiments.{path.stem}"

        def judge(target: str, other: str, wing: str = wing, own: str = own) -> str | None:
            if other == "geolib":
                return f"imports the package root ({target})"
            if other != wing and other not in ALLOWED[wing]:
                return f"{wing} imports {other} ({target})"
            if wing == other == "experiments" and target != own:
                return f"an experiment imports another ({target})"
            return None

        problems += _violations(path.relative_to(ROOT), _imports(path), judge)
    return problems


def test_wings_import_only_what_the_map_allows():
    assert import_violations(_modules()) == []


#: what a notebook may import (the map's paragraph on notebooks): every wing but experiments
NOTEBOOK_ALLOWED = {
    "config", "files", "stage", "data", "models", "measure", "theory", "verdicts", "report",
}  # fmt: skip


def notebook_code(path: Path) -> str:
    """The code cells of a notebook as one Python source (IPython's ``%`` and ``!`` lines
    dropped)."""
    cells = json.loads(path.read_text())["cells"]
    lines = [
        line
        for c in cells
        if c["cell_type"] == "code"
        for line in "".join(c["source"]).splitlines()
        if not line.lstrip().startswith(("%", "!"))
    ]
    return "\n".join(lines) + "\n"


def notebook_import_violations(paths: list[Path]) -> list[str]:
    """Every import of a notebook that reaches past what a notebook may import, or a private
    name, as ``notebook: message``."""

    def judge(target: str, wing: str) -> str | None:
        return None if wing in NOTEBOOK_ALLOWED else f"imports {wing} ({target})"

    return [
        problem
        for path in paths
        for problem in _violations(path.name, _imports_in(notebook_code(path)), judge)
    ]


def test_notebooks_import_only_what_the_map_allows():
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebooks) > 10
    assert notebook_import_violations(notebooks) == []
    assert "Notebooks" in DOC and "but ``experiments``" in DOC  # the map states the rule


def test_the_notebook_rule_catches_an_experiment_a_private_name_and_the_root(tmp_path):
    source = (
        "%matplotlib inline\n"
        "from geolib.experiments import gradient_energy\n"
        "from geolib.verdicts.rules import _level\n"
        "import geolib\n"
        "from geolib.verdicts.chapters import scale as chapter\n"
    )
    nb = {"cells": [{"cell_type": "code", "source": [source]}, {"cell_type": "markdown"}]}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb))
    assert notebook_import_violations([path]) == [
        "x.ipynb: imports experiments (geolib.experiments.gradient_energy)",
        "x.ipynb: imports private ['_level'] from geolib.verdicts.rules",
        "x.ipynb: imports geolib (geolib)",
    ]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles(paths: list[Path]) -> list[list[str]]:
    """The groups of modules that import each other, directly or round a longer loop (strongly
    connected components of the import graph, imports at any depth counted), each sorted."""
    names = {_module_name(p): p for p in paths}
    graph = {
        name: {
            t
            for module, imported in _imports(path)
            for t in _targets(module, imported)
            if t in names and t != name
        }
        for name, path in names.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1:
                cycles.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return cycles


def test_no_module_imports_one_that_imports_it_back():
    assert import_cycles(_modules()) == []


def test_the_cycle_check_finds_a_loop_of_three(tmp_path, monkeypatch):
    fake = tmp_path / "geolib" / "report"
    fake.mkdir(parents=True)
    (fake / "a.py").write_text("from geolib.report.b import x\n")
    (fake / "b.py").write_text("def f():\n    from geolib.report import c\n")
    (fake / "c.py").write_text("import geolib.report.a\n")
    (fake / "d.py").write_text("from geolib.report.a import y\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path / "geolib")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    found = import_cycles(sorted(fake.glob("*.py")))
    assert found == [["geolib.report.a", "geolib.report.b", "geolib.report.c"]]


def test_the_import_rule_catches_each_kind_of_violation(tmp_path, monkeypatch):
    """Written into a scratch package: each kind of break is named."""
    fake = tmp_path / "geolib"
    for wing, source in {
        "measure": "from geolib.models.train import train\n",
        "report": "from geolib.experiments import sweep\n",
        "experiments": "from geolib.experiments.forgetting import x\n",
        "data": "from geolib.measure.stats import _level\n",
    }.items():
        (fake / wing).mkdir(parents=True)
        (fake / wing / "mod.py").write_text(source)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    found = "\n".join(import_violations(sorted(fake.rglob("mod.py"))))
    assert "measure imports models" in found
    assert "report imports experiments" in found
    assert "an experiment imports another (geolib.experiments.forgetting)" in found
    assert "data imports measure" in found and "private ['_level']" in found


# ------------------------------------------------------------------------------------------
# An edit to measurement code re-measures and re-analyses; it never retrains a model
# ------------------------------------------------------------------------------------------

STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def _paths(entries) -> list[PurePosixPath]:
    out = []
    for e in entries or []:
        path = e if isinstance(e, str) else next(iter(e))
        out.append(PurePosixPath(re.sub(r"/?\$\{item\}", "", path)))  # a foreach's whole folder
    return out


def _overlap(a: PurePosixPath, b: PurePosixPath) -> bool:
    return a == b or a in b.parents or b in a.parents


def stages_invalidated_by(path: str) -> set[str]:
    """Stages ``dvc status`` lists after ``path`` changes: those depending on it, then those
    depending on what they write, transitively (a ``foreach`` stage as its template)."""
    body = {n: s["do"] if "foreach" in s else s for n, s in STAGES.items()}
    changed, stale = [PurePosixPath(path)], set()
    while changed:
        p = changed.pop()
        for name, s in body.items():
            if name not in stale and any(_overlap(p, d) for d in _paths(s.get("deps"))):
                stale.add(name)
                changed += _paths(s.get("outs"))
    return stale


def training_stages() -> set[str]:
    """Stages that write a run folder (``runs/…``)."""
    body = {n: s["do"] if "foreach" in s else s for n, s in STAGES.items()}
    return {n for n, s in body.items() if any(p.parts[0] == "runs" for p in _paths(s.get("outs")))}


@pytest.mark.parametrize(
    "module", ["metrics", "stats", "probes", "evaluate", "geometry", "prediction", "residual"]
)
def test_editing_measurement_code_retrains_nothing(module):
    stale = stages_invalidated_by(f"geolib/measure/{module}.py")
    assert stale, f"no stage depends on geolib/measure/{module}.py"
    assert not stale & training_stages(), (
        f"an edit to {module} retrains {stale & training_stages()}"
    )


def test_the_retraining_check_sees_training_and_measuring_stages():
    train = {
        "train_pythia",
        "train_olmo",
        "train_bert",
        "train_olmo_sgd",
        "train_olmo_warmup2",
        "sweep_train",
        "saturation_train",
        "train_replica",
        "ladder_train",
        "length_train",
    }
    assert training_stages() == train
    assert train <= stages_invalidated_by("geolib/models/train.py")
    stale = stages_invalidated_by("geolib/measure/metrics.py")
    assert {"sweep_measure", "saturation_measure", "geometry_performance_tables", "book"} <= stale
