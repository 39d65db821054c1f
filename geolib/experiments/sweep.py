"""Paper B's hyperparameter sweep in miniature: grid points, their runs, progress.

    python -m geolib.experiments.sweep points                  # the expansion of params.yaml's factors
    python -m geolib.experiments.sweep run POINT [--jobs N]    # train one point, then measure it
    python -m geolib.experiments.sweep status                  # runs done / total, elapsed, ETA

A *point* fixes model size, batch size, weight decay, peak learning rate, the final learning
rate (as a fraction of the peak) and the seed; its name spells them out
(``S-b32-wd2-lr0.004-f0.1-s0``) so that a DVC ``foreach`` stage per name reruns exactly the
points whose values change. Every point trains on the same number of tokens (``token_budget``):
batch size therefore also sets the number of steps. The grid is a full factorial, plus one
factor at a time from a centre point, plus seed replicates of the centre (section ``sweep`` of
``params.yaml``). Measuring a trained point is :mod:`geolib.experiments.sweep_measure`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from geolib.models import runs
from geolib.config import deep_update, load_params
from geolib.models.train import TrainConfig, lr_at

FACTORS = ("size", "batch_size", "weight_decay", "lr", "final_lr_ratio", "seed")
#: What a measured point writes beside its run (:mod:`geolib.experiments.sweep_measure`); its presence
#: marks the point done.
MEASURES = "measures.json"
_NAME = re.compile(
    r"^(?P<size>[A-Za-z]\w*)-b(?P<batch_size>\d+)-wd(?P<weight_decay>[0-9.e+-]+)"
    r"-lr(?P<lr>[0-9.e+-]+)-f(?P<final_lr_ratio>[0-9.e+-]+)-s(?P<seed>\d+)$"
)


@dataclass(frozen=True, order=True)
class Point:
    """One model of the sweep."""

    size: str
    batch_size: int
    weight_decay: float
    lr: float
    final_lr_ratio: float
    seed: int

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z]\w*", self.size):
            raise ValueError(f"size must be a name like S or M, got {self.size!r}")
        if self.batch_size < 1 or self.seed < 0:
            raise ValueError(f"bad batch_size {self.batch_size} or seed {self.seed}")
        if self.lr <= 0 or self.weight_decay < 0 or not 0 <= self.final_lr_ratio <= 1:
            raise ValueError(f"bad lr, weight_decay or final_lr_ratio in {self}")

    @property
    def name(self) -> str:
        return (
            f"{self.size}-b{self.batch_size}-wd{self.weight_decay:g}-lr{self.lr:g}"
            f"-f{self.final_lr_ratio:g}-s{self.seed}"
        )

    @classmethod
    def from_name(cls, name: str) -> Point:
        m = _NAME.match(name)
        if not m:
            raise ValueError(f"not a sweep point name: {name!r} (e.g. S-b32-wd2-lr0.004-f0.1-s0)")
        g = m.groupdict()
        point = cls(
            g["size"],
            int(g["batch_size"]),
            float(g["weight_decay"]),
            float(g["lr"]),
            float(g["final_lr_ratio"]),
            int(g["seed"]),
        )
        if point.name != name:
            raise ValueError(f"{name!r} is not in canonical form; write {point.name!r}")
        return point

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def expand(spec: Mapping[str, Any]) -> list[Point]:
    """The points of a ``sweep`` section, in order: the factorial, then one factor at a time
    from the centre (for each size in ``vary_sizes``), then the centre's seed replicates.

    Duplicates are an error (a point listed twice would be one run counted twice).
    """
    factorial = spec["factorial"]
    missing = [f for f in FACTORS if f not in factorial]
    if missing:
        raise KeyError(f"sweep.factorial lacks the factor(s) {missing}")
    unknown = sorted(set(factorial) - set(FACTORS))
    if unknown:
        raise KeyError(f"sweep.factorial: unknown factor(s) {unknown}; factors: {FACTORS}")
    sizes = spec.get("sizes", {})
    points = [Point(*values) for values in itertools.product(*(factorial[f] for f in FACTORS))]
    center = dict(spec.get("center") or {})
    for size in spec.get("vary_sizes", []):
        for factor, levels in (spec.get("vary") or {}).items():
            if factor not in FACTORS or factor == "size":
                raise KeyError(f"sweep.vary: {factor!r} is not a factor to vary")
            points += [Point(**{**center, "size": size, factor: v}) for v in levels]
        points += [
            Point(**{**center, "size": size, "seed": s}) for s in spec.get("replicate_seeds", [])
        ]
    names = [p.name for p in points]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"sweep points listed more than once: {dupes}")
    undefined = sorted({p.size for p in points} - set(sizes))
    if sizes and undefined:
        raise KeyError(f"sweep.sizes does not define {undefined}")
    return points


def point_config(params: Mapping[str, Any], point: Point) -> TrainConfig:
    """The training configuration of ``point``: ``common`` (seed, device), the ``train``
    section, ``sweep.base``, the size's model, then the point's factors."""
    sweep = params["sweep"]
    base = dict(sweep["base"])
    budget, warmup = int(base.pop("token_budget")), float(base.pop("warmup_fraction"))
    log_max = int(base.pop("checkpoint_log_max"))
    if point.size not in sweep["sizes"]:
        raise KeyError(f"sweep.sizes has no size {point.size!r}")
    names = {f.name for f in fields(TrainConfig)}
    merged = {k: v for k, v in params.get("common", {}).items() if k in names}
    merged = deep_update(merged, params["train"])
    merged = deep_update(merged, {**base, "model": dict(sweep["sizes"][point.size])})
    steps = budget // (point.batch_size * int(merged["seq_len"]))
    if steps < 10:
        raise ValueError(f"{point.name}: {budget} tokens make only {steps} steps")
    merged.update(
        batch_size=point.batch_size,
        weight_decay=point.weight_decay,
        lr=point.lr,
        min_lr_ratio=point.final_lr_ratio,
        seed=point.seed,
        total_steps=steps,
        warmup_steps=max(1, round(warmup * steps)),
        checkpoint_every=0,
        log_max=log_max,
        eval_interval=steps,
    )
    return TrainConfig.from_params(merged)


def decay_exponent(cfg: TrainConfig) -> float:
    """Σ_t lr_t · wd over the run: decoupled weight decay alone shrinks a weight by
    ``exp(−decay_exponent)``, so weight decay can act only where this is of order 1 or more."""
    return cfg.weight_decay * sum(lr_at(t, cfg) for t in range(1, cfg.total_steps + 1))


def check_points_listed(spec: Mapping[str, Any]) -> list[str]:
    """The expansion's names; error naming the difference if ``spec["points"]`` differs."""
    names = [p.name for p in expand(spec)]
    listed = list(spec.get("points", []))
    if listed != names:
        extra, absent = sorted(set(listed) - set(names)), sorted(set(names) - set(listed))
        raise ValueError(
            "sweep.points differs from the expansion of the factors (run `python -m "
            f"geolib.experiments.sweep points`): listed but not designed {extra}, designed but not listed "
            f"{absent}" + ("" if extra or absent else "; the order differs")
        )
    return names


