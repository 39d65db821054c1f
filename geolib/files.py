"""A stage's files: content hashes, and writes that are whole or absent.

Every table, JSON record and array file a stage writes goes through a temporary file in the same
folder and an atomic rename, so a full disk or a kill leaves the previous file (or none), never
a truncated one that still parses. Standard library only (numpy where arrays are written).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def atomic_tmp(path: str | Path) -> Path:
    """The temporary a write of ``path`` goes through: ``.<stem>.tmp<suffix>`` beside it (the
    suffix kept, which some writers, e.g. ``np.savez``, insist on)."""
    path = Path(path)
    return path.with_name(f".{path.stem}.tmp{path.suffix}")


def atomic_target(path: str | Path) -> Path | None:
    """The file whose atomic write ``path`` is the temporary of (:func:`atomic_tmp`), or None."""
    path = Path(path)
    name = path.name
    if not name.startswith(".") or ".tmp" not in name:
        return None
    stem, _, suffix = name[1:].rpartition(".tmp")
    return (
        path.with_name(stem + suffix)
        if stem and atomic_tmp(path.with_name(stem + suffix)) == path
        else None
    )


def write_atomic(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """``write(tmp)`` then rename ``tmp`` onto ``path`` (the temporary keeps the suffix, which
    some writers, e.g. ``np.savez``, insist on); the temporary is removed if ``write`` fails."""
    path = Path(path)
    tmp = atomic_tmp(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename (never half-written)."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: str | Path, obj: Any, **dumps: Any) -> Path:
    """``json.dumps(obj, **dumps)`` and a newline, atomically."""
    return write_text_atomic(path, json.dumps(obj, **dumps) + "\n")


def write_csv(path: str | Path, frame: Any, **to_csv: Any) -> Path:
    """A pandas DataFrame through ``frame.to_csv(tmp, **to_csv)``, atomically."""
    return write_atomic(path, lambda tmp: frame.to_csv(tmp, **to_csv))


def write_npz(path: str | Path, **arrays: Any) -> Path:
    """``np.savez`` of ``arrays``, atomically."""
    import numpy as np

    return write_atomic(path, lambda tmp: np.savez(tmp, **arrays))


def write_table(path: str | Path, frame: Any) -> Path:
    """The house table format: a DataFrame as CSV, no index, floats to 6 significant digits,
    atomically."""
    return write_csv(path, frame, index=False, float_format="%.6g")
