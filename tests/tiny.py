"""A tiny trained run for stage tests: d = 16, a few steps, checkpoints every few steps."""

from __future__ import annotations

import hashlib
from pathlib import Path

from geolib.models.families import ModelConfig
from geolib.models.train import train
from geolib.models.train_config import TrainConfig

OLD_WARMUP = 50


def train_tiny(
    run_dir: Path,
    *,
    tokenizer: Path,
    train_tokens: Path,
    family: str = "pythia",
    n_layers: int = 2,
    total_steps: int = 8,
    checkpoint_every: int = 4,
    log_max: int = 2,
    max_steps: int | None = None,
    **overrides,
) -> Path:
    """Train a 16-wide model of ``family`` into ``run_dir`` (batch 4 × 16 tokens); ``overrides``
    are further ``TrainConfig`` fields (``mask_prob``, ``optimizer``, ``lr`` …); ``max_steps``
    stops early (a simulated kill), as in :func:`geolib.models.train.train`."""
    if "warmup_steps" not in overrides and total_steps < OLD_WARMUP:
        # the schedule these fixtures were made with (a 50-step warmup over fewer steps: the
        # rate rises by peak/50 a step), said now as a warmup over the whole run, since a
        # warmup longer than the run is refused; the same rates, so the same runs
        peak = overrides.get("lr", TrainConfig.lr)
        overrides.update(warmup_steps=total_steps, lr=peak * total_steps / OLD_WARMUP)
    cfg = TrainConfig(
        model=ModelConfig(
            family=family, d_model=16, n_layers=n_layers, n_heads=2, d_ff=32, context=16
        ),
        train_tokens=str(train_tokens),
        val_tokens=None,
        tokenizer=str(tokenizer),
        batch_size=4,
        seq_len=16,
        total_steps=total_steps,
        checkpoint_every=checkpoint_every,
        log_max=log_max,
        **overrides,
    )
    train(cfg, run_dir, progress=False, max_steps=max_steps)
    return run_dir


def tree_hashes(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder``, by relative path (to show a run untouched)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def tiny_corpus(root: Path, **files: tuple[int, int]) -> Path:
    """The test vocabulary's tokenizer in ``root/tokenizer`` and uniform token files: each
    ``name=(high, n)`` writes ``root/<name>.npy``, ``n`` ids in ``[3, high)`` (no specials), from
    one seeded generator in the order given. Returns the tokenizer folder."""
    import numpy as np

    from tests.models.test_checkpoints import make_tokenizer

    tokenizer = make_tokenizer(root / "tokenizer")
    rng = np.random.default_rng(0)
    for name, (high, n) in files.items():
        np.save(root / f"{name}.npy", rng.integers(3, high, n).astype(np.uint16))
    return tokenizer


def tiny_train_section(train_tokens: str, val_tokens: str) -> dict:
    """A ``train`` section of a parameters file over the synthetic corpus of
    ``tests.models.test_train.token_files`` (its own vocabulary, no tokenizer folder)."""
    from tests.models.test_train import V

    return {
        "train_tokens": train_tokens,
        "val_tokens": val_tokens,
        "tokenizer": None,
        "vocab_size": V,
    }


def probe_section(root: Path, out: Path, **keys) -> dict:
    """A probe stage's section over the conftest's decoder + encoder runs (``root``), writing
    to ``out``: the keys gradient_energy and residual_isotropy share, plus ``keys``."""
    return {
        "seed": 0,
        "device": "cpu",
        "runs": [str(root / "pythia"), str(root / "bert")],
        "revisions": None,
        "tokens": str(root / "val.npy"),
        "text": None,  # hub models only
        "max_text_tokens": 1000,
        "seq_len": 16,
        "n_eval": 10,
        "batch_size": 4,
        "mask_prob": None,  # the runs' own: 0.3
        "ranks": [1, 2],
        "n_controls": 5,
        "out_dir": str(out),
        **keys,
    }


def run_quietly(experiment, section: dict) -> dict:
    """``experiment.run_stage(section)`` with torch seeded and no progress lines."""
    import torch

    torch.manual_seed(0)
    return experiment.run_stage(section, log=lambda *_: None)


def write_tiny_gguf(path: Path, *, d: int = 16, n_layers: int = 2, seed: int = 0) -> Path:
    """A tiny llama model in a GGUF file as SmolLM2's is laid out (float32 tensors, a byte-level
    BPE tokenizer of the 256 byte symbols and two merges, tied embedding): ``d`` wide, 2 heads,
    ``n_layers`` blocks, random weights from ``seed``."""
    import gguf
    import numpy as np
    from tokenizers.pre_tokenizers import ByteLevel

    rng = np.random.default_rng(seed)
    symbols = sorted(ByteLevel.alphabet())
    tokens = ["<unk>", "<s>", "</s>", *symbols, "he", "ll"]
    vocab, ffn = len(tokens), 2 * d
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(n_layers)
    w.add_context_length(64)
    w.add_embedding_length(d)
    w.add_feed_forward_length(ffn)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_rope_dimension_count(d // 2)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([3, 3, 3] + [1] * (vocab - 3))  # 3: control, 1: normal
    w.add_token_merges(["h e", "l l"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(False)

    def add(name: str, *shape: int) -> None:
        scale = 1.0 if len(shape) == 1 else 1 / np.sqrt(shape[-1])
        base = 1.0 if len(shape) == 1 else 0.0
        w.add_tensor(name, (base + scale * rng.standard_normal(shape)).astype(np.float32))

    add("token_embd.weight", vocab, d)
    for i in range(n_layers):
        add(f"blk.{i}.attn_norm.weight", d)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            add(f"blk.{i}.{name}.weight", d, d)
        add(f"blk.{i}.ffn_norm.weight", d)
        add(f"blk.{i}.ffn_gate.weight", ffn, d)
        add(f"blk.{i}.ffn_up.weight", ffn, d)
        add(f"blk.{i}.ffn_down.weight", d, ffn)
    add("output_norm.weight", d)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
