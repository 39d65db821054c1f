"""Run groups of independent DVC stages side by side: how `make all` runs the pipeline.

    python scripts/lanes.py --pipeline [--lanes 2]      # `make all`, and the profile runs
    python scripts/lanes.py [--lanes 2] [--dry] PATTERN [PATTERN ...]

``--pipeline``: ``dvc repro`` of the stages in :data:`BEFORE` (with their upstream), then each
group of :data:`GROUPS` side by side, then a plain ``dvc repro``, which finds those stages done
and runs the rest (the last chapter and the book) in order. A group holds stages whose upstream
lies in :data:`BEFORE` or in earlier groups only (a test checks this against ``dvc.yaml``):
training; then the analyses of what was trained and the sweep's and saturation's measurements;
then the tables built on those; then the chapters.

Every stage whose name matches a pattern (``fnmatch``, e.g. ``'sweep_train@*'``) is reproduced
with ``dvc repro --single-item NAME`` (an up-to-date stage is skipped by DVC itself), ``--lanes``
at a time, the cores split between them: each lane's processes see ``OMP_NUM_THREADS`` = cores ÷
lanes and ``GEOLIB_JOBS`` = lanes (oversubscribed OpenMP threads busy-wait and ruin every
job's throughput). Stages start in the order of the patterns (the longest first, so that the
short ones fill the lanes at the end), each pattern's stages in ``dvc.yaml`` order. DVC allows
it: a stage's command runs with the repository unlocked, and each ``repro`` records only its
own stage in ``dvc.lock``.

The matched stages must be independent of one another, and their upstream stages must be up to
date (``--single-item`` does not look upstream): `make all` runs :data:`BEFORE` first and a
plain ``dvc repro`` last, which finds these stages done and runs the rest in order. Results are
bitwise reproducible for a given number of lanes (threads per run) on one machine; a run with
another thread count differs in the last digits (floating-point summation order).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: reproduced first, upstream included: everything the groups read that no group makes
BEFORE = ["tokenize", "fetch_pretrained"]
#: run side by side, one group after the other, each group's patterns longest stages first
GROUPS = [
    # training (one torch thread per lane: two lanes ≈ one two-thread run in compute, and they
    # overlap the start-up of the many short stages); the notebooks that need no trained model
    # fill the lanes at the end
    [
        "train_*",
        "ladder_train@*",
        "sweep_train@*",
        "saturation_train@*",
        "metric_validation",
        "variance_collapse",
        "gradient_scaling",
        "chord_arc",
        "corpus",
    ],
    # what reads the trained models: the Paper A analyses, then the per-model measurements
    [
        "residual_isotropy_tables",
        "gradient_energy_tables",
        "frequency_collapse_tables",
        "scale_residual_isotropy_tables",
        "scale_gradient_energy_tables",
        "gradient_energy_pretrained",
        "scale_frequency_collapse_tables",
        "sweep_measure@*",
        "saturation_measure@*",
    ],
    # the tables built on the measurements
    ["geometry_performance_tables", "saturation_tables", "training"],
    # the two tables that read the sweep's model table, and the chapters of the tables above
    [
        "quantization_tables",
        "forgetting_tables",
        "residual_isotropy",
        "gradient_energy",
        "frequency_collapse",
        "scale",
        "saturation",
    ],
]


def dvc() -> str:
    """The environment's ``dvc`` (beside this interpreter), else the one on PATH."""
    here = Path(sys.executable).parent / "dvc"
    return str(here) if here.exists() else "dvc"


def stage_names(root: Path = ROOT) -> list[str]:
    """Every stage of the pipeline, ``foreach`` items expanded, in ``dvc.yaml`` order."""
    cmd = [dvc(), "stage", "list", "--name-only"]
    out = subprocess.run(cmd, cwd=root, check=True, capture_output=True, text=True)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def matching(names: list[str], patterns: list[str]) -> list[str]:
    """The names matching any pattern, in the order of the patterns (each pattern's names in
    pipeline order, a name once); a pattern matching none is an error (a typo would silently
    leave its stages to the serial run)."""
    found: list[str] = []
    for p in patterns:
        hits = [n for n in names if fnmatch.fnmatchcase(n, p)]
        if not hits:
            raise SystemExit(f"lanes: no stage matches {p!r}")
        found += [n for n in hits if n not in found]
    return found


