"""Where a chapter writes, and the record of where each of its figures came from.

**Where.** The default results (``figures/<stage>/``, ``data/results/<stage>/``,
``data/claims/<stage>.json``) are DVC outs and change only through ``dvc repro``. A chapter rerun
with parameter overrides (``papermill … -y "overrides: {…}"`` or ``scripts/run_notebook.py NAME -y
…``), or with a parameters file other than the repository's ``params.yaml`` (``--params
other.yaml``), writes instead to ``explore/<stage>-<hash of the overrides and that file>/`` with the
same layout inside, plus the overrides (and the file) in ``overrides.json``, so an exploration never
passes for a result. Overrides must name keys of the stage's parameters and keep their kinds
(:func:`check_overrides`): a check that cannot run must not report an outcome.

**Provenance.** A chapter run first writes its *stage record* into its figures folder
(``stage_outputs(…, params_path=…)`` does it): the stage, the parameters it used (every
``params.yaml`` section its DVC stage lists, after overrides), the git commit and whether the tree
was dirty, the content hashes of its inputs (the stage's ``deps`` in ``dvc.yaml``), library
versions, the date and the command that reproduces it. :func:`geolib.report.plotting.show` then
writes ``<figure>.provenance.json`` (the stage record plus the hashes of the PNG and SVG) and
refuses to save a figure without a stage record, so no figure exists without its provenance.
:func:`check` finds figures with no record, records whose files changed, and records whose
parameters are no longer what ``params.yaml`` gives (a stale figure):

    python -m geolib.report.outputs check figures --params params.yaml
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import html
import json
import platform
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from geolib.config import load_params, stage_params
from geolib.files import sha256_file, write_text_atomic
from geolib.verdicts.sections import section_of

#: Exploration runs go here (git-ignored, not a DVC out).
EXPLORE = Path("explore")


@dataclass(frozen=True)
class StageOutputs:
    """The output locations of one notebook stage (paths relative to the repository root)."""

    stage: str
    root: Path  #: ``.`` for the pipeline, ``explore/<stage>-<hash>`` for an exploration
    figures: Path  #: folder of the stage's figures (PNG + SVG)
    results: Path  #: folder of the stage's tables
    claims: Path  #: the stage's claims file (JSON)

    @property
    def exploring(self) -> bool:
        return self.root != Path(".")


#: The pipeline's parameters file; any other file makes a run an exploration.
DEFAULT_PARAMS = Path("params.yaml")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def check_overrides(
    defaults: Mapping[str, Any], overrides: Mapping[str, Any], where: str = ""
) -> None:
    """Refuse an override that names a key ``defaults`` lacks (``KeyError``) or whose value is
    of another kind than the default's (``ValueError``): true/false for true/false, an integer
    for an integer, a number (or an integer) for a number, a string for a string, a list for a
    list, and for a mapping a mapping of its keys, checked the same way. A default of null
    takes anything. The error names the key, the default and the value given."""
    for key, value in overrides.items():
        name = f"{where}{key}"
        if key not in defaults:
            raise KeyError(f"unknown parameter {name!r}; known: {sorted(defaults)}")
        default = defaults[key]
        if default is None:
            continue
        want, got = _kind(default), _kind(value)
        if want == "a mapping" and got == want:
            check_overrides(default, value, f"{name}.")
        elif got != want and not (want == "a number" and got == "an integer"):
            raise ValueError(
                f"override {name}: the parameters give {want} ({default!r}), the override "
                f"{got} ({value!r})"
            )


def is_default_params(params_path: str | Path) -> bool:
    """Whether ``params_path`` is the repository's ``params.yaml`` (paths from the root)."""
    return Path(params_path).resolve() == DEFAULT_PARAMS.resolve()


