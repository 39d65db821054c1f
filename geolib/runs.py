"""The layout of a training run directory: its names, atomic writes and readers, in one place.

A run directory holds::

    step-<N>/model.safetensors, config.json  weights after N updates (``save_pretrained``)
    step-<N>/trainer_state.json              step, tokens, lr, loss at that step
    step-<latest>/train_state.pt             optimizer, RNG states, step (for resuming)
    tokenizer/                               copy of the tokenizer, if any
    metrics.csv                              step, tokens, loss, lr, val_loss, tokens_per_s
    run.json                                 config, parameter counts, final numbers

A checkpoint is written into ``step-<N>.tmp`` and renamed when complete, so a ``step-<N>``
folder is never half-written; only the latest checkpoint keeps ``train_state.pt``. Text files
are replaced atomically (written beside, then renamed). :mod:`geolib.train` writes runs,
:mod:`geolib.checkpoints` loads them, notebooks read ``metrics.csv``/``run.json`` through here.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

WEIGHT_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
TRAINER_STATE = "trainer_state.json"
RESUME_STATE = "train_state.pt"
METRICS = "metrics.csv"
RUN_INFO = "run.json"
TOKENIZER = "tokenizer"
METRIC_COLUMNS = ("step", "tokens", "loss", "lr", "val_loss", "tokens_per_s")
_STEP_DIR = re.compile(r"^step-(\d+)$")


def step_dir(run_dir: str | Path, step: int) -> Path:
    """``run_dir/step-<step>``."""
    if step < 0:
        raise ValueError(f"a step is non-negative, got {step}")
    return Path(run_dir) / f"step-{step}"


def step_dirs(run_dir: str | Path) -> dict[int, Path]:
    """Every ``step-<N>`` folder of ``run_dir`` (complete or not), by step."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return {}
    found = {}
    for p in run_dir.iterdir():
        m = _STEP_DIR.match(p.name)
        if m and p.is_dir():
            found[int(m.group(1))] = p
    return dict(sorted(found.items()))


def available_steps(run_dir: str | Path) -> list[int]:
    """Steps of ``run_dir`` with a complete checkpoint (weights and config), ascending."""
    return [
        s
        for s, p in step_dirs(run_dir).items()
        if (p / WEIGHT_FILE).is_file() and (p / CONFIG_FILE).is_file()
    ]


def is_run_dir(path: str | Path) -> bool:
    """True for a training run directory (has ``step-N`` folders or ``run.json``)."""
    path = Path(path)
    return path.is_dir() and ((path / RUN_INFO).is_file() or bool(step_dirs(path)))


def latest_resumable(run_dir: str | Path) -> Path | None:
    """The last ``step-N`` folder holding ``train_state.pt`` (where training resumes)."""
    resumable = [p for p in step_dirs(run_dir).values() if (p / RESUME_STATE).is_file()]
    return resumable[-1] if resumable else None


def remove_partial(run_dir: str | Path) -> list[Path]:
    """Delete the ``step-N.tmp`` folders a killed run leaves behind; return what was removed."""
    stale = sorted(Path(run_dir).glob("step-*.tmp"))
    for p in stale:
        shutil.rmtree(p)
    return stale


def publish_step(tmp: Path, step_folder: Path) -> None:
    """Make the complete ``tmp`` folder the checkpoint ``step_folder`` (replacing one there) and
    keep ``train_state.pt`` in the new checkpoint only."""
    previous = latest_resumable(step_folder.parent)
    if step_folder.exists():
        shutil.rmtree(step_folder)
    tmp.rename(step_folder)
    if (step_folder / RESUME_STATE).is_file() and previous not in (None, step_folder):
        (previous / RESUME_STATE).unlink()


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename (never half-written)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


# ----------------------------------------------------------------------------- metrics.csv


def format_metric(x: float | None) -> str:
    """A metric cell: 6 significant digits, empty for ``None``."""
    return "" if x is None else f"{x:.6g}"


def write_metrics(run_dir: str | Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Replace ``metrics.csv`` with ``rows`` (mappings over :data:`METRIC_COLUMNS`)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=METRIC_COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    return write_text_atomic(Path(run_dir) / METRICS, buf.getvalue())


def metric_rows(run_dir: str | Path, upto: int | None = None) -> list[dict[str, str]]:
    """Rows of ``metrics.csv`` as written (strings), those with step ≤ ``upto``; ``[]`` if none."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if rows and list(rows[0]) != list(METRIC_COLUMNS):
        raise ValueError(f"{path}: columns {list(rows[0])}, expected {list(METRIC_COLUMNS)}")
    return [r for r in rows if upto is None or int(r["step"]) <= upto]


def read_metrics(run_dir: str | Path) -> pd.DataFrame:
    """``metrics.csv`` as a numeric table (empty cells are NaN)."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        raise FileNotFoundError(f"no {METRICS} in {run_dir}: is it a finished training run?")
    return pd.read_csv(path)


# ----------------------------------------------------------------------------- run.json


def write_run_info(run_dir: str | Path, info: Mapping[str, Any]) -> Path:
    """Write ``run.json`` (the summary of a finished run)."""
    return write_text_atomic(Path(run_dir) / RUN_INFO, json.dumps(info, indent=1) + "\n")


def read_run_info(run_dir: str | Path) -> dict[str, Any]:
    """``run.json`` of a finished run (error naming the folder if it is missing)."""
    path = Path(run_dir) / RUN_INFO
    if not path.is_file():
        raise FileNotFoundError(f"no {RUN_INFO} in {run_dir}: the run has not finished")
    info = json.loads(path.read_text())
    if not isinstance(info, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(info).__name__}")
    return info
