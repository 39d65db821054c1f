"""Gradient energy in tangent subspaces through training (Paper A, claims A4, A6, A7): the
analysis stage that writes the tables the ``gradient_energy`` chapter reads.

    python -m geolib.experiments.gradient_energy --params params.yaml --section gradient_energy

For every run (our run directories, every checkpoint step; or hub ids at the given revisions)
and every checkpoint, in ascending order:

1. **Source pass** (forward only) on ``n_source`` sequences: the covariance of each layer's
   states H_ℓ; its top-k principal directions are the tangent subspace T (``refit``). T fitted
   at the ``frozen_sources`` steps is kept and applied to every later step (A7).
2. **Evaluation pass** (forward + backward) on ``n_eval`` other sequences: G_ℓ = ∂L/∂H_ℓ, its
   energy per sequence in T and in ``n_controls`` Haar rank-k subspaces of T's complement
   (``geolib.measure.probes``), and G's second moment for the ceiling.

Source and evaluation sequences are disjoint windows of the same token ids (fitting and
measuring on the same tokens would inflate the ratio): the pipeline's token files for our runs;
for hub models (e.g. the Pythia suite at its revisions), the corpus text ``text`` encoded with
their own tokenizer. Runs that read the same ids (:mod:`geolib.models.token_groups`) share their
windows; each group has its own windows of the same text and its own unigram entropy. Every run
has ``n_eval`` evaluation sequences, and one bootstrap resample of their indices applies to every
run, layer and step at once: that is how the pooled key numbers get their intervals. (Across
groups the windows differ, so a resample pairs independent sequences by index: a declared
choice; the groups' own intervals are unaffected.)

Outputs in ``out_dir``: ``r_energy.csv`` (one row per run, step, layer, k and source of T),
``overlap.csv`` (A7: principal-angle overlap of early and final T against random subspaces),
``losses.csv`` (evaluation loss per run and step, and the unigram entropy of the training
tokens), ``checkpoints.csv`` (a hash of each checkpoint's weights; identical weights are flagged)
and ``summary.json`` (the key numbers of A4, A6 and A7 with their intervals).
"""

from __future__ import annotations

import argparse
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from geolib.data.windows import model_batch, split_windows
from geolib.files import write_csv, write_json, write_table
from geolib.measure.energy_counts import a4_count, a7_count
from geolib.measure.metrics import StreamingCovariance
from geolib.measure.probes import (
    REFIT,
    GradientEnergy,
    REnergy,
    SecondMoment,
    ceiling_ratios,
    complement_subspaces,
    is_decoder,
    layer_names,
    r_energy,
    residual_states,
    states_and_gradients,
    top_subspaces,
)
from geolib.measure.stats import (
    Interval,
    bootstrap_weights,
    entropy_of_counts,
    percentile_interval,
)
from geolib.models.checkpoints import (
    load,
    revision_step,
    training_mask_prob,
)
from geolib.models.device import resolve_device
from geolib.models.fingerprint import weights_hash
from geolib.models.ladder import run_size
from geolib.models.replicas import identity, per_seed
from geolib.models.runs import is_run_dir
from geolib.models.token_groups import TokenGroup, run_checkpoints, token_groups
from geolib.stage import stage

# ---------------------------------------------------------------------------------------------
# Token sets
# ---------------------------------------------------------------------------------------------


def unigram_entropy(tokens: np.ndarray) -> float:
    """Entropy (nats) of the token frequencies: the loss of the best context-free predictor."""
    return entropy_of_counts(np.bincount(np.asarray(tokens, dtype=np.int64)))