def overrides_tag(overrides: Mapping[str, Any]) -> str:
    """A short, order-independent name for a set of overrides (8 hex digits of sha256)."""
    text = json.dumps(dict(overrides), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def stage_outputs(
    stage: str,
    overrides: Mapping[str, Any] | None = None,
    *,
    create: bool = True,
    params_path: str | Path | None = None,
) -> StageOutputs:
    """Output locations of ``stage``; under overrides or with a parameters file other than
    ``params.yaml`` (``params_path``), a fresh exploration folder.

    With ``create`` the folders are made and an exploration's ``overrides.json`` is written;
    with ``params_path`` too, the chapter run's provenance record is written into the figures
    folder (:func:`stage_record`), without which no figure can be saved there.
    """
    if not stage or "/" in stage or stage.startswith("."):
        raise ValueError(f"not a stage name: {stage!r}")
    recorded = dict(overrides or {})
    if params_path is not None and not is_default_params(params_path):
        digest = hashlib.sha256(Path(params_path).read_bytes()).hexdigest()
        recorded["parameters file"] = f"{params_path} (sha256 {digest})"
    if recorded:
        root = EXPLORE / f"{stage}-{overrides_tag(recorded)}"
        out = StageOutputs(
            stage, root, root / "figures", root / "results", root / "claims" / f"{stage}.json"
        )
    else:
        out = StageOutputs(
            stage,
            Path("."),
            Path("figures") / stage,
            Path("data") / "results" / stage,
            Path("data") / "claims" / f"{stage}.json",
        )
    if create:
        for folder in (out.figures, out.results, out.claims.parent):
            folder.mkdir(parents=True, exist_ok=True)
        if out.exploring:
            text = json.dumps(recorded, sort_keys=True, indent=2, default=str)
            write_text_atomic(out.root / "overrides.json", text + "\n")
        if params_path is not None:
            write_stage_record(out.figures, stage_record(stage, params_path, overrides))
    return out


STAGE_RECORD = "_stage.provenance.json"
SUFFIX = ".provenance.json"
LIBRARIES = ("numpy", "scipy", "pandas", "torch", "transformers", "matplotlib", "geolib")


def tree_hash(path: str | Path) -> str | None:
    """SHA-256 of a file, or of a folder's (relative path, file hash) list; ``None`` if absent."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    if not path.is_dir():
        return None
    h = hashlib.sha256()
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        h.update(f"{p.relative_to(path).as_posix()}\0{sha256_file(p)}\n".encode())
    return h.hexdigest()


def params_hash(params: Mapping[str, Any]) -> str:
    """8 hex digits of the SHA-256 of the parameters as canonical JSON."""
    text = json.dumps(params, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


#: Files a pipeline run itself rewrites (DVC records each finished stage in its lock file, and
#: stages it): not code, so they never make the commit "dirty" on a provenance line.
RUN_WRITTEN = frozenset({"dvc.lock"})
#: ... and the ignore files beside outputs, to which DVC adds each output it writes for the
#: first time (a new stage; a committed tree lists the rest): they select no code either.
RUN_WRITTEN_NAME = ".gitignore"


def run_written(path: str) -> bool:
    """Whether a changed ``path`` (repository-relative, POSIX) is one a run itself writes."""
    return path in RUN_WRITTEN or Path(path).name == RUN_WRITTEN_NAME


def git_state(root: str | Path = ".") -> dict[str, Any]:
    """``{commit, dirty, changed}`` of the work tree at ``root`` (``commit: None`` outside git):
    ``changed`` lists the paths that differ from the commit, but those a run writes
    (:func:`run_written`)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True
        ).stdout

    try:
        commit = git("rev-parse", "HEAD").strip()
        status = git("status", "--porcelain", "--untracked-files=all")  # files, not folders
        changed = [line[3:] for line in status.splitlines()]
        changed = [p for p in changed if not run_written(p)]
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None, "changed": [], "n_changed": 0}
    return {
        "commit": commit,
        "dirty": bool(changed),
        "changed": changed[:20],
        "n_changed": len(changed),
    }


def stage_spec(stage: str, dvc_yaml: str | Path = "dvc.yaml") -> dict[str, Any]:
    """``{"deps": [...], "params": [...]}`` of a stage of ``dvc.yaml`` (empty if not there)."""
    path = Path(dvc_yaml)
    stages = yaml.safe_load(path.read_text()).get("stages", {}) if path.is_file() else {}
    spec = stages.get(stage, {})
    params = [p if isinstance(p, str) else next(iter(p)) for p in spec.get("params", [])]
    return {"deps": list(spec.get("deps", [])), "params": params}