# ----------------------------------------------------------------------------- running


def threads_for(jobs: int, cores: int | None = None) -> int:
    """Torch threads for one of ``jobs`` parallel runs: the cores split evenly, at least one
    (oversubscribed OpenMP threads busy-wait and ruin every job's throughput)."""
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    cores = cores or os.cpu_count() or 1
    return max(1, cores // jobs)


def measures_path(run_root: str | Path, name: str) -> Path:
    """``<run_root>/<name>/measures.json``: the measures of one point."""
    return Path(run_root) / name / MEASURES


def status(run_root: str | Path, names: Sequence[str], now: float | None = None) -> dict[str, Any]:
    """Sweep progress from the run directories: done / total, elapsed since the first measured
    run started, and the ETA at the pace so far (elapsed ÷ done, per remaining run), which
    counts process start-up and parallel jobs as they really went."""
    done, starts = 0, []
    for name in names:
        measured = measures_path(run_root, name)
        if measured.is_file():
            done += 1
            starts.append(json.loads(measured.read_text())["timing"]["started"])
    elapsed = (time.time() if now is None else now) - min(starts) if starts else 0.0
    return {
        "done": done,
        "total": len(names),
        "elapsed_s": elapsed,
        "eta_s": elapsed / done * (len(names) - done) if done else None,
    }


def format_status(s: Mapping[str, Any]) -> str:
    eta = "?" if s["eta_s"] is None else f"{s['eta_s'] / 60:.1f} min"
    return (
        f"sweep: {s['done']}/{s['total']} runs done, {s['elapsed_s'] / 60:.1f} min elapsed, "
        f"ETA {eta}"
    )


def run_point(params_path: str | Path, name: str, *, jobs: int = 1) -> dict[str, Any]:
    """Train ``name`` (resuming if interrupted, nothing if finished) and measure it; return
    the measures (also written to ``<run_root>/<name>/measures.json``)."""
    from geolib.experiments.sweep_measure import measure_run
    from geolib.models.train import train

    params = load_params(params_path)
    spec = params["sweep"]
    names = check_points_listed(spec)
    if name not in names:
        raise KeyError(f"{name!r} is not a point of the sweep; points: {names}")
    point = Point.from_name(name)
    cfg = point_config(params, point)
    cfg.num_threads = threads_for(jobs)
    run_dir = Path(spec["run_root"]) / name
    started = time.time()
    summary = train(cfg, run_dir, progress=False)
    measures = measure_run(run_dir, cfg, spec["measure"])
    measures.update(
        point=point.as_dict(),
        name=name,
        steps=cfg.total_steps,
        tokens=summary["tokens"],
        params=summary["params"],
        decay_exponent=decay_exponent(cfg),
        timing={"started": started, "seconds": time.time() - started, "jobs": jobs},
    )
    text = json.dumps(measures, indent=1) + "\n"
    runs.write_text_atomic(measures_path(spec["run_root"], name), text)
    print(format_status(status(spec["run_root"], names)), file=sys.stderr)
    return measures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m geolib.experiments.sweep", description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    sub = parser.add_subparsers(dest="command", required=True)
    points = sub.add_parser("points", help="print the expansion of the sweep's factors")
    points.add_argument("--bare", action="store_true", help="names only, one per line")
    run = sub.add_parser("run", help="train and measure one point")
    run.add_argument("point")
    run.add_argument(
        "--jobs",
        type=int,
        default=int(os.environ.get("GEOLIB_JOBS", "1")),
        help="parallel runs sharing the cores (default: $GEOLIB_JOBS or 1)",
    )
    sub.add_parser("status", help="runs done / total, elapsed, ETA")
    args = parser.parse_args(argv)
    spec = load_params(args.params)["sweep"]
    if args.command == "points":
        for p in expand(spec):
            print(p.name if args.bare else f"    - {p.name}")
    elif args.command == "run":
        run_point(args.params, args.point, jobs=args.jobs)
    else:
        print(format_status(status(spec["run_root"], check_points_listed(spec))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