# ---------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    """Everything measured on one run; ``energies[(step, layer, k, source)]`` is the
    ``(n_eval, 1 + n_controls)`` per-sequence energy matrix of that unit, ``ratios[…]`` its
    R_energy with the interval (the ``r_energy.csv`` row)."""

    run: str
    decoder: bool
    layers: list[str]
    d_model: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    energies: dict[tuple[int, str, int, str], np.ndarray] = field(default_factory=dict)
    ratios: dict[tuple[int, str, int, str], REnergy] = field(default_factory=dict)
    losses: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    subspaces: dict[tuple[int, str, int], np.ndarray] = field(default_factory=dict)


def _batches(n: int, size: int) -> list[slice]:
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def analyse_run(
    source: str,
    checkpoints: list[str | int],
    source_windows: np.ndarray,
    eval_windows: np.ndarray,
    *,
    ranks: list[int],
    n_controls: int,
    frozen_sources: list[int],
    batch_size: int,
    mask_prob: float | None,
    seed: int,
    n_boot: int,
    level: float,
    log=print,
    device: str | torch.device = "cpu",
) -> RunResult:
    """Measure R_energy for every checkpoint of one run (see the module docstring). The model
    runs on ``device``; its batches follow it."""
    mask_prob = training_mask_prob(source, mask_prob)
    frozen: dict[tuple[int, str, int], np.ndarray] = {}  # (source step, layer, k) -> T
    result: RunResult | None = None
    seen: dict[str, int] = {}
    for i, ckpt in enumerate(checkpoints):
        t0 = time.perf_counter()
        model, tokenizer = load(source, ckpt, device=device)
        model.to(device).eval()
        step = revision_step(ckpt)
        decoder = is_decoder(model)
        layers = layer_names(model)
        d = int(model.config.hidden_size)
        if result is None:
            result = RunResult(source, decoder, layers, d)
        digest = weights_hash(model)
        duplicate = seen.get(digest)
        seen.setdefault(digest, step)
        result.checkpoints.append(
            {"run": source, "step": step, "weights_sha256": digest, "duplicate_of": duplicate}
        )
        vocab = int(model.config.vocab_size)
        mask_id = getattr(tokenizer, "mask_token_id", None) if tokenizer is not None else None
        special = tuple(
            int(t) for t in (getattr(tokenizer, "all_special_ids", None) or []) if t is not None
        )
        kw = dict(mask_token_id=mask_id, vocab_size=vocab, special_ids=special, mask_prob=mask_prob)
        src_in, _ = model_batch(source_windows, decoder, seed=seed, **kw)
        ev_in, ev_tg = model_batch(eval_windows, decoder, seed=seed + 1, **kw)

        # 1. source pass: covariance of H per layer -> T (refit) for every k
        covs = [StreamingCovariance(d) for _ in layers]
        for sl in _batches(len(src_in), batch_size):
            for cov, h in zip(
                covs, residual_states(model, torch.from_numpy(src_in[sl])), strict=True
            ):
                cov.update(h.reshape(-1, d))
        # per layer: {(k, source of T): T and its controls stacked}
        bases: dict[str, dict[tuple[int, str], np.ndarray]] = {layer: {} for layer in layers}
        for li, (layer, cov) in enumerate(zip(layers, covs, strict=True)):
            for k, t in top_subspaces(cov.covariance(), ranks).items():
                result.subspaces[(step, layer, k)] = t
                if step in frozen_sources:
                    frozen[(step, layer, k)] = t
                sources = {REFIT: t}
                sources |= {
                    f"step-{s}": frozen[(s, layer, k)]
                    for s in frozen_sources
                    if s < step and (s, layer, k) in frozen
                }
                for name, basis in sources.items():
                    rng = np.random.default_rng([seed, step + 1, li, k, zlib.crc32(name.encode())])
                    ctrl = complement_subspaces(basis, n_controls, rng)
                    bases[layer][(k, name)] = np.concatenate([basis[None], ctrl])

        # 2. evaluation pass: G per layer -> energies in T and the controls; second moments
        acc = {
            layer: {key: GradientEnergy(b) for key, b in by.items()} for layer, by in bases.items()
        }
        moments = [SecondMoment(d) for _ in layers]
        loss_sum, n_targets = 0.0, 0
        for sl in _batches(len(ev_in), batch_size):
            sg = states_and_gradients(
                model, torch.from_numpy(ev_in[sl]), torch.from_numpy(ev_tg[sl])
            )
            loss_sum += sg.loss_sum
            n_targets += sg.n_targets
            for li, (layer, g) in enumerate(zip(layers, sg.grads, strict=True)):
                moments[li].update(g)
                for a in acc[layer].values():
                    a.update(g)
        result.losses.append({"run": source, "step": step, "eval_loss": loss_sum / n_targets})
        for li, layer in enumerate(layers):
            ceilings = ceiling_ratios(moments[li].matrix.numpy(), ranks)
            unit = dict(run=source, decoder=decoder, step=step, layer=layer, layer_index=li)
            for (k, name), a in acc[layer].items():
                e = a.energies
                r = r_energy(e, n_boot=n_boot, level=level, seed=seed)
                result.energies[(step, layer, k, name)] = e
                result.ratios[(step, layer, k, name)] = r
                result.rows.append(
                    {
                        **unit,
                        "k": k,
                        "source": name,
                        "r_energy": r.ratio,
                        "ci_low": r.low,
                        "ci_high": r.high,
                        "p_value": r.p_value,
                        "ceiling": ceilings[k],
                        "fraction_of_ceiling": r.ratio / ceilings[k],
                        "n_sequences": r.n_sequences,
                        "n_controls": r.n_controls,
                        "duplicate_of": duplicate,
                    }
                )
        log(
            f"{source}: checkpoint {ckpt} ({i + 1}/{len(checkpoints)}), eval loss "
            f"{loss_sum / n_targets:.3f}, {time.perf_counter() - t0:.1f} s"
        )
    assert result is not None
    return result


# ---------------------------------------------------------------------------------------------
# Pooled key numbers with a joint bootstrap over evaluation sequences
# ---------------------------------------------------------------------------------------------


def unit_ratios(energies: list[np.ndarray], weights: np.ndarray | None = None) -> np.ndarray:
    """R_energy of each unit (columns) for each weighting of the sequences (rows; ``None``: the
    observed data only, one row)."""
    if not energies:
        raise ValueError("no units to pool")
    e = np.stack(energies)  # (units, sequences, 1 + controls)
    w = np.ones((1, e.shape[1])) if weights is None else weights
    tot = np.einsum("bs,usc->buc", w, e)
    return tot[:, :, 0] / tot[:, :, 1:].mean(axis=2)


def _pooled_row(iv: Interval) -> dict[str, float]:
    """A pooled key number as the summary stores it."""
    return {"value": iv.value, "low": iv.low, "high": iv.high, "n_units": iv.n}


def pooled_median(energies: list[np.ndarray], weights: np.ndarray, level: float) -> Interval:
    """Median R_energy over units, with the percentile interval from resampling evaluation
    sequences jointly (``n`` is the number of units)."""
    point = float(np.median(unit_ratios(energies)[0]))
    boot = np.median(unit_ratios(energies, weights), axis=1)
    return percentile_interval(boot, point, level, len(energies), "unit")


def pooled_median_ratio(
    numer: list[np.ndarray], denom: list[np.ndarray], weights: np.ndarray, level: float
) -> Interval:
    """Median R_energy of one group of units over the median of another (same sequences)."""
    point = float(np.median(unit_ratios(numer)[0]) / np.median(unit_ratios(denom)[0]))
    boot = np.median(unit_ratios(numer, weights), axis=1) / np.median(
        unit_ratios(denom, weights), axis=1
    )
    return percentile_interval(boot, point, level, len(numer) + len(denom), "unit")


def subspace_overlap(u: np.ndarray, v: np.ndarray) -> float:
    """Mean squared cosine of the principal angles between span(u) and span(v) (both (d, k)
    orthonormal): ‖uᵀv‖²_F / k. Random k-subspaces of R^d have expected overlap k/d."""
    if u.shape != v.shape:
        raise ValueError(f"bases must have the same shape, got {u.shape} and {v.shape}")
    return float(np.sum((u.T @ v) ** 2) / u.shape[1])


def rule_v2_counts(table: Any, losses: Any, p: dict[str, Any]) -> dict[str, Any]:
    """The v2 counts of A4 and A7 for the primary analysis and each declared alternative.

    ``p["a4_v2"]["alternatives"]`` (and ``a7_v2``) map a name to the settings it changes; the
    settings of the count (``k``, ``early_max``, ``phase``, ``bound``) apply here, those of the
    rule (``min_fraction``) in the chapter.
    """
    a4 = {
        "k": int(p["key_rank"]),
        "early_max": int(p["early_max"]),
        "threshold": float(p["a4_v2"]["threshold"]),
        "no_effect": float(p["a4_v2"]["no_effect"]),
        "phase": "learned",
        "bound": "ci_low",
    }
    a7 = {
        "k": int(p["key_rank"]),
        "early_max": int(p["early_max"]),
        "a7_source": int(p["a7_source"]),
        "no_effect": float(p["a7_v2"]["no_effect"]),
    }
    out = {}
    for name, base, count in (
        ("a4_v2", a4, lambda **kw: a4_count(table, losses, **kw)),
        ("a7_v2", a7, lambda **kw: a7_count(table, **kw)),
    ):
        alts = p[name].get("alternatives") or {}
        measured = {int(r) for r in p["ranks"]}
        out[name] = {
            "primary": count(**base),
            "alternatives": {  # an alternative at a rank this run did not measure is left out
                alt: count(**{**base, **{k: v for k, v in change.items() if k in base}})
                for alt, change in alts.items()
                if int(change.get("k", base["k"])) in measured
            },
        }
    return out


# ---------------------------------------------------------------------------------------------
# The stage
# ---------------------------------------------------------------------------------------------


def summarise(results: list[RunResult], p: dict[str, Any]) -> dict[str, Any]:
    """The key numbers of A4, A6 and A7 (definitions in ``params.yaml``)."""
    k, early_max, a7 = int(p["key_rank"]), int(p["early_max"]), int(p["a7_source"])
    n_eval = next(iter(results[0].energies.values())).shape[0]
    w = bootstrap_weights(n_eval, int(p["n_boot"]), int(p["seed"]) + 7)
    level = float(p["ci_level"])

    def units(res: list[RunResult], steps_ok, source: str = REFIT) -> list[np.ndarray]:
        return [
            e
            for r in res
            for (step, layer, kk, src), e in sorted(r.energies.items())
            if kk == k and src == source and layer != "embed" and steps_ok(step)
        ]

    decoders = [r for r in results if r.decoder]
    encoders = [r for r in results if not r.decoder]
    out: dict[str, Any] = {"key_rank": k, "early_max": early_max, "a7_source": a7}
    if decoders:
        early = units(decoders, lambda s: 1 <= s <= early_max)
        out["a4"] = _pooled_row(pooled_median(early, w, level))
    common = set.intersection(*({s for (s, *_rest) in r.energies} for r in results))
    if decoders and encoders and not any(s >= 1 for s in common):
        # e.g. released encoders (step -1) beside decoders' checkpoints: no matched step
        out["a6_unmatched"] = "no checkpoint step >= 1 is shared by every decoder and encoder"
    elif decoders and encoders:

        def a6(rank: int) -> dict[str, float]:
            def at(res: list[RunResult]) -> list[np.ndarray]:
                return [
                    e
                    for r in res
                    for (step, layer, kk, src), e in sorted(r.energies.items())
                    if kk == rank
                    and src == REFIT
                    and layer != "embed"
                    and step >= 1
                    and step in common
                ]

            return _pooled_row(pooled_median_ratio(at(decoders), at(encoders), w, level))

        out["a6"] = a6(k)
        # rule v2: the same ratio at the other ranks the paper's text admits (declared)
        measured = {int(r) for r in p["ranks"]}
        out["a6_by_rank"] = {
            str(rank): a6(int(rank))
            for rank in p.get("alt_ranks", [])
            if int(rank) != k and int(rank) in measured
        }
    a7_units = []
    for r in decoders:
        final = max(s for (s, *_rest) in r.energies)
        for layer in r.layers[1:]:
            early = [
                ratio.ratio
                for (s, lay, kk, src), ratio in r.ratios.items()
                if lay == layer and kk == k and src == REFIT and 1 <= s <= early_max
            ]
            final_refit = r.ratios[(final, layer, k, REFIT)].ratio
            frozen_key = (final, layer, k, f"step-{a7}")
            if not early or frozen_key not in r.energies:
                continue
            fz = r.ratios[frozen_key]
            a7_units.append(
                {
                    "run": r.run,
                    "layer": layer,
                    "early_median": float(np.median(early)),
                    "final_refit": float(final_refit),
                    "final_frozen": fz.ratio,
                    "final_frozen_low": fz.low,
                    "strongest_early": bool(np.median(early) > final_refit),
                    "maintained": bool(fz.low > 1.0),
                }
            )
    out["a7_units"] = a7_units
    out["a7"] = {
        "successes": sum(u["strongest_early"] and u["maintained"] for u in a7_units),
        "n_units": len(a7_units),
    }
    return out


def overlap_rows(results: list[RunResult], sources: list[int]) -> list[dict[str, Any]]:
    """A7: overlap of T at each early source step with T at the final step."""
    rows = []
    for r in results:
        final = max(s for (s, _l, _k) in r.subspaces)
        for (step, layer, k), t in sorted(r.subspaces.items()):
            if step in sources and step < final:
                rows.append(
                    {
                        "run": r.run,
                        "source_step": step,
                        "final_step": final,
                        "layer": layer,
                        "k": k,
                        "overlap": subspace_overlap(t, r.subspaces[(final, layer, k)]),
                        "random_overlap": k / r.d_model,
                    }
                )
    return rows


def section_groups(p: dict[str, Any]) -> list[TokenGroup]:
    """The section's runs grouped by the token ids they read (:func:`token_groups`): the
    pipeline's token files for our runs, the corpus files ``text`` / ``unigram_text`` in each
    hub tokenizer's ids for hub models."""
    return token_groups(
        p["runs"],
        p.get("revisions"),
        tokens=p["tokens"],
        unigram_tokens=p["unigram_tokens"],
        text=p.get("text"),
        unigram_text=p.get("unigram_text"),
        max_text_tokens=int(p["max_text_tokens"]),
    )


