"""Frequency against geometric freedom in trained models (Paper A, claim A1): the analysis
stage that writes the tables the ``frequency_collapse`` chapter reads.

    python -m geolib.experiments.frequency_collapse --params params.yaml \\
        --section frequency_collapse

For every run (``geolib.measure.frequency`` has the definitions):

* **states** — the final checkpoint reads all held-out text (``state_tokens``, cut into
  consecutive windows, unmasked); per layer and token type, the within-type variance of its
  states as a share of the layer's total variance, for types with ``min_occurrences`` states;
* **rows** — the input-embedding rows at every checkpoint: late jitter (checkpoints from
  ``jitter_from`` on) and the settle step (``settle_threshold``), for types seen at least
  ``min_train_count`` times in training;
* each against the type's training frequency: log–log slopes (states, jitter) and the Spearman
  correlation (settle step), with intervals from resampling types.

Outputs in ``out_dir``: ``states.csv`` (run, layer, type), ``rows.csv`` (run, type),
``fits.csv`` (one row per run, measure and layer), ``bins.csv`` (binned medians for the
figures), ``summary.json`` (the units the two A1 rules count, per optimizer), ``per_model.csv``
(each model's own units, for the scale chapter) and ``a1_per_model.csv`` (each model's A1 v3
numbers, which the chapter decides on: :func:`a1_per_model`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from geolib.data.tokens import load_tokens
from geolib.files import write_csv, write_json, write_table
from geolib.measure.frequency import (
    TypeStates,
    frequency_bins,
    loglog_slope,
    row_jitter,
    settle_spearman,
    settle_steps,
    type_counts,
)
from geolib.measure.probes import layer_names, residual_states
from geolib.measure.stats import Interval
from geolib.models.checkpoints import load, shared_vocab_size
from geolib.models.device import resolve_device
from geolib.models.replicas import per_seed
from geolib.models.runs import available_steps, read_run_info
from geolib.stage import stage

#: Within-type variance shares at or below this are float32 rounding of identical states.
ROUNDING = 1e-9


def held_out_windows(paths: list[str], seq_len: int, vocab_size: int | None = None) -> np.ndarray:
    """``(n, seq_len)`` int64: each token file cut into consecutive windows (a tail shorter than
    a window dropped), files concatenated; no window spans two files."""
    out = []
    for path in paths:
        t = load_tokens(path, vocab_size)
        n = len(t) // seq_len
        if n == 0:
            raise ValueError(f"{path} holds {len(t)} tokens, fewer than one window of {seq_len}")
        out.append(np.asarray(t[: n * seq_len], dtype=np.int64).reshape(n, seq_len))
    return np.concatenate(out)


def state_variances(model, windows: np.ndarray, batch_size: int) -> list[TypeStates]:
    """One :class:`TypeStates` per layer (``layer_names`` order) over all ``windows``."""
    vocab, d = int(model.config.vocab_size), int(model.config.hidden_size)
    acc = [TypeStates(vocab, d) for _ in layer_names(model)]
    for i in range(0, len(windows), batch_size):
        ids = windows[i : i + batch_size]
        for a, h in zip(acc, residual_states(model, torch.from_numpy(ids)), strict=True):
            a.update(ids.reshape(-1), h.reshape(-1, d))
    return acc


def embedding_trajectory(run: str, steps: list[int]) -> np.ndarray:
    """``(len(steps), vocab, d)`` float64 input-embedding rows at each checkpoint."""
    rows = []
    for s in steps:
        model, _ = load(run, s)
        rows.append(model.get_input_embeddings().weight.detach().cpu().double().numpy().copy())
    return np.stack(rows)


def _fit_row(run, optimizer, measure, layer, assoc, n_types) -> dict[str, Any]:
    return {
        "run": run,
        "optimizer": optimizer,
        "measure": measure,
        "layer": layer,
        "estimate": assoc.value,
        "low": assoc.low,
        "high": assoc.high,
        "n_types": n_types,
    }


def _bins_rows(run, measure, layer, freq, values, n_bins) -> list[dict[str, Any]]:
    b = frequency_bins(freq, values, n_bins)
    return [
        {"run": run, "measure": measure, "layer": layer, "centre": c, "median": m, "n_types": n}
        for c, m, n in zip(b.centre, b.median, b.n, strict=True)
    ]


def analyse_run(run: str, p: dict[str, Any], train_counts: np.ndarray, windows, log=print):
    """``(states rows, type rows, fits, bins)`` of one run."""
    t0 = time.perf_counter()
    optimizer = read_run_info(run)["config"].get("optimizer", "adamw")
    steps = available_steps(run)
    model, _ = load(run, steps[-1], device=p["device"])
    model.eval()
    vocab = int(model.config.vocab_size)
    if train_counts.size > vocab:
        raise ValueError(f"{run}: the training tokens use ids beyond its vocabulary of {vocab}")
    counts = np.zeros(vocab, dtype=np.int64)
    counts[: train_counts.size] = train_counts
    freq = counts / counts.sum()
    level, n_boot, seed = float(p["ci_level"]), int(p["n_boot"]), int(p["seed"])
    min_train, n_bins = int(p["min_train_count"]), int(p["n_bins"])
    states, types, fits, bins = [], [], [], []

    per_layer = state_variances(model, windows, int(p["batch_size"]))
    for layer, acc in zip(layer_names(model), per_layer, strict=True):
        v = acc.within_variance(int(p["min_occurrences"]))
        # a share at rounding level is no variance (a decoder's layer 0 is the embedding row
        # itself, the same vector at every occurrence)
        keep = np.isfinite(v) & (v > ROUNDING) & (counts >= max(min_train, 1))
        ids = np.flatnonzero(keep)
        states += [
            {
                "run": run,
                "layer": layer,
                "type": int(t),
                "train_count": int(counts[t]),
                "occurrences": int(acc.count[t]),
                "within_variance": float(v[t]),
            }
            for t in ids
        ]
        if ids.size >= 4:
            a = loglog_slope(freq[ids], v[ids], n_boot=n_boot, level=level, seed=seed)
            fits.append(_fit_row(run, optimizer, "states", layer, a, ids.size))
            bins += _bins_rows(run, "states", layer, freq[ids], v[ids], n_bins)

    late = [s for s in steps if s >= int(p["jitter_from"])]
    if len(late) < 2:
        raise ValueError(f"{run}: fewer than 2 checkpoints from step {p['jitter_from']} on")
    traj = embedding_trajectory(run, steps)
    seen = np.flatnonzero(counts >= max(min_train, 1))
    jitter = row_jitter(traj[[steps.index(s) for s in late]][:, seen])
    settle = settle_steps(np.asarray(steps), traj[:, seen], float(p["settle_threshold"]))
    types = [
        {
            "run": run,
            "type": int(t),
            "train_count": int(counts[t]),
            "jitter": float(j),
            "settle_step": int(s),
        }
        for t, j, s in zip(seen, jitter, settle, strict=True)
    ]
    a = loglog_slope(freq[seen], jitter, n_boot=n_boot, level=level, seed=seed)
    fits.append(_fit_row(run, optimizer, "jitter", "embed", a, seen.size))
    bins += _bins_rows(run, "jitter", "embed", freq[seen], jitter, n_bins)
    if np.unique(settle).size > 1:
        a = settle_spearman(freq[seen], settle.astype(float), n_boot=n_boot, level=level, seed=seed)
    else:  # every row settles at the same checkpoint: no correlation to estimate
        a = Interval(np.nan, np.nan, np.nan, level, int(seen.size), "undefined")
    fits.append(_fit_row(run, optimizer, "settle", "embed", a, seen.size))
    bins += _bins_rows(run, "settle", "embed", freq[seen], settle.astype(float), n_bins)
    log(
        f"{run}: {len(states)} (layer, type) pairs, {seen.size} rows, "
        f"{time.perf_counter() - t0:.1f} s"
    )
    return states, types, fits, bins


def summarise(fits: list[dict[str, Any]]) -> dict[str, Any]:
    """The units the two A1 rules count, per optimizer: a states unit (run × block layer) holds
    when its slope's interval is below 0; a rows unit (run) when both the jitter slope and the
    settle-step correlation are."""
    out: dict[str, Any] = {}
    for opt in sorted({f["optimizer"] for f in fits}):
        mine = [f for f in fits if f["optimizer"] == opt]
        st = [f for f in mine if f["measure"] == "states" and f["layer"] != "embed"]
        runs = sorted({f["run"] for f in mine})
        rows_ok = []
        for run in runs:
            by = {f["measure"]: f for f in mine if f["run"] == run and f["layer"] == "embed"}
            if "jitter" in by and "settle" in by:
                rows_ok.append(by["jitter"]["high"] < 0 and by["settle"]["high"] < 0)
        out[opt] = {
            "states": {"successes": sum(f["high"] < 0 for f in st), "n_units": len(st)},
            "rows": {"successes": int(sum(rows_ok)), "n_units": len(rows_ok)},
            "median_state_slope": float(np.median([f["estimate"] for f in st])) if st else None,
        }
    return out


def run_stage(p: dict[str, Any], log=print) -> dict[str, Any]:
    import pandas as pd

    p = {**p, "device": resolve_device(p["device"])}
    out = Path(p["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    vocab = shared_vocab_size(list(p["runs"]))
    windows = held_out_windows(list(p["state_tokens"]), int(p["seq_len"]), vocab)
    train = load_tokens(p["train_tokens"], vocab)
    counts = type_counts(train, int(train.max()) + 1)
    tables: dict[str, list] = {"states": [], "rows": [], "fits": [], "bins": []}
    for run in p["runs"]:
        for name, part in zip(tables, analyse_run(run, p, counts, windows, log), strict=True):
            tables[name] += part
    for name, rows in tables.items():
        write_table(out / f"{name}.csv", pd.DataFrame(rows))
    summary = summarise(tables["fits"])
    summary["n_state_tokens"] = int(windows.size)
    summary |= per_seed(  # A1 again on each seed's models: the trained model is the unit
        list(p["runs"]), lambda runs: summarise([f for f in tables["fits"] if f["run"] in runs])
    )
    write_json(out / "summary.json", summary, indent=1, sort_keys=True)
    # every digit: the scale chapter fits these numbers again (the house 6 digits would move them)
    write_csv(out / "per_model.csv", pd.DataFrame(per_model_units(tables["fits"])), index=False)
    frames = (pd.DataFrame(tables[name]) for name in ("fits", "states", "rows"))
    write_csv(out / "a1_per_model.csv", a1_per_model(*frames), index=False)
    return summary


def _decades(counts: Any) -> float:
    c = counts[counts > 0]
    return float(np.log10(c.max() / c.min())) if len(c) else 0.0


def a1_per_model(fits: Any, states: Any, rows: Any) -> Any:
    """Each trained model's A1 v3 numbers (pandas tables as this stage writes them), one row per
    run and optimizer in the order of ``fits``: ``layers``: its block layers with a state fit,
    ``falls``: those whose slope's whole interval is below 0; ``state_decades``: the fewest
    decades of training frequency its layers' fitted types span; ``rows_settle``: jitter slope
    and settle-step correlation both wholly below 0 (empty: no row fit); ``row_decades``: the
    span of its rows' training counts. Every run is here; which learned is the chapter's rule."""
    import pandas as pd

    columns = ["run", "optimizer", "layers", "falls", "state_decades", "rows_settle"]
    columns.append("row_decades")
    if fits.empty:
        return pd.DataFrame(columns=columns)
    out = []
    for run, optimizer in dict.fromkeys(zip(fits["run"], fits["optimizer"], strict=True)):
        mine = fits[fits["run"] == run]
        st = mine[(mine["measure"] == "states") & (mine["layer"] != "embed")]
        by = {m: g.iloc[0] for m, g in mine[mine["layer"] == "embed"].groupby("measure")}
        rows_settle = (
            bool(by["jitter"]["high"] < 0 and by["settle"]["high"] < 0)
            if "jitter" in by and "settle" in by
            else None
        )
        s = states[(states["run"] == run) & (states["layer"] != "embed")]
        spans = [_decades(g["train_count"]) for _, g in s.groupby("layer")]
        out.append(
            {
                "run": run,
                "optimizer": optimizer,
                "layers": len(st),
                "falls": int((st["high"] < 0).sum()),
                "state_decades": min(spans) if spans else 0.0,
                "rows_settle": rows_settle,
                "row_decades": _decades(rows.loc[rows["run"] == run, "train_count"]),
            }
        )
    return pd.DataFrame(out, columns=columns)


def per_model_units(fits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each trained model's own A1 units (:func:`summarise` of its fits alone), one row per run
    in the order of ``fits``: the key numbers the scale chapter fits against model size."""
    rows = []
    for run in dict.fromkeys(f["run"] for f in fits):
        for optimizer, units in summarise([f for f in fits if f["run"] == run]).items():
            rows.append(
                {
                    "run": run,
                    "optimizer": optimizer,
                    "states_successes": units["states"]["successes"],
                    "states_units": units["states"]["n_units"],
                    "rows_successes": units["rows"]["successes"],
                    "rows_units": units["rows"]["n_units"],
                    "median_state_slope": units["median_state_slope"],
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    st = stage(__doc__, "frequency_collapse", argv)
    return st.done(run_stage(st.params))


if __name__ == "__main__":
    raise SystemExit(main())
