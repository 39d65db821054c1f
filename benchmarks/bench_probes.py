"""Probe throughput against training throughput, on the same model and batches, in one run.

    python benchmarks/bench_probes.py [--params params.yaml] [--steps 6] [--repeats 3]

For each default model (the ``train_*`` sections merged over ``train``), times the real
training step (``geolib.models.train.train_step``: forward, backward, clipping, AdamW) and the probe
pass (``geolib.measure.probes.states_and_gradients``: forward, backward to every layer's residual
stream, no weight gradients) on the same batches, in alternating blocks so that machine noise
hits both alike; the best block of each is kept. Reports tokens/s of each and the ratio
probe/train (the target is >= 0.8). Run it alone: other busy processes ruin torch's threads.
Writes ``benchmarks/results/bench_probes.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

# the same models and tokens (a script's own folder is first on sys.path)
from bench_train import config_and_tokens

from geolib.config import load_params
from geolib.measure.probes import states_and_gradients
from geolib.models.families import build_model
from geolib.models.train import (
    keep_freed_memory,
    lr_at,
    make_batch,
    make_optimizer,
    train_step,
)

ROOT = Path(__file__).resolve().parents[1]


def bench_model(params: Path, section: str, steps: int, repeats: int) -> dict:
    cfg, vocab, tokens = config_and_tokens(params, section)
    model = build_model(cfg.model, vocab.size, seed=cfg.seed)
    optimizer = make_optimizer(model, cfg)
    rng = np.random.default_rng(cfg.seed)
    batches = [make_batch(tokens, rng, cfg, vocab) for _ in range(steps)]
    lr = lr_at(cfg.warmup_steps + 1, cfg)

    def train_block() -> float:
        model.train()
        t0 = time.perf_counter()
        for x, y in batches:
            train_step(model, optimizer, x, y, cfg, lr, "cpu")
        return time.perf_counter() - t0

    def probe_block() -> float:
        model.eval()
        t0 = time.perf_counter()
        for x, y in batches:
            states_and_gradients(model, torch.from_numpy(x), torch.from_numpy(y))
        return time.perf_counter() - t0

    train_block(), probe_block()  # warm-up
    t_train, t_probe = float("inf"), float("inf")
    for _ in range(repeats):
        t_train = min(t_train, train_block())
        t_probe = min(t_probe, probe_block())
    n_tokens = steps * cfg.tokens_per_step
    return {
        "section": section,
        "family": cfg.model.family,
        "tokens_per_block": n_tokens,
        "train_tokens_per_s": n_tokens / t_train,
        "probe_tokens_per_s": n_tokens / t_probe,
        "ratio_probe_over_train": t_train / t_probe,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    parser.add_argument("--sections", nargs="*", default=None, help="default: every train_*")
    parser.add_argument("--steps", type=int, default=6, help="batches per timed block")
    parser.add_argument("--repeats", type=int, default=3, help="timed blocks of each kind")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_probes.json"))
    args = parser.parse_args(argv)
    params = Path(args.params)
    sections = args.sections or [s for s in load_params(params) if s.startswith("train_")]
    torch.use_deterministic_algorithms(True, warn_only=True)
    keep_freed_memory()
    rows = [bench_model(params, s, args.steps, args.repeats) for s in sections]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"threads": torch.get_num_threads(), "models": rows}, indent=1))
    for r in rows:
        print(
            f"{r['section']:>14}: train {r['train_tokens_per_s']:,.0f} tok/s, probe "
            f"{r['probe_tokens_per_s']:,.0f} tok/s, ratio {r['ratio_probe_over_train']:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
