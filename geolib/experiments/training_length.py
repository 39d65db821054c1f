"""The training-length study measured: at every checkpoint of every run, the validation loss and
the effective rank of the unembedding W; then, per size, where each settles.

    python -m geolib.models.designs length train <name>   # stage length_train@<name>
    python -m geolib.experiments.training_length          # stage training_length_tables

The runs are :mod:`geolib.models.length`'s, trained by :mod:`geolib.models.designs`. At each
checkpoint (step 0, the random start, and every doubling of the steps) this stage records:

* ``epochs``: the tokens seen over the training split's length (past 1, text repeats: a
  longer run of the same corpus would measure repetition, not more training);
* ``loss``: the mean next-token loss (nats) of ``n_eval_seqs`` fixed validation windows;
* ``w_erank`` and ``w_erank_sq``: the effective rank of W (Roy & Vetterli, on σ and on σ²) over
  the rows of tokens that occur in the training split, as the sweep measures it, and
  ``w_erank_max``, its ceiling min(rows kept, d) (the share of it is comparable across sizes).

Per size and quantity it also records the turn (:func:`geolib.measure.settling.turn_at`): the
sweep's rows read both from ``settling.csv`` for their premise that W left its random start and
settled (:mod:`geolib.verdicts.settled_premise`).

The settling rule (:func:`geolib.measure.settling.settling`, its constant ``min_doublings`` in
``params.yaml``) is applied per size over the seeds, to each quantity, from step 1 on. Every run
reports its final loss beside the unigram entropy of the training split (the chapter names a run
that did not learn: ``verdicts.learned_margin``). Writes ``checkpoints.csv`` (one row per run and
checkpoint), ``settling.csv`` (one row per size and quantity) and ``summary.json``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from geolib.data.tokens import load_tokens
from geolib.data.windows import fixed_windows
from geolib.files import write_json, write_table
from geolib.measure.evaluate import window_losses
from geolib.measure.geometry import unused_rows
from geolib.measure.metrics import effective_rank
from geolib.measure.probes import unembedding
from geolib.measure.settling import settling, turn_at
from geolib.measure.stats import entropy_of_counts
from geolib.models.checkpoints import load
from geolib.models.device import resolve_device
from geolib.models.grid import decay_exponent
from geolib.models.length import LengthRun, check_names_listed, length_run, n_params
from geolib.models.runs import available_steps
from geolib.models.train_config import TrainConfig
from geolib.stage import progress_line, stage

#: the quantities the settling rule reads, in the order the tables list them
QUANTITIES = ("loss", "w_erank", "w_erank_sq")


def measure_run(
    cfg: TrainConfig, run_dir: Path, name: str, n_eval_seqs: int, device: str = "cpu"
) -> list[dict[str, Any]]:
    """One row per checkpoint of run ``name`` (configuration ``cfg``, folder ``run_dir``): its
    tokens and the :data:`QUANTITIES` (the model on ``device``)."""
    run = LengthRun.from_name(name)
    steps = available_steps(run_dir)
    if not steps or steps[-1] != cfg.total_steps:
        raise FileNotFoundError(
            f"{run_dir}: checkpoints {steps}, the run must reach step {cfg.total_steps} "
            f"(run `python -m geolib.models.designs length train {name}`)"
        )
    n = n_params(cfg)
    train_tokens = load_tokens(cfg.train_tokens)
    windows = fixed_windows(load_tokens(cfg.val_tokens), n_eval_seqs, cfg.seq_len + 1)
    rows = []
    kept: np.ndarray | None = None  # W's rows of tokens the training split holds: one set
    for step in steps:
        model, _ = load(run_dir, step, device=device, tokenizer=False)
        model.eval()
        w = unembedding(model).detach().cpu().double()
        if kept is None:
            kept = np.flatnonzero(~unused_rows(train_tokens, w.shape[0]))
        w = w[kept].numpy()
        rows.append(
            {
                "run": name,
                "size": run.size,
                "seed": run.seed,
                "step": step,
                "tokens": step * cfg.tokens_per_step,
                "params": n,
                "tokens_per_param": step * cfg.tokens_per_step / n,
                "epochs": step * cfg.tokens_per_step / len(train_tokens),  # past 1: repetition
                "loss": float(window_losses(model, windows).mean()),
                "w_erank": effective_rank(w),
                "w_erank_sq": effective_rank(w, squared=True),
                "w_erank_max": min(w.shape),  # the rank's ceiling: a share reads w_erank / this
            }
        )
    return rows


def settling_rows(table: pd.DataFrame, min_doublings: int) -> list[dict[str, Any]]:
    """The settling rule per size and quantity over the seeds' runs (step 0 left out: the
    doublings start at step 1)."""
    out = []
    for size, rows in table[table["step"] > 0].groupby("size", sort=False):
        wide = {q: rows.pivot(index="seed", columns="step", values=q) for q in QUANTITIES}
        x = rows.groupby("step")["tokens_per_param"].first().to_numpy()
        for q, values in wide.items():
            if values.isna().to_numpy().any():
                raise ValueError(f"size {size}: the seeds' runs have different checkpoints")
            s = settling(x, values.to_numpy(), min_doublings=min_doublings)
            out.append(
                {
                    "size": size,
                    "quantity": q,
                    "settled": s.settled,
                    "settled_at": s.settled_at,
                    "quiet_doublings": s.doublings,
                    "turn_at": turn_at(s),  # lowest seeds' mean, risen from since; NaN: none
                    "n_seeds": s.n_seeds,
                    "final_tokens_per_param": float(x[-1]),
                    "final_mean": float(s.mean[-1]),
                    "final_sd": float(s.sd[-1]),
                    "last_move": float(s.moves[-1]),
                    "reason": s.reason,
                }
            )
    return out


def run_stage(p: dict[str, Any], params: dict[str, Any], log=print) -> dict[str, Any]:
    """Measure every run, apply the rule, write the tables; returns the summary."""
    device = resolve_device(p["device"])  # before anything is read or written
    out = Path(p["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    names = check_names_listed(p)
    measure = p["measure"]
    configs = {name: length_run(params, name) for name in names}
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for i, (name, (cfg, run_dir)) in enumerate(configs.items(), start=1):
        rows += measure_run(cfg, run_dir, name, int(measure["n_eval_seqs"]), device)
        log(progress_line("training-length runs measured", i, len(names), time.perf_counter() - t0))
    table = pd.DataFrame(rows)
    write_table(out / "checkpoints.csv", table)
    settled = pd.DataFrame(settling_rows(table, int(measure["min_doublings"])))
    write_table(out / "settling.csv", settled)

    train_tokens = load_tokens(next(iter(configs.values()))[0].train_tokens)
    entropy = entropy_of_counts(np.bincount(np.asarray(train_tokens, np.int64)))
    final = table.loc[table.groupby("run", sort=False)["step"].idxmax()].set_index("run")
    runs = {
        name: {
            "steps": int(final.loc[name, "step"]),
            "tokens": int(final.loc[name, "tokens"]),
            "params": int(final.loc[name, "params"]),
            "tokens_per_param": float(final.loc[name, "tokens_per_param"]),
            "epochs": float(final.loc[name, "epochs"]),  # of the training split
            "lr_wd_sum": decay_exponent(cfg),  # Σ lr·wd: weight decay alone shrinks by exp(-it)
            "final_loss": float(final.loc[name, "loss"]),
        }
        for name, (cfg, _) in configs.items()
    }
    summary = {
        "unigram_entropy": entropy,  # of the training split: the bar a run must beat to learn
        "runs": runs,
        "settling": {
            f"{r['size']}/{r['quantity']}": {
                "settled": bool(r["settled"]),
                "settled_at": float(r["settled_at"]) if r["settled"] else None,
                "reason": r["reason"],
            }
            for r in settled.to_dict("records")
        },
    }
    write_json(out / "summary.json", summary, indent=1, sort_keys=True)
    return summary


def main(argv: list[str] | None = None) -> int:
    from geolib.config import load_params

    st = stage(__doc__, "training_length", argv)
    params = load_params(st.args.params)
    return st.done(run_stage(st.params, params, log=lambda s: print(s, file=sys.stderr)))


if __name__ == "__main__":
    raise SystemExit(main())
