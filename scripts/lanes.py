"""Run the pipeline's stages side by side, each as soon as its upstream is done: how `make all`
runs the pipeline.

    python scripts/lanes.py --pipeline [--lanes 2]      # `make all`, and the profile runs
    python scripts/lanes.py [--lanes 2] [--dry] PATTERN [PATTERN ...]

``--pipeline``: DVC's own graph of the pipeline (``Repo.index.graph``) and its status give the
stages to run: every stage whose deps, params or outs changed, and everything downstream of one.
Each is reproduced with ``dvc repro --single-item NAME`` (DVC's command line through
``scripts/dvc_fast_lock.py``) once every upstream stage in that set has finished (a stage that
turns out unchanged is skipped by DVC itself), ``--lanes`` at a time. When
a lane frees up it takes the ready stage that comes first in :data:`PRIORITY`: the sweep's short
training stages and the chain that reads them (measures, the model table, quantization,
forgetting) first, so that the long quantization stage runs beside the Paper A training instead
of alone at the end; then the training, longest first; then the analyses and the chapters.
No barrier waits for a whole group: a lane idles only when no stage is ready.

Every stage run is timed: wall and CPU seconds (its whole process tree) and peak memory go to
stderr and, as one CSV row, to ``--log`` (default ``logs/lanes.csv``, appended run after run).
The row's ``ran`` says whether DVC ran the stage's command (``Running stage`` on its output) or
skipped it (unchanged, or restored from its run cache): the book's compute tables
(``geolib.report.compute``) count only the runs that computed something.

Stages given as patterns (``fnmatch``, e.g. ``'sweep_train@*'``) run the same way, each once
every stage among them upstream of it (at any distance, in DVC's graph) has finished; their
upstream outside the patterns must be up to date (``--single-item`` does not look upstream).

Each lane's processes see ``OMP_NUM_THREADS`` = cores ÷ lanes and ``GEOLIB_JOBS`` = lanes
(oversubscribed OpenMP threads busy-wait and ruin every job's throughput). DVC allows running
stages side by side: a stage's command runs with the repository unlocked, and each ``repro``
records only its own stage in ``dvc.lock``. Results are bitwise reproducible for a given number
of lanes (threads per run) on one machine; another thread count differs in the last digits
(floating-point summation order).
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: which ready stage a free lane takes first (the first matching pattern wins; stages matching
#: none come last, in pipeline order)
PRIORITY = [
    # the data every model reads
    "prepare_corpus",
    "tokenize",
    "tokenize_small",
    # the sweep's many short stages and the chain that reads them, ending in quantization
    # (the longest analysis: ~11 min on one thread), which then runs beside the training below
    "sweep_train@*",
    "sweep_measure",
    "geometry_performance_tables",
    "quantization_tables",
    "forgetting_tables",
    # training, the longest stages first
    "train_*",
    "ladder_train@*",
    "saturation_train@*",
    "length_train@*",
    "saturation_measure",
    "saturation_tables",
    "fetch_pretrained@*",
    # the analyses, longest first (the released models' measures take ~3-6 min each)
    "gradient_energy_pretrained@*",
    "residual_isotropy_tables",
    "gradient_energy_tables",
    "frequency_collapse_tables",
    "scale_residual_isotropy_tables",
    "scale_gradient_energy_tables",
    "scale_frequency_collapse_tables",
    "warmup_gradient_energy_tables",
    # the chapters, the book last (it depends on all of them)
    "*",
]

#: one row per stage run, appended by every ``make all`` / profile run (``--log``)
LOG = Path("logs") / "lanes.csv"
LOG_COLUMNS = [
    "started_utc",
    "stage",
    "exit",
    "wall_s",
    "cpu_s",
    "user_s",
    "system_s",
    "peak_rss_gib",
    "lanes",
    "ran",
]
#: what DVC prints (on stdout) when it runs a stage's command rather than skipping it
RAN_MARK = "Running stage '"


def dvc() -> list[str]:
    """The command line that starts DVC: this interpreter's DVC through
    ``scripts/dvc_fast_lock.py`` (the same DVC, ~3 s less per stage writing ``dvc.lock``)."""
    return [sys.executable, str(ROOT / "scripts" / "dvc_fast_lock.py")]


def stage_names(root: Path = ROOT) -> list[str]:
    """Every stage of the pipeline, ``foreach`` items expanded, in ``dvc.yaml`` order."""
    cmd = [*dvc(), "stage", "list", "--name-only"]
    out = subprocess.run(cmd, cwd=root, check=True, capture_output=True, text=True)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def matching(names: list[str], patterns: list[str]) -> list[str]:
    """The names matching any pattern, in the order of the patterns (each pattern's names in
    pipeline order, a name once); a pattern matching none is an error (a typo would silently
    change the order or the set of stages)."""
    found: list[str] = []
    for p in patterns:
        hits = [n for n in names if fnmatch.fnmatchcase(n, p)]
        if not hits:
            raise SystemExit(f"lanes: no stage matches {p!r}")
        found += [n for n in hits if n not in found]
    return found


def pipeline_graph(root: Path = ROOT) -> tuple[list[str], dict[str, set[str]], set[str]]:
    """``(names in pipeline order, upstream stages of each, stages DVC reports changed)``, from
    DVC's own index and status (``foreach`` items expanded)."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        graph = repo.index.graph  # edges run from a stage to the stages it depends on
        names = [stage.addressing for stage in graph.nodes]
        upstream = {s.addressing: {u.addressing for u in graph.successors(s)} for s in graph.nodes}
        changed = set(repo.status())
    return names, upstream, changed