def run_stage(p: dict[str, Any], log=print) -> dict[str, Any]:
    """Run the whole analysis from a parameters mapping (the stage's section of params.yaml,
    merged over ``common``) and write the tables; returns the summary."""
    import pandas as pd

    device = resolve_device(p["device"])
    out = Path(p["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    groups = section_groups(p)
    entropy: dict[str, float] = {}
    results = []
    for group in groups:
        src, ev = split_windows(
            group.tokens,
            int(p["seq_len"]) + 1,
            int(p["n_source"]),
            int(p["n_eval"]),
            int(p["seed"]),
        )
        if group.unigram is None:
            raise ValueError(f"{list(group.runs)}: set `unigram_text` for hub models' losses")
        entropy |= dict.fromkeys(group.runs, unigram_entropy(group.unigram))
        for run in group.runs:
            results.append(
                analyse_run(
                    run,
                    run_checkpoints(run, p.get("revisions")),
                    src,
                    ev,
                    ranks=[int(k) for k in p["ranks"]],
                    n_controls=int(p["n_controls"]),
                    frozen_sources=[int(s) for s in p["frozen_sources"]],
                    batch_size=int(p["batch_size"]),
                    mask_prob=None if p["mask_prob"] is None else float(p["mask_prob"]),
                    seed=int(p["seed"]),
                    n_boot=int(p["n_boot"]),
                    level=float(p["ci_level"]),
                    log=log,
                    device=device,
                )
            )
    order = {run: i for i, run in enumerate(p["runs"])}
    results.sort(key=lambda r: order[r.run])
    ratios = pd.DataFrame([row for r in results for row in r.rows])
    write_table(out / "r_energy.csv", ratios)
    overlap = pd.DataFrame(overlap_rows(results, [int(s) for s in p["frozen_sources"]]))
    write_table(out / "overlap.csv", overlap)
    losses = pd.DataFrame([row for r in results for row in r.losses])
    losses["unigram_entropy"] = losses["run"].map(entropy)
    write_table(out / "losses.csv", losses)
    checkpoints = pd.DataFrame([row for r in results for row in r.checkpoints])
    write_csv(out / "checkpoints.csv", checkpoints, index=False)
    summary = summarise_tables(results, ratios, losses, p)
    summary |= per_seed(  # each claim again on each seed's models: the model is the unit
        [r.run for r in results],
        lambda runs: summarise_tables(
            [r for r in results if r.run in runs],
            ratios[ratios["run"].isin(runs)],
            losses[losses["run"].isin(runs)],
            p,
        ),
    )
    write_json(out / "summary.json", summary, indent=1, sort_keys=True)
    if "a4_v2" in p:
        write_table(out / "per_model.csv", pd.DataFrame(per_model_counts(ratios, losses, p)))
    return summary


def per_model_counts(ratios: Any, losses: Any, p: dict[str, Any]) -> list[dict[str, Any]]:
    """Each trained model's own v2 counts of A4 and A7 (the primary analyses of
    :func:`rule_v2_counts` on its rows alone) with its seed and non-embedding parameters
    (:func:`~geolib.models.ladder.run_size`; ``None`` for a hub id), one row per run in the
    section's order: the key numbers the scale chapter fits against model size."""
    rows, measured = [], set(ratios["run"])
    for run in (r for r in p["runs"] if r in measured):
        counts = rule_v2_counts(ratios[ratios["run"] == run], losses[losses["run"] == run], p)
        a4, a7 = counts["a4_v2"]["primary"], counts["a7_v2"]["primary"]
        rows.append(
            {
                "run": run,
                "seed": identity(run)[1],
                "non_embedding": run_size(run)["non_embedding"] if is_run_dir(run) else None,
                "a4_successes": a4["successes"],
                "a4_units": a4["n_units"],
                "a7_successes": a7["successes"],
                "a7_units": a7["n_units"],
            }
        )
    return rows


def summarise_tables(results: list[RunResult], ratios: Any, losses: Any, p: dict[str, Any]):
    """:func:`summarise` and, where the section declares rules v2, their counts."""
    summary = summarise(results, p)
    if "a4_v2" in p:
        summary |= rule_v2_counts(ratios, losses, p)
    return summary


def main(argv: list[str] | None = None) -> int:
    def threads(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--threads", type=int, default=None, help="torch threads")

    st = stage(__doc__, "gradient_energy", argv, threads)
    if st.args.threads:
        torch.set_num_threads(st.args.threads)
    return st.done(run_stage(st.params), hide=("a7_units",))


if __name__ == "__main__":
    raise SystemExit(main())
