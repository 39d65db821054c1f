"""Tests of geolib.data.tokens: token arrays and frequency tables."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from geolib.data.tokens import (
    document_token_counts,
    load_tokens,
    read_token_freq,
    save_tokens,
    token_dtype,
    token_frequencies,
    write_token_freq,
)


def test_save_and_load_tokens(tmp_path):
    ids = np.array([5, 0, 7, 7, 0], dtype=np.int64)
    path = save_tokens(tmp_path / "d" / "train.npy", ids)
    tokens = load_tokens(path, vocab_size=8)
    assert tokens.dtype == np.uint16 and tokens.shape == (5,)
    assert isinstance(tokens, np.memmap)
    np.testing.assert_array_equal(tokens, ids)
    with pytest.raises(ValueError, match=">= vocab_size"):
        load_tokens(path, vocab_size=7)


def test_load_tokens_rejects_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="token file not found"):
        load_tokens(tmp_path / "missing.npy")
    np.save(tmp_path / "i32.npy", np.arange(4, dtype=np.int32))
    with pytest.raises(ValueError, match="uint16"):
        load_tokens(tmp_path / "i32.npy")
    np.save(tmp_path / "2d.npy", np.zeros((2, 2), dtype=np.uint16))
    with pytest.raises(ValueError, match="1-D"):
        load_tokens(tmp_path / "2d.npy")
    np.save(tmp_path / "empty.npy", np.zeros(0, dtype=np.uint16))
    with pytest.raises(ValueError, match="empty"):
        load_tokens(tmp_path / "empty.npy")
    (tmp_path / "junk.npy").write_bytes(b"junk")
    with pytest.raises(ValueError, match="not a readable"):
        load_tokens(tmp_path / "junk.npy")
    with pytest.raises(ValueError, match="vocab_size 60000"):
        save_tokens(tmp_path / "big.npy", np.array([70000]), vocab_size=60000)
    with pytest.raises(ValueError, match="negative"):
        save_tokens(tmp_path / "neg.npy", np.array([3, -1]))
    with pytest.raises(ValueError, match="integers"):
        save_tokens(tmp_path / "f.npy", np.array([1.5]))
    with pytest.raises(ValueError, match="1-D"):
        save_tokens(tmp_path / "m.npy", np.zeros((2, 2), dtype=np.uint16))


@pytest.mark.parametrize(
    ("vocab", "dtype"),
    [
        (1, np.uint16),
        (65_536, np.uint16),
        (65_537, np.uint32),
        (100_278, np.uint32),
        (2**32, np.uint32),
    ],
)
def test_token_dtype_is_the_narrowest_that_fits(vocab, dtype):
    assert token_dtype(vocab) == dtype


def test_token_dtype_refuses_impossible_vocabularies():
    for bad in (0, 2**32 + 1):
        with pytest.raises(ValueError, match="vocab_size"):
            token_dtype(bad)
    with pytest.raises(TypeError):
        token_dtype(True)


def test_large_vocabularies_round_trip_as_uint32(tmp_path):
    """OLMo-2's 100,278 ids do not fit uint16: the file holds uint32 and reads back exactly."""
    ids = np.array([0, 65_535, 65_536, 100_277, 5], dtype=np.int64)
    path = save_tokens(tmp_path / "olmo.npy", ids, vocab_size=100_278)
    tokens = load_tokens(path, vocab_size=100_278)
    assert tokens.dtype == np.uint32
    np.testing.assert_array_equal(tokens, ids)
    small = load_tokens(save_tokens(tmp_path / "small.npy", ids[[0, 1, 4]]), 65_536)
    assert small.dtype == np.uint16  # the narrowest that fits the largest id


def test_truncated_token_file_is_refused_by_name(tmp_path):
    """A file cut short (disk full, interrupted copy) is an error naming it, not an mmap
    error from deep inside numpy."""
    path = save_tokens(tmp_path / "t.npy", np.arange(1000))
    path.write_bytes(path.read_bytes()[:900])
    with pytest.raises(ValueError, match=r"t\.npy: not a readable .* truncated"):
        load_tokens(path)


def test_token_frequencies_match_counter(tmp_path):
    rng = np.random.default_rng(0)
    tokens = rng.zipf(1.5, 5000) % 50
    counts = token_frequencies(tokens, 60)
    expected = Counter(tokens.tolist())
    assert counts.shape == (60,)
    assert all(counts[i] == expected.get(i, 0) for i in range(60))
    vocab = [f"t{i}" if i != 3 else 'comma, "quoted"' for i in range(60)]
    path = write_token_freq(tmp_path / "freq.csv", counts, vocab)
    ids, file_counts, strings = read_token_freq(path)
    assert sorted(ids.tolist()) == list(range(60))
    assert list(file_counts) == sorted(file_counts, reverse=True)
    assert dict(zip(ids.tolist(), file_counts.tolist(), strict=True)) == {
        i: expected.get(i, 0) for i in range(60)
    }
    assert strings[list(ids).index(3)] == 'comma, "quoted"'
    with pytest.raises(ValueError, match="vocab_size"):
        token_frequencies(np.array([60]), 60)
    with pytest.raises(ValueError, match="token strings"):
        write_token_freq(tmp_path / "f.csv", counts, vocab[:-1])


def test_document_token_counts():
    tokens = np.array([3, 4, 4, 0, 5, 0, 0, 3], dtype=np.uint16)  # eos = 0; an empty doc
    m = document_token_counts(tokens, eos_id=0, vocab_size=6)
    assert m.shape == (3, 6)
    assert m[0].tolist() == [0, 0, 0, 1, 2, 0]
    assert m[1].tolist() == [0, 0, 0, 0, 0, 1]
    assert m[2].tolist() == [0, 0, 0, 1, 0, 0]
    assert m.sum() == 5


def test_importing_tokens_imports_no_acquisition_or_corpus_code():
    """Reading a token array (as geolib.models.train does) must not pull in the corpus machinery."""
    code = "import sys, geolib.data.tokens; print(' '.join(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(proc.stdout.split())
    assert "geolib.data.tokens" in loaded
    unwanted = {
        "geolib.data.acquire",
        "geolib.data.corpus",
        "geolib.data.rdata",
        "geolib.data.text",
    }
    assert not loaded & unwanted, (
        f"importing geolib.data.tokens imported {sorted(loaded & unwanted)}"
    )
