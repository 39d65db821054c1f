"""Training throughput and model FLOP utilisation (MFU) of the default models on this machine.

    python benchmarks/bench_train.py [--params params.yaml] [--steps 12] [--sections ...]
    python benchmarks/bench_train.py --compile   # eager vs torch.compile, alternating blocks

Peak: the best of several large float32 matmuls (``n×n @ n×n``, ``2n³`` FLOPs) with torch's
default thread count — the machine's achievable fp32 matmul rate. Each default model (the
``train_*`` sections, merged over ``train``) then runs the real training step
(``geolib.models.train.train_step``: forward, backward, clipping, fused AdamW) on batches drawn as
in training (real tokens if present, else uniform random ids), timed after warm-up steps. The
best of ``--repeats`` timed blocks is reported, since other processes only ever slow a block.

FLOPs per token: ``6·N_matmul + 12·n_layers·d_model·seq_len`` with the LM head counted on the
fraction of positions it runs on (all for decoders, the masked 15% for the encoder), see
``geolib.models.families.train_flops_per_token``. MFU = achieved FLOP/s ÷ measured peak.
Writes ``benchmarks/results/bench_train.json``. Numbers on a shared machine are noisy.

``--compile`` also builds each model a second time from the same seed, compiles it with
``torch.compile`` (inductor, the default backend; on CPU it generates C++ and needs a compiler)
and times eager and compiled training steps in alternating blocks on the same batches, so that
both see the same machine load. Reported per model: tokens/s of both (best and median block),
the speed-up, the compile time (the first compiled steps' time beyond an eager step's) and the
largest difference between the two models' losses, step by step (same initial weights, same
batches, same optimizer). The encoder's loss (``geolib.models.train.lm_loss_sum``) calls
``model.base_model`` and ``model.cls`` rather than ``model(...)``, which ``torch.compile(model)``
would leave uncompiled; for it those two modules are compiled in place instead.
Results go to ``benchmarks/results/bench_train_compile.json``.

``--precision`` times the training step of each family at ``--widths`` (default 128 and 256;
``d_ff`` and the head count scale with the width) in float32 and under
``torch.autocast("cpu", dtype=torch.bfloat16)`` (AMX-BF16 where the CPU has it, else AVX-512-BF16:
the header names the flags found; without AMX bf16 was the slower of the two here), with torch's
SDPA attention and with the eager (matmul + softmax) attention, whose bf16 backward is faster on
this CPU than SDPA's flash kernel; ``--compile`` adds compiled variants. Same initial weights and
batches for every variant, timed in round-robin blocks so that all see the same machine load.
MFU is reported against both measured peaks (fp32 and bf16 matmul at 2048², and bf16 at 512²,
the size of these models' matmuls). Weights, optimizer state and gradients stay float32 (autocast
only runs the matmuls in bf16). Results go to ``benchmarks/results/bench_train_precision.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from geolib.config import load_params
from geolib.models.families import build_model, count_params, matmul_params, train_flops_per_token
from geolib.models.train import (
    keep_freed_memory,
    make_batch,
    make_optimizer,
    resolve_vocab,
    train_step,
)
from geolib.models.train_config import lr_at, params_to_config

ROOT = Path(__file__).resolve().parents[1]
FALLBACK_PARAMS = ROOT / "pipeline" / "train.params.yaml"
DEFAULT_OUT = str(ROOT / "benchmarks" / "results" / "bench_train.json")
COMPILE_OUT = ROOT / "benchmarks" / "results" / "bench_train_compile.json"
PRECISION_OUT = ROOT / "benchmarks" / "results" / "bench_train_precision.json"


def bf16_flags(cpuinfo: str = "/proc/cpuinfo") -> dict[str, bool]:
    """Which bf16 units the CPU reports: AMX tiles (``amx_bf16``) or AVX-512 (``avx512_bf16``);
    machines of one kind have differed here, and bf16's speed depends on it."""
    try:
        words = set(Path(cpuinfo).read_text().split())
    except OSError:
        words = set()
    return {flag: flag in words for flag in ("amx_bf16", "avx512_bf16")}


