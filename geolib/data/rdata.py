"""R data: a reader of R's XDR serialization and of R lazy-load databases, in pure Python.

Debian's ``r-cran-*`` packages ship texts as R lazy-load databases (``Rdata.rdx`` index +
``Rdata.rdb`` blobs); :func:`read_r_lazyload` turns one into ``{name: value}`` without R.
Standard library only.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import struct
import zlib
from typing import Any


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
