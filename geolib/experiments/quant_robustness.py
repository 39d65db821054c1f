"""Robustness to post-training quantization, for every sweep model (Paper B, claim B8): the
analysis stage that adds quantization columns to the per-model table.

    python -m geolib.experiments.quant_robustness --params params.yaml --section quantization

For each sweep point, the final checkpoint is loaded (its run directory is only read) and, for
each method (round-to-nearest, GPTQ) and bit width, a copy is quantized by
:mod:`geolib.models.quantize`: first the blocks' projections (``lm_head: false``, the standard
setting), measured, then also the unembedding W on top (``lm_head: true``), measured again.
GPTQ is calibrated on ``n_calib_seqs`` fixed windows of the training split. The mean next-token
loss of fixed windows of every ``eval_tokens`` split is measured before and after on the same
windows, so each loss increase has a *paired* bootstrap interval over windows.

Then, over models, the predictive comparison of B1/B7 (:mod:`geolib.measure.prediction`):
the ID test loss increase of each setting against the effective rank of W and against ID loss,
and the partial correlation of geometry with it given ID loss.

Outputs in ``out_dir``: ``quantization.csv`` (one row per model × setting × split),
``settings.csv`` (per setting and split, over models), ``models.csv`` (the sweep's per-model
table joined with one column per setting and split, ``q_<setting>_<split>``, plus intervals),
``layers.csv`` (per GPTQ layer: reconstruction error against round-to-nearest's),
``window_losses.npz``, per token budget ``<budget>/prediction.csv``,
``prediction_within_size.csv`` and ``r2_gap.csv``, and ``summary.json``. No file holds a
timing, so that a rerun that changes no number writes the same bytes and reruns nothing below
it; the seconds per method (quantizing, evaluating, GPTQ's capture and solve) are in the
summary the stage prints to its log.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from geolib.data.tokens import load_tokens
from geolib.data.windows import fixed_windows
from geolib.files import write_json, write_npz, write_table
from geolib.measure.evaluate import window_losses
from geolib.measure.prediction import join_per_model, per_model_tables_by_budget
from geolib.measure.stats import paired_change
from geolib.models.checkpoints import load, shared_vocab_size
from geolib.models.device import resolve_device
from geolib.models.grid import check_points_listed, point_dir
from geolib.models.quantize import QuantSpec, head_layer, quantize
from geolib.stage import progress_line, stage

#: the split whose loss increase is B8's outcome
OUTCOME_SPLIT = "id_test"
#: timing columns of quantize_point's rows and layer rows: logged, never written to a table
TIMING = ("quantize_seconds", "eval_seconds", "seconds", "capture_seconds")


def settings(p: dict[str, Any]) -> list[QuantSpec]:
    """The block-only settings of ``p`` (one per method × bit width), in order."""
    heads = [bool(h) for h in p["lm_head"]]
    if False not in heads:
        raise ValueError("quantization.lm_head must include false (the standard setting)")
    return [
        QuantSpec(
            str(m),
            int(b),
            int(p["group_size"]),
            bool(p["symmetric"]),
            damp_percent=float(p["damp_percent"]),
        )
        for m in p["methods"]
        for b in p["bits"]
    ]


def column(setting: str, split: str) -> str:
    """The per-model table's column of the loss increase of ``setting`` (a
    :attr:`QuantSpec.label`) on ``split``."""
    return f"q_{setting}_{split}"


def eval_windows(p: dict[str, Any], vocab: int) -> dict[str, np.ndarray]:
    """Fixed windows of every evaluation split (the same for every model and setting)."""
    n, length = int(p["n_eval_seqs"]), int(p["seq_len"]) + 1
    return {
        split: fixed_windows(load_tokens(path, vocab), n, length)
        for split, path in p["eval_tokens"].items()
    }


def calibration(p: dict[str, Any], vocab: int) -> torch.Tensor:
    """GPTQ's calibration windows: fixed windows of the training split, int64 ``(n, T)``."""
    tokens = load_tokens(p["calib_tokens"], vocab)
    return torch.from_numpy(fixed_windows(tokens, int(p["n_calib_seqs"]), int(p["seq_len"])))


