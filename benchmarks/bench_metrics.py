"""Speed and accuracy of geolib.measure.metrics against the IsoScore package, SVD and a bare X^T X.

Usage: ``python benchmarks/bench_metrics.py [--quick] [--repeats R]``

* effective rank of a 50304 x 768 float32 matrix (a GPT-NeoX/Pythia-sized unembedding);
* IsoScore of 100000 x 768 float32 activations.

Each is compared with ``torch.linalg.svdvals`` (float32, float64), the IsoScore package 2.0.1
(IsoScore only) and a bare ``X^T X`` of the same shape: torch float32/float64 (general matmul)
and numpy float64 (``X.T @ X`` on one buffer dispatches to OpenBLAS syrk, half the flops). The
floors start from an X already in their dtype; ours starts from float32 and includes the upcast.
Ours, the package and the floors are timed in interleaved rounds (each round times every method
once, after a pause that lets idle BLAS/OpenMP workers stop spinning), so that a slow spell of a
shared machine hits all of them alike; the SVD references are timed apart, before. Median wall
seconds and median process CPU seconds (all threads) over ``--repeats`` rounds are printed with
ours/floor, ours/package and the relative error against a float64 reference (float64 svdvals for
effective rank; float64 eigvalsh of np.cov for IsoScore), and the load average before and after.
Results go to ``benchmarks/results/bench_metrics.json``. Timings on a shared machine are noisy:
CPU time is the steadier of the two when other jobs compete for the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from geolib.measure import metrics
from geolib.measure.synthetic import spectrum_effective_rank, spectrum_isoscore

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


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall seconds, process CPU seconds (all threads) and result of one call."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


class Timings:
    """Median wall and CPU seconds of named calls."""

    def __init__(self, repeats: int) -> None:
        self.repeats = repeats
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.samples: dict[str, list[list[float]]] = {}  # [wall, cpu] per repeat

    def _record(self, name: str, samples: list[tuple[float, float, Any]]) -> Any:
        self.wall[name] = statistics.median(s[0] for s in samples)
        self.cpu[name] = statistics.median(s[1] for s in samples)
        self.samples[name] = [[round(s[0], 4), round(s[1], 4)] for s in samples]
        return samples[-1][2]

    def run(self, name: str, fn: Callable[[], Any], repeats: int | None = None) -> Any:
        """Time ``fn`` in consecutive repeats (for the slow references); returns its result."""
        return self._record(name, [timed(fn) for _ in range(repeats or self.repeats)])

    def interleaved(self, fns: dict[str, Callable[[], Any]]) -> dict[str, Any]:
        """Time every call once per round, ``repeats`` rounds; returns the results by name.

        A pause before each call lets the previous call's idle BLAS/OpenMP workers (numpy's
        OpenBLAS, torch's MKL/OpenMP) stop spinning, so no method pays for another's threads.
        """
        samples: dict[str, list[tuple[float, float, Any]]] = {k: [] for k in fns}
        for _ in range(self.repeats):
            for name, fn in fns.items():
                time.sleep(PAUSE_S)
                samples[name].append(timed(fn))
        return {name: self._record(name, s) for name, s in samples.items()}

    def ratios(self, ours: str) -> dict[str, dict[str, float]]:
        """ours / each floor and the package (ratios of medians), per clock."""
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


def floors(x32: np.ndarray) -> dict[str, Callable[[], Any]]:
    """Bare X^T X of x32's shape: torch f32/f64 (gemm) and numpy f64 (syrk)."""
    x64 = x32.astype(np.float64)
    t32, t64 = torch.from_numpy(x32), torch.from_numpy(x64)
    return {
        "floor_torch_f32_XtX": lambda: t32.T @ t32,
        "floor_torch_f64_XtX": lambda: t64.T @ t64,
        "floor_numpy_f64_XtX": lambda: x64.T @ x64,
    }


PAUSE_S = 0.3  # idle OpenBLAS workers spin ~0.1 s after a call; OpenMP's stop sooner


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
    s32 = tm.run("svdvals_f32", lambda: torch.linalg.svdvals(t32), few)
    settle()
    ours = tm.interleaved({"ours_effective_rank": lambda: metrics.effective_rank(w)} | floors(w))[
        "ours_effective_rank"
    ]
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
        "samples_s": tm.samples,
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
    fns: dict[str, Callable[[], Any]] = {"ours_isoscore": lambda: metrics.isoscore(x)}
    if isoscore_pkg is not None:
        fns["isoscore_pkg_2.0.1"] = lambda: float(isoscore_pkg.IsoScore(x))
    out = tm.interleaved(fns | floors(x))
    errs = {k: abs(out[k] - ref) / ref for k in fns}
    return {
        "shape": [n, d],
        "reference": ref,
        "wall_s": tm.wall,
        "cpu_s": tm.cpu,
        "samples_s": tm.samples,
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
    load_before = os.getloadavg()
    er = bench_erank(ne, d, args.repeats, rng)
    iso = bench_isoscore(ni, d, args.repeats, rng)
    load_after = os.getloadavg()

    print(f"threads: {json.dumps(threads)}")
    print(f"load average before {load_before}, after {load_after} on {os.cpu_count()} cores")
    print(
        f"medians of {args.repeats} interleaved rounds on a shared machine; "
        "ours starts from float32 (upcast included)\n"
    )
    print_block("effective rank", er)
    print_block("IsoScore", iso)

    result = {
        "quick": args.quick,
        "repeats": args.repeats,
        "threads": threads,
        "load_average": {"before": load_before, "after": load_after},
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
