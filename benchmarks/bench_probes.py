"""Probe throughput against training throughput, on the same model and batches, in one run.

    python benchmarks/bench_probes.py [--params params.yaml] [--steps 6] [--repeats 3]

For each default model (the ``train_*`` sections merged over ``train``), times the real
training step (``geolib.models.train.train_step``: forward, backward, clipping, AdamW) and the probe
pass (``geolib.measure.probes.states_and_gradients``: forward, backward to every layer's residual
stream, no weight gradients) on the same batches, in alternating blocks so that machine noise
hits both alike; the best block of each is kept. Reports tokens/s of each and the ratio
probe/train (the target is >= 0.8). Times the forward pass for states alike
(``probes.residual_states``, which runs the base model only) against the same hooks on the
whole model's forward (the LM head included, as before), and checks that both give the same
states bit for bit. Run it alone: other busy processes ruin torch's threads.
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
from geolib.measure.probes import residual_modules, residual_states, states_and_gradients
from geolib.models.families import build_model
from geolib.models.train import keep_freed_memory, make_batch, make_optimizer, train_step
from geolib.models.train_config import lr_at

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

    def states_block(full: bool) -> tuple[float, list[torch.Tensor]]:
        model.eval()
        t0 = time.perf_counter()
        for x, _ in batches:
            x = torch.from_numpy(x)
            states = full_model_states(model, x) if full else residual_states(model, x)
        return time.perf_counter() - t0, states

    train_block(), probe_block(), states_block(True), states_block(False)  # warm-up
    t_train, t_probe, t_full, t_base = (float("inf"),) * 4
    for _ in range(repeats):
        t_train = min(t_train, train_block())
        t_probe = min(t_probe, probe_block())
        t, full = states_block(True)
        t_full = min(t_full, t)
        t, base = states_block(False)
        t_base = min(t_base, t)
    if not all(torch.equal(a, b) for a, b in zip(full, base, strict=True)):
        raise RuntimeError(f"{section}: the base-model states differ from the full forward's")
    n_tokens = steps * cfg.tokens_per_step
    return {
        "section": section,
        "family": cfg.model.family,
        "tokens_per_block": n_tokens,
        "train_tokens_per_s": n_tokens / t_train,
        "probe_tokens_per_s": n_tokens / t_probe,
        "ratio_probe_over_train": t_train / t_probe,
        "states_full_forward_tokens_per_s": n_tokens / t_full,
        "states_base_model_tokens_per_s": n_tokens / t_base,
        "ratio_states_base_over_full": t_full / t_base,
    }


def full_model_states(model, inputs: torch.Tensor) -> list[torch.Tensor]:
    """The residual states as read before: the same hooks, the whole model's forward."""
    captured: list[torch.Tensor] = []

    def keep(_m, _inputs, out):
        captured.append(out[0] if isinstance(out, tuple) else out)

    handles = [m.register_forward_hook(keep) for m in residual_modules(model)]
    try:
        with torch.no_grad():
            model(input_ids=inputs)
    finally:
        for h in handles:
            h.remove()
    return [h.detach().cpu() for h in captured]


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
            f"{r['probe_tokens_per_s']:,.0f} tok/s, ratio {r['ratio_probe_over_train']:.2f}; "
            f"states {r['states_full_forward_tokens_per_s']:,.0f} -> "
            f"{r['states_base_model_tokens_per_s']:,.0f} tok/s "
            f"({r['ratio_states_base_over_full']:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
