"""Saturation: parallel (Pythia-style) against sequential (OLMo-style) blocks trained long
(Paper B, claim B6).

    python -m geolib.models.designs saturation names          # the runs of the design
    python -m geolib.models.designs saturation train <name>   # stage saturation_train@<name>
    python -m geolib.experiments.saturation measure --all     # stage saturation_measure
    python -m geolib.experiments.saturation measure <name>    # one run
    python -m geolib.experiments.saturation tables            # degradation and rank (a stage)

The design and its training are :mod:`geolib.models.grid`. Training writes the run folder
``<run_root>/<name>/`` only; measuring reads it and writes ``<measures_root>/<name>/`` only (an
edit to a metric re-measures without retraining).

The two layouts are GPT-NeoX models that differ only in ``parallel_residual``. Every run trains
on the ID training split with dense checkpoints (log-spaced early, then evenly spaced); at every
checkpoint :func:`measure_checkpoint` records the loss of each fixed ID-validation and OOD
window, the effective rank and singular values of the unembedding W and the effective rank of
the last-layer states H, and the number of epochs of the training split seen so far.

**Late degradation** (:func:`late_degradation`) is the final checkpoint's ID loss minus that of
the best checkpoint of the late span (from ``second_half_from`` of training on). The best
checkpoint is *chosen* on one set of validation windows and the difference *measured* on
another, with a paired bootstrap over the measuring windows: choosing and measuring on the same
windows would make the difference non-negative by construction. **Rank collapse**
(:func:`rank_drop`) is the effective rank of W at that best checkpoint minus at the final one.

**Repetition.** A rise of validation loss under repeated data is overfitting, not saturation;
the design keeps every run below one epoch of the training split (the epoch count at every
checkpoint is in the tables), and every checkpoint also measures windows the run trained on
before the late span (:func:`seen_windows`, the sampler replayed) next to never-seen
validation windows: a model that fit what it saw better than new text would show it there.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from geolib.config import load_params
from geolib.data.tokens import load_tokens
from geolib.data.windows import fixed_windows, sample_windows
from geolib.files import write_json, write_npz, write_table
from geolib.measure.evaluate import window_losses
from geolib.measure.metrics import effective_rank
from geolib.measure.probes import final_states, unembedding
from geolib.measure.stats import Interval, interval
from geolib.models import runs
from geolib.models.checkpoints import load, vocab_size_of
from geolib.models.device import resolve_device
from geolib.models.grid import Run, check_names_listed, saturation_run
from geolib.models.runs import available_steps

CURVE = "curve.json"
WINDOWS = "window_losses.npz"
SPECTRA = "spectra.npz"


@torch.no_grad()
def measure_checkpoint(
    model, windows: dict[str, np.ndarray], h_windows: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray, float]:
    """``(per-window losses by split, singular values of W (descending), erank of H)``."""
    model.eval()
    losses = {k: window_losses(model, w) for k, w in windows.items()}
    w = unembedding(model).detach().cpu().double()
    sigma = torch.linalg.svdvals(w).numpy()
    h_rank = effective_rank(final_states(model, h_windows).numpy())
    return losses, sigma, h_rank


def seen_windows(cfg, tokens: np.ndarray, steps: int, n: int) -> np.ndarray:
    """``n`` of the windows a decoder run trained on in its first ``steps`` steps, evenly
    spaced in training order, ``(n, seq_len + 1)``: the training loop's window sampler replayed
    from its seed (``train`` draws one ``sample_windows`` batch per step from
    ``default_rng(cfg.seed)``; a test checks the replay against a run's logged loss)."""
    if not cfg.model.is_decoder:
        raise ValueError("seen windows are replayed for decoder runs only")
    if steps < 1 or n < 1 or n > steps * cfg.batch_size:
        raise ValueError(f"cannot take {n} windows from {steps} steps of {cfg.batch_size}")
    rng = np.random.default_rng(cfg.seed)
    drawn = np.concatenate(
        [sample_windows(tokens, rng, cfg.batch_size, cfg.seq_len + 1) for _ in range(steps)]
    )
    return drawn[np.linspace(0, len(drawn) - 1, n).round().astype(np.int64)]


def _erank_from_sigma(sigma: np.ndarray) -> float:
    p = sigma / sigma.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def measure_run(params_path: str | Path, name: str) -> dict[str, Any]:
    """Measure every checkpoint of the trained run ``name`` into ``<measures_root>/<name>/``
    (``curve.json``, ``window_losses.npz``, ``spectra.npz``); the run folder is only read."""
    params = load_params(params_path)
    spec = params["saturation"]
    cfg, run_dir = saturation_run(params, name)
    device = resolve_device(cfg.device)
    info = runs.read_run_info(run_dir)  # unfinished: an error
    trained = float(info["wall_time_s"])
    # the same numerics as the training process had (threads, deterministic kernels)
    torch.use_deterministic_algorithms(True, warn_only=True)
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    m = spec["measure"]
    steps = available_steps(run_dir)
    vocab = vocab_size_of(run_dir)
    val = load_tokens(cfg.val_tokens, vocab)
    half, length = len(val) // 2, cfg.seq_len + 1
    # choosing windows from the first half of the split, measuring windows from the second
    windows = {
        "id_select": fixed_windows(val[:half], int(m["n_select_seqs"]), length),
        "id_eval": fixed_windows(val[half:], int(m["n_eval_seqs"]), length),
    }
    # windows trained on before the late span: their loss next to the never-seen ones shows
    # whether the model fits what it saw better than new text (memorisation, not saturation)
    early = int(float(spec["second_half_from"]) * cfg.total_steps)
    windows["id_seen"] = seen_windows(
        cfg, load_tokens(cfg.train_tokens, vocab), early, int(m["n_eval_seqs"])
    )
    for path in m["ood"]:
        windows[Path(path).parent.name] = fixed_windows(
            load_tokens(path, vocab), int(m["n_eval_seqs"]), length
        )
    h_windows = fixed_windows(val, int(m["n_h_seqs"]), cfg.seq_len)
    n_train = len(load_tokens(cfg.train_tokens, vocab))
    curve, per_split, spectra = [], {k: [] for k in windows}, []
    for step in steps:
        model, _ = load(run_dir, step, device=device)
        losses, sigma, h_rank = measure_checkpoint(model, windows, h_windows)
        for k, v in losses.items():
            per_split[k].append(v)
        spectra.append(sigma)
        curve.append(
            {
                "step": step,
                "tokens": step * cfg.tokens_per_step,
                "epochs": step * cfg.tokens_per_step / n_train,
                "erank_w": _erank_from_sigma(sigma),
                "erank_h": h_rank,
                **{f"loss_{k}": float(v.mean()) for k, v in losses.items()},
            }
        )
    folder = Path(spec["measures_root"]) / name
    folder.mkdir(parents=True, exist_ok=True)
    write_npz(folder / WINDOWS, **{k: np.stack(v) for k, v in per_split.items()})
    steps_done = np.array([c["step"] for c in curve])
    write_npz(folder / SPECTRA, sigma=np.stack(spectra), steps=steps_done)
    out = {
        "name": name,
        "params": int(info["params"]),
        "train_seconds": trained,  # fixed when the run was trained
        "curve": curve,
    }
    # no measuring time here (the log has it): a re-measure giving the same numbers writes the
    # same bytes and reruns nothing downstream
    write_json(folder / CURVE, out, indent=1)
    return out


def late_degradation(
    steps: np.ndarray,
    select: np.ndarray,
    evaluate: np.ndarray,
    *,
    from_fraction: float,
    n_boot: int,
    level: float,
    seed: int,
) -> tuple[int, Interval]:
    """``(best late step, final − best loss)``: the best checkpoint at or after
    ``from_fraction`` of training, chosen by the mean loss of the ``select`` windows
    ``(n_ckpt, n_select)``; the difference measured on the ``evaluate`` windows
    ``(n_ckpt, n_eval)`` with a paired bootstrap over them. Positive = the run got worse."""
    s = np.asarray(steps)
    if s.ndim != 1 or np.any(np.diff(s) <= 0):
        raise ValueError("steps must be strictly increasing")
    if select.shape[0] != s.size or evaluate.shape[0] != s.size:
        raise ValueError("one row of window losses per checkpoint")
    if not 0.0 <= from_fraction < 1.0:
        raise ValueError(f"from_fraction must be in [0, 1), got {from_fraction}")
    late = np.flatnonzero(s >= from_fraction * s[-1])
    best = late[np.argmin(select[late].mean(axis=1))]
    diff = (
        interval(
            lambda b, f: float(np.mean(f - b)),
            evaluate[best],
            evaluate[-1],
            n_boot=n_boot,
            level=level,
            seed=seed,
        )
        if best != s.size - 1
        else Interval(0.0, 0.0, 0.0, level, evaluate.shape[1], "none", "window")
    )
    return int(s[best]), diff


def rank_drop(steps: np.ndarray, erank: np.ndarray, best_step: int) -> float:
    """Effective rank of W at ``best_step`` minus at the final checkpoint (positive: collapse)."""
    s = list(np.asarray(steps))
    if best_step not in s:
        raise ValueError(f"step {best_step} is not a checkpoint: {s}")
    return float(erank[s.index(best_step)] - erank[-1])


def tables(params_path: str | Path) -> dict[str, Any]:
    """Per-run degradation and rank, the curves and the spectra at the best and final
    checkpoints, and the B6 units; written to ``out_dir``."""
    import pandas as pd

    params = load_params(params_path)
    spec = params["saturation"]
    seed = int(params.get("common", {}).get("seed", 0))
    out = Path(spec["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    rows, curves, spectra = [], [], []
    for name in check_names_listed(spec):
        run = Run.from_name(name)
        folder = Path(spec["measures_root"]) / name
        info = json.loads((folder / CURVE).read_text())
        w = np.load(folder / WINDOWS)
        sp = np.load(folder / SPECTRA)
        steps = np.array([c["step"] for c in info["curve"]])
        erank = np.array([c["erank_w"] for c in info["curve"]])
        best, deg = late_degradation(
            steps,
            w["id_select"],
            w["id_eval"],
            from_fraction=float(spec["second_half_from"]),
            n_boot=int(spec["n_boot"]),
            level=float(spec["ci_level"]),
            seed=seed,
        )
        final = info["curve"][-1]
        rows.append(
            {
                "name": name,
                "layout": run.layout,
                "width": run.width,
                "seed": run.seed,
                "best_step": best,
                "final_step": int(steps[-1]),
                "degradation": deg.value,
                "degradation_ci_low": deg.low,
                "degradation_ci_high": deg.high,
                "rank_drop": rank_drop(steps, erank, best),
                "erank_w_best": float(erank[list(steps).index(best)]),
                "erank_w_final": float(erank[-1]),
                "erank_h_final": final["erank_h"],
                "loss_id_eval_final": final["loss_id_eval"],
                "loss_id_seen_final": final["loss_id_seen"],
                "unseen_minus_seen_final": final["loss_id_eval"] - final["loss_id_seen"],
                "epochs_final": final["epochs"],
                "params": info["params"],
                "tokens": final["tokens"],
                "train_seconds": info["train_seconds"],
            }
        )
        curves += [
            {"name": name, "layout": run.layout, "width": run.width, "seed": run.seed, **c}
            for c in info["curve"]
        ]
        for label, step in (("best", best), ("final", int(steps[-1]))):
            sigma = sp["sigma"][list(sp["steps"]).index(step)]
            spectra += [
                {
                    "name": name,
                    "layout": run.layout,
                    "width": run.width,
                    "seed": run.seed,
                    "checkpoint": label,
                    "index": i + 1,
                    "sigma": float(v),
                }
                for i, v in enumerate(sigma)
            ]
    table = pd.DataFrame(rows)
    write_table(out / "runs.csv", table)
    write_table(out / "curves.csv", pd.DataFrame(curves))
    write_table(out / "spectra.csv", pd.DataFrame(spectra))
    layouts = list(spec["layouts"])
    summary = contrast(table, layouts, "degradation_ci_low")
    summary["max_epochs"] = float(table["epochs_final"].max())
    # rule v2's declared alternative: a run degrades when its point estimate is above 0
    summary["point"] = contrast(table, layouts, "degradation")
    write_json(out / "summary.json", summary, indent=1)
    return summary


def contrast(table: Any, layouts: list[str], column: str) -> dict[str, Any]:
    """B6 per (width, seed): does the first layout's run degrade (``column`` > 0: the lower
    bound ``degradation_ci_low``, or the point ``degradation``) and the second's not?
    ``n_parallel_degrades`` is the claim's premise: the degradation it contrasts occurs."""
    units = []
    for (width, s), g in table.groupby(["width", "seed"], sort=False):
        by = g.set_index("layout")
        par, seq = by.loc[layouts[0]], by.loc[layouts[1]]
        units.append(
            {
                "width": width,
                "seed": int(s),
                "parallel_degrades": bool(par[column] > 0),
                "sequential_degrades": bool(seq[column] > 0),
            }
        )
    return {
        "units": units,
        "successes": sum(u["parallel_degrades"] and not u["sequential_degrades"] for u in units),
        "n_units": len(units),
        "n_parallel_degrades": sum(u["parallel_degrades"] for u in units),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["measure", "tables"])
    parser.add_argument("name", nargs="*")
    parser.add_argument("--all", action="store_true", help="measure: every listed run, in order")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    if args.command == "measure":
        if args.all == bool(args.name):
            parser.error("measure takes run names or --all (not both)")
        # one process for all (stage saturation_measure): start-up is paid once, not per run
        spec = load_params(args.params)["saturation"]
        names = check_names_listed(spec) if args.all else args.name
        for i, name in enumerate(names, start=1):
            t0 = time.perf_counter()
            measure_run(args.params, name)
            took = time.perf_counter() - t0
            print(f"{name}: measured in {took:.0f} s ({i}/{len(names)})", file=sys.stderr)
    elif args.name or args.all:
        parser.error("tables takes no run names")
    else:
        print(json.dumps(tables(args.params), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
