"""The layout of a training run directory: its names, atomic writes and readers, in one place.

A run directory holds::

    step-<N>/model.safetensors, config.json  weights after N updates (``save_pretrained``)
    step-<N>/trainer_state.json              step, tokens, lr, loss at that step
    step-<N>/manifest.json                   SHA-256 of every other file of the step, at writing
    step-<last two>/train_state.pt           optimizer, RNG states, step, data hash (resuming)
    tokenizer/                               copy of the tokenizer, if any
    metrics.csv                              step, tokens, loss, lr, val_loss, tokens_per_s
    run.json                                 config, parameter counts, final numbers

A checkpoint is written into ``step-<N>.tmp`` and renamed when complete, so a ``step-<N>``
folder is never half-written; its manifest lets a reader prove that the files are the ones
written (:func:`verify_manifest`: flipped bytes or an edited header fail it). Only the last
:data:`KEEP_RESUME` checkpoints keep ``train_state.pt``, so a resume can fall back one
checkpoint when the latest state is damaged. Text files are replaced atomically (written
beside, then renamed), and a ``metrics.csv`` row a kill could leave incomplete is dropped on
reading (:func:`metric_rows`). :mod:`geolib.models.train` writes runs,
:mod:`geolib.models.checkpoints` loads them,
notebooks read ``metrics.csv``/``run.json`` through here.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import fcntl
import io
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from geolib.files import sha256_file, write_text_atomic

WEIGHT_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
TRAINER_STATE = "trainer_state.json"
RESUME_STATE = "train_state.pt"
METRICS = "metrics.csv"
RUN_INFO = "run.json"
#: written instead of ``run.json`` by a run whose loss went non-finite or far above chance
DIVERGED = "diverged.json"
TOKENIZER = "tokenizer"
MANIFEST = "manifest.json"
KEEP_RESUME = 2  # checkpoints that keep train_state.pt (the latest and one to fall back to)
METRIC_COLUMNS = ("step", "tokens", "loss", "lr", "val_loss", "tokens_per_s")
_STEP_DIR = re.compile(r"^step-(\d+)$")


def step_dir(run_dir: str | Path, step: int) -> Path:
    """``run_dir/step-<step>``."""
    if step < 0:
        raise ValueError(f"a step is non-negative, got {step}")
    return Path(run_dir) / f"step-{step}"


def folder_step(folder: str | Path) -> int:
    """The step a ``step-N`` folder's name says it holds."""
    m = _STEP_DIR.match(Path(folder).name)
    if not m:
        raise ValueError(f"{folder} is not a step-N folder")
    return int(m.group(1))


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


def resumable(run_dir: str | Path) -> list[Path]:
    """The ``step-N`` folders holding ``train_state.pt``, newest first (where training can
    resume)."""
    return [p for p in reversed(step_dirs(run_dir).values()) if (p / RESUME_STATE).is_file()]


def latest_resumable(run_dir: str | Path) -> Path | None:
    """The last ``step-N`` folder holding ``train_state.pt`` (where training resumes)."""
    found = resumable(run_dir)
    return found[0] if found else None


# ----------------------------------------------------------------------------- content hashes


class IntegrityError(ValueError):
    """A run file is not the one that was written (its content hash differs, or it is gone)."""


def write_manifest(folder: str | Path, step: int | None = None) -> Path:
    """Record the SHA-256 of every file in ``folder`` (but the manifest) in its manifest, and
    for a checkpoint its ``step``: a folder renamed or swapped with another is then caught."""
    folder = Path(folder)
    hashes = {
        p.name: sha256_file(p)
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != MANIFEST and not p.name.startswith(".")
    }
    body: dict[str, Any] = {"sha256": hashes}
    if step is not None:
        body["step"] = int(step)
    return write_text_atomic(folder / MANIFEST, json.dumps(body, indent=1) + "\n")


def manifest_step(folder: str | Path) -> int | None:
    """The step a checkpoint's manifest records (``None`` if it records none)."""
    path = Path(folder) / MANIFEST
    try:
        step = json.loads(path.read_text()).get("step")
    except (OSError, ValueError, AttributeError):
        raise IntegrityError(f"{path} is not a readable manifest") from None
    return None if step is None else int(step)


def verify_step(folder: str | Path, step: int) -> None:
    """Check that checkpoint ``folder`` holds ``step``: the step its manifest and its
    ``trainer_state.json`` record (:class:`IntegrityError` naming the folder otherwise)."""
    folder = Path(folder)
    recorded = manifest_step(folder)
    if recorded is None:
        raise IntegrityError(
            f"{folder / MANIFEST} records no step: cannot prove that {folder.name} holds step "
            f"{step} (`python -m geolib.models.runs manifest {folder.parent}` records it)"
        )
    try:
        state = int(json.loads((folder / TRAINER_STATE).read_text())["step"])
    except (OSError, ValueError, KeyError, TypeError):
        raise IntegrityError(f"{folder / TRAINER_STATE} records no readable step") from None
    if recorded != step or state != step:
        raise IntegrityError(
            f"{folder} holds step {recorded} (manifest) / {state} (trainer state), not {step}: "
            "checkpoint folders were renamed or swapped"
        )


