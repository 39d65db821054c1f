"""Forgetting after fine-tuning on a new domain, for every sweep model (Paper B, claim B8): the
analysis stage that adds forgetting to the per-model table.

    python -m geolib.experiments.forgetting --params params.yaml --section forgetting

For each sweep point, the final checkpoint is loaded and fine-tuned **in memory** (its run
directory is only read) for ``token_budget`` tokens on the first ``tune_fraction`` of the
``domain`` split, with the same fixed settings for every model (AdamW at a constant ``lr``, no
weight decay, gradient clipping at 1, seeded windows). Before and after, the mean next-token
loss of fixed windows of the rest of the domain split (never seen in fine-tuning) and of the ID
test split is measured; the windows are the same before and after, so each change has a
*paired* bootstrap interval over windows.

* ``gain`` = domain loss before − after (what fine-tuning bought);
* ``forgetting`` = ID test loss after − before (what it cost on the training distribution).

Then, over models, the predictive comparison of B1/B7 (:mod:`geolib.measure.prediction`):
forgetting against the effective rank of W and against ID loss, and the partial correlation of
geometry with forgetting given ID loss.

Outputs in ``out_dir``: ``forgetting.csv`` (one row per model, with the sweep's per-model
columns joined), ``window_losses.npz`` (per-window losses before and after, per model), and per
token budget ``<budget>/prediction.csv``, ``prediction_within_size.csv`` and ``r2_gap.csv``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from geolib.data.tokens import load_tokens
from geolib.data.windows import fixed_windows, sample_windows
from geolib.files import write_json, write_npz, write_table
from geolib.measure.evaluate import on_model_device, window_losses
from geolib.measure.prediction import join_per_model, per_model_tables_by_budget
from geolib.measure.stats import paired_change
from geolib.models.checkpoints import load, vocab_size_of
from geolib.models.device import resolve_device
from geolib.models.grid import check_points_listed, point_dir
from geolib.stage import progress_line, stage

OUTCOME = "forgetting"


def split_domain(tokens: np.ndarray, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """``(tune, held_out)``: the first ``fraction`` of the tokens and the rest (no overlap)."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"tune_fraction must be in (0, 1), got {fraction}")
    cut = int(len(tokens) * fraction)
    return np.asarray(tokens[:cut]), np.asarray(tokens[cut:])


