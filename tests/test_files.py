"""geolib.files: hashes against hashlib, and writes that are whole or absent."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geolib.files import (
    sha256_file,
    write_csv,
    write_json,
    write_npz,
    write_table,
    write_text_atomic,
)


def test_sha256_matches_hashlib_across_chunks(tmp_path):
    data = np.random.default_rng(0).bytes(3 * 1000 + 7)
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f", chunk=1000) == hashlib.sha256(data).hexdigest()


def test_writers_produce_what_the_plain_calls_would(tmp_path):
    frame = pd.DataFrame({"a": [1.0, 2.5], "b": ["x", "y"]})
    write_csv(tmp_path / "t.csv", frame, index=False, float_format="%.6g")
    frame.to_csv(tmp_path / "ref.csv", index=False, float_format="%.6g")
    assert (tmp_path / "t.csv").read_bytes() == (tmp_path / "ref.csv").read_bytes()
    write_json(tmp_path / "s.json", {"b": 1, "a": [2]}, indent=1, sort_keys=True)
    assert (tmp_path / "s.json").read_text() == json.dumps({"a": [2], "b": 1}, indent=1) + "\n"
    write_npz(tmp_path / "w.npz", x=np.arange(3))
    assert np.load(tmp_path / "w.npz")["x"].tolist() == [0, 1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.csv", "s.json", "t.csv", "w.npz"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    """A writer that dies half-way (a full disk, a bad value) leaves the previous file whole."""
    path = write_text_atomic(tmp_path / "table.csv", "old,complete\n")

    class Broken:
        def to_csv(self, target, **_):
            with open(target, "w") as fh:
                fh.write("half,a,ta")
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        write_csv(path, Broken())
    assert path.read_text() == "old,complete\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_write_table_is_the_house_csv_format(tmp_path):
    frame = pd.DataFrame({"x": [1 / 3, 2e-9], "n": [1, 2]})
    write_table(tmp_path / "t.csv", frame)
    assert (tmp_path / "t.csv").read_text() == "x,n\n0.333333,1\n2e-09,2\n"


def test_atomic_tmp_and_target_are_inverse():
    from geolib.files import atomic_target, atomic_tmp

    for p in ("data/claims/a.json", "book/chapters/c.ipynb", "x/noext", "a/b.tar.gz"):
        assert atomic_target(atomic_tmp(p)) == Path(p)
    assert atomic_target("data/claims/a.json") is None
    assert atomic_target("data/.hidden.json") is None