def to_run(upstream: Mapping[str, set[str]], changed: set[str]) -> set[str]:
    """The changed stages and everything downstream of one (it may have to run once they have;
    if its inputs come out unchanged, DVC skips it)."""
    downstream: dict[str, set[str]] = {n: set() for n in upstream}
    for n, ups in upstream.items():
        for u in ups:
            downstream[u].add(n)
    out, todo = set(), [n for n in changed if n in upstream]
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo += downstream[n]
    return out


def waits_among(upstream: Mapping[str, set[str]], names: list[str]) -> dict[str, set[str]]:
    """For each of ``names``, the others upstream of it at any distance (through stages not in
    ``names`` too): what it must wait for when only ``names`` run."""
    chosen, out = set(names), {}
    for name in names:
        seen, todo = set(), list(upstream.get(name, ()))
        while todo:
            u = todo.pop()
            if u not in seen:
                seen.add(u)
                todo += upstream.get(u, ())
        out[name] = seen & chosen
    return out


def pipeline(lanes: int, root: Path = ROOT, dry: bool = False, log: Path | None = LOG) -> int:
    """The whole pipeline, every stage to run as soon as its upstream is done (``dry``: list
    them in priority order, run nothing)."""
    t0 = time.perf_counter()
    names, upstream, changed = pipeline_graph(root)
    run_set = to_run(upstream, changed)
    order = [n for n in matching(names, PRIORITY) if n in run_set]
    print(
        f"lanes: {len(order)} of {len(names)} stages to run "
        f"({len(changed)} changed; read in {time.perf_counter() - t0:.0f} s)",
        file=sys.stderr,
        flush=True,
    )
    if dry:
        print("\n".join(order))
        return 0
    waits = {n: upstream[n] & run_set for n in order}
    return summary(run(order, lanes, root, waits=waits, log=log), lanes, t0)


def summary(results: list[tuple[str, int, float]], lanes: int, t0: float) -> int:
    """Print how many stages ran in how long and which failed or never started; the exit code."""
    bad = [name for name, code, _ in results if code != 0]
    print(
        f"lanes: {len(results)} stages in {lanes} lanes, {time.perf_counter() - t0:.0f} s"
        + (f"; failed or not started: {bad}" if bad else ""),
        file=sys.stderr,
    )
    return 1 if bad else 0


