"""Training throughput and model FLOP utilisation (MFU) of the default models on this machine.

    python benchmarks/bench_train.py [--params params.yaml] [--steps 12] [--sections ...]

Peak: the best of several large float32 matmuls (``n×n @ n×n``, ``2n³`` FLOPs) with torch's
default thread count — the machine's achievable fp32 matmul rate. Each default model (the
``train_*`` sections, merged over ``train``) then runs the real training step
(``geolib.train.train_step``: forward, backward, clipping, fused AdamW) on batches drawn as in
training (real tokens if present, else uniform random ids), timed after warm-up steps. The
best of ``--repeats`` timed blocks is reported, since other processes only ever slow a block.

FLOPs per token: ``6·N_matmul + 12·n_layers·d_model·seq_len`` with the LM head counted on the
fraction of positions it runs on (all for decoders, the masked 15% for the encoder), see
``geolib.models.train_flops_per_token``. MFU = achieved FLOP/s ÷ measured peak.
Writes ``benchmarks/results/bench_train.json``. Numbers on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from geolib.config import load_params  # noqa: E402
from geolib.models import build_model, count_params, matmul_params, train_flops_per_token  # noqa: E402
from geolib.train import (  # noqa: E402
    keep_freed_memory,
    lr_at,
    make_batch,
    make_optimizer,
    params_to_config,
    resolve_vocab,
    train_step,
)

FALLBACK_PARAMS = ROOT / "pipeline" / "train.params.yaml"


def matmul_peak(n: int = 2048, repeats: int = 5, inner: int = 4) -> float:
    """Best fp32 matmul rate in FLOP/s over ``repeats`` blocks of ``inner`` products."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)
    torch.mm(a, b, out=out)
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            torch.mm(a, b, out=out)
        best = max(best, inner * 2 * n**3 / (time.perf_counter() - t0))
    return best


def config_and_tokens(params: Path, section: str):
    """``(TrainConfig, Vocab, tokens)`` of one default model: real tokens and tokenizer if the
    pipeline has built them, else the configured vocabulary and uniform random ids."""
    cfg = params_to_config(params, section, base="train")
    if not (ROOT / str(cfg.tokenizer)).is_dir():  # no tokenizer built yet: configured size
        cfg = replace(cfg, tokenizer=None, vocab_size=cfg.vocab_size or 4096, mask_token_id=2)
    cfg = replace(cfg, tokenizer=cfg.tokenizer and str(ROOT / cfg.tokenizer))
    vocab, _ = resolve_vocab(cfg)
    train_path = ROOT / cfg.train_tokens
    tokens = (
        np.load(train_path, mmap_mode="r")  # same windows as training
        if train_path.is_file()
        else np.random.default_rng(0).integers(3, vocab.size, 1_000_000).astype(np.uint16)
    )
    return cfg, vocab, tokens


def bench_model(params: Path, section: str, steps: int, repeats: int, warmup: int) -> dict:
    cfg, vocab, tokens = config_and_tokens(params, section)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, vocab.size, seed=cfg.seed)
    optimizer = make_optimizer(model, cfg)
    rng = np.random.default_rng(cfg.seed)
    batches = [make_batch(tokens, rng, cfg, vocab) for _ in range(steps + warmup)]
    lr = lr_at(cfg.warmup_steps + 1, cfg)
    for inputs, targets in batches[:warmup]:
        train_step(model, optimizer, inputs, targets, cfg, lr, "cpu")
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for inputs, targets in batches[warmup:]:
            train_step(model, optimizer, inputs, targets, cfg, lr, "cpu")
        best = min(best, (time.perf_counter() - t0) / steps)
    head_fraction = 1.0 if cfg.model.is_decoder else cfg.mask_prob
    flops_per_token = train_flops_per_token(model, cfg.seq_len, head_fraction)
    tokens_per_s = cfg.tokens_per_step / best
    return {
        "section": section,
        "family": cfg.model.family,
        "params": count_params(model),
        "matmul_params": matmul_params(model),
        "batch_size": cfg.batch_size,
        "grad_accum": cfg.grad_accum,
        "seq_len": cfg.seq_len,
        "tokens_per_step": cfg.tokens_per_step,
        "step_s": best,
        "tokens_per_s": tokens_per_s,
        "flops_per_token": flops_per_token,
        "flops_per_s": flops_per_token * tokens_per_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    parser.add_argument("--sections", nargs="*", default=None, help="default: every train_*")
    parser.add_argument("--steps", type=int, default=8, help="timed steps per block")
    parser.add_argument("--repeats", type=int, default=3, help="timed blocks (best is kept)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_train.json"))
    args = parser.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
    params = Path(args.params)
    if "train" not in load_params(params):
        params = FALLBACK_PARAMS
    sections = args.sections or [s for s in load_params(params) if s.startswith("train_")]
    torch.use_deterministic_algorithms(True, warn_only=True)
    keep_freed_memory()  # as geolib.train does on CPU
    peak_before = matmul_peak()
    models = [bench_model(params, s, args.steps, args.repeats, args.warmup) for s in sections]
    peak = max(peak_before, matmul_peak())
    for m in models:
        m["mfu"] = m["flops_per_s"] / peak
    result = {
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "cpu_threads": torch.get_num_threads(),
            "torch": torch.__version__,
        },
        "params_file": str(params.relative_to(ROOT) if params.is_relative_to(ROOT) else params),
        "peak_fp32_matmul_flops": peak,
        "models": models,
        "note": "best of repeated blocks; a shared machine makes these numbers noisy",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"peak fp32 matmul: {peak / 1e9:.1f} GFLOP/s ({torch.get_num_threads()} threads)")
    for m in models:
        print(
            f"{m['section']:>14}: {m['params'] / 1e6:.2f}M params, {m['tokens_per_s']:,.0f} tok/s, "
            f"{m['flops_per_s'] / 1e9:.1f} GFLOP/s, MFU {m['mfu']:.0%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