def quantize_point(
    run_dir: str | Path,
    p: dict[str, Any],
    windows: dict[str, np.ndarray],
    calib: torch.Tensor,
) -> tuple[list[dict], list[dict], dict[str, np.ndarray]]:
    """``(rows, GPTQ layer rows, per-window losses)`` of one model (module docstring). Rows and
    layer rows carry their seconds (:data:`TIMING` columns), which :func:`run_stage` logs and
    leaves out of the tables."""
    name = Path(run_dir).name
    device = resolve_device(p["device"])
    # quantized on the CPU (gptqmodel's and torchao's CPU paths), evaluated on the device
    model, _ = load(run_dir)
    base = {s: window_losses(model.to(device), w) for s, w in windows.items()}
    model.to("cpu")
    per_window = {f"float_{s}": v for s, v in base.items()}
    kw = dict(n_boot=int(p["n_boot"]), level=float(p["ci_level"]), seed=int(p["seed"]))
    rows, layer_rows = [], []
    with_head = True in [bool(h) for h in p["lm_head"]]
    for spec in settings(p):
        q = copy.deepcopy(model)
        stages = [(spec, None)]
        if with_head:
            stages.append((replace(spec, lm_head=True), head_layer))
        for s, layers in stages:
            t0 = time.perf_counter()
            reports = quantize(q, s, calib, layers=None if layers is None else layers(q))
            t_quant = time.perf_counter() - t0
            after = {split: window_losses(q.to(device), w) for split, w in windows.items()}
            q.to("cpu")
            t_eval = time.perf_counter() - t0 - t_quant
            for split in windows:
                c = paired_change(base[split], after[split], **kw)
                rows.append(
                    {
                        "name": name,
                        "setting": s.label,
                        "method": s.method,
                        "bits": s.bits,
                        "lm_head": s.lm_head,
                        "split": split,
                        "loss_before": float(base[split].mean()),
                        "loss_after": float(after[split].mean()),
                        "increase": c.value,
                        "ci_low": c.low,
                        "ci_high": c.high,
                        "quantize_seconds": t_quant,
                        "eval_seconds": t_eval,
                    }
                )
                per_window[f"{s.label}_{split}"] = after[split]
            layer_rows += [{"name": name, "setting": s.label, **asdict(r)} for r in reports]
    return rows, layer_rows, per_window


