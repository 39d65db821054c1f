"""One command line for the designs of training runs: each design lists its units (runs, or the
sweep's cells) and trains one of them by name, as its DVC stage does.

    python -m geolib.models.designs DESIGN names                 # the runs of a design
    python -m geolib.models.designs DESIGN train NAME            # stage STAGE@NAME
    python -m geolib.models.designs DESIGN --params FILE names   # another parameters file
    python -m geolib.models.designs sweep train CELL --jobs 2    # a cell's points, 2 at a time
    python -m geolib.models.designs sweep train POINT            # one point of the sweep

The designs (:data:`DESIGNS`): ``ladder``, the ladder of model sizes (stage ``ladder_train``);
``replicas``, the seed replicates of the default models (``train_replica``); ``length``, the
training-length study (``length_train``); ``saturation``, claim B6's runs
(``saturation_train``); ``sweep``, Paper B's grid, trained a cell at a time (``sweep_train``:
a cell is one size at one batch size, its points trained one after another, the smaller
budgets branched from the largest), or one point by name (a cluster job). A named run is built
by its design and trained by :func:`~geolib.models.train.train`; a cell is trained by its
design's own ``trainer``. Each design's module is imported only when it is asked for, so that a
stage reaches (and depends on) its own design's code alone: an edit to one design retrains no
other. An edit to this module reruns every training stage, which finds its runs finished and
leaves them (a run's identity is its configuration, data and training code:
:mod:`geolib.models.resume`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

from geolib.config import load_params
from geolib.models import runs
from geolib.models.device import resolve_device
from geolib.models.train import train
from geolib.stage import add_jobs_option

PROG = "python -m geolib.models.designs"


@dataclass(frozen=True)
class Design:
    """A design of runs: its module; what one unit is called (``noun``); the DVC stage that
    trains each (``STAGE@NAME``); and the names, in that module, of ``listed(params)`` (the
    units' names, checked against the stage's ``foreach`` list) and of either ``build`` or
    ``trainer``. ``build(params_path, name)``: one named run's configuration and run folder.
    ``trainer(params_path, name, *, jobs, log, supersede_into)``: trains the unit ``name``
    itself (the sweep's cells)."""

    module: str
    noun: str
    stage: str
    listed: str
    build: str | None = None
    trainer: str | None = None

    def __post_init__(self) -> None:
        if (self.build is None) == (self.trainer is None):
            raise ValueError(f"design of {self.stage}: give build or trainer, not both or none")


DESIGNS: dict[str, Design] = {
    "ladder": Design("geolib.models.ladder", "rung", "ladder_train", "check_listed", "rung"),
    "replicas": Design(
        "geolib.models.replicas", "replicate", "train_replica", "check_listed", "replica"
    ),
    "length": Design("geolib.models.length", "run", "length_train", "check_listed", "named_run"),
    "saturation": Design(
        "geolib.models.grid",
        "run",
        "saturation_train",
        "saturation_listed",
        "saturation_named_run",
    ),
    "sweep": Design(
        "geolib.models.grid", "cell", "sweep_train", "cell_names", trainer="train_unit"
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if not args or args[0] not in DESIGNS:
        given = repr(args[0]) if args else "nothing"
        print(
            f"usage: {PROG} DESIGN ...: DESIGN is one of {sorted(DESIGNS)}, got {given}",
            file=sys.stderr,
        )
        return 2
    design = DESIGNS[args[0]]
    return _command(args[0], design, importlib.import_module(design.module), args[1:])


def _command(design_name: str, design: Design, module: ModuleType, argv: list[str]) -> int:
    """A design's command line: ``names`` prints its units (``listed(params)``); ``train NAME``
    checks the device first (building a configuration may read the tokenizer, which a wrong
    device must not reach), then trains the unit: a named run with
    :func:`~geolib.models.train.train`, on the configuration and folder that
    ``build(params_path, NAME)`` gives, or a cell by the design's ``trainer`` (which takes
    ``--jobs``: runs at once on the cores)."""
    parser = argparse.ArgumentParser(prog=f"{PROG} {design_name}", description=module.__doc__)
    parser.add_argument("--params", default="params.yaml")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("names", help=f"print the {design.noun}s")
    one = sub.add_parser("train", help=f"train one {design.noun} (stage {design.stage}@NAME)")
    one.add_argument("name")
    if design.trainer is not None:
        add_jobs_option(one)
    runs.add_supersede_option(one)
    args = parser.parse_args(argv)
    params = load_params(args.params)
    if args.command == "names":
        print("\n".join(getattr(module, design.listed)(params)))
        return 0
    resolve_device(params.get("common", {}).get("device", "cpu"))
    if design.trainer is not None:
        getattr(module, design.trainer)(
            args.params,
            args.name,
            jobs=args.jobs,
            log=_log,
            supersede_into=args.supersede_into,
        )
        return 0
    assert design.build is not None
    t0 = time.perf_counter()
    cfg, run_dir = getattr(module, design.build)(args.params, args.name)
    _log(f"{args.name}: {cfg.total_steps} steps, {cfg.total_steps * cfg.tokens_per_step:,} tokens")
    train(cfg, run_dir, progress=False, supersede_into=args.supersede_into)
    _log(f"{args.name}: trained in {time.perf_counter() - t0:.0f} s")
    return 0


def _log(message: str) -> None:
    print(message, file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
