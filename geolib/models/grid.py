"""Paper B's hyperparameter grid in miniature: points, their training configurations, where
their runs and measures live.

A *point* fixes model size, batch size, weight decay, peak learning rate (named at a reference
batch size and scaled with the batch: :class:`LrScaling`), the final learning rate (as a
fraction of the peak) and the seed; its name spells them out
and the token budget it trains for (``S-b32-wd2-lr0.004-f0.1-s0-tD``) so that a DVC ``foreach``
stage per name reruns exactly the points whose values change. Every point of a budget trains on
the same number of tokens (``budgets``: a multiple of ``base.token_budget``, each model annealed
to the end of its own schedule): batch size therefore also sets the number of steps. On the
warmup-stable-decay schedule a point's smaller budgets are cooldown branches of its largest
(:func:`branch_plan`): each starts from the largest run's checkpoint where its own decay begins,
and ends bitwise as if trained from step 0, at the cost of its decay alone. The grid
is a full factorial, plus one factor at a time from a centre point, plus seed replicates of the
centre, each at every budget (section ``sweep`` of ``params.yaml``): the same design at D and at
2D tokens, so a verdict can be read twice and checked for its dependence on training length.
The saturation design (claim B6) is here too: its runs differ only in the block layout.

    python -m geolib.models.grid points                     # the expansion of the factors
    python -m geolib.models.grid points --cells             # the cells of the expansion
    python -m geolib.models.designs sweep train CELL        # stage sweep_train@CELL
    python -m geolib.models.designs sweep train POINT       # one point (cluster jobs, by hand)
    python -m geolib.models.designs saturation names        # the saturation runs
    python -m geolib.models.designs saturation train NAME   # stage saturation_train@NAME

A *cell* is one size at one batch size (``S-b32``): its points train the same number of steps at
the same cost, and one stage trains them one after another into ``<run_root>/<cell>/<point>``.
One stage per cell, not per point: each stage pays DVC's and Python/torch's start-up (~12 s on
this machine) once, against ~20-30 s of training per miniature point.

Training writes the run folder only. Measuring a point is :mod:`geolib.experiments.sweep`, a
saturation run :mod:`geolib.experiments.saturation`; this module imports no measurement code, so
an edit to one never retrains a model.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from geolib.config import checked_number, load_params
from geolib.models.branch import Branch, branch_problem
from geolib.models.train import train
from geolib.models.train_config import TrainConfig, lr_at, merged_config

#: fewest optimizer steps a point may train (fewer and W barely leaves its initialisation)
MIN_STEPS = 10
#: what a measured point writes in its measures folder; its presence marks the point done
MEASURES = "measures.json"
#: the per-window losses of a measured point (paired comparisons read them)
SEQUENCE_LOSSES = "sequence_losses.npz"


FACTORS = ("size", "batch_size", "weight_decay", "lr", "final_lr_ratio", "seed")


_NAME = re.compile(
    r"^(?P<size>[A-Za-z]\w*)-b(?P<batch_size>\d+)-wd(?P<weight_decay>[0-9.e+-]+)"
    r"-lr(?P<lr>[0-9.e+-]+)-f(?P<final_lr_ratio>[0-9.e+-]+)-s(?P<seed>\d+)-t(?P<budget>\w+)$"
)
#: a budget's label: ``D``, ``2D``, … (a multiple of ``base.token_budget``)
_BUDGET = re.compile(r"[0-9]*D")


@dataclass(frozen=True, order=True)
class Point:
    """One model of the sweep."""

    size: str
    batch_size: int
    weight_decay: float
    lr: float
    final_lr_ratio: float
    seed: int
    budget: str = "D"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z]\w*", self.size):
            raise ValueError(f"size must be a name like S or M, got {self.size!r}")
        if not _BUDGET.fullmatch(self.budget):
            raise ValueError(f"budget must be a label like D or 2D, got {self.budget!r}")
        if self.batch_size < 1 or self.seed < 0:
            raise ValueError(f"bad batch_size {self.batch_size} or seed {self.seed}")
        if self.lr <= 0 or self.weight_decay < 0 or not 0 <= self.final_lr_ratio <= 1:
            raise ValueError(f"bad lr, weight_decay or final_lr_ratio in {self}")

    @property
    def name(self) -> str:
        return (
            f"{self.size}-b{self.batch_size}-wd{self.weight_decay:g}-lr{self.lr:g}"
            f"-f{self.final_lr_ratio:g}-s{self.seed}-t{self.budget}"
        )

    @classmethod
    def from_name(cls, name: str) -> Point:
        m = _NAME.match(name)
        if not m:
            raise ValueError(
                f"not a sweep point name: {name!r} (e.g. S-b32-wd2-lr0.004-f0.1-s0-tD)"
            )
        g = m.groupdict()
        point = cls(
            g["size"],
            int(g["batch_size"]),
            float(g["weight_decay"]),
            float(g["lr"]),
            float(g["final_lr_ratio"]),
            int(g["seed"]),
            g["budget"],
        )
        if point.name != name:
            raise ValueError(f"{name!r} is not in canonical form; write {point.name!r}")
        return point

    @property
    def cell(self) -> str:
        """The training stage's group: size and batch size (``S-b32``)."""
        return f"{self.size}-b{self.batch_size}"

    @property
    def design_point(self) -> str:
        """The name without the budget: the same configuration at every budget."""
        return self.name.rsplit("-t", 1)[0]

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def expand(spec: Mapping[str, Any]) -> list[Point]:
    """The points of a ``sweep`` section, in order, at each budget of ``budgets`` in turn: the
    factorial, then one factor at a time from the centre (for each size in ``vary_sizes``), then
    the centre's seed replicates.

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
    points = [replace(p, budget=b) for b in budget_multiples(spec) for p in points]
    names = [p.name for p in points]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"sweep points listed more than once: {dupes}")
    undefined = sorted({p.size for p in points} - set(sizes))
    if sizes and undefined:
        raise KeyError(f"sweep.sizes does not define {undefined}")
    return points


def budget_multiples(spec: Mapping[str, Any]) -> dict[str, int]:
    """``spec["budgets"]``: each budget's label (``D``, ``2D``, …) → its multiple of
    ``base.token_budget`` (absent: the one budget ``D``), smallest first. The label must spell its
    multiple."""
    budgets = spec.get("budgets") or {"D": 1}
    if not isinstance(budgets, Mapping):
        raise ValueError(f"sweep.budgets must map labels to multiples, got {budgets!r}")
    out = {}
    for label, k in budgets.items():
        k = checked_number(f"sweep.budgets.{label}", k, int, low=1)
        if label != ("D" if k == 1 else f"{k}D"):
            raise ValueError(
                f"sweep.budgets: the budget {k} x token_budget is labelled {k}D, not {label!r}"
            )
        out[str(label)] = k
    return dict(sorted(out.items(), key=lambda item: item[1]))  # smallest budget first


@dataclass(frozen=True)
class LrScaling:
    """How a point's peak learning rate follows its batch size: the named ``lr`` holds at
    ``reference_batch`` and scales as ``(batch / reference_batch) ** exponent`` (0.5: the
    square-root rule for Adam-type optimizers, which keeps the update's noise scale; 0: none)."""

    reference_batch: int = 1
    exponent: float = 0.0

    @classmethod
    def from_params(cls, spec: Mapping[str, Any] | None) -> LrScaling:
        """From ``sweep.base.lr_scaling`` (absent or null: no scaling)."""
        if spec is None:
            return cls()
        w = "sweep.base.lr_scaling."
        unknown = sorted(set(spec) - {"reference_batch", "exponent"})
        if unknown:
            raise KeyError(f"{w[:-1]}: unknown key(s) {unknown}; keys: reference_batch, exponent")
        return cls(
            checked_number(w + "reference_batch", spec["reference_batch"], int, low=1),
            checked_number(w + "exponent", spec["exponent"], float, low=0, high=1),
        )

    def peak_lr(self, lr: float, batch_size: int) -> float:
        """The peak learning rate at ``batch_size`` of a point named with ``lr``."""
        return lr * (batch_size / self.reference_batch) ** self.exponent


def point_config(params: Mapping[str, Any], point: Point) -> TrainConfig:
    """The training configuration of ``point``: ``common`` (seed, device), the ``train``
    section, ``sweep.base``, the size's model, then the point's factors, its peak learning rate
    scaled with its batch size by ``sweep.base.lr_scaling`` (:class:`LrScaling`)."""
    sweep = params["sweep"]
    base = dict(sweep["base"])
    w = "sweep.base."
    multiples = budget_multiples(sweep)
    if point.budget not in multiples:
        raise KeyError(f"{point.name}: sweep.budgets has no budget {point.budget!r}")
    unit = checked_number(w + "token_budget", base.pop("token_budget"), int, low=1)
    budget = unit * multiples[point.budget]
    warmup = checked_number(
        w + "warmup_fraction", base.pop("warmup_fraction"), float, low=0, high=1
    )
    decay = base.pop("decay_fraction", None)
    if decay is not None:
        decay = checked_number(w + "decay_fraction", decay, float, low=0, high=1, low_open=True)
    log_max = checked_number(w + "checkpoint_log_max", base.pop("checkpoint_log_max"), int, low=0)
    scaling = LrScaling.from_params(base.pop("lr_scaling", None))
    if point.size not in sweep["sizes"]:
        raise KeyError(f"sweep.sizes has no size {point.size!r}")
    merged = merged_config(
        params, params["train"], {**base, "model": dict(sweep["sizes"][point.size])}
    )
    tokens_per_step = point.batch_size * int(merged["seq_len"])
    steps = budget // tokens_per_step
    # one warmup for every budget of a point (the smallest budget's share): a branch shares it
    first_steps = unit * min(multiples.values()) // tokens_per_step
    if steps < MIN_STEPS:
        raise ValueError(
            f"{point.name}: {budget} tokens make only {steps} steps at batch "
            f"{point.batch_size} × seq_len {merged['seq_len']} (at least {MIN_STEPS} needed)"
        )
    merged.update(
        batch_size=point.batch_size,
        weight_decay=point.weight_decay,
        lr=scaling.peak_lr(point.lr, point.batch_size),
        min_lr_ratio=point.final_lr_ratio,
        seed=point.seed,
        total_steps=steps,
        warmup_steps=max(1, round(warmup * first_steps)),
        checkpoint_every=0,
        log_max=log_max,
        eval_interval=steps,
    )
    if (merged.get("schedule") == "wsd") != (decay is not None):
        raise ValueError(
            f"{w}decay_fraction (the share of each run's steps in its final decay) goes with "
            f"schedule wsd, and only with it (schedule {merged.get('schedule')!r})"
        )
    if decay is not None:
        merged["decay_steps"] = max(1, round(decay * steps))
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
            f"geolib.models.grid points`): listed but not designed {extra}, designed but "
            f"not listed {absent}" + ("" if extra or absent else "; the order differs")
        )
    return names


