"""The ``geolib`` command (``python -m geolib`` alike): ``geolib measure MODEL …`` measures the
geometry of any model (:mod:`geolib.experiments.measure_model`)."""

from __future__ import annotations

import sys
from collections.abc import Callable


def measure(argv: list[str]) -> int:
    """``geolib measure``: the measurement (an experiment) and its figure (the report's)."""
    from geolib.experiments import measure_model
    from geolib.report.measure_figure import profiles_figure

    return measure_model.main(argv, draw=profiles_figure)


#: subcommand → what runs it (imported when it runs: ``geolib --help`` loads no torch)
COMMANDS: dict[str, Callable[[list[str]], int]] = {"measure": measure}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in COMMANDS:
        given = f"unknown command {argv[0]!r}; " if argv and argv[0] not in ("-h", "--help") else ""
        print(
            f"{given}usage: geolib {{{','.join(COMMANDS)}}} … (geolib measure --help)",
            file=sys.stderr,
        )
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
