"""The one training loop of the three families, with Pythia-style checkpoints and exact resume.

    python -m geolib.models.train --params params.yaml --base train --section train_pythia \\
        --run-dir runs/pythia

Decoders (``pythia``, ``olmo``) learn next-token prediction; the encoder (``bert``) learns
masked-token prediction (15% of positions, of which 80% become ``[MASK]``, 10% a random token,
10% stay). Each optimizer step draws ``batch_size`` random contiguous windows from the token
array with a seeded ``numpy`` generator (split into ``grad_accum`` micro-batches); AdamW with
decoupled weight decay (or SGD with momentum, ``optimizer: sgd``) on every matrix (embeddings
and LM head included, not on biases or norms), linear warmup then a cosine, linear, constant or
warmup-stable-decay schedule, gradient clipping. A run on the warmup-stable-decay schedule can
start from another's checkpoint inside both runs' stable phase (the cooldown branch,
:mod:`geolib.models.branch`), which ends bitwise as the run trained from step 0 would.

The run directory's layout (``step-<N>/`` checkpoints, ``metrics.csv``, ``run.json``) belongs
to :mod:`geolib.models.runs`.
Only the newest ``runs.KEEP_RESUME`` checkpoints keep ``train_state.pt`` (saves disk; the
second is a fallback if the newest is damaged). Killed and restarted with the same
configuration, :func:`train` resumes from the newest intact one and ends with bitwise
the same weights as an uninterrupted run on the same machine and thread count (CPU,
deterministic algorithms).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from geolib.config import checked_number
from geolib.data.tokens import load_tokens
from geolib.data.windows import IGNORE_INDEX, mask_tokens, sample_windows
from geolib.models import runs
from geolib.models.branch import Branch, start_branch
from geolib.models.device import resolve_device
from geolib.models.families import SpecialTokens, build_model, count_params, matmul_params
from geolib.models.resume import (
    Clock,
    Trainee,
    code_hashes,
    data_hashes,
    resume,
    resume_state,
    save_checkpoint,
    superseded_reason,
)
from geolib.models.train_config import (
    TrainConfig,
    autocast,
    lr_at,
    params_to_config,
    run_checkpoints,
)

# ----------------------------------------------------------------------------- data


@dataclass
class Vocab:
    """Vocabulary size and special-token ids (``special`` are never masked by the MLM)."""

    size: int
    pad: int | None = None
    bos: int | None = None
    eos: int | None = None
    mask: int | None = None

    @property
    def special(self) -> tuple[int, ...]:
        return tuple(i for i in (self.pad, self.bos, self.eos, self.mask) if i is not None)


def resolve_vocab(cfg: TrainConfig) -> tuple[Vocab, Any]:
    """The run's vocabulary (and tokenizer, ``None`` without one): from ``cfg.tokenizer``,
    else ``cfg.vocab_size``/``cfg.mask_token_id``."""
    tokenizer = None
    if cfg.tokenizer is not None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(cfg.tokenizer)
        vocab = Vocab(
            len(tokenizer),
            tokenizer.pad_token_id,
            tokenizer.bos_token_id,
            tokenizer.eos_token_id,
            tokenizer.mask_token_id,
        )
        if cfg.vocab_size is not None and cfg.vocab_size != vocab.size:
            raise ValueError(f"vocab_size={cfg.vocab_size} but the tokenizer has {vocab.size}")
    else:
        vocab = Vocab(cfg.vocab_size, mask=cfg.mask_token_id)
    if cfg.mask_token_id is not None:
        vocab.mask = cfg.mask_token_id
    if cfg.model.family == "bert" and vocab.mask is None:
        raise ValueError("the bert family needs a mask token (tokenizer or mask_token_id)")
    return vocab, tokenizer


def make_batch(
    tokens: np.ndarray, rng: np.random.Generator, cfg: TrainConfig, vocab: Vocab
) -> tuple[np.ndarray, np.ndarray]:
    """One optimizer step's ``(inputs, targets)`` of shape ``(batch_size, seq_len)``:
    shifted windows for decoders, masked windows for the encoder."""
    if cfg.model.is_decoder:
        w = sample_windows(tokens, rng, cfg.batch_size, cfg.seq_len + 1)
        return w[:, :-1], w[:, 1:]
    w = sample_windows(tokens, rng, cfg.batch_size, cfg.seq_len)
    return mask_tokens(
        w,
        rng,
        mask_token_id=vocab.mask,
        vocab_size=vocab.size,
        mask_prob=cfg.mask_prob,
        special_ids=vocab.special,
    )


def lm_loss_sum(
    model, inputs: torch.Tensor, targets: torch.Tensor, is_decoder: bool
) -> torch.Tensor:
    """The training objective: summed cross-entropy over target positions (``-100`` ignored).
    For the encoder the MLM head runs on masked positions only (sparse prediction: same loss,
    ~6× less head compute). Measurements use :mod:`geolib.measure.evaluate`, never this, so that
    editing a measurement retrains nothing."""
    if is_decoder:
        logits = model(input_ids=inputs).logits
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum"
        )
    hidden = model.base_model(input_ids=inputs).last_hidden_state
    keep = targets != IGNORE_INDEX
    return F.cross_entropy(model.cls(hidden[keep]), targets[keep], reduction="sum")


# ----------------------------------------------------------------------------- loop


@torch.no_grad()
def evaluate(model, batches, is_decoder: bool, device, precision: str = "fp32") -> float:
    """Mean cross-entropy over fixed ``(inputs, targets)`` batches (eval mode, restored), at
    the training's ``precision`` (a log of training; measurements use float32)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for inputs, targets in batches:
        x, y = torch.from_numpy(inputs).to(device), torch.from_numpy(targets).to(device)
        with autocast(precision, device):
            total += lm_loss_sum(model, x, y, is_decoder).item()
        count += int((y != IGNORE_INDEX).sum())
    model.train(was_training)
    return total / max(count, 1)


