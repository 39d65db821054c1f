"""Paper B's sweep in miniature: the grid points trained (one stage per cell of points), then all
measured (one stage).

    python -m geolib.models.grid points                       # the expansion of the factors
    python -m geolib.models.designs sweep train CELL          # stage sweep_train@CELL
    python -m geolib.models.designs sweep train POINT         # one point [--jobs N]
    python -m geolib.experiments.sweep measure --all          # stage sweep_measure
    python -m geolib.experiments.sweep measure POINT [...]    # some points
    python -m geolib.experiments.sweep status                 # points measured / total, ETA

The grid (points, their training configurations, training a point) is
:mod:`geolib.models.grid`, which imports no measurement code. Training writes
the run folder ``<run_root>/<cell>/<point>/`` only; measuring reads it and writes
``<measures_root>/<point>/`` only, so an edit to a metric or a probe re-measures every point
without retraining one.

What is measured on the final checkpoint of each point:

* **W**, the unembedding (``vocab × d_model``): every metric of
  :func:`geolib.measure.geometry.geometry`, once over all rows and once without the rows of
  tokens that never occur in the training split (never a target: their rows are moved only by
  the softmax's push-down and by weight decay).
* **H**, last-layer states of ``n_h_seqs`` fixed held-out validation windows (one row per
  token): the same metrics, and IsoScore* with ``C0`` the covariance of a larger sample
  (``n_c0_seqs`` windows of the same split), as Rudman & Eickhoff define it. W has no larger
  sample (it is the whole vocabulary), so its IsoScore* is not reported (NaN).
* **Losses**: mean next-token loss per fixed window on the ID validation and test splits and on
  each OOD domain; the mean over windows with a percentile-bootstrap interval over windows.
  The per-window losses are kept (``sequence_losses.npz``) so that later comparisons of the
  same model (quantized, fine-tuned) can be paired window by window.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from geolib.config import load_params
from geolib.data.tokens import load_tokens
from geolib.data.windows import fixed_windows
from geolib.files import write_json, write_npz
from geolib.measure.evaluate import window_losses
from geolib.measure.geometry import geometry, unused_rows
from geolib.measure.probes import final_states, unembedding
from geolib.measure.stats import interval
from geolib.models import runs
from geolib.models.checkpoints import load
from geolib.models.device import resolve_device
from geolib.models.grid import (
    SEQUENCE_LOSSES,
    Point,
    check_points_listed,
    decay_exponent,
    measures_path,
    point_config,
    point_dir,
    threads_for,
)
from geolib.models.train_config import TrainConfig
from geolib.stage import add_jobs_option, progress_line


def measure_run(
    run_dir: str | Path, cfg: TrainConfig, spec: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(measures, per-window losses by split)`` of the final checkpoint of ``run_dir`` (see
    the module docstring).

    ``spec``: ``n_eval_seqs``, ``n_h_seqs``, ``n_c0_seqs``, ``isoscore_zeta``, ``n_boot``,
    ``ci_level`` and ``splits`` (name → token file; the first is the ID validation split H is
    taken from).
    """
    model, tokenizer = load(run_dir, device=resolve_device(cfg.device))
    vocab = len(tokenizer) if tokenizer is not None else int(model.config.vocab_size)
    zeta, seed = float(spec["isoscore_zeta"]), cfg.seed
    out: dict[str, Any] = {}

    w = unembedding(model).detach().cpu().double()
    unused = unused_rows(load_tokens(cfg.train_tokens, vocab), vocab)
    out["vocab_size"] = vocab
    out["n_unused_rows"] = int(unused.sum())
    out["w_all"] = geometry(w, zeta)
    out["w"] = geometry(w[torch.from_numpy(~unused)], zeta)
    # W at its random start (step 0), the same rows: how far training moved its geometry
    w0 = unembedding(load(run_dir, 0, tokenizer=False)[0]).detach().double()
    out["init_w"] = geometry(w0[torch.from_numpy(~unused)], zeta)

    splits = dict(spec["splits"])
    h_split = next(iter(splits))
    h_tokens = load_tokens(splits[h_split], vocab)
    h = final_states(model, fixed_windows(h_tokens, spec["n_h_seqs"], cfg.seq_len))
    big = final_states(model, fixed_windows(h_tokens, spec["n_c0_seqs"], cfg.seq_len))
    c0 = torch.cov(big.T)
    out["h"] = geometry(h, zeta, c0)
    out["h_source"] = {"split": h_split, "rows": len(h), "c0_rows": len(big)}

    losses, per_window = {}, {}
    for name, path in splits.items():
        windows = fixed_windows(load_tokens(path, vocab), spec["n_eval_seqs"], cfg.seq_len + 1)
        per_window[name] = window_losses(model, windows)
        est = interval(
            np.mean, per_window[name], n_boot=spec["n_boot"], level=spec["ci_level"], seed=seed
        )
        losses[name] = {"mean": est.value, "ci_low": est.low, "ci_high": est.high}
    out["loss"] = losses
    return out, per_window


