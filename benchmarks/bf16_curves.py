"""Does bf16 training stay within float32's seed spread? Data for choosing the precision.

    python benchmarks/bf16_curves.py [--models pythia olmo bert]

Trains each default Paper A model once more, seed ``common.seed``, with every training and
validation step under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (AMX-BF16 where the CPU
has it; weights, optimizer state and checkpoints stay float32) and eager attention (the faster bf16
backward here, ``bench_train.py --precision``), into ``benchmarks/results/bf16_runs/<model>``.
It then compares that run's validation-loss curve with the float32 runs of the same recipe —
the default run and its seed replicates, from the pipeline — step by step: the bf16 loss, the
float32 seeds' range and mean, and whether the bf16 loss lies inside the range. The
validation loss of the bf16 run is itself computed under autocast (a few 1e-3 nats against a
float32 evaluation, far below the seed spread). Results go to
``benchmarks/results/bf16_curves.json``. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from geolib.config import load_params
from geolib.models.runs import read_metrics, read_run_info
from geolib.models.train import train
from geolib.models.train_config import params_to_config

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"


def fp32_runs(params: dict, model: str) -> list[Path]:
    """The pipeline's float32 runs of ``model``: the default run and its seed replicates."""
    root = Path(params["replicas"]["run_root"])
    return [ROOT / "runs" / model] + [
        ROOT / root / f"{model}-s{s}" for s in params["replicas"]["seeds"]
    ]


def val_curve(run: Path) -> dict[int, float]:
    m = read_metrics(run)
    m = m[m["val_loss"].notna()]
    return dict(zip(m["step"].astype(int), m["val_loss"].astype(float), strict=True))


def compare(bf16: dict[int, float], fp32: list[dict[int, float]]) -> dict:
    steps = sorted(set(bf16).intersection(*fp32))
    rows = []
    for s in steps:
        seeds = np.array([c[s] for c in fp32])
        rows.append(
            {
                "step": s,
                "bf16": bf16[s],
                "fp32_min": float(seeds.min()),
                "fp32_max": float(seeds.max()),
                "fp32_mean": float(seeds.mean()),
                "inside": bool(seeds.min() <= bf16[s] <= seeds.max()),
            }
        )
    late = [r for r in rows if r["step"] >= 1]
    return {
        "steps": rows,
        "inside": f"{sum(r['inside'] for r in late)} of {len(late)} evaluations after step 0",
        "final": rows[-1],
        "max_abs_minus_mean": max(abs(r["bf16"] - r["fp32_mean"]) for r in late),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--models", nargs="+", default=["pythia", "olmo", "bert"])
    args = parser.parse_args(argv)
    params = load_params(ROOT / args.params)
    out: dict = {"torch": torch.__version__, "threads": torch.get_num_threads(), "models": {}}
    for model in args.models:
        fp32 = fp32_runs(params, model)
        missing = [str(r) for r in fp32 if not (r / "run.json").is_file()]
        if missing:
            raise SystemExit(f"float32 runs missing (run the pipeline first): {missing}")
        cfg = params_to_config(ROOT / args.params, f"train_{model}", base="train")
        cfg = replace(cfg, model=replace(cfg.model, attn_implementation="eager"))
        run_dir = OUT / "bf16_runs" / model
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            info = train(cfg, run_dir, progress=False)
        wall = time.perf_counter() - t0
        result = compare(val_curve(run_dir), [val_curve(r) for r in fp32])
        result |= {
            "bf16_tokens_per_s": info["tokens_per_s"],
            "bf16_wall_s": wall,
            "fp32_tokens_per_s_as_run_by_the_pipeline": [
                read_run_info(r)["tokens_per_s"] for r in fp32
            ],
        }
        out["models"][model] = result
        f = result["final"]
        print(
            f"{model}: final val loss bf16 {f['bf16']:.4f}, float32 seeds "
            f"{f['fp32_min']:.4f}..{f['fp32_max']:.4f}; inside the seeds' range at "
            f"{result['inside']}; max |bf16 - seed mean| {result['max_abs_minus_mean']:.3f}; "
            f"{info['tokens_per_s']:,.0f} tok/s",
            flush=True,
        )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bf16_curves.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