def fine_tune(
    model,
    tokens: np.ndarray,
    *,
    token_budget: int,
    batch_size: int,
    seq_len: int,
    lr: float,
    seed: int,
    betas: tuple[float, float] = (0.9, 0.95),
) -> list[float]:
    """Fine-tune a causal LM in place on random windows of ``tokens`` for
    ``token_budget // (batch_size · seq_len)`` AdamW steps (constant ``lr``, no weight decay,
    clipping at 1); returns the training loss of each step."""
    steps = int(token_budget) // (int(batch_size) * int(seq_len))
    if steps < 1:
        raise ValueError(f"token_budget {token_budget} is less than one batch")
    rng = np.random.default_rng(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(steps):
        w = on_model_device(
            model, torch.from_numpy(sample_windows(tokens, rng, batch_size, seq_len + 1))
        )
        logits = model(input_ids=w[:, :-1]).logits
        loss = F.cross_entropy(logits.transpose(1, 2), w[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def forget_point(run_dir: str | Path, p: dict[str, Any], seed: int) -> tuple[dict, dict]:
    """``(row, per-window losses)`` of one model (module docstring). The row holds no timing,
    so that a rerun that changes no number writes the same bytes."""
    vocab = vocab_size_of(run_dir)
    tune, held = split_domain(load_tokens(p["domain"], vocab), float(p["tune_fraction"]))
    n, length = int(p["n_eval_seqs"]), int(p["seq_len"]) + 1
    windows = {
        "domain": fixed_windows(held, n, length),
        "id": fixed_windows(load_tokens(p["id_tokens"], vocab), n, length),
    }
    torch.manual_seed(seed)
    model, _ = load(run_dir, device=resolve_device(p["device"]))
    before = {k: window_losses(model, w) for k, w in windows.items()}
    steps = fine_tune(
        model,
        tune,
        token_budget=int(p["token_budget"]),
        batch_size=int(p["batch_size"]),
        seq_len=int(p["seq_len"]),
        lr=float(p["lr"]),
        seed=seed,
    )
    after = {k: window_losses(model, w) for k, w in windows.items()}
    kw = dict(n_boot=int(p["n_boot"]), level=float(p["ci_level"]), seed=seed)
    forgetting = paired_change(before["id"], after["id"], **kw)
    gain = paired_change(after["domain"], before["domain"], **kw)  # before − after
    row = {
        "name": Path(run_dir).name,
        "id_before": float(before["id"].mean()),
        "id_after": float(after["id"].mean()),
        "domain_before": float(before["domain"].mean()),
        "domain_after": float(after["domain"].mean()),
        OUTCOME: forgetting.value,
        f"{OUTCOME}_ci_low": forgetting.low,
        f"{OUTCOME}_ci_high": forgetting.high,
        "gain": gain.value,
        "gain_ci_low": gain.low,
        "gain_ci_high": gain.high,
        "tune_steps": len(steps),
        "tune_first_loss": steps[0],
        "tune_last_loss": steps[-1],
    }
    per_window = {
        f"{k}_{when}": v[k] for when, v in (("before", before), ("after", after)) for k in v
    }
    return row, per_window


def run_stage(p: dict[str, Any], sweep: dict[str, Any], models_table: str, log=print) -> dict:
    """Fine-tune every sweep point, write the tables, return a summary: ``summary.json``'s
    contents plus the stage's ``seconds``, which goes to the log only (a table that recorded it
    would change on every rerun and rerun the chapter below it)."""
    import pandas as pd

    resolve_device(p["device"])  # before anything is read or written
    out = Path(p["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    names = check_points_listed(sweep)
    rows, arrays = [], {}
    t0 = time.perf_counter()
    for i, name in enumerate(names):
        t_model = time.perf_counter()
        row, per_window = forget_point(point_dir(sweep, name), p, int(p["seed"]))
        rows.append(row)
        arrays |= {f"{name}/{k}": v for k, v in per_window.items()}
        done = progress_line("forgetting", i + 1, len(names), time.perf_counter() - t0)
        log(
            f"{name}: forgetting {row[OUTCOME]:+.4f}, gain {row['gain']:+.4f} nats, "
            f"{time.perf_counter() - t_model:.1f} s; {done}"
        )
    table = join_per_model(pd.read_csv(models_table), pd.DataFrame(rows), names, models_table)
    write_table(out / "forgetting.csv", table)
    write_npz(out / "window_losses.npz", **arrays)
    kw = dict(n_boot=int(p["n_boot"]), level=float(p["ci_level"]), seed=int(p["seed"]))
    outcomes = [OUTCOME, "gain"]
    for budget, tables in per_model_tables_by_budget(table, outcomes, **kw).items():
        (out / budget).mkdir(parents=True, exist_ok=True)
        for stem, frame in tables.items():
            write_table(out / budget / f"{stem}.csv", frame)
    summary = {
        "n_models": len(table),
        "median_forgetting": float(table[OUTCOME].median()),
        "median_gain": float(table["gain"].median()),
        "forgetting_excludes_zero": int((table[f"{OUTCOME}_ci_low"] > 0).sum()),
    }
    write_json(out / "summary.json", summary, indent=1, sort_keys=True)
    return {**summary, "seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    st = stage(__doc__, "forgetting", argv)
    models_table = st.section_of("geometry_performance")["models_table"]
    return st.done(run_stage(st.params, st.section_of("sweep"), models_table))


if __name__ == "__main__":
    raise SystemExit(main())
