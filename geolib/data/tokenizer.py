"""Byte-level BPE tokenizer trained on the training split, and the corpus as token-id arrays.

    python -m geolib.data.tokenizer train  --params params.yaml --section tokenizer
    python -m geolib.data.tokenizer encode --params params.yaml --section tokenizer
    python -m geolib.data.tokenizer all    --params params.yaml --section tokenizer   # both

``train`` fits a GPT-2-style byte-level BPE (no normaliser, so ``decode(encode(x)) == x`` for
any text) with ``vocab_size`` entries on ``<corpus_dir>/<train_domain>/train.jsonl`` and saves
it in Hugging Face format (``tokenizer.json`` + ``tokenizer_config.json``), loadable with
``transformers.AutoTokenizer.from_pretrained(out_dir)``. Special tokens, ids 0-2:

- ``<|endoftext|>``: end of document; also the bos and unk token (as in GPT-2 / Pythia);
- ``<|padding|>``: padding (ignored by losses);
- ``[MASK]``: the masked-language-model token of the encoder.

``encode`` writes ``<tokens_dir>/<domain>/<split>.npy`` (uint16, or uint32 above 65,536
ids; each document followed by ``<|endoftext|>``), ``<tokens_dir>/summary.json`` (tokens and
documents per split) and the training split's token-frequency table ``token_id,token,count``
(all ids, most frequent first).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from geolib.data.corpus import corpus_splits, read_jsonl
from geolib.data.tokens import save_tokens, token_dtype, token_frequencies, write_token_freq
from geolib.files import write_text_atomic

EOS = "<|endoftext|>"
PAD = "<|padding|>"
MASK = "[MASK]"
#: Special tokens in id order (they take ids 0, 1, 2).
SPECIAL_TOKENS = (EOS, PAD, MASK)
#: the largest vocabulary a token file holds (uint32 ids)
MAX_VOCAB = 2**32


def _texts(texts: Iterable[str]) -> Iterator[str]:
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is {type(text).__name__}, expected str")
        yield text


def train_tokenizer(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    """Byte-level BPE with ``vocab_size`` entries (256 bytes + 3 specials + merges).

    Deterministic for a given input order.
    """
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
    base = 256 + len(SPECIAL_TOKENS)
    if not base < vocab_size <= MAX_VOCAB:
        raise ValueError(
            f"vocab_size must be in ({base}, {MAX_VOCAB}] (256 bytes + {len(SPECIAL_TOKENS)} "
            f"special tokens below; uint32 ids above), got {vocab_size}"
        )
    if min_frequency < 1:
        raise ValueError(f"min_frequency must be >= 1, got {min_frequency}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    seen = []

    def counted(stream: Iterable[str]) -> Iterator[str]:
        for text in _texts(stream):
            seen.append(len(text))
            yield text

    tok.train_from_iterator(counted(texts), trainer=trainer)
    if not seen or not sum(seen):
        raise ValueError("cannot train a tokenizer on no text")
    for i, token in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(token) != i:
            raise RuntimeError(f"special token {token} did not get id {i}")
    return tok


def save_tokenizer(tok: Tokenizer, out_dir: str | Path, model_max_length: int = 2048) -> Path:
    """Save in Hugging Face format (``tokenizer.json``, ``tokenizer_config.json``, ...)."""
    from transformers import PreTrainedTokenizerFast

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS,
        eos_token=EOS,
        unk_token=EOS,
        pad_token=PAD,
        mask_token=MASK,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
    fast.save_pretrained(str(out_dir))
    # transformers 5 writes its own class name; the 4.x name loads in both major versions.
    config_path = out_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return out_dir


def load_tokenizer(path: str | Path):
    """The saved tokenizer through ``transformers.AutoTokenizer`` (clear error if missing)."""
    from transformers import AutoTokenizer

    path = Path(path)
    if not (path / "tokenizer.json").is_file():
        raise FileNotFoundError(
            f"no tokenizer.json in {path}: run `python -m geolib.data.tokenizer train`"
        )
    return AutoTokenizer.from_pretrained(str(path))


def load_raw_tokenizer(path: str | Path) -> Tokenizer:
    """The ``tokenizers.Tokenizer`` saved in ``path/tokenizer.json`` (fast, no transformers)."""
    file = Path(path) / "tokenizer.json"
    if not file.is_file():
        raise FileNotFoundError(
            f"no tokenizer.json in {path}: run `python -m geolib.data.tokenizer train`"
        )
    return Tokenizer.from_file(str(file))


def encode_documents(tok: Tokenizer, texts: Iterable[str], batch_size: int = 256) -> np.ndarray:
    """Token ids of the documents, each followed by ``<|endoftext|>``, as one array of the
    narrowest token dtype for the vocabulary (:func:`geolib.data.tokens.token_dtype`)."""
    eos = tok.token_to_id(EOS)
    if eos is None:
        raise ValueError(f"tokenizer has no {EOS} token")
    dtype = token_dtype(tok.get_vocab_size())
    parts: list[np.ndarray] = []
    batch: list[str] = []

    def flush() -> None:
        for enc in tok.encode_batch(batch, add_special_tokens=False):
            parts.append(np.asarray(enc.ids + [eos], dtype=dtype))
        batch.clear()

    for text in _texts(texts):
        batch.append(text)
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def encode_corpus(
    corpus_dir: str | Path,
    tokenizer_dir: str | Path,
    tokens_dir: str | Path,
    freq_path: str | Path,
    train_domain: str = "id",
) -> dict[str, Any]:
    """Encode every ``<domain>/<split>.jsonl``; write token arrays, summary and frequency table."""
    tok = load_raw_tokenizer(tokenizer_dir)
    dtype = token_dtype(tok.get_vocab_size())
    tokens_dir = Path(tokens_dir)
    summary: dict[str, Any] = {
        "tokenizer": str(tokenizer_dir),
        "vocab_size": tok.get_vocab_size(),
        "eos_id": tok.token_to_id(EOS),
        "layout": f"{dtype} ids; every document followed by <|endoftext|>",
        "domains": {},
    }
    splits = corpus_splits(corpus_dir)
    if "train" not in splits.get(train_domain, {}):
        raise FileNotFoundError(f"no {train_domain}/train.jsonl under {corpus_dir}")
    for domain, paths in splits.items():
        for split, path in paths.items():
            rows = list(read_jsonl(path))
            ids = encode_documents(tok, (r["text"] for r in rows))
            save_tokens(tokens_dir / domain / f"{split}.npy", ids, tok.get_vocab_size())
            n_bytes = sum(len(r["text"].encode()) for r in rows)
            summary["domains"].setdefault(domain, {})[split] = {
                "documents": len(rows),
                "tokens": int(ids.size),
                "bytes": n_bytes,
                "bytes_per_token": round(n_bytes / max(ids.size - len(rows), 1), 4),
            }
            if domain == train_domain and split == "train":
                vocab = tok.get_vocab_size()
                counts = token_frequencies(ids, vocab)
                id_to_token = [tok.id_to_token(i) for i in range(vocab)]
                write_token_freq(freq_path, counts, id_to_token)
    write_text_atomic(tokens_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


def train_from_corpus(
    corpus_dir: str | Path,
    out_dir: str | Path,
    *,
    vocab_size: int,
    min_frequency: int = 2,
    train_domain: str = "id",
    model_max_length: int = 2048,
) -> Tokenizer:
    """Train on ``<corpus_dir>/<train_domain>/train.jsonl`` and save to ``out_dir``."""
    path = Path(corpus_dir) / train_domain / "train.jsonl"
    tok = train_tokenizer(
        (row["text"] for row in read_jsonl(path)), vocab_size, min_frequency=min_frequency
    )
    save_tokenizer(tok, out_dir, model_max_length=model_max_length)
    return tok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m geolib.data.tokenizer", description=__doc__.splitlines()[0]
    )
    parser.add_argument("command", choices=["train", "encode", "all"])
    parser.add_argument("--params", help="parameters file (values below override it)")
    parser.add_argument("--section", default="tokenizer")
    parser.add_argument("--corpus-dir")
    parser.add_argument("--out-dir", help="tokenizer folder")
    parser.add_argument("--tokens-dir")
    parser.add_argument("--freq-path")
    parser.add_argument("--train-domain")
    parser.add_argument("--vocab-size", type=int)
    parser.add_argument("--min-frequency", type=int)
    parser.add_argument("--model-max-length", type=int)
    args = parser.parse_args(argv)
    params: dict[str, Any] = {
        "corpus_dir": "data/corpus",
        "out_dir": "data/tokenizer",
        "tokens_dir": "data/tokens",
        "freq_path": "data/tokens/token_freq.csv",
        "train_domain": "id",
        "vocab_size": 4096,
        "min_frequency": 2,
        "model_max_length": 2048,
    }
    if args.params:
        from geolib.config import stage_params

        params.update(stage_params(args.params, args.section))
    for key in params:
        value = getattr(args, key, None)
        if value is not None:
            params[key] = value
    if args.command in ("train", "all"):
        t0 = time.perf_counter()
        tok = train_from_corpus(
            params["corpus_dir"],
            params["out_dir"],
            vocab_size=int(params["vocab_size"]),
            min_frequency=int(params["min_frequency"]),
            train_domain=params["train_domain"],
            model_max_length=int(params["model_max_length"]),
        )
        print(
            f"tokenizer: {tok.get_vocab_size()} tokens → {params['out_dir']} "
            f"[{time.perf_counter() - t0:.1f} s]"
        )
    if args.command in ("encode", "all"):
        t0 = time.perf_counter()
        summary = encode_corpus(
            params["corpus_dir"],
            params["out_dir"],
            params["tokens_dir"],
            params["freq_path"],
            train_domain=params["train_domain"],
        )
        for domain, splits in summary["domains"].items():
            text = ", ".join(f"{s} {v['tokens']:,} tokens" for s, v in splits.items())
            print(f"{domain:>14}: {text}")
        print(f"encode: done [{time.perf_counter() - t0:.1f} s] → {params['tokens_dir']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
