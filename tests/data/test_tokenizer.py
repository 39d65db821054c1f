"""Tests of geolib.data.tokenizer on small text made here."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geolib.data import tokenizer as T
from geolib.data.corpus import write_jsonl
from geolib.data.tokens import load_tokens, read_token_freq

VARIED = [
    "To be, or not to be: that is the question.",
    "  leading and trailing spaces  ",
    "tabs\tand\nnew\n\nlines\r\nCRLF",
    "naïve café — “curly quotes” … ½ £5",
    "日本語のテキスト、中文，한국어",
    "emoji 🙂👍🏽 and ZWJ 👩‍👩‍👧",
    "def f(x):\n    return x ** 2  # code",
    "",
    "\u0301 combining accent alone, NUL \x00 and DEL \x7f",
]


def corpus_texts(n: int = 200, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = (
        "the of and to a in that is was he for it with as his on be at by I you thou "
        "love king lord sir lady heart death night day sweet fair good man men"
    ).split()
    texts = []
    for _ in range(n):
        sentences = [
            " ".join(rng.choice(words, rng.integers(4, 14))).capitalize() + "." for _ in range(8)
        ]
        texts.append(" ".join(sentences))
    return texts + VARIED


@pytest.fixture(scope="module")
def tok():
    return T.train_tokenizer(corpus_texts(), vocab_size=400)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, tok):
    return T.save_tokenizer(tok, tmp_path_factory.mktemp("tok"), model_max_length=128)


def test_special_tokens_have_fixed_ids(tok):
    assert [tok.token_to_id(t) for t in T.SPECIAL_TOKENS] == [0, 1, 2]
    assert T.SPECIAL_TOKENS == ("<|endoftext|>", "<|padding|>", "[MASK]")
    assert 259 < tok.get_vocab_size() <= 400


@pytest.mark.parametrize("text", VARIED + corpus_texts(3))
def test_round_trip_varied_text(tok, text):
    assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=200))
def test_round_trip_any_text(tok, text):
    assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text


def test_training_is_deterministic():
    a = T.train_tokenizer(corpus_texts(), vocab_size=400)
    b = T.train_tokenizer(corpus_texts(), vocab_size=400)
    assert a.to_str() == b.to_str()


def test_autotokenizer_loads_the_saved_tokenizer(saved):
    hf = T.load_tokenizer(saved)
    assert (hf.eos_token, hf.bos_token, hf.pad_token, hf.mask_token) == (
        "<|endoftext|>",
        "<|endoftext|>",
        "<|padding|>",
        "[MASK]",
    )
    assert (hf.eos_token_id, hf.pad_token_id, hf.mask_token_id) == (0, 1, 2)
    assert hf.model_max_length == 128
    for text in VARIED:
        assert hf.decode(hf.encode(text)) == text
    config = json.loads((saved / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    raw = T.load_raw_tokenizer(saved)
    assert hf.encode(VARIED[3]) == raw.encode(VARIED[3]).ids


def test_bad_inputs_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="vocab_size"):
        T.train_tokenizer(["abc"], vocab_size=100)
    with pytest.raises(ValueError, match="vocab_size"):
        T.train_tokenizer(["abc"], vocab_size=2**32 + 1)
    with pytest.raises(TypeError, match="int"):
        T.train_tokenizer(["abc"], vocab_size=4096.0)
    with pytest.raises(ValueError, match="no text"):
        T.train_tokenizer([], vocab_size=300)
    with pytest.raises(TypeError, match="expected str"):
        T.train_tokenizer(["ok", b"bytes"], vocab_size=300)
    with pytest.raises(ValueError, match="min_frequency"):
        T.train_tokenizer(["abc"], vocab_size=300, min_frequency=0)
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        T.load_tokenizer(tmp_path)
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        T.load_raw_tokenizer(tmp_path)


def test_encode_documents_layout(tok):
    texts = ["first document", "second one, longer than the first", "x"]
    ids = T.encode_documents(tok, texts, batch_size=2)
    assert ids.dtype == np.uint16 and ids.ndim == 1
    eos = tok.token_to_id(T.EOS)
    lengths = [len(tok.encode(t).ids) for t in texts]
    assert ids.size == sum(lengths) + len(texts)
    assert np.flatnonzero(ids == eos).tolist() == list(np.cumsum(np.array(lengths) + 1) - 1)
    pieces = np.split(ids, np.flatnonzero(ids == eos) + 1)[:-1]
    assert [tok.decode(p[:-1].tolist()) for p in pieces] == texts
    assert T.encode_documents(tok, []).shape == (0,)


def test_encode_corpus_and_cli_end_to_end(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    texts = corpus_texts(60, seed=1)
    rows = [{"doc_id": f"s/w/{i:03d}", "source": "s", "text": t} for i, t in enumerate(texts)]
    write_jsonl(corpus / "id" / "train.jsonl", rows[:40])
    write_jsonl(corpus / "id" / "validation.jsonl", rows[40:50])
    write_jsonl(corpus / "ood_x" / "test.jsonl", rows[50:])
    args = [
        "--corpus-dir",
        str(corpus),
        "--out-dir",
        str(tmp_path / "tok"),
        "--tokens-dir",
        str(tmp_path / "tokens"),
        "--freq-path",
        str(corpus / "token_freq.csv"),
        "--vocab-size",
        "320",
    ]
    assert T.main(["all", *args]) == 0
    assert "encode: done" in capsys.readouterr().out
    summary = json.loads((tmp_path / "tokens" / "summary.json").read_text())
    assert summary["vocab_size"] == 320 and summary["eos_id"] == 0
    train = load_tokens(tmp_path / "tokens" / "id" / "train.npy", vocab_size=320)
    assert summary["domains"]["id"]["train"]["tokens"] == train.size
    assert summary["domains"]["id"]["train"]["documents"] == int((train == 0).sum()) == 40
    assert (tmp_path / "tokens" / "ood_x" / "test.npy").is_file()
    ids, counts, strings = read_token_freq(corpus / "token_freq.csv")
    assert len(ids) == 320
    expected = Counter(np.asarray(train).tolist())
    assert dict(zip(ids.tolist(), counts.tolist(), strict=True)) == {
        i: expected.get(i, 0) for i in range(320)
    }
    raw = T.load_raw_tokenizer(tmp_path / "tok")
    assert strings == [raw.id_to_token(i) for i in ids]
