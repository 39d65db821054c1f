"""One command line for the designs of named training runs: each design lists its runs and
trains one of them by name, as its DVC stage does.

    python -m geolib.models.designs DESIGN names                 # the runs of a design
    python -m geolib.models.designs DESIGN train NAME            # stage STAGE@NAME
    python -m geolib.models.designs DESIGN --params FILE names   # another parameters file

The designs (:data:`DESIGNS`): ``ladder``, the ladder of model sizes (stage ``ladder_train``);
``replicas``, the seed replicates of the default models (``train_replica``); ``length``, the
training-length study (``length_train``); ``saturation``, claim B6's runs
(``saturation_train``). Each design's module is imported only when it is asked for, so that a
stage reaches (and depends on) its own design's code alone: an edit to one design retrains no
other. The sweep keeps :mod:`geolib.models.grid`'s command line: a stage trains a cell of
points, not one named run.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from geolib.models.train import named_runs_main

PROG = "python -m geolib.models.designs"


@dataclass(frozen=True)
class Design:
    """A design of named runs: its module; what one run is called (``noun``); the DVC stage that
    trains each (``STAGE@NAME``); and the names, in that module, of ``listed(params)`` (its run
    names, checked against the stage's ``foreach`` list) and ``build(params_path, name)`` (one
    run's configuration and run folder)."""

    module: str
    noun: str
    stage: str
    listed: str
    build: str


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
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in DESIGNS:
        given = repr(args[0]) if args else "nothing"
        print(f"usage: {PROG} DESIGN ...: DESIGN is one of {sorted(DESIGNS)}, got {given}")
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    design = DESIGNS[args[0]]
    module = importlib.import_module(design.module)
    return named_runs_main(
        args[1:],
        prog=f"{PROG} {args[0]}",
        description=module.__doc__,
        noun=design.noun,
        stage=design.stage,
        listed=getattr(module, design.listed),
        build=getattr(module, design.build),
    )


if __name__ == "__main__":
    raise SystemExit(main())