def matmul_peak(
    n: int = 2048, repeats: int = 5, inner: int = 4, dtype: torch.dtype = torch.float32
) -> float:
    """Best matmul rate in FLOP/s over ``repeats`` blocks of ``inner`` products."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    out = torch.empty(n, n, dtype=dtype)
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
        "precision": cfg.precision,
        "attention": cfg.model.attn_implementation,
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


def compiled_for_training(model, is_decoder: bool):
    """What to pass to ``train_step`` instead of ``model`` to run its loss compiled.

    Decoders: ``torch.compile(model)`` (the loss calls ``model(...)``). The encoder's loss calls
    ``model.base_model`` and ``model.cls``, so those are compiled in place (``Module.compile``)
    and the model itself is returned. Parameters are shared either way, so the optimizer made
    from ``model`` trains the compiled one.
    """
    if is_decoder:
        return torch.compile(model)
    model.base_model.compile()
    model.cls.compile()
    return model


def dynamo_graphs() -> int:
    """Graphs compiled so far in this process (a recompile in a timed block would show here)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:  # pragma: no cover - private API
        return -1
    return int(counters["stats"]["unique_graphs"])


def bench_compile(params: Path, section: str, steps: int, repeats: int, warmup: int) -> dict:
    """Eager vs compiled training steps of one model: same seed, same batches, alternating."""
    cfg, vocab, tokens = config_and_tokens(params, section)
    rng = np.random.default_rng(cfg.seed)
    batches = [make_batch(tokens, rng, cfg, vocab) for _ in range(steps + warmup)]
    lr = lr_at(cfg.warmup_steps + 1, cfg)
    runs = {}
    for name in ("eager", "compiled"):
        model = build_model(cfg.model, vocab.size, seed=cfg.seed)
        optimizer = make_optimizer(model, cfg)
        step_model = (
            compiled_for_training(model, cfg.model.is_decoder) if name == "compiled" else model
        )
        runs[name] = {"model": step_model, "optimizer": optimizer, "losses": [], "warmup_s": []}
    first = [p.detach().clone() for p in runs["eager"]["model"].parameters()]
    same_init = all(
        torch.equal(a, b)
        for a, b in zip(first, runs["compiled"]["model"].parameters(), strict=True)
    )

    def step(run: dict, inputs: np.ndarray, targets: np.ndarray) -> None:
        loss = train_step(run["model"], run["optimizer"], inputs, targets, cfg, lr, "cpu")
        run["losses"].append(loss)

    graphs0 = dynamo_graphs()
    for inputs, targets in batches[:warmup]:  # lockstep; the compiled ones compile here
        for run in runs.values():
            t0 = time.perf_counter()
            step(run, inputs, targets)
            run["warmup_s"].append(time.perf_counter() - t0)
    graphs_warmup = dynamo_graphs() - graphs0
    block_s: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(repeats):  # alternating blocks (ABBA order) over the same batches
        for name in ("eager", "compiled") if r % 2 == 0 else ("compiled", "eager"):
            run = runs[name]
            t0 = time.perf_counter()
            for inputs, targets in batches[warmup:]:
                step(run, inputs, targets)
            block_s[name].append((time.perf_counter() - t0) / steps)
    graphs_timed = dynamo_graphs() - graphs0 - graphs_warmup

    out = {
        "section": section,
        "family": cfg.model.family,
        "tokens_per_step": cfg.tokens_per_step,
        "tokens": "real" if (ROOT / cfg.train_tokens).is_file() else "uniform random ids",
    }
    for name, run in runs.items():
        best, med = min(block_s[name]), statistics.median(block_s[name])
        out[name] = {
            "step_s_best": best,
            "step_s_median": med,
            "tokens_per_s_best": cfg.tokens_per_step / best,
            "tokens_per_s_median": cfg.tokens_per_step / med,
            "warmup_step_s": run["warmup_s"],
        }
    eager_step = out["eager"]["step_s_median"]
    comp_warm = runs["compiled"]["warmup_s"]
    diffs = [
        abs(a - b) for a, b in zip(runs["eager"]["losses"], runs["compiled"]["losses"], strict=True)
    ]
    out |= {
        "speedup_best": out["eager"]["step_s_best"] / out["compiled"]["step_s_best"],
        "speedup_median": eager_step / out["compiled"]["step_s_median"],
        "compile_s_first_step": comp_warm[0] - eager_step,
        "compile_s_warmup": sum(comp_warm) - len(comp_warm) * eager_step,
        "graphs_compiled_warmup": graphs_warmup,
        "graphs_compiled_timed": graphs_timed,
        "same_initial_weights": same_init,
        "steps_compared": len(diffs),
        "loss_abs_diff_by_step": diffs,
        "loss_max_abs_diff": max(diffs),
        "loss_max_rel_diff": max(
            d / abs(a) for d, a in zip(diffs, runs["eager"]["losses"], strict=True)
        ),
        "losses_eager": runs["eager"]["losses"],
        "losses_compiled": runs["compiled"]["losses"],
    }
    return out