def read_manifest(folder: str | Path) -> dict[str, str]:
    """``{file name: sha256}`` of a checkpoint folder (:class:`IntegrityError` if unreadable)."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise IntegrityError(
            f"{path} is missing: the checkpoint cannot prove its content (written before "
            f"manifests existed? `python -m geolib.models.runs manifest {Path(folder).parent}` "
            "records "
            "the files as they are now)"
        )
    try:
        data = json.loads(path.read_text())
        hashes = data["sha256"]
        if not isinstance(hashes, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise IntegrityError(f"{path} is not a manifest ({{'sha256': {{file: hash}}}})") from None
    return hashes


def verify_manifest(folder: str | Path, names: Iterable[str]) -> None:
    """Check that the files ``names`` of ``folder`` are byte for byte the ones written
    (:class:`IntegrityError` naming the file otherwise)."""
    folder = Path(folder)
    hashes = read_manifest(folder)
    for name in names:
        path = folder / name
        if name not in hashes:
            raise IntegrityError(f"{path}: not in {folder / MANIFEST}")
        if not path.is_file():
            raise IntegrityError(f"{path} is missing")
        actual = sha256_file(path)
        if actual != hashes[name]:
            raise IntegrityError(
                f"{path}: content changed since it was written (sha256 {actual[:12]}…, "
                f"recorded {hashes[name][:12]}…)"
            )


class RunLockedError(RuntimeError):
    """Another process is writing the run directory."""


LOCK = ".lock"


@contextlib.contextmanager
def sole_writer(run_dir: str | Path) -> Iterator[None]:
    """Hold ``run_dir/.lock`` (an exclusive ``flock``) while writing the run: a second
    trainer on the same directory stops with :class:`RunLockedError` instead of deleting the
    first one's temporary checkpoints. The kernel releases the lock if the holder dies, so a
    killed run leaves no lock behind (at most an unlocked, harmless ``.lock`` file)."""
    path = Path(run_dir) / LOCK
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise RunLockedError(
                f"{run_dir} is being written by another process (pid {holder}, holding "
                f"{path}); wait for it to finish or stop it, then rerun: this run resumes "
                "from its last checkpoint"
            ) from None
        try:  # the holder may have finished and unlinked the file we opened: lock the new one
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)  # a finished run leaves no lock file
    finally:
        os.close(fd)


def set_aside(run_dir: str | Path, into: str | Path) -> Path:
    """Move everything in ``run_dir`` but its lock into a new folder
    ``into/<parent>.<name>-<UTC time>`` and return that folder: a run another one replaces is
    kept, not deleted."""
    run_dir = Path(run_dir)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = Path(into) / f"{run_dir.resolve().parent.name}.{run_dir.name}-{stamp}"
    target, n = base, 1
    while target.exists():
        target, n = base.with_name(f"{base.name}-{n}"), n + 1
    target.mkdir(parents=True)
    for child in sorted(run_dir.iterdir()):
        if child.name != LOCK:
            shutil.move(str(child), str(target / child.name))
    return target


def add_supersede_option(parser: argparse.ArgumentParser) -> None:
    """``--supersede-into DIR`` on a training command line (see :func:`set_aside`)."""
    parser.add_argument(
        "--supersede-into",
        default=None,
        metavar="DIR",
        help="move a run directory that holds another run (other configuration, data or "
        "training code, or none that can resume) into DIR and train afresh, instead of refusing",
    )


def verify_folder(folder: str | Path) -> None:
    """Check that ``folder`` holds exactly the files its manifest lists, each unchanged (an
    added, removed or edited file is an :class:`IntegrityError` naming it)."""
    folder = Path(folder)
    hashes = read_manifest(folder)
    present = {p.name for p in folder.iterdir() if p.is_file() and p.name != MANIFEST}
    extra = sorted(n for n in present - set(hashes) if not n.startswith("."))
    if extra:
        raise IntegrityError(f"{folder}: files {extra} are not in its manifest (added later)")
    verify_manifest(folder, sorted(hashes))


def save_tokenizer(tokenizer, run_dir: str | Path) -> Path:
    """Save the run's tokenizer in ``run_dir/tokenizer`` with a manifest of its files, through a
    temporary folder (kept as it is when already there: a resumed run trained with it)."""
    final = Path(run_dir) / TOKENIZER
    if final.is_dir():
        return final
    tmp = final.with_name(TOKENIZER + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer.save_pretrained(tmp)
    write_manifest(tmp)
    tmp.rename(final)
    return final


def _forget_in_manifest(folder: Path, name: str) -> None:
    """Drop ``name`` from ``folder``'s manifest (after deleting that file)."""
    path = folder / MANIFEST
    if path.is_file():
        body = json.loads(path.read_text())
        body["sha256"].pop(name, None)
        write_text_atomic(path, json.dumps(body, indent=1) + "\n")