def make_optimizer(model, cfg: TrainConfig) -> torch.optim.Optimizer:
    """AdamW (decoupled weight decay) or SGD with momentum (``optimizer: sgd``; torch's weight
    decay is then the coupled L2 term), with weight decay on every matrix (embeddings and LM
    head included), none on biases and norm weights; fused kernels on CPU and CUDA.

    SGD is there for one question (Paper A, A1): Adam normalises each coordinate's update, so a
    rare token's row moves as far per update as a frequent one's; plain SGD does not."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum)
    return torch.optim.AdamW(
        groups,
        lr=cfg.lr,
        betas=cfg.betas,
        eps=cfg.eps,
        fused=next(model.parameters()).device.type in ("cpu", "cuda"),
    )


def train_step(model, optimizer, inputs, targets, cfg: TrainConfig, lr: float, device) -> float:
    """One optimizer update on ``(inputs, targets)`` (numpy, one step's full batch), split into
    ``grad_accum`` micro-batches; the loss is the mean over all target positions of the step.
    Returns that loss."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    n_targets = max(int((targets != IGNORE_INDEX).sum()), 1)
    micro = cfg.batch_size // cfg.grad_accum
    loss_sum = 0.0
    for i in range(cfg.grad_accum):
        sl = slice(i * micro, (i + 1) * micro)
        x = torch.from_numpy(inputs[sl]).to(device)
        y = torch.from_numpy(targets[sl]).to(device)
        with autocast(cfg.precision, device):
            loss = lm_loss_sum(model, x, y, cfg.model.is_decoder) / n_targets
        loss.backward()
        loss_sum += loss.item()
    if cfg.grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss_sum


def keep_freed_memory() -> bool:
    """Ask glibc to serve every allocation from its heap and keep freed memory (no ``mmap``
    per large tensor, no trimming). A training step allocates and frees the same large buffers
    (logits, softmax) every time; served by fresh ``mmap``s they page-fault on first touch,
    which costs ~15% of a miniature model's step on CPU. No effect on results; a no-op where
    glibc is absent. Returns whether it applied."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_max = -1, -4
        return bool(libc.mallopt(m_mmap_max, 0)) and bool(libc.mallopt(m_trim_threshold, 1 << 30))
    except (OSError, AttributeError):
        return False


def _configure_torch(cfg: TrainConfig) -> None:
    if torch.device(cfg.device).type == "cuda":  # cuBLAS is deterministic only with this
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    if torch.device(cfg.device).type == "cpu":
        keep_freed_memory()
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)


def validation_batches(cfg: TrainConfig, vocab: Vocab) -> list[tuple[np.ndarray, np.ndarray]]:
    """The fixed evaluation set: ``eval_batches`` micro-batches of the validation tokens drawn
    with their own seed (the same for every run with this seed), ``[]`` without them."""
    if not cfg.val_tokens:
        return []
    tokens = load_tokens(cfg.val_tokens, vocab.size)
    rng = np.random.default_rng([cfg.seed, 1])
    micro = replace(cfg, batch_size=cfg.batch_size // cfg.grad_accum, grad_accum=1)
    return [make_batch(tokens, rng, micro, vocab) for _ in range(cfg.eval_batches)]


def metric_row(
    step: int,
    cfg: TrainConfig,
    loss: float | None = None,
    lr: float | None = None,
    val_loss: float | None = None,
    tokens_per_s: float | None = None,
) -> dict[str, Any]:
    """One line of ``metrics.csv``."""
    fmt = runs.format_metric
    return {
        "step": step,
        "tokens": step * cfg.tokens_per_step,
        "loss": fmt(loss),
        "lr": fmt(lr),
        "val_loss": fmt(val_loss),
        "tokens_per_s": "" if tokens_per_s is None else f"{tokens_per_s:.1f}",
    }


def run_summary(
    cfg: TrainConfig, model, vocab: Vocab, rows: list[dict], clock: Clock, data: dict[str, str]
) -> dict:
    """``run.json``: the configuration, sizes, and (when finished) the final numbers."""
    summary: dict[str, Any] = {
        "config": cfg.to_dict(),
        "params": count_params(model),
        "matmul_params": matmul_params(model),
        "vocab_size": vocab.size,
        "tokens_per_step": cfg.tokens_per_step,
        "checkpoint_steps": run_checkpoints(cfg),
        "torch": torch.__version__,
        "num_threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "data_sha256": data,
    }
    if not rows or int(rows[-1]["step"]) < cfg.total_steps:
        return summary
    tail = [float(r["loss"]) for r in rows[-20:] if r["loss"]]
    vals = [float(r["val_loss"]) for r in rows if r["val_loss"]]
    return {
        **summary,
        "final_step": cfg.total_steps,
        "tokens": cfg.total_steps * cfg.tokens_per_step,
        "final_train_loss": float(np.mean(tail)) if tail else None,
        "final_val_loss": vals[-1] if vals else None,
        "initial_val_loss": vals[0] if vals else None,
        "train_time_s": clock.train_s,
        "wall_time_s": clock.wall_s,
        "tokens_per_s": cfg.total_steps * cfg.tokens_per_step / max(clock.train_s, 1e-9),
    }


def divergence_threshold(vocab_size: int) -> float:
    """The training loss (nats per token) above which a run counts as diverged: 3 ln |V|,
    three times the loss of a uniform guess over the vocabulary (a fresh model starts near
    ln |V|). Stated before use as a fault guard, not a claim rule: the highest training or
    validation loss of any run of the default pipeline was 10.8 (an encoder, step 163; V =
    4096, threshold 24.95)."""
    return 3.0 * math.log(vocab_size)


def train(
    cfg: TrainConfig,
    run_dir: str | Path,
    *,
    max_steps: int | None = None,
    progress: bool = True,
    supersede_into: str | Path | None = None,
    branch: Branch | None = None,
    also_checkpoint: Sequence[int] = (),
) -> dict[str, Any]:
    """Train (or resume, or do nothing if finished) the run in ``run_dir``; return ``run.json``.

    ``max_steps`` stops after that many updates without saving anything extra (a simulated
    kill): the next call resumes from the last checkpoint. ``progress=False`` replaces the
    progress bar by one line on stderr per evaluation (for logs). The returned summary is also
    written to ``run_dir/run.json`` when the run reaches ``total_steps``.

    A ``run_dir`` holding another run (configuration, data or training code; see
    :mod:`geolib.models.resume`) is refused, or with ``supersede_into`` moved into that folder
    whole (:func:`runs.set_aside`) before training afresh.

    ``branch``: a fresh run starts from another run's checkpoint (:class:`Branch`); a run
    already started resumes as any other. ``also_checkpoint``: steps checkpointed besides
    :func:`checkpoint_steps` (where branches start; a checkpoint changes no number).
    """
    extra = [checked_number("also_checkpoint", s, int, low=1) for s in also_checkpoint]
    device = resolve_device(cfg.device)  # before anything is written: no GPU, no run folder
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with runs.sole_writer(run_dir):  # a second trainer here would delete this one's files
        return _train(
            cfg,
            run_dir,
            device,
            max_steps=max_steps,
            progress=progress,
            supersede_into=supersede_into,
            branch=branch,
            also_checkpoint=extra,
        )


def _train(
    cfg: TrainConfig,
    run_dir: Path,
    device: torch.device,
    *,
    max_steps: int | None,
    progress: bool,
    supersede_into: str | Path | None,
    branch: Branch | None = None,
    also_checkpoint: Sequence[int] = (),
) -> dict[str, Any]:
    runs.remove_partial(run_dir)  # a checkpoint a kill interrupted
    data, code = data_hashes(cfg), code_hashes()
    if supersede_into is not None:
        why = superseded_reason(run_dir, cfg, data, code)
        if why:
            moved = runs.set_aside(run_dir, supersede_into)
            print(f"{why}: moved to {moved}; training afresh", file=sys.stderr, flush=True)
    runs.refuse_diverged(run_dir)  # resuming would diverge again, deterministically
    _configure_torch(cfg)
    vocab, tokenizer = resolve_vocab(cfg)
    if tokenizer is not None:
        runs.save_tokenizer(tokenizer, run_dir)
    train_tokens = load_tokens(cfg.train_tokens, vocab.size)
    eval_set = validation_batches(cfg, vocab)

    special = SpecialTokens(pad=vocab.pad, bos=vocab.bos, eos=vocab.eos)
    model = build_model(cfg.model, vocab.size, special=special, seed=cfg.seed).to(device)
    optimizer = make_optimizer(model, cfg)
    rng = np.random.default_rng(cfg.seed)  # the order of the training windows
    clock = Clock()
    resumed = resume(run_dir, cfg, Trainee(model, optimizer, rng, clock), data, code)
    if resumed == cfg.total_steps and (run_dir / runs.RUN_INFO).is_file():
        return runs.read_run_info(run_dir)  # finished: its record stays as it was written
    start = 0 if resumed is None else resumed
    rows = runs.metric_rows(run_dir, upto=start) if resumed is not None else []
    ckpt_steps = set(run_checkpoints(cfg))
    ckpt_steps.update(s for s in also_checkpoint if s <= cfg.total_steps)

    def validate() -> float | None:
        if not eval_set:
            return None
        return evaluate(model, eval_set, cfg.model.is_decoder, device, cfg.precision)

    def checkpoint(step: int, loss: float | None, lr: float | None) -> None:
        runs.write_metrics(run_dir, rows)
        clock.lap()
        info = {"step": step, "tokens": step * cfg.tokens_per_step, "loss": loss, "lr": lr}
        state = resume_state(step, cfg, optimizer, rng, clock, data, code)
        save_checkpoint(run_dir, model, step, info, state)

    model.train()
    if resumed is None:  # a fresh run (a resume from step 0 has its row and checkpoint)
        rows.append(metric_row(0, cfg, val_loss=validate()))
        checkpoint(0, None, None)
        if branch is not None:
            start = start_branch(branch, cfg, Trainee(model, optimizer, rng, clock), data, code)
            if start:  # the parent's rows up to the branch are this run's too
                shared = [
                    r for r in runs.metric_rows(branch.parent, upto=start) if r["step"] != "0"
                ]
                rows.extend(shared)
                loss = shared[-1]["loss"] if shared else ""
                checkpoint(start, float(loss) if loss else None, lr_at(start, cfg))

    stop = cfg.total_steps if max_steps is None else min(cfg.total_steps, max_steps)
    limit = divergence_threshold(vocab.size)
    bar = tqdm(
        total=cfg.total_steps, initial=start, disable=not progress, unit="step", dynamic_ncols=True
    )
    with bar:
        for step in range(start + 1, stop + 1):
            t0 = time.perf_counter()
            lr = lr_at(step, cfg)
            inputs, targets = make_batch(train_tokens, rng, cfg, vocab)
            loss = train_step(model, optimizer, inputs, targets, cfg, lr, device)
            if not loss <= limit:  # NaN fails too
                runs.write_metrics(run_dir, rows)
                runs.write_diverged(
                    run_dir,
                    {
                        "step": step,
                        "loss": loss,
                        "threshold": limit,
                        "config": cfg.to_dict(),
                        "data_sha256": data,
                        "code_sha256": code,
                    },
                )
                raise runs.DivergedRunError(
                    f"{run_dir}: training diverged at step {step} (loss {loss}, above "
                    f"{limit:.2f} = 3 ln |V|); marked in {runs.DIVERGED}, no run.json written"
                )
            dt = time.perf_counter() - t0
            clock.train_s += dt
            tokens_per_s = cfg.tokens_per_step / dt

            due = step % cfg.eval_interval == 0 or step == cfg.total_steps
            val = validate() if due else None
            rows.append(metric_row(step, cfg, loss, lr, val, tokens_per_s))
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tokens_per_s:.0f}", refresh=False)
            if not progress and val is not None:  # one line per evaluation instead of a bar
                print(
                    f"step {step}/{cfg.total_steps}  loss {loss:.4f}  val_loss {val:.4f}  "
                    f"lr {lr:.3g}  {tokens_per_s:,.0f} tok/s",
                    file=sys.stderr,
                    flush=True,
                )
            if step in ckpt_steps:
                checkpoint(step, loss, lr)
    clock.lap()

    summary = {**run_summary(cfg, model, vocab, rows, clock, data), "code_sha256": code}
    if stop < cfg.total_steps:
        return {**summary, "stopped_at": stop}
    runs.write_run_info(run_dir, summary)
    return summary


# ----------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train one model (resumes if interrupted).")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--section", required=True, help="parameters section of this run")
    parser.add_argument("--base", default=None, help="section of shared defaults (e.g. train)")
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--max-steps", type=int, default=None, help="stop early (for testing)")
    parser.add_argument("--no-progress", action="store_true")
    runs.add_supersede_option(parser)
    args = parser.parse_args(argv)
    cfg = params_to_config(args.params, args.section, args.base)
    summary = train(
        cfg,
        args.run_dir,
        max_steps=args.max_steps,
        progress=not args.no_progress,
        supersede_into=args.supersede_into,
    )
    keys = ("params", "final_val_loss", "train_time_s", "tokens_per_s")
    print(json.dumps({k: summary.get(k) for k in keys}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
