"""The ``geolib`` command (``python -m geolib`` alike): ``geolib measure MODEL …`` measures the
geometry of any model (:mod:`geolib.experiments.measure_model`)."""

from __future__ import annotations

import importlib
import sys

#: subcommand → the module whose ``main(argv)`` runs it
COMMANDS = {"measure": "geolib.experiments.measure_model"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in COMMANDS:
        given = f"unknown command {argv[0]!r}; " if argv and argv[0] not in ("-h", "--help") else ""
        print(
            f"{given}usage: geolib {{{','.join(COMMANDS)}}} … (geolib measure --help)",
            file=sys.stderr,
        )
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