def cells(names: list[str]) -> dict[str, list[str]]:
    """The points ``names`` grouped by :attr:`Point.cell`, cells and points in listed order."""
    out: dict[str, list[str]] = {}
    for name in names:
        out.setdefault(Point.from_name(name).cell, []).append(name)
    return out


def cell_names(params: Mapping[str, Any]) -> list[str]:
    """The cells' names from the whole parameters (:func:`check_cells_listed`): the units the
    design command line trains (:mod:`geolib.models.designs`, stage ``sweep_train@CELL``)."""
    return list(check_cells_listed(params["sweep"]))


def check_cells_listed(
    spec: Mapping[str, Any], points: list[str] | None = None
) -> dict[str, list[str]]:
    """The cells of the listed points (``points``: those :func:`check_points_listed` already
    returned); error naming the difference if ``spec["cells"]`` (the training stages' names)
    differs."""
    found = cells(check_points_listed(spec) if points is None else points)
    listed = list(spec.get("cells", []))
    if listed != list(found):
        raise ValueError(
            f"sweep.cells must be {list(found)} (the points' sizes and batch sizes, in the "
            f"order of sweep.points), got {listed}"
        )
    return found


def point_dir(spec: Mapping[str, Any], name: str) -> Path:
    """``<run_root>/<cell>/<name>``: the run folder of the sweep point ``name``."""
    return Path(spec["run_root"]) / Point.from_name(name).cell / name


