"""The geometry of any model, one command: ``geolib measure`` (or ``python -m geolib measure``).

    geolib measure MODEL [--revision R ...] [--text FILE ... | --corpus id|ood|DOMAIN ...]
                   [--device cpu|cuda] [--layers all|L,...] [--tokens N] [--out DIR]

``MODEL`` is a hub id (``EleutherAI/pythia-70m``; revisions such as ``step1000``), one of our
run directories (revisions are steps; default the last), a ``save_pretrained`` folder, or a
GGUF file (``model.gguf``). Causal and masked LMs. The text is encoded with the model's own
tokenizer and cut into non-overlapping windows; a seeded half of them is the *source* set, the
other half the *evaluation* set (disjoint, as in the gradient-energy chapter). A decoder whose
tokenizer starts every text with a BOS token (Gemma) reads each window after it, as it was
trained to; the BOS position itself is neither measured nor predicted. Several texts
(``--corpus id ood_bible``, or several files) are measured one by one on the same loaded model,
each with its own windows; ``ood`` is every OOD domain of the corpus as one text.

For each revision, text and layer ℓ (the residual stream after the embedding and after each
block, :func:`geolib.measure.probes.layer_names`), one row of ``measure.csv``:

- the residual states H_ℓ of the source windows (streamed covariance, memory O(d²) whatever the
  token count): effective rank of the centred states (Roy & Vetterli), IsoScore, mean cosine;
- the tangent subspace T_k = top-k principal directions of H_ℓ, for every k of ``--ranks``:
  R_energy = E_T / mean E_N of the loss gradients G_ℓ = ∂L/∂H_ℓ of the evaluation windows
  against ``--controls`` Haar rank-k subspaces N of T's complement, with a bootstrap interval
  over sequences and its ceiling (the largest ratio any rank-k subspace reaches for these
  gradients) — Paper A's A4 quantity, computed as the chapter computes it;
- IsoScore of H_ℓ after removing T_k (the covariance scored in T_k's complement; Paper A's A5
  quantity at ζ = 0);
- and, the same on every row of a revision, the unembedding W: effective rank (σ and σ²
  variants), stable rank, IsoScore.

Outputs in ``--out``: ``measure.csv``, ``r_energy.csv`` (the R_energy columns again, one row per
revision, layer and rank, in the gradient-energy chapter's columns), ``summary.json`` (the
model, each revision's weight hash, token counts, library versions, the command line) and
``profiles.png`` / ``.svg`` (per-layer profiles, one line per revision, drawn by
:mod:`geolib.report.measure_figure` when run as ``geolib measure``). They are written only
after every revision was measured, so a bad revision leaves no partial table. The seconds each
revision took go to the log, not to a file: measured again, a model writes the same bytes.
Bad input (no LM head, a revision not in the cache, a text shorter than the windows, a layer out
of range, ``cuda`` without a GPU) stops before any model is measured.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tqdm.auto import tqdm

from geolib.data.corpus import corpus_splits
from geolib.data.windows import IGNORE_INDEX, model_batch, split_windows
from geolib.files import write_csv, write_json
from geolib.measure import probes
from geolib.measure.metrics import (
    StreamingCovariance,
    effective_rank,
    isoscore,
    isoscore_from_cov,
    stable_rank,
)
from geolib.measure.residual import top_removal_isoscores
from geolib.measure.streamed import CosineSum, centred_effective_rank, release_freed_memory
from geolib.models.checkpoints import load, revision_step, training_mask_prob
from geolib.models.device import resolve_device
from geolib.models.fingerprint import weights_hash
from geolib.models.pretrained import encode_domain, load_gguf

if TYPE_CHECKING:
    import pandas as pd

#: defaults: the gradient-energy chapter's ranks, controls, bootstrap and level
RANKS = (1, 4, 16)
LIBRARIES = ("torch", "transformers", "numpy")


@dataclass(frozen=True)
class Request:
    """What to measure: a checked command line (see the module docstring)."""

    model: str
    revisions: tuple[str | int | None, ...]
    text: tuple[str, ...] = ()  # files (one str is taken as one file)
    corpus: tuple[str, ...] = ()  # corpus domains, or "id" / "ood"
    corpus_dir: str = "data/corpus"
    device: str = "cpu"
    layers: str = "all"
    tokens: int = 16384
    seq_len: int = 128
    ranks: tuple[int, ...] = RANKS
    controls: int = 20
    n_boot: int = 1000
    level: float = 0.95
    batch_size: int | None = None
    seed: int = 0
    out: str = "measure-out"

    def __post_init__(self) -> None:
        for name in ("text", "corpus"):
            value = getattr(self, name)
            value = () if value is None else (value,) if isinstance(value, str) else tuple(value)
            object.__setattr__(self, name, value)
        if bool(self.text) == bool(self.corpus):
            raise ValueError(
                "give the text to measure on: --text FILE ... or --corpus id|ood|DOMAIN ..."
            )
        if len(set(self.sources)) != len(self.sources):
            raise ValueError(f"a text is named twice: {list(self.sources)}")
        resolve_device(
            self.device, "--device"
        )  # cuda without a GPU: an error now, never the CPU instead
        for name in ("tokens", "seq_len", "controls", "n_boot", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < (0 if name == "seed" else 1):
                raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {v}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"--batch-size must be positive, got {self.batch_size}")
        if not 0 < self.level < 1:
            raise ValueError(f"--level must be in (0, 1), got {self.level}")
        if not self.ranks or any(int(k) != k or k < 1 for k in self.ranks):
            raise ValueError(f"--ranks must be positive integers, got {self.ranks}")
        if self.tokens < 4 * (self.seq_len + 1):
            raise ValueError(
                f"--tokens {self.tokens} hold fewer than 4 windows of {self.seq_len + 1} tokens "
                "(2 source and 2 evaluation sequences are the least a bootstrap can use)"
            )

    @property
    def sources(self) -> tuple[str, ...]:
        """The texts' labels, in order: ``corpus:<name>`` or the file's path."""
        return self.text or tuple(f"corpus:{c}" for c in self.corpus)

    @property
    def batch(self) -> int:
        """Sequences per pass: the device's memory sets it (a GPU takes many more)."""
        return self.batch_size or (32 if self.device.startswith("cuda") else 8)