def main_compile(params: Path, sections: list[str], args: argparse.Namespace) -> int:
    warmup = max(args.warmup, 2)  # the compiled model compiles in its first steps
    results = [bench_compile(params, s, args.steps, args.repeats, warmup) for s in sections]
    out = Path(COMPILE_OUT if args.out == DEFAULT_OUT else args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"cpu_threads": torch.get_num_threads(), "torch": torch.__version__}
    out.write_text(json.dumps({"machine": meta, "models": results}, indent=1) + "\n")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for r in results:
        e, c = r["eager"], r["compiled"]
        print(f"{r['section']} ({r['tokens']}): tokens/s best (median of {args.repeats} blocks)")
        print(f"  eager    {e['tokens_per_s_best']:9,.0f} ({e['tokens_per_s_median']:,.0f})")
        print(f"  compiled {c['tokens_per_s_best']:9,.0f} ({c['tokens_per_s_median']:,.0f})")
        print(f"  speed-up {r['speedup_best']:.3f}x ({r['speedup_median']:.3f}x)")
        print(
            f"  compile  {r['compile_s_warmup']:.1f} s over the warm-up steps "
            f"(first step {r['compile_s_first_step']:.1f} s); graphs compiled: "
            f"{r['graphs_compiled_warmup']} in warm-up, {r['graphs_compiled_timed']} when timed"
        )
        first = ", ".join(f"{x:.1e}" for x in r["loss_abs_diff_by_step"][:warmup])
        print(
            f"  losses   |eager - compiled| at steps 1-{warmup}: {first}; max "
            f"{r['loss_max_abs_diff']:.2e} (relative {r['loss_max_rel_diff']:.1e}) over "
            f"{r['steps_compared']} steps; same initial weights: {r['same_initial_weights']}"
        )
    print(f"wrote {out}")
    return 0


def at_width(cfg, width: int, attention: str):
    """``cfg`` with the model at ``width`` (``d_ff`` and heads scaled from the configured width,
    head size kept) and the given attention implementation."""
    m = cfg.model
    scale = width / m.d_model
    model = replace(
        m,
        d_model=width,
        d_ff=round(m.d_ff * scale),
        n_heads=max(1, round(m.n_heads * scale)),
        attn_implementation=attention,
    )
    return replace(cfg, model=model)


#: the variants timed by ``--precision``: name -> (autocast dtype or None, attention, compiled)
VARIANTS = {
    "fp32": (None, "sdpa", False),
    "fp32 (eager attention)": (None, "eager", False),
    "bf16 (sdpa)": (torch.bfloat16, "sdpa", False),
    "bf16 (eager attention)": (torch.bfloat16, "eager", False),
}
COMPILED = {
    "fp32 compiled": (None, "sdpa", True),
    "bf16 (eager attention) compiled": (torch.bfloat16, "eager", True),
}


def bench_precision(
    params: Path, section: str, width: int, steps: int, repeats: int, warmup: int, variants: dict
) -> dict:
    """tokens/s of the training step of one family at one width, per variant (round-robin)."""
    cfg0, vocab, tokens = config_and_tokens(params, section)
    rng = np.random.default_rng(cfg0.seed)
    batches = [make_batch(tokens, rng, cfg0, vocab) for _ in range(steps + warmup)]
    lr = lr_at(cfg0.warmup_steps + 1, cfg0)
    runs = {}
    for name, (dtype, attention, compiled) in variants.items():
        cfg = replace(at_width(cfg0, width, attention), precision="bf16" if dtype else "fp32")
        model = build_model(cfg.model, vocab.size, seed=cfg.seed)
        step_model = compiled_for_training(model, cfg.model.is_decoder) if compiled else model
        runs[name] = {
            "cfg": cfg,
            "model": step_model,
            "optimizer": make_optimizer(model, cfg),
            "dtype": dtype,
            "losses": [],
            "block_s": [],
            "warmup_s": 0.0,
        }

    def step(run: dict, inputs: np.ndarray, targets: np.ndarray) -> None:
        # the variant's precision is its cfg's: train_step runs the forward under its autocast
        loss = train_step(run["model"], run["optimizer"], inputs, targets, run["cfg"], lr, "cpu")
        run["losses"].append(loss)

    for run in runs.values():  # compiled variants compile here
        t0 = time.perf_counter()
        for inputs, targets in batches[:warmup]:
            step(run, inputs, targets)
        run["warmup_s"] = time.perf_counter() - t0
    order = list(runs)
    for r in range(repeats):  # round-robin, rotated each block
        for name in order[r % len(order) :] + order[: r % len(order)]:
            run = runs[name]
            t0 = time.perf_counter()
            for inputs, targets in batches[warmup:]:
                step(run, inputs, targets)
            run["block_s"].append((time.perf_counter() - t0) / steps)
    cfg = runs[order[0]]["cfg"]
    model = runs[order[0]]["model"]
    head_fraction = 1.0 if cfg.model.is_decoder else cfg.mask_prob
    flops_per_token = train_flops_per_token(model, cfg.seq_len, head_fraction)
    base = runs[order[0]]["losses"]
    out = {
        "section": section,
        "family": cfg.model.family,
        "d_model": width,
        "n_layers": cfg.model.n_layers,
        "matmul_params": matmul_params(model),
        "tokens_per_step": cfg.tokens_per_step,
        "flops_per_token": flops_per_token,
        "variants": {},
    }
    for name, run in runs.items():
        best, med = min(run["block_s"]), statistics.median(run["block_s"])
        out["variants"][name] = {
            "tokens_per_s_best": cfg.tokens_per_step / best,
            "tokens_per_s_median": cfg.tokens_per_step / med,
            "flops_per_s_median": flops_per_token * cfg.tokens_per_step / med,
            "warmup_s": run["warmup_s"],
            "loss_max_abs_diff_vs_fp32": max(
                abs(a - b) for a, b in zip(base, run["losses"], strict=True)
            ),
        }
    return out