def remove_partial(run_dir: str | Path) -> list[Path]:
    """Delete the ``step-N.tmp`` folders a killed run leaves behind; return what was removed."""
    stale = sorted(Path(run_dir).glob("step-*.tmp"))
    for p in stale:
        shutil.rmtree(p)
    return stale


def publish_step(tmp: Path, step_folder: Path) -> None:
    """Make the complete ``tmp`` folder (manifest included) the checkpoint ``step_folder``
    (replacing one there), then keep ``train_state.pt`` in the newest :data:`KEEP_RESUME`
    checkpoints only: older states are removed only once the new one is in place."""
    if step_folder.exists():
        shutil.rmtree(step_folder)
    tmp.rename(step_folder)
    for old in resumable(step_folder.parent)[KEEP_RESUME:]:
        (old / RESUME_STATE).unlink()
        _forget_in_manifest(old, RESUME_STATE)


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
    """Rows of ``metrics.csv`` as written (strings), those with step ≤ ``upto``; ``[]`` if none.

    An incomplete *last* row (a kill in the middle of a write by an older, non-atomic writer or
    another program) is dropped with a note on stderr; an incomplete row elsewhere, or steps
    that do not increase, are an error naming the file and the line."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is not None and list(reader.fieldnames) != list(METRIC_COLUMNS):
            raise ValueError(
                f"{path}: columns {reader.fieldnames}, expected {list(METRIC_COLUMNS)}"
            )
        rows = list(reader)
    good: list[dict[str, str]] = []
    for i, r in enumerate(rows):
        line = i + 2  # the header is line 1
        complete = None not in r and all(v is not None for v in r.values())
        step = r.get("step") or ""
        if complete and not step.isdigit():
            complete = False
        if not complete:
            if i == len(rows) - 1:
                print(f"{path}: dropped the incomplete last row (line {line})", file=sys.stderr)
                break
            raise ValueError(f"{path}: line {line} is incomplete or malformed: {r}")
        if good and int(step) <= int(good[-1]["step"]):
            raise ValueError(f"{path}: line {line}: step {step} does not increase")
        good.append(r)
    return [r for r in good if upto is None or int(r["step"]) <= upto]


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


class DivergedRunError(RuntimeError):
    """A training run diverged: nothing is measured on it and it is never resumed."""


def write_diverged(run_dir: str | Path, info: Mapping[str, Any]) -> Path:
    """Mark ``run_dir`` as diverged (``info``: the step, the loss and the threshold)."""
    path = Path(run_dir) / DIVERGED
    write_text_atomic(path, json.dumps(dict(info), indent=2) + "\n")
    return path


def refuse_diverged(run_dir: str | Path) -> None:
    """Raise :class:`DivergedRunError` naming ``run_dir`` if it is marked as diverged."""
    path = Path(run_dir) / DIVERGED
    if path.is_file():
        info = json.loads(path.read_text())
        raise DivergedRunError(
            f"{run_dir} diverged at step {info.get('step')} (training loss {info.get('loss')}, "
            f"threshold {info.get('threshold')}): no stage reads it. Train it again with other "
            f"settings after deleting the folder."
        )


def read_run_info(run_dir: str | Path) -> dict[str, Any]:
    """``run.json`` of a finished run (error naming the folder if it is missing, or if the run
    diverged)."""
    refuse_diverged(run_dir)
    path = Path(run_dir) / RUN_INFO
    if not path.is_file():
        raise FileNotFoundError(f"no {RUN_INFO} in {run_dir}: the run has not finished")
    info = json.loads(path.read_text())
    if not isinstance(info, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(info).__name__}")
    return info


def main(argv: list[str] | None = None) -> int:
    """``python -m geolib.models.runs manifest RUN_DIR``: record manifests for the checkpoints and
    the tokenizer of a run written before manifests existed (the files are accepted as they are
    now)."""
    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("command", choices=["manifest"])
    parser.add_argument("run_dir")
    args = parser.parse_args(argv)
    for step, folder in step_dirs(args.run_dir).items():
        if not (folder / MANIFEST).is_file():
            write_manifest(folder, step)
            print(f"step {step}: manifest written")
        elif manifest_step(folder) is None:  # written before manifests recorded the step
            hashes = read_manifest(folder)
            write_text_atomic(
                folder / MANIFEST, json.dumps({"sha256": hashes, "step": step}, indent=1) + "\n"
            )
            print(f"step {step}: step recorded in the manifest")
    tokenizer = Path(args.run_dir) / TOKENIZER
    if tokenizer.is_dir() and not (tokenizer / MANIFEST).is_file():
        write_manifest(tokenizer)
        print(f"{TOKENIZER}: manifest written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