def stage_parameters(
    params_path: str | Path, stage: str, sections: list[str], overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """The parameters a stage read: its own section (or the one it shares:
    :func:`~geolib.verdicts.sections.section_of`; ``common`` merged, overrides applied) and
    every other section its DVC stage lists, each as in ``params_path``."""
    data = load_params(params_path)
    own = section_of(stage)
    out = {own: stage_params(params_path, own, overrides)}
    for name in sections:
        top = name.split(".")[0]
        if top not in (own, "common") and top in data:
            out[top] = data[top]
    return out


def reproduce_command(
    stage: str, overrides: Mapping[str, Any], params_path: str | Path | None = None
) -> str:
    """``dvc repro <stage>`` for the pipeline's own run; the runner's command line for an
    exploration (overrides, or another parameters file than ``params.yaml``)."""
    foreign = params_path is not None and not is_default_params(params_path)
    if not overrides and not foreign:
        return f"dvc repro {stage}"
    command = f"python scripts/run_notebook.py {stage}"
    if foreign:
        command += f" --params {params_path}"
    if overrides:
        command += f" -y '{json.dumps(dict(overrides), sort_keys=True, default=str)}'"
    return command


def stage_record(
    stage: str,
    params_path: str | Path,
    overrides: Mapping[str, Any] | None = None,
    *,
    dvc_yaml: str | Path = "dvc.yaml",
    root: str | Path = ".",
) -> dict[str, Any]:
    """The provenance of one chapter run (module docstring)."""
    overrides = dict(overrides or {})
    spec = stage_spec(stage, dvc_yaml)
    params = stage_parameters(params_path, stage, spec["params"], overrides)
    versions = {}
    for lib in LIBRARIES:
        try:
            versions[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            versions[lib] = None
    return {
        "stage": stage,
        "params_file": str(params_path),
        "overrides": overrides,
        "params": params,
        "params_sha256": params_hash(params),
        "git": git_state(root),
        "inputs": {d: tree_hash(Path(root) / d) for d in spec["deps"]},
        "versions": {"python": platform.python_version(), **versions},
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "reproduce": reproduce_command(stage, overrides, params_path),
        "exploration": bool(overrides) or not is_default_params(params_path),
    }


def write_stage_record(folder: str | Path, record: Mapping[str, Any]) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / STAGE_RECORD
    write_text_atomic(path, json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
    return path


def record_figure(stem: str | Path, files: list[Path]) -> dict[str, Any]:
    """Write ``<stem>.provenance.json`` from the stage record of the figure's folder and the
    hashes of ``files``; error if the folder has no stage record."""
    stem = Path(stem)
    base = stem.parent / STAGE_RECORD
    if not base.is_file():
        raise FileNotFoundError(
            f"no provenance for figures in {stem.parent}: create the chapter's outputs with "
            "stage_outputs(stage, overrides, params_path=params_path) before saving a figure"
        )
    record = json.loads(base.read_text())
    record["figure"] = stem.name
    record["files"] = {Path(f).name: sha256_file(f) for f in files}
    path = stem.with_name(stem.name + SUFFIX)
    write_text_atomic(path, json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
    return record


def caption_html(record: Mapping[str, Any]) -> str:
    """The quiet line under a figure (stage · commit · params hash) and a "reproduce"
    disclosure with the exact command."""
    git = record.get("git") or {}
    commit = (git.get("commit") or "no git")[:7]
    if git.get("dirty"):  # say which code differs from the commit
        changed = list(git.get("changed") or [])
        total = int(git.get("n_changed", len(changed)))  # ``changed`` keeps the first 20
        more = f" and {total - 3} more" if total > 3 else ""
        commit += f" + uncommitted changes to {', '.join(changed[:3])}{more}"
    explore = " · exploration" if record.get("exploration", record.get("overrides")) else ""
    return (
        '<div class="provenance"><small>'
        f"stage <code>{record['stage']}</code> · commit <code>{html.escape(commit)}</code> · "
        f"params <code>{record['params_sha256']}</code>{explore}</small>"
        '<details class="reproduce"><summary><small>reproduce</small></summary>'
        f"<pre>{record['reproduce']}</pre></details></div>"
    )


def check(figures_root: str | Path, params_path: str | Path) -> list[str]:
    """Problems of the figures under ``figures_root`` (``<stage>/<name>.png``): no record, a
    file whose hash differs from its record, or parameters that differ from what
    ``params_path`` gives for the record's stage now (a stale figure)."""
    problems = []
    for png in sorted(Path(figures_root).glob("*/*.png")):
        rec_path = png.with_name(png.stem + SUFFIX)
        if not rec_path.is_file():
            problems.append(f"{png}: no provenance record ({rec_path.name})")
            continue
        record = json.loads(rec_path.read_text())
        for name, digest in record.get("files", {}).items():
            f = png.with_name(name)
            if not f.is_file() or sha256_file(f) != digest:
                problems.append(f"{f}: not the file its provenance record describes")
        now = stage_parameters(
            params_path, record["stage"], list(record["params"]), record.get("overrides") or {}
        )
        now = json.loads(json.dumps(now, default=str))  # as the record stores it
        was = record["params"]
        stale = sorted(k for k in set(now) | set(was) if now.get(k) != was.get(k))
        if stale:
            problems.append(f"{png}: stale: parameters of {stale} differ from {params_path}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check the provenance of every figure.")
    parser.add_argument("command", choices=["check"])
    parser.add_argument("figures", nargs="?", default="figures")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    problems = check(args.figures, args.params)
    for p in problems:
        print(p, file=sys.stderr)
    n = len(list(Path(args.figures).glob("*/*.png")))
    print(f"provenance: {n} figures, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