def main_precision(params: Path, sections: list[str], args: argparse.Namespace) -> int:
    variants = VARIANTS | (COMPILED if args.compile else {})
    peaks = {
        "fp32 2048": matmul_peak(2048),
        "bf16 2048": matmul_peak(2048, dtype=torch.bfloat16),
        "bf16 512": matmul_peak(512, inner=64, dtype=torch.bfloat16),
        "fp32 512": matmul_peak(512, inner=64),
    }
    results = [
        bench_precision(params, s, w, args.steps, args.repeats, args.warmup, variants)
        for s in sections
        for w in args.widths
    ]
    for r in results:
        fp32 = r["variants"]["fp32"]["tokens_per_s_median"]
        for v in r["variants"].values():
            v["speedup_vs_fp32"] = v["tokens_per_s_median"] / fp32
            v["mfu_fp32_peak"] = v["flops_per_s_median"] / peaks["fp32 2048"]
            v["mfu_bf16_peak"] = v["flops_per_s_median"] / peaks["bf16 2048"]
    out = Path(PRECISION_OUT if args.out == DEFAULT_OUT else args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"cpu_threads": torch.get_num_threads(), "torch": torch.__version__}
    meta["bf16_flags"] = bf16_flags()
    result = {"machine": meta, "peaks_flops": peaks, "models": results}
    out.write_text(json.dumps(result, indent=1) + "\n")
    flags = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in meta["bf16_flags"].items())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; CPU flags: {flags}")
    print("matmul peaks (GFLOP/s):")
    print("  " + ", ".join(f"{k} {v / 1e9:.0f}" for k, v in peaks.items()))
    print("model     d    variant                   tok/s (median)  x fp32  MFU fp32/bf16 peak")
    for r in results:
        for name, v in r["variants"].items():
            model = r["section"].removeprefix("train_")
            print(
                f"{model:<9} {r['d_model']:<4} {name:<25} {v['tokens_per_s_median']:>9,.0f}"
                f"       {v['speedup_vs_fp32']:.2f}   {v['mfu_fp32_peak']:.0%} / "
                f"{v['mfu_bf16_peak']:.0%}"
            )
    print(f"wrote {out}")
    return 0


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
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument(
        "--compile",
        action="store_true",
        help="eager vs torch.compile (inductor) in alternating blocks, with compile time and "
        "loss agreement (writes bench_train_compile.json unless --out is given)",
    )
    parser.add_argument(
        "--precision",
        action="store_true",
        help="float32 vs bf16 autocast (SDPA and eager attention) per family and width, in "
        "round-robin blocks (with --compile: compiled variants too); writes "
        "bench_train_precision.json unless --out is given",
    )
    parser.add_argument("--widths", type=int, nargs="*", default=[128, 256])
    args = parser.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
    params = Path(args.params)
    if "train" not in load_params(params):
        params = FALLBACK_PARAMS
    sections = args.sections or [s for s in load_params(params) if s.startswith("train_")]
    torch.use_deterministic_algorithms(True, warn_only=True)
    keep_freed_memory()  # as geolib.models.train does on CPU
    if args.precision:
        return main_precision(params, sections, args)
    if args.compile:
        return main_compile(params, sections, args)
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
