"""Residual isotropy after removing the tangent subspace T (Paper A, claim A5): the analysis
stage that writes the tables the ``residual_isotropy`` chapter reads.

    python -m geolib.experiments.residual_isotropy --params params.yaml --section residual_isotropy

For every run and checkpoint (ascending), three disjoint sets of windows of the same token ids
(the pipeline's token file for our runs; for hub models the corpus text ``text`` in their own
tokenizer's ids, :mod:`geolib.models.token_groups`) pass through the model (forward only;
inputs as in training, so the encoder sees its masking):

1. **source** windows: each layer's covariance; its top-k principal subspace is ``refit`` T.
   T fitted at the ``frozen_sources`` steps is kept and applied to every later step.
2. **reference** windows: each layer's covariance C0, the shrinkage target of IsoScore*.
3. **evaluation** windows: per-sequence moments of each layer's states H (the bootstrap unit).

Per layer, rank k, IsoScore* zeta and source of T
(``geolib.measure.residual``): the change of IsoScore*
from H's own value when T is removed (``d_t``), when each of ``n_controls`` Haar rank-k
subspaces of T's complement is removed (median ``d_n`` and its 5–95% band over the controls),
and when H's own top-k principal subspace is removed (``d_max``, the achievable reference);
``fraction = (d_t − d_n) / (d_max − d_n)``. Refit rows also carry a **Gaussian control**: the
same refit measurement on Gaussian points with H's covariance (T fitted on a second Gaussian
sample of the source's size), i.e. what the spectrum alone gives, with no learned structure.

At ``key_rank`` every unit gets percentile intervals from a bootstrap over evaluation sequences
(one set of resampling weights shared by all units, so pooled statistics get joint intervals).
``d_max``'s replicates are centred on its estimate first and the shift is written as
``d_max_boot_bias`` (:func:`geolib.measure.residual.centred_replicates`: a resample carries the
sample's noise twice, and the bulk that the top-k removal leaves is where that noise lowers
IsoScore most, so uncentred replicates sit below the estimate).

Outputs in ``out_dir``: ``residual_isotropy.csv`` (one row per run, step, layer, k, zeta and
source), ``summary.json`` (the A5 key number at every zeta and the tautology references, each
with its interval).
"""

from __future__ import annotations

import time
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from geolib.data.windows import model_batch, split_windows
from geolib.files import write_json, write_table
from geolib.measure.metrics import StreamingCovariance
from geolib.measure.probes import (
    REFIT,
    complement_subspaces,
    is_decoder,
    layer_names,
    residual_states,
)
from geolib.measure.probes import top_subspaces as _top_subspaces
from geolib.measure.residual import (
    SequenceMoments,
    centred_replicates,
    gain_fraction,
    isoscore_of_covariance,
    residual_isoscore,
    shrink,
    top_removal_isoscore_near,
    top_removal_isoscores,
)
from geolib.measure.stats import bootstrap_weights, percentile_interval
from geolib.models.checkpoints import is_hub_id, load, revision_step, training_mask_prob
from geolib.models.device import resolve_device
from geolib.models.replicas import per_seed
from geolib.models.token_groups import run_checkpoints, token_groups
from geolib.stage import stage


def _step_source(step: int) -> str:
    return f"step-{step}"


@dataclass
class Replicates:
    """Bootstrap replicates of one key-rank unit: ``(n_boot,)`` arrays of d_t, d_n, d_max."""

    d_t: np.ndarray
    d_n: np.ndarray
    d_max: np.ndarray

    def fraction(self) -> np.ndarray:
        return gain_fraction(self.d_t, self.d_n, self.d_max)


@dataclass
class RunResult:
    run: str
    decoder: bool
    layers: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    # (step, layer, zeta, source) -> replicates at key_rank
    replicates: dict[tuple[int, str, float, str], Replicates] = field(default_factory=dict)


