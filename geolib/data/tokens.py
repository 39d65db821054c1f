"""Token arrays and token-frequency tables: the files between the tokenizer and the models.

``data/tokens/<domain>/<split>.npy`` holds one split's token ids as a 1-D array (documents
separated by the end-of-text id): ``uint16`` when the vocabulary fits (≤ 65,536 ids, ours and
Pythia's), ``uint32`` otherwise (OLMo-2's 100k, Llama-3's 128k), the dtype in the ``.npy``
header. Written by :mod:`geolib.data.tokenizer` and :mod:`geolib.models.pretrained`, read by
every stage through :func:`load_tokens` (the one reader, which validates).
``data/tokens/token_freq.csv`` lists every id's count. numpy, the standard library and files:
reading a token array imports no acquisition or corpus code.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from geolib.files import write_atomic, write_text_atomic

TOKEN_DTYPE = np.uint16
#: what a token file may hold: the narrowest that fits the vocabulary
TOKEN_DTYPES = (np.dtype(np.uint16), np.dtype(np.uint32))


def token_dtype(vocab_size: int) -> np.dtype:
    """``uint16`` for a vocabulary of ≤ 65,536 ids, else ``uint32`` (≤ 2³² ids)."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int | np.integer):
        raise TypeError(f"vocab_size must be an int, got {vocab_size!r}")
    for dtype in TOKEN_DTYPES:
        if 0 < vocab_size <= int(np.iinfo(dtype).max) + 1:
            return dtype
    raise ValueError(f"vocab_size {vocab_size} is not in 1 … 2**32")


def save_tokens(path: str | Path, tokens: np.ndarray, vocab_size: int | None = None) -> Path:
    """Save a 1-D array of token ids as ``.npy`` (atomically), as ``uint16`` or ``uint32``
    (:func:`token_dtype` of ``vocab_size``; default: of the largest id + 1)."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 1:
        raise ValueError(f"token array must be 1-D, got shape {tokens.shape}")
    if tokens.size and not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"token ids must be integers, got dtype {tokens.dtype}")
    top = int(tokens.max()) if tokens.size else -1
    if tokens.size and int(tokens.min()) < 0:
        raise ValueError(f"negative token id {int(tokens.min())}")
    if vocab_size is not None and top >= vocab_size:
        raise ValueError(f"token id {top} >= vocab_size {vocab_size}")
    dtype = token_dtype(vocab_size if vocab_size is not None else max(top + 1, 1))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, lambda tmp: np.save(tmp, tokens.astype(dtype, copy=False)))


def load_tokens(path: str | Path, vocab_size: int | None = None) -> np.ndarray:
    """Memory-mapped token ids of one file (``data/tokens/<domain>/<split>.npy``): the one
    reader every stage uses.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError``, naming the file, for
    one that is truncated or unreadable, not a non-empty 1-D ``uint16``/``uint32`` array, or
    (when ``vocab_size`` is given) holds an id ≥ ``vocab_size``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"token file not found: {path}")
    try:
        tokens = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise ValueError(f"{path}: not a readable .npy token array, truncated? ({err})") from err
    if tokens.dtype not in TOKEN_DTYPES:
        raise ValueError(f"{path}: token dtype is {tokens.dtype}, expected uint16 or uint32")
    if tokens.ndim != 1:
        raise ValueError(f"{path}: token array must be 1-D, got shape {tokens.shape}")
    if tokens.size == 0:
        raise ValueError(f"{path}: token array is empty")
    if vocab_size is not None and int(tokens.max()) >= vocab_size:
        raise ValueError(
            f"{path}: token id {int(tokens.max())} >= vocab_size {vocab_size} "
            "(encoded with another tokenizer?)"
        )
    return tokens


def token_frequencies(tokens: np.ndarray, vocab_size: int) -> np.ndarray:
    """Count of every token id in ``[0, vocab_size)`` (int64), zero for unseen ids."""
    tokens = np.asarray(tokens)
    if tokens.size and int(tokens.max()) >= vocab_size:
        raise ValueError(f"token id {int(tokens.max())} >= vocab_size {vocab_size}")
    return np.bincount(tokens.astype(np.int64, copy=False), minlength=vocab_size).astype(np.int64)


def write_token_freq(path: str | Path, counts: np.ndarray, tokens: Sequence[str]) -> Path:
    """CSV ``token_id,token,count`` for every id, most frequent first (ties by id)."""
    counts = np.asarray(counts)
    if len(tokens) != len(counts):
        raise ValueError(f"{len(tokens)} token strings for {len(counts)} counts")
    order = np.lexsort((np.arange(len(counts)), -counts))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["token_id", "token", "count"])
    for i in order:
        writer.writerow([int(i), tokens[i], int(counts[i])])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, out.getvalue())


def read_token_freq(path: str | Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(token_id, count, token)`` columns of a token-frequency CSV, in file order."""
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    ids = np.array([int(r["token_id"]) for r in rows], dtype=np.int64)
    counts = np.array([int(r["count"]) for r in rows], dtype=np.int64)
    return ids, counts, [r["token"] for r in rows]


def document_token_counts(tokens: np.ndarray, eos_id: int, vocab_size: int) -> np.ndarray:
    """Matrix ``[documents, vocab_size]`` of token counts; documents end at each ``eos_id``.

    The eos separators themselves are not counted. Trailing tokens after the last eos form a
    final document.
    """
    tokens = np.asarray(tokens).astype(np.int64)
    ends = np.flatnonzero(tokens == eos_id)
    starts = np.concatenate([[0], ends + 1])
    stops = np.concatenate([ends, [tokens.size]])
    keep = stops > starts
    starts, stops = starts[keep], stops[keep]
    doc = np.repeat(np.arange(starts.size), stops - starts)
    body = (
        np.concatenate([tokens[a:b] for a, b in zip(starts, stops, strict=True)])
        if starts.size
        else np.zeros(0, np.int64)
    )
    out = np.zeros((starts.size, vocab_size), dtype=np.int64)
    np.add.at(out, (doc, body), 1)
    return out