def threads_for(jobs: int, cores: int | None = None) -> int:
    """Torch threads for one of ``jobs`` parallel runs: the cores split evenly, at least one
    (oversubscribed OpenMP threads busy-wait and ruin every job's throughput)."""
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    cores = cores or os.cpu_count() or 1
    return max(1, cores // jobs)


def measures_path(measures_root: str | Path, name: str) -> Path:
    """``<measures_root>/<name>/measures.json``: the measures of one point."""
    return Path(measures_root) / name / MEASURES


def check_grid(params: Mapping[str, Any]) -> list[TrainConfig]:
    """Every point's training configuration, in order: the listed points must equal the
    design and every point must be trainable (enough steps at its batch size, valid numbers),
    checked when a profile or parameters file is read rather than when a stage runs."""
    check_cells_listed(params["sweep"])
    return [point_config(params, p) for p in expand(params["sweep"])]


def branch_plan(params: Mapping[str, Any], names: list[str]) -> dict[str, tuple[str, int]]:
    """The points of ``names`` that start from another point's checkpoint: name → (the point
    it branches from, the step). Among the budgets of one design point, the largest trains
    from step 0 and each smaller one branches from it where its own decay begins, wherever
    that changes no number (:func:`geolib.models.branch.branch_problem`: a warmup-stable-decay
    schedule whose stable phases contain the step). A point not in the plan trains from 0."""
    groups: dict[str, list[Point]] = {}
    for name in names:
        point = Point.from_name(name)
        groups.setdefault(point.design_point, []).append(point)
    multiples = budget_multiples(params["sweep"])
    plan = {}
    for points in groups.values():
        parent = max(points, key=lambda p: multiples[p.budget])
        theirs = point_config(params, parent).to_dict()
        for point in points:
            cfg = point_config(params, point)
            if point == parent or cfg.decay_steps is None:
                continue
            step = cfg.total_steps - cfg.decay_steps
            if branch_problem(theirs, cfg, step) is None:
                plan[point.name] = (parent.name, step)
    return plan


def train_point(
    params_path: str | Path,
    name: str,
    *,
    jobs: int = 1,
    supersede_into: str | None = None,
    branch: Branch | None = None,
    max_steps: int | None = None,
    also_checkpoint: tuple[int, ...] = (),
) -> dict[str, Any]:
    """Train the sweep point ``name`` into :func:`point_dir` (resuming if interrupted, nothing
    if finished); return its ``run.json``. ``jobs`` parallel runs share the cores;
    ``supersede_into``, ``branch``, ``max_steps`` and ``also_checkpoint`` as in
    :func:`geolib.models.train.train`."""
    params = load_params(params_path)
    names = check_points_listed(params["sweep"])
    if name not in names:
        raise KeyError(f"{name!r} is not a point of the sweep; points: {names}")
    cfg = point_config(params, Point.from_name(name))
    cfg.num_threads = threads_for(jobs)
    return train(
        cfg,
        point_dir(params["sweep"], name),
        progress=False,
        supersede_into=supersede_into,
        branch=branch,
        max_steps=max_steps,
        also_checkpoint=also_checkpoint,
    )


def train_unit(
    params_path: str | Path,
    name: str,
    *,
    jobs: int = 1,
    log=print,
    supersede_into: str | None = None,
) -> list[str]:
    """Train ``name``, a cell (stage ``sweep_train@<cell>``: its points one after another,
    :func:`_train_cell`) or one point (a cluster job, or by hand), each as :func:`train_point`;
    return the points trained. The sweep's ``trainer`` on the design command line
    (:mod:`geolib.models.designs`). A point's job reads only ``sweep.points``; a cell's also
    checks ``sweep.cells``, the stages' names."""
    params = load_params(params_path)
    points = check_points_listed(params["sweep"])
    common = {"jobs": jobs, "supersede_into": supersede_into}
    if name in cells(points):
        group = check_cells_listed(params["sweep"], points)[name]
        _train_cell(params_path, params, group, log, common)
        return group
    if name not in points:
        raise KeyError(
            f"{name!r} is neither a cell nor a point of the sweep; cells: {list(cells(points))}"
        )
    t0 = time.perf_counter()
    train_point(params_path, name, **common)
    log(f"{name}: trained in {time.perf_counter() - t0:.0f} s")
    return [name]


def _train_cell(
    params_path: str | Path,
    params: Mapping[str, Any],
    names: list[str],
    log: Callable[[str], Any],
    common: Mapping[str, Any],
) -> None:
    """Train the points ``names`` of one cell in listed order. A point that branches
    (:func:`branch_plan`) trains when the point it branches from has reached the branch's
    step, which then goes on to its end."""
    plan = branch_plan(params, names)
    kids: dict[str, list[tuple[int, str]]] = {}
    for kid, (parent, step) in plan.items():
        kids.setdefault(parent, []).append((step, kid))
    spec = params["sweep"]
    for name in names:
        if name in plan:
            continue  # trained from its parent's checkpoint, below
        t0 = time.perf_counter()
        stops = sorted(kids.get(name, []))
        also = tuple(step for step, _ in stops)
        for step, kid in stops:
            train_point(params_path, name, max_steps=step, also_checkpoint=also, **common)
            t1 = time.perf_counter()
            train_point(params_path, kid, branch=Branch(point_dir(spec, name), step), **common)
            took = time.perf_counter() - t1
            t0 += took
            log(f"{kid}: trained in {took:.0f} s (from {name} at step {step})")
        train_point(params_path, name, also_checkpoint=also, **common)
        log(f"{name}: trained in {time.perf_counter() - t0:.0f} s")


# ----------------------------------------------------------------------------- saturation
# Paper B's saturation design (claim B6): GPT-NeoX models that differ only in the block layout
# (``parallel_residual``), at a few widths and seeds, trained long with dense checkpoints.


@dataclass(frozen=True)
class Run:
    """One run of the saturation design: a block layout, a width, a seed."""

    layout: str
    width: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.layout}-{self.width}-s{self.seed}"

    @classmethod
    def from_name(cls, name: str) -> Run:
        parts = name.rsplit("-", 2)
        if len(parts) != 3 or not parts[2].startswith("s") or not parts[2][1:].isdigit():
            raise ValueError(f"not a saturation run name: {name!r} (layout-width-s<seed>)")
        return cls(parts[0], parts[1], int(parts[2][1:]))


