"""DVC's command line, with ``dvc.lock`` read by the YAML C loader when DVC rewrites it.

    python scripts/dvc_fast_lock.py repro --single-item NAME     # any `dvc` command line

Each time DVC records a stage it re-reads the whole lock file with ruamel's pure-Python
round-trip loader (so that comments survive its rewrite), then dumps it. On this pipeline's
~17,800-line lock that reading took 3.3 s of the ~7 s DVC spent around each stage, against
0.4 s with the C loader (measured 2026-12-02): about 4 min of lane time in a `make all` of 85
stages, and the lanes wait for one another while the lock is held.

``dvc.lock`` is written by DVC alone and holds no comment, and DVC's own dumper writes the same
bytes from either reading (``tests/test_pipeline.py`` checks this on the committed lock), so the
file DVC writes is unchanged. A file with a ``#`` anywhere (``dvc.yaml`` when a ``dvc stage``
command edits it, or a lock a person annotated) is read the round-trip way, as before.
"""

from __future__ import annotations

import sys
from typing import Any

from dvc.utils.serialize import _yaml

_round_trip = _yaml.parse_yaml_for_update


def parse_for_update(text: str, path: Any) -> Any:
    """What DVC's ``parse_yaml_for_update`` returns, read by the C loader unless ``text`` may
    hold a comment."""
    if "#" in text:
        return _round_trip(text, path)
    return _yaml.parse_yaml(text, path, typ="safe")


def main(argv: list[str]) -> int:
    _yaml.parse_yaml_for_update = parse_for_update  # looked up at each call by modify_yaml
    from dvc.cli import main as dvc_main

    return dvc_main(argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