# ----------------------------------------------------------------------------- stages


def measure_point(params_path: str | Path, name: str, *, jobs: int = 1) -> dict[str, Any]:
    """Measure the trained point ``name``; write ``measures.json`` and ``sequence_losses.npz``
    to ``<measures_root>/<name>/`` and return the measures. The run folder is only read."""
    params = load_params(params_path)
    spec = params["sweep"]
    names = check_points_listed(spec)
    if name not in names:
        raise KeyError(f"{name!r} is not a point of the sweep; points: {names}")
    point = Point.from_name(name)
    cfg = point_config(params, point)
    resolve_device(cfg.device)  # before the run is read
    run_dir = point_dir(spec, name)
    info = runs.read_run_info(run_dir)  # an unfinished run is an error naming it
    # the same numerics as the training process had (threads, deterministic kernels)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_num_threads(threads_for(jobs))
    started = time.perf_counter()
    measures, per_window = measure_run(run_dir, cfg, spec["measure"])
    measured = time.perf_counter() - started
    measures.update(
        point=point.as_dict(),
        name=name,
        steps=cfg.total_steps,
        peak_lr=cfg.lr,  # the named lr scaled with the batch size (sweep.base.lr_scaling)
        tokens=info["tokens"],
        params=info["params"],
        decay_exponent=decay_exponent(cfg),
        # the run's own training time, fixed when it was trained; the measuring time goes to
        # the log only, so that a re-measure giving the same numbers writes the same bytes and
        # reruns nothing downstream
        timing={"train_seconds": float(info["wall_time_s"])},
    )
    out = measures_path(spec["measures_root"], name)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_npz(out.with_name(SEQUENCE_LOSSES), **per_window)
    write_json(out, measures, indent=1)  # last: its presence marks the point measured
    print(f"{name}: measured in {measured:.1f} s", file=sys.stderr)
    print(format_status(status(spec["measures_root"], names)), file=sys.stderr)
    return measures


def status(
    measures_root: str | Path, names: Sequence[str], now: float | None = None
) -> dict[str, Any]:
    """Sweep progress from the measures folders: done / total, elapsed since the first point
    was measured (its ``measures.json`` written), and the ETA at the pace between the first and
    the last point measured (per remaining point; ``None`` until two are measured). The times
    are the files' modification times: the files themselves hold no wall-clock time."""
    written = sorted(
        measures_path(measures_root, n).stat().st_mtime
        for n in names
        if measures_path(measures_root, n).is_file()
    )
    done = len(written)
    elapsed = (time.time() if now is None else now) - written[0] if written else 0.0
    pace = (written[-1] - written[0]) / (done - 1) if done > 1 else None
    return {
        "done": done,
        "total": len(names),
        "elapsed_s": elapsed,
        "eta_s": None if pace is None else pace * (len(names) - done),
    }


def format_status(s: Mapping[str, Any]) -> str:
    return progress_line("sweep points measured", s["done"], s["total"], s["elapsed_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m geolib.experiments.sweep", description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("measure", help="measure trained points (stage sweep_measure: --all)")
    one.add_argument("point", nargs="*")
    one.add_argument("--all", action="store_true", help="every listed point, in order")
    add_jobs_option(one)
    sub.add_parser("status", help="points measured / total, elapsed, ETA")
    args = parser.parse_args(argv)
    if args.command == "measure" and args.all == bool(args.point):
        parser.error("measure takes point names or --all (not both)")
    params = load_params(args.params)
    spec = params["sweep"]
    if args.command == "measure":
        # one process for all: the torch/transformers start-up (~7 s) and DVC's per-stage work
        # (~7 s) are paid once, not per point (each point measures in a few seconds)
        for name in check_points_listed(spec) if args.all else args.point:
            measure_point(args.params, name, jobs=args.jobs)
    else:
        print(format_status(status(spec["measures_root"], check_points_listed(spec))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
