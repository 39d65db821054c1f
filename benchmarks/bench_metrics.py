"""Speed and accuracy of geolib.metrics against the IsoScore package, SVD and a bare X^T X.

Usage: ``python benchmarks/bench_metrics.py [--quick] [--repeats R]``

* effective rank of a 50304 x 768 float32 matrix (a GPT-NeoX/Pythia-sized unembedding);
* IsoScore of 100000 x 768 float32 activations.

Each is compared with ``torch.linalg.svdvals`` (float32, float64), the IsoScore package 2.0.1
(IsoScore only) and a bare ``X^T X`` of the same shape: torch float32/float64 (general matmul)
and numpy float64 (``X.T @ X`` on one buffer dispatches to OpenBLAS syrk, half the flops). The
floors start from an X already in their dtype; ours starts from float32 and includes the upcast.
Median wall seconds and median process CPU seconds (all threads) over ``--repeats`` runs are
printed with ours/floor, ours/package and the relative error against a float64 reference
(float64 svdvals for effective rank; float64 eigvalsh of np.cov for IsoScore). Results go to
``benchmarks/results/bench_metrics.json``. Timings on a shared machine are noisy: CPU time is
the steadier of the two when other jobs compete for the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from geolib import metrics  # noqa: E402
from geolib.synthetic import spectrum_effective_rank, spectrum_isoscore  # noqa: E402

try:
    from IsoScore import IsoScore as isoscore_pkg
except ImportError:  # pragma: no cover - the package is a dev dependency
    isoscore_pkg = None

RESULTS = Path(__file__).resolve().parent / "results" / "bench_metrics.json"


def thread_info() -> dict[str, Any]:
    """Thread pools in use: threadpoolctl if installed, else torch's count and the env vars."""
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "torch_num_threads": torch.get_num_threads(),
        "env": {
            k: os.environ[k]
            for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
            if k in os.environ
        },
    }
    try:
        from threadpoolctl import threadpool_info

        info["threadpoolctl"] = [
            {k: p.get(k) for k in ("internal_api", "num_threads", "version")}
            for p in threadpool_info()
        ]
    except ImportError:
        info["threadpoolctl"] = "not installed (numpy's OpenBLAS defaults to cpu_count threads)"
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        info["numpy_blas"] = f"{blas.get('name')} {blas.get('version')}"
    except (KeyError, TypeError):
        info["numpy_blas"] = "unknown"
    info["torch_blas"] = "MKL" if torch.backends.mkl.is_available() else "other"
    return info


class Timings:
    """Median wall and CPU seconds of named calls."""

    def __init__(self, repeats: int) -> None:
        self.repeats = repeats
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def run(self, name: str, fn: Callable[[], Any], repeats: int | None = None) -> Any:
        walls, cpus, out = [], [], None
        for _ in range(repeats or self.repeats):
            c0, t0 = time.process_time(), time.perf_counter()
            out = fn()
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        self.wall[name] = statistics.median(walls)
        self.cpu[name] = statistics.median(cpus)
        return out

    def floors(self, x32: np.ndarray) -> None:
        """Bare X^T X of x32's shape: torch f32/f64 (gemm), then numpy f64 (syrk)."""
        x64 = x32.astype(np.float64)
        t32, t64 = torch.from_numpy(x32), torch.from_numpy(x64)
        self.run("floor_torch_f32_XtX", lambda: t32.T @ t32)
        self.run("floor_torch_f64_XtX", lambda: t64.T @ t64)
        self.run("floor_numpy_f64_XtX", lambda: x64.T @ x64)

    def ratios(self, ours: str) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for clock, table in (("wall", self.wall), ("cpu", self.cpu)):
            out[clock] = {
                f"ours/{k}": table[ours] / table[k]
                for k in table
                if k.startswith(("floor_", "isoscore_pkg"))
            }
            best = min(table["floor_torch_f64_XtX"], table["floor_numpy_f64_XtX"])
            out[clock]["ours/best_f64_floor"] = table[ours] / best
        return out


def settle() -> None:
    """Let idle BLAS/OpenMP worker threads stop spinning before the next timed block."""
    time.sleep(1.0)


