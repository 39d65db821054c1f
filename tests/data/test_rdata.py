"""Tests of geolib.data.rdata on R lazy-load databases made here."""

from __future__ import annotations

import gzip
import struct
import zlib

import pytest

from geolib.data.corpus import read_r_texts
from geolib.data.rdata import read_r_lazyload, unserialize_r


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


def test_r_lazyload_reader_round_trip():
    objects = {"emma": ["EMMA", "", "Emma Woodhouse, handsome"], "persuasion": ["Persuasion", "é"]}
    rdx, rdb = r_lazyload(objects)
    assert read_r_lazyload(rdx, rdb) == objects
    works = read_r_texts({"p/data/Rdata.rdx": rdx, "p/data/Rdata.rdb": rdb})
    assert [(w.work_id, w.text) for w in works] == [
        ("emma", "EMMA\n\nEmma Woodhouse, handsome"),
        ("persuasion", "Persuasion\né"),
    ]
    with pytest.raises(ValueError, match="XDR"):
        unserialize_r(b"A\n....")
    with pytest.raises(ValueError, match="no p/data/Rdata.rdb"):
        read_r_texts({"p/data/Rdata.rdx": rdx})