def wide(long: pd.DataFrame) -> pd.DataFrame:
    """One row per model: ``q_<setting>_<split>`` and its ``_ci_low`` / ``_ci_high``."""
    parts = []
    for suffix, col in (("", "increase"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high")):
        t = long.pivot(index="name", columns=["setting", "split"], values=col)
        t.columns = [column(a, b) + suffix for a, b in t.columns]
        parts.append(t)
    out = pd.concat(parts, axis=1)
    return out[sorted(out.columns)].reset_index()


def by_setting(long: pd.DataFrame) -> pd.DataFrame:
    """Per setting and split, over models: the median loss increase, its range, and how many
    models' paired intervals lie above 0."""
    g = long.groupby(["setting", "method", "bits", "lm_head", "split"], sort=False)
    return g.agg(
        median_increase=("increase", "median"),
        min_increase=("increase", "min"),
        max_increase=("increase", "max"),
        models_above_zero=("ci_low", lambda x: int((x > 0).sum())),
        models=("increase", "size"),
    ).reset_index()


def run_stage(p: dict[str, Any], sweep: dict[str, Any], models_table: str, log=print) -> dict:
    """Quantize every sweep point under every setting, write the tables, return a summary:
    ``summary.json``'s contents plus the timings, which go to the log only."""
    resolve_device(p["device"])  # before anything is read or written
    out = Path(p["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    names = check_points_listed(sweep)
    specs = settings(p)
    vocab = shared_vocab_size([str(point_dir(sweep, name)) for name in names])
    windows, calib = eval_windows(p, vocab), calibration(p, vocab)
    if OUTCOME_SPLIT not in windows:
        raise ValueError(f"quantization.eval_tokens must include {OUTCOME_SPLIT!r}")
    rows, layer_rows, arrays = [], [], {}
    t0 = time.perf_counter()
    for i, name in enumerate(names):
        t_model = time.perf_counter()
        r, lr, per_window = quantize_point(point_dir(sweep, name), p, windows, calib)
        rows += r
        layer_rows += lr
        arrays |= {f"{name}/{k}": v for k, v in per_window.items()}
        done = progress_line("quantization", i + 1, len(names), time.perf_counter() - t0)
        outcome = {x["setting"]: x["increase"] for x in r if x["split"] == OUTCOME_SPLIT}
        log(
            f"{name}: ID loss increase "
            + ", ".join(f"{k} {v:+.4f}" for k, v in outcome.items())
            + f" nats, {time.perf_counter() - t_model:.1f} s; {done}"
        )
    long = pd.DataFrame(rows)
    layers = pd.DataFrame(layer_rows)
    gptq = layers[layers.setting.str.startswith("gptq")]
    per_model = long.drop_duplicates(["name", "setting"]).groupby("method")
    timing = {
        "quantize_seconds_per_model": (per_model["quantize_seconds"].sum() / len(names)).to_dict(),
        "eval_seconds_per_model": (per_model["eval_seconds"].sum() / len(names)).to_dict(),
        "gptq_capture_seconds_per_model": float(gptq["capture_seconds"].sum() / len(names)),
        "gptq_layer_seconds_per_model": float(gptq["seconds"].sum() / len(names)),
    }
    long = long.drop(columns=[c for c in TIMING if c in long])
    layers = layers.drop(columns=[c for c in TIMING if c in layers])
    write_table(out / "quantization.csv", long)
    write_table(out / "layers.csv", layers)
    table = join_per_model(pd.read_csv(models_table), wide(long), names, models_table)
    write_table(out / "models.csv", table)
    write_npz(out / "window_losses.npz", **arrays)

    kw = dict(n_boot=int(p["n_boot"]), level=float(p["ci_level"]), seed=int(p["seed"]))
    labels = sorted(set(long["setting"]), key=list(long["setting"]).index)
    outcomes = [column(label, OUTCOME_SPLIT) for label in labels]
    for budget, tables in per_model_tables_by_budget(table, outcomes, **kw).items():
        (out / budget).mkdir(parents=True, exist_ok=True)
        for stem, frame in tables.items():
            write_table(out / budget / f"{stem}.csv", frame)
    write_table(out / "settings.csv", by_setting(long))
    outcome = long[long.split == OUTCOME_SPLIT]
    summary = {
        "n_models": len(table),
        "settings": labels,
        "block_settings": [s.label for s in specs],
        "median_increase_id_test": outcome.groupby("setting")["increase"].median().to_dict(),
        "excludes_zero_id_test": outcome.assign(x=outcome.ci_low > 0)
        .groupby("setting")["x"]
        .sum()
        .astype(int)
        .to_dict(),
        "gptq_error_ratio_median": float((gptq["error"] / gptq["rtn_error"]).median()),
        "gptq_worse_than_rtn_layers": int((gptq["error"] > gptq["rtn_error"]).sum()),
    }
    write_json(out / "summary.json", summary, indent=1, sort_keys=True)
    return {**summary, **timing, "seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    st = stage(__doc__, "quantization", argv)
    models_table = st.section_of("geometry_performance")["models_table"]
    return st.done(run_stage(st.params, st.section_of("sweep"), models_table))


if __name__ == "__main__":
    raise SystemExit(main())