def bench_erank(n: int, d: int, repeats: int, rng: np.random.Generator) -> dict[str, Any]:
    # Decaying column scales give a non-trivial, LM-like spectrum (condition number ~ 1e2).
    w = (rng.standard_normal((n, d)) * np.geomspace(1.0, 1e-2, d)).astype(np.float32)
    t32 = torch.from_numpy(w)
    t64 = t32.double()
    tm = Timings(repeats)
    few = max(1, repeats - 1)
    s64 = tm.run("svdvals_f64", lambda: torch.linalg.svdvals(t64), few)
    ref = spectrum_effective_rank(s64.numpy())
    settle()
    ours = tm.run("ours_effective_rank", lambda: metrics.effective_rank(w))
    s32 = tm.run("svdvals_f32", lambda: torch.linalg.svdvals(t32), few)
    tm.floors(w)
    errs = {
        "ours_effective_rank": abs(ours - ref) / ref,
        "svdvals_f32": abs(spectrum_effective_rank(s32.double().numpy()) - ref) / ref,
        "svdvals_f64": 0.0,
    }
    return {
        "shape": [n, d],
        "reference": ref,
        "wall_s": tm.wall,
        "cpu_s": tm.cpu,
        "rel_error": errs,
        "ratios": tm.ratios("ours_effective_rank"),
    }


def bench_isoscore(n: int, d: int, repeats: int, rng: np.random.Generator) -> dict[str, Any]:
    # Anisotropic activations: a large common offset and decaying per-direction scales.
    x = rng.standard_normal((n, d)) * np.geomspace(3.0, 0.05, d) + 4.0 * rng.standard_normal(d)
    x = x.astype(np.float32)
    ref = spectrum_isoscore(
        np.clip(np.linalg.eigvalsh(np.cov(x.astype(np.float64), rowvar=False)), 0.0, None)
    )
    settle()
    tm = Timings(repeats)
    ours = tm.run("ours_isoscore", lambda: metrics.isoscore(x))
    errs = {"ours_isoscore": abs(ours - ref) / ref}
    if isoscore_pkg is not None:
        pkg = tm.run("isoscore_pkg_2.0.1", lambda: float(isoscore_pkg.IsoScore(x)))
        errs["isoscore_pkg_2.0.1"] = abs(pkg - ref) / ref
    tm.floors(x)
    return {
        "shape": [n, d],
        "reference": ref,
        "wall_s": tm.wall,
        "cpu_s": tm.cpu,
        "rel_error": errs,
        "ratios": tm.ratios("ours_isoscore"),
    }


def print_block(title: str, block: dict[str, Any]) -> None:
    n, d = block["shape"]
    print(f"{title}  {n} x {d} float32")
    print(f"  {'method':<24}{'wall s':>9}{'cpu s':>9}{'rel. error':>12}")
    for k, wall in block["wall_s"].items():
        err = block["rel_error"].get(k)
        err_s = f"{err:12.1e}" if err is not None else " " * 12
        print(f"  {k:<24}{wall:9.3f}{block['cpu_s'][k]:9.3f}{err_s}")
    print(f"  {'ratio':<33}{'wall':>9}{'cpu':>9}")
    for k, wall in block["ratios"]["wall"].items():
        print(f"  {k:<33}{wall:9.2f}{block['ratios']['cpu'][k]:9.2f}")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small shapes, for a fast check")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    ne, ni, d = (4096, 8192, 256) if args.quick else (50304, 100000, 768)

    threads = thread_info()
    er = bench_erank(ne, d, args.repeats, rng)
    iso = bench_isoscore(ni, d, args.repeats, rng)

    print(f"threads: {json.dumps(threads)}")
    print(f"load average: {os.getloadavg()} on {os.cpu_count()} cores")
    print("medians of noisy runs on a shared machine; ours starts from float32 (upcast included)\n")
    print_block("effective rank", er)
    print_block("IsoScore", iso)

    result = {
        "quick": args.quick,
        "repeats": args.repeats,
        "threads": threads,
        "load_average": os.getloadavg(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "effective_rank": er,
        "isoscore": iso,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