@dataclass
class Measured:
    """One revision: its rows, weight hash, loss, timing."""

    revision: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    weights_sha256: str = ""
    eval_loss: float = float("nan")
    seconds: float = 0.0


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


def load_model(req: Request, revision: str | int | None):
    """``(model, tokenizer)`` of ``req.model`` at ``revision`` on ``req.device``, eval mode."""
    path = Path(req.model)
    if path.suffix == ".gguf":
        if revision is not None:
            raise ValueError(f"{path} is one GGUF file; it has no revisions")
        model, tok = load_gguf(path.parent, path.name)
        return model.to(req.device), tok
    model, tok = load(req.model, revision, device=req.device)
    if tok is None:
        raise ValueError(f"{req.model} has no tokenizer to encode the text with")
    return model, tok


def encode_text(req: Request, tokenizer, source: str) -> np.ndarray:
    """Token ids of the text ``source`` (one of ``req.sources``), by the model's own tokenizer,
    up to ``req.tokens``."""
    if not source.startswith("corpus:"):
        text = Path(source).read_text(encoding="utf-8")
        ids = tokenizer(text, add_special_tokens=False)["input_ids"][: req.tokens]
        tokens = np.asarray(ids, dtype=np.int64)
    else:
        corpus = source.removeprefix("corpus:")
        splits = corpus_splits(req.corpus_dir)
        domains = [d for d in splits if d.startswith("ood")] if corpus == "ood" else [corpus]
        unknown = [d for d in domains if d not in splits]
        if not domains or unknown:
            raise ValueError(f"--corpus {corpus!r}: the corpus has domains {sorted(splits)}")
        share = req.tokens // len(domains)
        parts = []
        for d in domains:  # an equal share of each domain, its validation split if it has one
            split = "validation" if "validation" in splits[d] else "test"
            parts.append(encode_domain(splits[d][split], tokenizer, share))
        tokens = np.concatenate(parts)
    if len(tokens) < 4 * (req.seq_len + 1):
        raise ValueError(
            f"{source} holds {len(tokens)} tokens of this model, fewer than 4 windows of "
            f"{req.seq_len + 1}: give a longer text or a shorter --seq-len"
        )
    return tokens