def saturation_runs(spec: Mapping[str, Any]) -> list[Run]:
    """Every layout × width × seed of the design, in that order."""
    return [
        Run(layout, width, int(seed))
        for width in spec["widths"]
        for seed in spec["seeds"]
        for layout in spec["layouts"]
    ]


def check_names_listed(spec: Mapping[str, Any]) -> list[str]:
    """The design's run names; error if ``spec["names"]`` (the DVC foreach list) differs."""
    names = [r.name for r in saturation_runs(spec)]
    if list(spec.get("names", [])) != names:
        raise ValueError(
            f"saturation.names must equal the design's expansion (the list to write there): {names}"
        )
    return names


def saturation_config(params: Mapping[str, Any], run: Run) -> TrainConfig:
    """The TrainConfig of one run: ``common`` (device) < ``train`` < ``saturation.train`` <
    the run's model."""
    spec = params["saturation"]
    if run.layout not in spec["layouts"] or run.width not in spec["widths"]:
        raise KeyError(f"{run.name}: unknown layout or width; design: {check_names_listed(spec)}")
    p = merged_config(params, params["train"], spec["train"])
    p["model"] = {
        **params["train"]["model"],
        "family": "pythia",
        "n_layers": int(spec["n_layers"]),
        "parallel_residual": bool(spec["layouts"][run.layout]),
        **spec["widths"][run.width],
    }
    p["seed"] = run.seed
    return TrainConfig.from_params(p)