def _layer_covariances(model, windows: np.ndarray, batch_size: int, d: int, n_layers: int):
    covs = [StreamingCovariance(d) for _ in range(n_layers)]
    for i in range(0, len(windows), batch_size):
        for cov, h in zip(
            covs, residual_states(model, torch.from_numpy(windows[i : i + batch_size])), strict=True
        ):
            cov.update(h.reshape(-1, d))
    return covs


def _sequence_moments(model, windows, batch_size, shifts) -> list[SequenceMoments]:
    moments = [SequenceMoments(s) for s in shifts]
    for i in range(0, len(windows), batch_size):
        states = residual_states(model, torch.from_numpy(windows[i : i + batch_size]))
        for mom, h in zip(moments, states, strict=True):
            for seq in h:
                mom.update(seq)
    return moments


def gaussian_samples(
    cov: np.ndarray, n_eval: int, n_source: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Population covariances of two independent Gaussian samples with covariance ``cov``, of
    ``n_eval`` and ``n_source`` points: the evaluation and source sets of the Gaussian control,
    points whose only structure is the spectrum (no learned directions)."""
    lam, vec = np.linalg.eigh(cov)
    root = vec * np.sqrt(np.clip(lam, 0.0, None))
    d = cov.shape[0]
    out = []
    for n in (n_eval, n_source):
        x = rng.standard_normal((n, d)) @ root.T
        c = np.cov(x, rowvar=False, ddof=0)
        out.append(0.5 * (c + c.T))
    return out[0], out[1]


def _removals(s: np.ndarray, base, t: np.ndarray, controls: np.ndarray, checked: bool = False):
    """``(d_t, d_n per control)``: IsoScore changes from ``base`` for covariance(s) ``s``
    (``checked``: ``s`` was checked already, as the resamples are once in :func:`_resampled`)."""
    bases = np.concatenate([t[None], controls])
    vals = residual_isoscore(s, bases, check_input=not checked) - np.asarray(base)[..., None]
    return vals[..., 0], vals[..., 1:]


def _resampled(c_boot: np.ndarray, c0: np.ndarray, zeta: float, point: np.ndarray, k: int):
    """``(shrunk covariances, their IsoScore*, top-k gain)`` of the bootstrap resamples; the
    top-k subspaces by subspace iteration from that of ``point``, the unresampled one."""
    sb = shrink(c_boot, c0, zeta)
    base_b = isoscore_of_covariance(sb)
    start = _top_subspaces(point, [k])[k]
    return sb, base_b, top_removal_isoscore_near(sb, start) - base_b


def analyse_run(
    source: str,
    checkpoints: list[str | int],
    windows: dict[str, np.ndarray],
    p: dict[str, Any],
    boot: np.ndarray,
    log=print,
) -> RunResult:
    """Measure one run at every checkpoint (module docstring); ``windows`` holds the
    ``source``, ``reference`` and ``eval`` window arrays; ``boot`` the ``(n_boot, n_eval)``
    resampling weights shared by all runs."""
    ranks = [int(k) for k in p["ranks"]]
    key_rank, seed = int(p["key_rank"]), int(p["seed"])
    zetas = sorted({float(z) for z in p["zetas"]} | {float(p["zeta"])})
    main_zeta, a5_source = float(p["zeta"]), int(p["a5_source"])
    frozen_steps = [int(s) for s in p["frozen_sources"]]
    bs, n_controls, level = int(p["batch_size"]), int(p["n_controls"]), float(p["ci_level"])
    mask_prob = training_mask_prob(source, p["mask_prob"])
    frozen: dict[tuple[int, str, int], np.ndarray] = {}
    result: RunResult | None = None
    q = [(1 - level) / 2, (1 + level) / 2]
    for i, ckpt in enumerate(checkpoints):
        t0 = time.perf_counter()
        model, tokenizer = load(source, ckpt, device=p["device"])
        model.eval()
        step = revision_step(ckpt)
        decoder, layers, d = is_decoder(model), layer_names(model), int(model.config.hidden_size)
        if result is None:
            result = RunResult(source, decoder, layers)
        kw = dict(
            mask_token_id=getattr(tokenizer, "mask_token_id", None),
            vocab_size=int(model.config.vocab_size),
            special_ids=tuple(int(t) for t in (tokenizer.all_special_ids or []) if t is not None),
            mask_prob=mask_prob,
        )
        inputs = {
            name: model_batch(w, decoder, seed=seed + j, **kw)[0]
            for j, (name, w) in enumerate(sorted(windows.items()))
        }
        src_cov = _layer_covariances(model, inputs["source"], bs, d, len(layers))
        ref_cov = _layer_covariances(model, inputs["reference"], bs, d, len(layers))
        moments = _sequence_moments(model, inputs["eval"], bs, [c.mean for c in ref_cov])
        n_eval_tokens = sum(len(x) for x in inputs["eval"])
        n_source_tokens = sum(len(x) for x in inputs["source"])
        for li, layer in enumerate(layers):
            c = moments[li].covariance()
            c_boot = moments[li].covariance(boot)
            c0 = ref_cov[li].covariance(ddof=0)
            refit = _top_subspaces(src_cov[li].covariance(), ranks)
            g_rng = np.random.default_rng([seed, step + 1, li, 99])
            c_g, c_g_source = gaussian_samples(c, n_eval_tokens, n_source_tokens, g_rng)
            refit_g = _top_subspaces(c_g_source, ranks)
            # per zeta: the shrunk covariance, its IsoScore* and top-k references (all k from
            # one eigendecomposition), for H and for the Gaussian control
            per_zeta = {}
            for zeta in zetas:
                s, sg = shrink(c, c0, zeta), shrink(c_g, c0, zeta)
                base, g_base = isoscore_of_covariance(s), isoscore_of_covariance(sg)
                per_zeta[zeta] = (
                    s,
                    base,
                    top_removal_isoscores(s, ranks),
                    sg,
                    g_base,
                    top_removal_isoscores(sg, ranks),
                )
            boot_cache: dict[float, tuple] = {}
            where = dict(run=source, decoder=decoder, step=step, layer=layer, layer_index=li)
            for k in ranks:
                unit = {**where, "k": k}
                if step in frozen_steps:
                    frozen[(step, layer, k)] = refit[k]
                sources = {REFIT: refit[k]} | {
                    _step_source(s): frozen[(s, layer, k)]
                    for s in frozen_steps
                    if s < step and (s, layer, k) in frozen
                }
                controls = {
                    name: complement_subspaces(
                        t, n_controls, [seed, step + 1, li, k, zlib.crc32(name.encode())]
                    )
                    for name, t in sources.items()
                }
                g_controls = complement_subspaces(refit_g[k], n_controls, g_rng)
                for zeta in zetas:
                    s, base, tops, sg, g_base, g_tops = per_zeta[zeta]
                    d_max = tops[k] - base
                    gd_t, gd_n = _removals(sg, g_base, refit_g[k], g_controls)
                    g_frac = float(gain_fraction(gd_t, np.median(gd_n), g_tops[k] - g_base))
                    boot_names = [
                        name
                        for name in sources
                        if k == key_rank and (zeta == main_zeta or name == _step_source(a5_source))
                    ]
                    if boot_names:
                        if zeta not in boot_cache:
                            boot_cache[zeta] = _resampled(c_boot, c0, zeta, s, key_rank)
                        sb, base_b, d_max_b = boot_cache[zeta]
                    for name, t in sources.items():
                        d_t, d_n = _removals(s, base, t, controls[name])
                        row = {
                            **unit,
                            "zeta": zeta,
                            "source": name,
                            "isoscore_star": float(base),
                            "d_t": float(d_t),
                            "d_n": float(np.median(d_n)),
                            "d_n_p05": float(np.quantile(d_n, 0.05)),
                            "d_n_p95": float(np.quantile(d_n, 0.95)),
                            "d_max": float(d_max),
                        }
                        row["fraction"] = float(gain_fraction(d_t, row["d_n"], d_max))
                        if name == REFIT:
                            row["gaussian_fraction"] = g_frac
                        if name in boot_names:
                            bd_t, bd_n = _removals(sb, base_b, t, controls[name], checked=True)
                            rep = Replicates(bd_t, np.median(bd_n, axis=1), d_max_b)
                            result.replicates[(step, layer, zeta, name)] = rep
                            # d_max's replicates carry the resample's second dose of noise in
                            # the bulk its removal leaves: centred on the estimate, bias reported
                            d_max_c, row["d_max_boot_bias"] = centred_replicates(d_max_b, d_max)
                            for col, vals in (
                                ("d_t", rep.d_t),
                                ("d_n", rep.d_n),
                                ("d_max", d_max_c),
                                ("fraction", rep.fraction()),
                            ):
                                lo, hi = np.nanquantile(vals, q)
                                row[f"{col}_low"], row[f"{col}_high"] = float(lo), float(hi)
                        result.rows.append(row)
        log(
            f"{source}: checkpoint {ckpt} ({i + 1}/{len(checkpoints)}), "
            f"{time.perf_counter() - t0:.1f} s"
        )
    assert result is not None
    return result


# ---------------------------------------------------------------------------------------------
# Pooled key numbers
# ---------------------------------------------------------------------------------------------


def _nan_median(a: np.ndarray, axis=None):
    with warnings.catch_warnings():  # all-NaN slices are expected: their median is NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(a, axis=axis)


def pooled_fraction(
    units: list[Replicates], point: list[float], level: float, undefined: str = "drop"
) -> dict[str, Any]:
    """Median ``fraction`` over units with the percentile interval of the per-resample medians
    (joint over units: shared weights).

    A unit's share is undefined (NaN) where no rank-k removal gains more than its normal
    controls: there is no gain to share. ``undefined="drop"`` leaves such units out (all
    undefined: value and interval NaN); ``"zero"`` counts them as delivering none of it.
    """
    if undefined not in ("drop", "zero"):
        raise ValueError(f"undefined must be 'drop' or 'zero', got {undefined!r}")
    if not units:
        raise ValueError("no units to pool")
    fill = (lambda a: np.nan_to_num(a, nan=0.0)) if undefined == "zero" else (lambda a: a)
    boot = _nan_median(fill(np.stack([u.fraction() for u in units])), axis=0)
    pts = fill(np.asarray(point, dtype=np.float64))
    iv = percentile_interval(boot, float(_nan_median(pts)), level, len(units))
    return {
        "value": iv.value,
        "low": iv.low,
        "high": iv.high,
        "n_units": len(units),
        "n_undefined": int(np.isnan(np.asarray(point, dtype=np.float64)).sum()),
    }


def summarise(results: list[RunResult], p: dict[str, Any]) -> dict[str, Any]:
    """A5 at every zeta (T frozen at ``a5_source``; block layers; steps after it) and the
    references that say how much of it is by construction."""
    k, a5 = int(p["key_rank"]), int(p["a5_source"])
    main_zeta, level = float(p["zeta"]), float(p["ci_level"])
    zetas = sorted({float(z) for z in p["zetas"]} | {main_zeta})

    def pool(
        source: str, zeta: float, steps_ok, runs=results, undefined: str = "drop"
    ) -> dict[str, Any] | None:
        units, point = [], []
        for r in runs:
            index = {
                (row["step"], row["layer"]): row["fraction"]
                for row in r.rows
                if row["k"] == k and row["zeta"] == zeta and row["source"] == source
            }
            for (step, layer, z, src), rep in sorted(r.replicates.items()):
                if src == source and z == zeta and layer != "embed" and steps_ok(step):
                    units.append(rep)
                    point.append(index[(step, layer)])
        return pooled_fraction(units, point, level, undefined) if units else None

    later = lambda s: s > a5  # noqa: E731
    out: dict[str, Any] = {"key_rank": k, "a5_source": a5, "zeta": main_zeta}
    out["a5_by_zeta"] = {str(z): pool(_step_source(a5), z, later) for z in zetas}
    out["a5"] = out["a5_by_zeta"][str(main_zeta)]
    out["a5_by_run"] = {r.run: pool(_step_source(a5), main_zeta, later, [r]) for r in results}
    # rule v2: per model, at every zeta, undefined units dropped or counted as 0
    out["a5_v2"] = {
        f"{z:g}/{how}": {r.run: pool(_step_source(a5), z, later, [r], how) for r in results}
        for z in zetas
        for how in ("drop", "zero")
    }
    out["refit_later"] = pool(REFIT, main_zeta, later)
    out["refit_step0"] = pool(REFIT, main_zeta, lambda s: s == 0)
    out["untrained_source_later"] = pool(_step_source(0), main_zeta, later)
    gauss = [
        row["gaussian_fraction"]
        for r in results
        for row in r.rows
        if row["source"] == REFIT
        and row["k"] == k
        and row["zeta"] == main_zeta
        and row["layer"] != "embed"
        and row["step"] > a5
    ]
    out["gaussian_later"] = {
        "value": float(np.nanmedian(gauss)) if gauss else None,
        "p05": float(np.nanquantile(gauss, 0.05)) if gauss else None,
        "p95": float(np.nanquantile(gauss, 0.95)) if gauss else None,
        "n_units": len(gauss),
    }
    return out


def _checkpoints(run: str, p: dict[str, Any]) -> list[str | int]:
    """The run's checkpoints, or the listed ``steps`` of them (all must exist); a hub run's
    are its revisions, which ``steps`` does not filter."""
    ckpts = run_checkpoints(run, p.get("revisions"))
    if p.get("steps") is None or is_hub_id(run):
        return ckpts
    missing = sorted(set(p["steps"]) - set(ckpts))
    if missing:
        raise ValueError(f"{run}: no checkpoints at steps {missing}; available: {ckpts}")
    return [c for c in ckpts if c in set(p["steps"])]


def run_stage(p: dict[str, Any], log=print) -> dict[str, Any]:
    """The whole analysis from the stage's parameters (merged over ``common``)."""
    import pandas as pd

    p = {**p, "device": resolve_device(p["device"])}
    out = Path(p["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    n_src, n_ev, n_ref = int(p["n_source"]), int(p["n_eval"]), int(p["n_reference"])
    boot = bootstrap_weights(n_ev, int(p["n_boot"]), int(p["seed"]) + 11)
    found = {}
    for group in token_groups(  # hub models read `text` in their own ids (one group each)
        p["runs"],
        p.get("revisions"),
        tokens=p["tokens"],
        text=p.get("text"),
        max_text_tokens=int(p["max_text_tokens"]),
    ):
        src, rest = split_windows(
            group.tokens, int(p["seq_len"]) + 1, n_src, n_ev + n_ref, int(p["seed"])
        )
        windows = {"source": src, "eval": rest[:n_ev], "reference": rest[n_ev:]}
        for run in group.runs:
            found[run] = analyse_run(run, _checkpoints(run, p), windows, p, boot, log)
    results = [found[run] for run in p["runs"]]
    rows = pd.DataFrame([row for r in results for row in r.rows])
    write_table(out / "residual_isotropy.csv", rows)
    summary = summarise(results, p)
    summary |= per_seed(  # A5 again on each seed's models: the trained model is the unit
        [r.run for r in results], lambda runs: summarise([r for r in results if r.run in runs], p)
    )
    write_json(out / "summary.json", summary, indent=1, sort_keys=True)
    return summary


def main(argv: list[str] | None = None) -> int:
    st = stage(__doc__, "residual_isotropy", argv)
    return st.done(run_stage(st.params))


if __name__ == "__main__":
    raise SystemExit(main())