def pipeline(lanes: int, root: Path = ROOT) -> int:
    """The whole pipeline: :data:`BEFORE`, the :data:`GROUPS` side by side, then the rest."""
    t0 = time.perf_counter()
    subprocess.run([dvc(), "repro", *BEFORE], cwd=root, check=True)
    names = stage_names(root)
    for i, patterns in enumerate(GROUPS, start=1):
        t1 = time.perf_counter()
        results = run(matching(names, patterns), lanes, root)
        if any(code != 0 for _, code, _ in results):
            print("lanes: a stage failed; stopping", file=sys.stderr)
            return 1
        took = time.perf_counter() - t1
        print(f"lanes: group {i} ({len(results)} stages) in {took:.0f} s", file=sys.stderr)
    print(f"lanes: groups done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return subprocess.run([dvc(), "repro"], cwd=root).returncode


def lane_env(lanes: int, cores: int | None = None) -> dict[str, str]:
    """The environment of one lane: its share of the cores for torch (OpenMP) threads."""
    threads = max(1, (cores or os.cpu_count() or 1) // lanes)
    return os.environ | {"OMP_NUM_THREADS": str(threads), "GEOLIB_JOBS": str(lanes)}


def run(
    names: list[str], lanes: int, root: Path = ROOT, force: bool = False
) -> list[tuple[str, int, float]]:
    """Reproduce each stage, ``lanes`` at a time (``force``: even if up to date, for timing);
    ``(name, exit code, seconds)`` per stage. After the first failure no new stage starts
    (those running finish)."""
    env = lane_env(lanes)
    failed = False
    results: list[tuple[str, int, float]] = []

    def one(name: str) -> tuple[str, int, float]:
        nonlocal failed
        if failed:
            return name, -1, 0.0
        t0 = time.perf_counter()
        cmd = [dvc(), "--wait-for-lock", "repro", "--single-item", *(["-f"] * force), name]
        code = subprocess.run(cmd, cwd=root, env=env).returncode
        failed |= code != 0
        return name, code, time.perf_counter() - t0

    with ThreadPoolExecutor(max_workers=lanes) as pool:
        for result in pool.map(one, names):
            results.append(result)
            name, code, seconds = result
            if code >= 0:
                print(f"lanes: {name}: exit {code}, {seconds:.0f} s", file=sys.stderr, flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="*", help="stage names or fnmatch patterns")
    parser.add_argument("--pipeline", action="store_true", help="the whole pipeline (make all)")
    parser.add_argument("--lanes", type=int, default=2, help="stages at a time (default 2)")
    parser.add_argument("--dry", action="store_true", help="list the stages, run nothing")
    parser.add_argument(
        "--force", action="store_true", help="rerun the matched stages even if up to date"
    )
    args = parser.parse_args(argv)
    if args.lanes < 1:
        parser.error("--lanes must be >= 1")
    if args.pipeline == bool(args.patterns):
        parser.error("give --pipeline or stage patterns (not both)")
    if args.pipeline:
        return pipeline(args.lanes)
    names = matching(stage_names(), args.patterns)
    if args.dry:
        print("\n".join(names))
        return 0
    t0 = time.perf_counter()
    results = run(names, args.lanes, force=args.force)
    bad = [name for name, code, _ in results if code != 0]
    print(
        f"lanes: {len(names)} stages in {args.lanes} lanes, {time.perf_counter() - t0:.0f} s"
        + (f"; failed or not started: {bad}" if bad else ""),
        file=sys.stderr,
    )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
