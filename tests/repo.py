"""The checkout the tests run in: its root, for tests that read its scripts, and the environment
of a Python subprocess that imports geolib from it (rather than from an installed copy)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def repo_env() -> dict[str, str]:
    """This process's environment with the checkout on ``PYTHONPATH``."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}
