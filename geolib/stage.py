"""A stage's entry point: its command line, its section of the parameters file, progress lines
and the summary it ends with. Every ``python -m geolib.<wing>.<module>`` analysis stage uses it:

    def main(argv=None) -> int:
        st = stage(__doc__, "frequency_collapse", argv)
        return st.done(run_stage(st.params))

Outputs are written with :mod:`geolib.files` (atomically).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from geolib.config import stage_params


@dataclass
class Stage:
    """A running stage: ``params`` is its section, ``args`` its parsed command line."""

    section: str
    params: dict[str, Any]
    args: argparse.Namespace
    started: float = field(default_factory=time.perf_counter)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def section_of(self, name: str) -> dict[str, Any]:
        """Another section of the same parameters file (e.g. the sweep a stage reads)."""
        return stage_params(self.args.params, name)

    def done(self, summary: Mapping[str, Any] | None = None, *, hide: tuple[str, ...] = ()) -> int:
        """Print ``summary`` (without the ``hide`` keys) as JSON on stdout and the stage's time on
        stderr; the exit code 0."""
        if summary is not None:
            print(json.dumps({k: v for k, v in summary.items() if k not in hide}, indent=1))
        print(f"{self.section}: {self.elapsed:.0f} s", file=sys.stderr)
        return 0


def stage(
    doc: str,
    section: str,
    argv: list[str] | None = None,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> Stage:
    """Parse ``--params`` (default ``params.yaml``), ``--section`` (default ``section``) and the
    options ``add_arguments`` adds; read the section (an error names the file and section)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--section", default=section)
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    return Stage(args.section, stage_params(args.params, args.section), args)


def progress_line(what: str, done: int, total: int, elapsed_s: float) -> str:
    """``"<what>: 3/32 done, 1.2 min elapsed, ETA 11.6 min"`` at the pace so far."""
    if total < 1 or not 0 <= done <= total:
        raise ValueError(f"done {done} of total {total}")
    eta = f"{elapsed_s / done * (total - done) / 60:.1f} min" if done else "?"
    return f"{what}: {done}/{total} done, {elapsed_s / 60:.1f} min elapsed, ETA {eta}"


def add_jobs_option(parser: argparse.ArgumentParser) -> None:
    """``--jobs N``: parallel runs sharing the cores (default ``$GEOLIB_JOBS`` or 1); each run
    then takes cores ÷ N torch threads (``geolib.models.grid.threads_for``)."""
    parser.add_argument(
        "--jobs",
        type=int,
        default=int(os.environ.get("GEOLIB_JOBS", "1")),
        help="parallel runs sharing the cores (default: $GEOLIB_JOBS or 1)",
    )