def windows(req: Request, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint source and evaluation windows of ``seq_len + 1`` tokens, half the text each."""
    n = len(tokens) // (req.seq_len + 1)
    return split_windows(tokens, req.seq_len + 1, n // 2, n - n // 2, req.seed)


def bos_prefix(tokenizer) -> int | None:
    """The token a decoder's tokenizer puts before every text by default (Gemma's ``<bos>``),
    else ``None``. A model trained with it reads text without it as out of distribution (Gemma
    3 270M's loss on our id evaluation windows: 5.83 nats without, 3.97 with), so each window
    is read after it; the prefix's own position is neither measured nor predicted."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return None
    # compare with and without special tokens: an unknown "a" may itself have BOS's id
    plain = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    default = list(tokenizer("a")["input_ids"])
    return int(bos) if default[: len(plain) + 1] == [bos, *plain] else None


def with_prefix(batch: np.ndarray, value: int) -> np.ndarray:
    """``(n, L)`` → ``(n, L + 1)`` with column 0 set to ``value``."""
    return np.concatenate([np.full((len(batch), 1), value, dtype=batch.dtype), batch], axis=1)


def pick_layers(spec: str, names: list[str]) -> list[int]:
    """Layer indices from ``all`` or ``0,3,-1`` (negative: from the end); out of range: error."""
    if spec.strip() == "all":
        return list(range(len(names)))
    try:
        wanted = [int(s) for s in spec.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--layers must be 'all' or integers like 0,3,-1, got {spec!r}") from None
    bad = [i for i in wanted if not -len(names) <= i < len(names)]
    if not wanted or bad:
        raise ValueError(
            f"--layers {spec!r}: the model has {len(names)} layers (0…{len(names) - 1}: "
            f"{names[0]} … {names[-1]}); out of range: {bad}"
        )
    return sorted({i % len(names) for i in wanted})


# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------


def unembedding_row(model) -> dict[str, float]:
    """W's effective rank (σ and σ²), stable rank and IsoScore (rows = tokens)."""
    w = probes.unembedding(model).detach().to("cpu", torch.float64)
    return {
        "w_erank": effective_rank(w),
        "w_erank_sq": effective_rank(w, squared=True),
        "w_stable_rank": stable_rank(w),
        "w_isoscore": isoscore(w),
    }


def measure_revision(
    req: Request,
    revision: str | int | None,
    model,
    tokenizer,
    src: np.ndarray,
    ev: np.ndarray,
    layer_idx: list[int],
    source: str,
    w_row: dict[str, float],
    progress: tqdm | None = None,
) -> Measured:
    """Every row of one revision on one text, labelled ``source`` (module docstring).
    ``w_row``: :func:`unembedding_row` of this revision, computed once for all its texts (it
    does not depend on the text; its SVD of a vocabulary-sized W is costly)."""
    t0 = time.perf_counter()
    names = probes.layer_names(model)
    d = int(model.config.hidden_size)
    decoder = probes.is_decoder(model)
    ranks = [k for k in req.ranks if 2 * k <= d - 2]  # T and a control fit, 2 dims left over
    if not ranks:
        raise ValueError(f"no rank of {req.ranks} fits d = {d} (need 2k <= d - 2)")
    kw = dict(
        mask_token_id=getattr(tokenizer, "mask_token_id", None),
        vocab_size=int(model.config.vocab_size),
        special_ids=tuple(int(t) for t in (tokenizer.all_special_ids or []) if t is not None),
        mask_prob=training_mask_prob(req.model, None),
    )
    src_in, _ = model_batch(src, decoder, seed=req.seed, **kw)
    ev_in, ev_tg = model_batch(ev, decoder, seed=req.seed + 1, **kw)
    prefix = bos_prefix(tokenizer) if decoder else None
    skip = int(prefix is not None)  # positions before the text: not measured
    if prefix is not None:
        src_in, ev_in = with_prefix(src_in, prefix), with_prefix(ev_in, prefix)
        ev_tg = with_prefix(ev_tg, IGNORE_INDEX)  # the prefix predicts nothing counted

    def batches(n: int) -> list[slice]:
        return [slice(i, min(i + req.batch, n)) for i in range(0, n, req.batch)]

    covs = {i: StreamingCovariance(d) for i in layer_idx}
    cosines = {i: CosineSum(d) for i in layer_idx}
    for sl in batches(len(src_in)):
        states = probes.residual_states(model, torch.from_numpy(src_in[sl]).to(req.device))
        for i in layer_idx:
            h = states[i][:, skip:].detach().to("cpu", torch.float64).reshape(-1, d)
            covs[i].update(h)
            cosines[i].update(h)
        release_freed_memory()
        if progress is not None:
            progress.update(1)

    bases, acc = {}, {}
    for i in layer_idx:
        for k, t in probes.top_subspaces(covs[i].covariance(), ranks).items():
            rng = np.random.default_rng([req.seed, i, k])
            bases[i, k] = np.concatenate(
                [t[None], probes.complement_subspaces(t, req.controls, rng)]
            )
            acc[i, k] = probes.GradientEnergy(bases[i, k])
    moments = {i: probes.SecondMoment(d) for i in layer_idx}
    loss_sum, n_targets = 0.0, 0
    for sl in batches(len(ev_in)):
        sg = probes.states_and_gradients(
            model,
            torch.from_numpy(ev_in[sl]).to(req.device),
            torch.from_numpy(ev_tg[sl]).to(req.device),
        )
        loss_sum, n_targets = loss_sum + sg.loss_sum, n_targets + sg.n_targets
        for i in layer_idx:
            g = sg.grads[i][:, skip:].detach().cpu()
            moments[i].update(g)
            for k in ranks:
                acc[i, k].update(g)
        release_freed_memory()
        if progress is not None:
            progress.update(1)

    out = Measured(str(revision if revision is not None else "final"))
    out.weights_sha256 = weights_hash(model)
    out.eval_loss = loss_sum / n_targets
    for i in layer_idx:
        cov = covs[i].covariance()
        row: dict[str, Any] = {
            "model": req.model,
            "revision": out.revision,
            "text": source,
            "decoder": decoder,
            "layer": names[i],
            "layer_index": i,
            "d_model": d,
            "erank": centred_effective_rank(cov),
            "isoscore": isoscore_from_cov(cov),
            "mean_cosine": cosines[i].mean(),
        }
        ceilings = probes.ceiling_ratios(moments[i].matrix.numpy(), ranks)
        removed = top_removal_isoscores(cov, ranks)
        for k in ranks:
            r = probes.r_energy(
                acc[i, k].energies, n_boot=req.n_boot, level=req.level, seed=req.seed
            )
            row |= {
                f"r_energy_k{k}": r.ratio,
                f"r_energy_k{k}_ci_low": r.low,
                f"r_energy_k{k}_ci_high": r.high,
                f"r_energy_k{k}_p": r.p_value,
                f"ceiling_k{k}": ceilings[k],
                f"isoscore_after_tangent_k{k}": removed[k],
            }
        row |= {"n_source": len(src_in), "n_eval": len(ev_in), "seq_len": req.seq_len}
        row |= {"eval_loss": out.eval_loss, **w_row}
        out.rows.append(row)
    out.seconds = time.perf_counter() - t0
    return out


def measure(req: Request, log=print) -> tuple[list[Measured], dict[str, Any]]:
    """Load, check and measure every revision on every text; returns the results (one per
    revision and text) and the summary. Nothing is written here (:func:`write_outputs`), so a
    failure leaves no partial output."""
    results: list[Measured] = []
    texts: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    layer_idx: list[int] = []
    prefix: int | None = None
    bar = None
    for j, revision in enumerate(req.revisions):
        model, tokenizer = load_model(req, revision)
        if not texts:  # the texts, windows and layers of the first revision serve them all
            for source in req.sources:
                tokens = encode_text(req, tokenizer, source)
                texts[source] = (tokens, *windows(req, tokens))
            layer_idx = pick_layers(req.layers, probes.layer_names(model))
            prefix = bos_prefix(tokenizer) if probes.is_decoder(model) else None
            per_rev = sum(
                -(-len(src) // req.batch) + -(-len(ev) // req.batch)
                for _, src, ev in texts.values()
            )
            bar = tqdm(
                total=per_rev * len(req.revisions), desc="revisions × batches", file=sys.stderr
            )
        w_row = unembedding_row(model)  # once per revision, whatever the texts
        for source, (_, src, ev) in texts.items():
            res = measure_revision(
                req, revision, model, tokenizer, src, ev, layer_idx, source, w_row, bar
            )
            results.append(res)
            log(
                f"{req.model} @ {res.revision} ({j + 1}/{len(req.revisions)}), {source}: "
                f"{len(layer_idx)} layers, eval loss {res.eval_loss:.3f}, {res.seconds:.1f} s"
            )
        del model
    if bar is not None:
        bar.close()
    summary = {
        "model": req.model,
        "revisions": {
            rev: {
                "weights_sha256": next(r for r in results if r.revision == rev).weights_sha256,
                "eval_loss": {r.rows[0]["text"]: r.eval_loss for r in results if r.revision == rev},
            }
            for rev in dict.fromkeys(r.revision for r in results)
        },
        "texts": {source: int(len(tokens)) for source, (tokens, _, _) in texts.items()},
        "seq_len": req.seq_len,
        "bos_prefix": prefix,  # read before every window (decoders whose tokenizer adds it)
        "ranks": measured_ranks(results[0].rows[0]),
        "controls": req.controls,
        "n_boot": req.n_boot,
        "level": req.level,
        "seed": req.seed,
        "device": req.device,
        "libraries": {lib: importlib.metadata.version(lib) for lib in LIBRARIES},
    }
    return results, summary


def long_table(table: Any) -> Any:
    """``measure.csv``'s rows (one per revision, text and layer, a column group per rank) as one
    row per revision, text, layer and rank k in the gradient-energy chapter's columns
    (``r_energy.csv``: ``run``, ``text``, ``step``, ``decoder``, ``layer``, ``layer_index``,
    ``k``, ``source`` = ``"refit"``, ``r_energy``, ``ci_low``, ``ci_high``, ``p_value``,
    ``ceiling``, ``fraction_of_ceiling``, ``eval_loss``), so that the chapter's counts apply to
    it unchanged."""
    import pandas as pd

    if len(table) == 0:
        raise ValueError("measure.csv has no rows")
    rows = []
    for _, r in table.iterrows():
        for k in measured_ranks(r.to_dict()):
            ratio, ceiling = float(r[f"r_energy_k{k}"]), float(r[f"ceiling_k{k}"])
            rows.append(
                {
                    "run": r["model"],
                    "text": r["text"],
                    "step": revision_step(str(r["revision"])),
                    "decoder": bool(r["decoder"]),
                    "layer": r["layer"],
                    "layer_index": int(r["layer_index"]),
                    "k": k,
                    "source": probes.REFIT,
                    "r_energy": ratio,
                    "ci_low": float(r[f"r_energy_k{k}_ci_low"]),
                    "ci_high": float(r[f"r_energy_k{k}_ci_high"]),
                    "p_value": float(r[f"r_energy_k{k}_p"]),
                    "ceiling": ceiling,
                    "fraction_of_ceiling": ratio / ceiling,
                    "eval_loss": float(r["eval_loss"]),
                }
            )
    return pd.DataFrame(rows)


def measured_ranks(row: dict[str, Any]) -> list[int]:
    """The ranks k a row holds R_energy for (``r_energy_k<k>`` columns)."""
    return sorted(int(c[10:]) for c in row if c.startswith("r_energy_k") and c[10:].isdigit())


def write_outputs(
    results: list[Measured],
    summary: dict[str, Any],
    out: str | Path,
    draw: Callable[[pd.DataFrame, Path], Any] | None = None,
) -> Path:
    """``measure.csv``, ``r_energy.csv`` (:func:`long_table`) and ``summary.json`` in ``out``
    (each written whole); then ``draw(table, out / "profiles")``, the figure (the ``geolib``
    command passes :func:`geolib.report.measure_figure.profiles_figure`: an experiment draws
    nothing in the book's style itself)."""
    import pandas as pd

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame([r for res in results for r in res.rows])
    write_csv(out / "measure.csv", table, index=False)
    write_csv(out / "r_energy.csv", long_table(table), index=False)
    write_json(out / "summary.json", summary)
    if draw is not None:
        draw(table, out / "profiles")
    return out


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="geolib measure",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", help="hub id, run directory, save_pretrained folder or .gguf file")
    p.add_argument(
        "--revision",
        action="append",
        default=None,
        help="hub revision or run step (repeat for several; default: the last)",
    )
    text = p.add_mutually_exclusive_group(required=True)
    text.add_argument("--text", nargs="+", help="UTF-8 text files (each measured on its own)")
    text.add_argument(
        "--corpus", nargs="+", help="our corpus: id, ood (all OOD domains as one) or domain names"
    )
    p.add_argument("--corpus-dir", default="data/corpus")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (no silent fallback)")
    p.add_argument("--layers", default="all", help="all, or indices like 0,3,-1")
    p.add_argument("--tokens", type=int, default=16384, help="tokens of text (both halves)")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--ranks", type=int, nargs="+", default=list(RANKS))
    p.add_argument("--controls", type=int, default=20, help="normal control subspaces per unit")
    p.add_argument("--n-boot", type=int, default=1000)
    p.add_argument("--level", type=float, default=0.95)
    p.add_argument("--batch-size", type=int, default=None, help="default 8 on CPU, 32 on GPU")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="measure-out", help="output folder")
    return p


def main(
    argv: list[str] | None = None, draw: Callable[[pd.DataFrame, Path], Any] | None = None
) -> int:
    """``geolib measure``; ``draw`` as in :func:`write_outputs` (without it, no figure)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    revs = tuple(int(r) if r.isdigit() else r for r in args.revision) if args.revision else (None,)
    try:
        # the options are named as Request's fields; revisions and ranks need converting
        given = {f.name: getattr(args, f.name) for f in fields(Request) if hasattr(args, f.name)}
        req = Request(**given | {"revisions": revs, "ranks": tuple(args.ranks)})
        results, summary = measure(req, log=lambda m: print(m, file=sys.stderr))
        summary["command"] = shlex.join(["geolib", "measure", *argv])  # what to type again
    except (ValueError, RuntimeError, FileNotFoundError) as exc:
        print(f"geolib measure: {exc}", file=sys.stderr)
        return 2
    out = write_outputs(results, summary, req.out, draw)
    figure = ", profiles.png and .svg" if draw is not None else ""
    print(
        f"wrote {out}/measure.csv ({sum(len(r.rows) for r in results)} rows), r_energy.csv, "
        f"summary.json{figure}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