#: glibc malloc settings of every lane: no ``mmap`` for large blocks and no trimming, so a freed
#: array's pages are reused instead of returned to the kernel and faulted in (zeroed) again on
#: the next allocation. Training already asks for this in-process
#: (``geolib.models.train.keep_freed_memory``); the environment extends it to every process of
#: every stage: analyses, notebooks, DVC. Measured alone on 2 cores, one thread: the smoke
#: frequency-collapse analysis (BCa jackknives over 4,096 token types) 83.7 s -> 49.5 s (system
#: time 44 s -> 6.6 s), its outputs bitwise the same, peak memory +3%. Other allocators ignore
#: these variables.
MALLOC_ENV = {
    "MALLOC_MMAP_MAX_": "0",
    "MALLOC_TRIM_THRESHOLD_": str(64 << 30),
    "MALLOC_TOP_PAD_": str(256 << 20),
}


def lane_env(lanes: int, cores: int | None = None) -> dict[str, str]:
    """The environment of one lane: its share of the cores for torch (OpenMP) threads, and
    :data:`MALLOC_ENV` unless the caller's environment sets those variables itself."""
    threads = max(1, (cores or os.cpu_count() or 1) // lanes)
    return MALLOC_ENV | os.environ | {"OMP_NUM_THREADS": str(threads), "GEOLIB_JOBS": str(lanes)}


def run_measured(
    cmd: list[str], root: Path, env: Mapping[str, str]
) -> tuple[int, os.struct_rusage, bool]:
    """Run ``cmd``; its exit code, resource usage and whether its stdout carried
    :data:`RAN_MARK` (copied through line by line). ``wait4`` reports the child's own usage
    plus that of every descendant it waited for (DVC waits for the stage's command), so CPU
    seconds are the stage's whole process tree; peak memory is the largest single process."""
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, text=True, bufsize=1)
    ran = False
    assert proc.stdout is not None
    for line in proc.stdout:
        ran |= RAN_MARK in line
        sys.stdout.write(line)
        sys.stdout.flush()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage, ran


def append_record(
    path: Path,
    name: str,
    code: int,
    seconds: float,
    usage: os.struct_rusage,
    lanes: int,
    ran: bool,
) -> None:
    """Append one stage's row to the CSV ``path`` (its header first if the file is new; see
    :func:`upgrade_log` for a log from before a column was added)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds))
    row = [
        started,
        name,
        code,
        f"{seconds:.1f}",
        f"{usage.ru_utime + usage.ru_stime:.1f}",
        f"{usage.ru_utime:.1f}",
        f"{usage.ru_stime:.1f}",
        f"{usage.ru_maxrss / 2**20:.3f}",
        lanes,
        int(ran),
    ]
    with path.open("a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(LOG_COLUMNS)
        writer.writerow(row)


def upgrade_log(path: Path) -> None:
    """Bring an existing log ``path`` under :data:`LOG_COLUMNS` before any row is appended: a
    column its header lacks is empty in its old rows (unknown, not guessed); a header with
    columns of its own is refused (not a lanes log: nothing is rewritten)."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open(newline="") as f:
        header = next(csv.reader(f), [])
    if header == LOG_COLUMNS:
        return
    extra = [c for c in header if c not in LOG_COLUMNS]
    if extra:
        raise SystemExit(f"{path}: columns {extra} are not a lanes log's ({LOG_COLUMNS})")
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, LOG_COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