def saturation_run(params: Mapping[str, Any], name: str) -> tuple[TrainConfig, Path]:
    """The configuration and run folder of the saturation run ``name`` (error if not listed)."""
    spec = params["saturation"]
    names = check_names_listed(spec)
    if name not in names:
        raise KeyError(f"{name!r} is not a saturation run; runs: {names}")
    return saturation_config(params, Run.from_name(name)), Path(spec["run_root"]) / name


def saturation_listed(params: Mapping[str, Any]) -> list[str]:
    """The saturation runs' names from the whole parameters (:func:`check_names_listed`)."""
    return check_names_listed(params["saturation"])


def saturation_named_run(params_path: str | Path, name: str) -> tuple[TrainConfig, Path]:
    """:func:`saturation_run` from a parameters file: the design command line's ``build``
    (:mod:`geolib.models.designs`, stage ``saturation_train@NAME``)."""
    return saturation_run(load_params(params_path), name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m geolib.models.grid", description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    sub = parser.add_subparsers(dest="command", required=True)
    points = sub.add_parser("points", help="print the expansion of the sweep's factors")
    points.add_argument("--bare", action="store_true", help="names only, one per line")
    points.add_argument(
        "--cells", action="store_true", help="the cells (training stages), one per line"
    )
    args = parser.parse_args(argv)
    params = load_params(args.params)
    check_grid(params)  # every point trainable at its budget, before anything runs
    if args.cells:
        print("\n".join(cells([p.name for p in expand(params["sweep"])])))
    else:
        for p in expand(params["sweep"]):
            print(p.name if args.bare else f"    - {p.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