def run(
    names: list[str],
    lanes: int,
    root: Path = ROOT,
    force: bool = False,
    waits: Mapping[str, set[str]] | None = None,
    log: Path | None = None,
) -> list[tuple[str, int, float]]:
    """Reproduce each stage, ``lanes`` at a time (``force``: even if up to date, for timing);
    ``(name, exit code, seconds)`` per stage, in the order of ``names``. A stage starts once every
    stage in ``waits[name]`` (its upstream among ``names``) has ended with exit 0; a free lane
    takes the first such stage in ``names``. After a failure no new stage starts (those running
    finish); the stages never started are reported with exit code -1, a stage whose lane
    failed itself (DVC could not start, its record could not be written) with -2. ``log``: a
    CSV (relative to ``root``) that gets one row per stage run: wall and CPU seconds, peak
    memory."""
    if log is not None and not log.is_absolute():
        log = root / log
    if log is not None:
        upgrade_log(log)  # here, not in a lane's thread: a refusal stops the run before it starts
    waits = {n: set((waits or {}).get(n, ())) for n in names}
    unknown = {u for n in names for u in waits[n]} - set(names)
    if unknown:
        raise ValueError(f"stages wait for stages that are not run: {sorted(unknown)}")
    env = lane_env(lanes)
    pending, done, results = list(names), set(), []
    running = 0
    failed = False
    cond = threading.Condition()

    def one(name: str) -> None:
        nonlocal running, failed
        t0 = time.perf_counter()
        cmd = [*dvc(), "--wait-for-lock", "repro", "--single-item", *(["-f"] * force), name]
        code = -2  # what an error of this thread itself (not of the stage) is reported as
        try:
            code, usage, ran = run_measured(cmd, root, env)
            seconds = time.perf_counter() - t0
            cpu = usage.ru_utime + usage.ru_stime
            print(
                f"lanes: {name}: exit {code}, {seconds:.0f} s "
                f"(CPU {cpu:.0f} s, peak memory {usage.ru_maxrss / 2**20:.2f} GiB)"
                + ("" if ran else "; DVC did not run its command"),
                file=sys.stderr,
                flush=True,
            )
            if log is not None:
                with cond:
                    append_record(log, name, code, seconds, usage, lanes, ran)
        except Exception as e:  # a lane that died silently would leave the others waiting
            print(f"lanes: {name}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            code = code if code != 0 else -2  # ran, but its record was not written
        finally:
            with cond:
                results.append((name, code, time.perf_counter() - t0))
                failed |= code != 0
                if code == 0:
                    done.add(name)
                running -= 1
                cond.notify_all()

    with cond:
        while pending and not failed:
            ready = next((n for n in pending if waits[n] <= done), None)
            if ready is None or running >= lanes:
                if running == 0:  # nothing can ever become ready: a cycle in `waits`
                    raise ValueError(f"stages wait for one another: {pending}")
                cond.wait()
                continue
            pending.remove(ready)
            running += 1
            threading.Thread(target=one, args=(ready,), daemon=True).start()
        while running:
            cond.wait()
    by_name = {r[0]: r for r in results}
    return [by_name.get(n, (n, -1, 0.0)) for n in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="*", help="stage names or fnmatch patterns")
    parser.add_argument("--pipeline", action="store_true", help="the whole pipeline (make all)")
    parser.add_argument("--lanes", type=int, default=2, help="stages at a time (default 2)")
    parser.add_argument(
        "--dry", action="store_true", help="list the stages (in the order they may start)"
    )
    parser.add_argument(
        "--force", action="store_true", help="rerun the matched stages even if up to date"
    )
    parser.add_argument(
        "--log",
        type=Path,
        default=LOG,
        help=f"CSV that gets a row per stage run: wall, CPU seconds, peak memory (default {LOG})",
    )
    args = parser.parse_args(argv)
    if args.lanes < 1:
        parser.error("--lanes must be >= 1")
    if args.pipeline == bool(args.patterns):
        parser.error("give --pipeline or stage patterns (not both)")
    if args.pipeline:
        return pipeline(args.lanes, dry=args.dry, log=args.log)
    names = matching(stage_names(), args.patterns)
    if args.dry:
        print("\n".join(names))
        return 0
    t0 = time.perf_counter()
    waits = waits_among(pipeline_graph()[1], names)
    return summary(
        run(names, args.lanes, force=args.force, waits=waits, log=args.log), args.lanes, t0
    )


if __name__ == "__main__":
    raise SystemExit(main())
