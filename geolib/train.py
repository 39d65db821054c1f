"""The one training loop of the three families, with Pythia-style checkpoints and exact resume.

    python -m geolib.train --params params.yaml --base train --section train_pythia \\
        --run-dir runs/pythia

Decoders (``pythia``, ``olmo``) learn next-token prediction; the encoder (``bert``) learns
masked-token prediction (15% of positions, of which 80% become ``[MASK]``, 10% a random token,
10% stay). Each optimizer step draws ``batch_size`` random contiguous windows from the token
array with a seeded ``numpy`` generator (split into ``grad_accum`` micro-batches); AdamW with
decoupled weight decay on every matrix (embeddings and LM head included, not on biases or
norms), linear warmup then a cosine, linear or constant schedule, gradient clipping.

A run directory holds::

    step-<N>/model.safetensors, config.json  weights after N updates (``save_pretrained``)
    step-<N>/trainer_state.json              step, tokens, lr, loss at that step
    step-<latest>/train_state.pt             optimizer, RNG states, step (for resuming)
    tokenizer/                               copy of the tokenizer, if any
    metrics.csv                              step, tokens, loss, lr, val_loss, tokens_per_s
    run.json                                 config, parameter counts, final numbers

Only the latest checkpoint keeps ``train_state.pt`` (saves disk). Killed and restarted with the
same configuration, :func:`train` resumes from it and ends with bitwise the same weights as an
uninterrupted run on the same machine and thread count (CPU, deterministic algorithms).
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import json
import math
import platform
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from geolib.data import load_tokens
from geolib.models import ModelConfig, build_model, count_params, matmul_params, quiet_progress

SCHEDULES = ("cosine", "linear", "constant")
METRIC_COLUMNS = ("step", "tokens", "loss", "lr", "val_loss", "tokens_per_s")
IGNORE_INDEX = -100


@dataclass
class TrainConfig:
    """Everything that determines a run (a run directory is tied to one configuration).

    ``batch_size`` is the number of sequences per optimizer step (tokens per step =
    ``batch_size·seq_len``); ``grad_accum`` splits them into that many micro-batches (the data
    and, up to float summation order, the update do not depend on it). Checkpoints are taken at
    :func:`checkpoint_steps` ``(total_steps, checkpoint_every, log_max)``. Without a tokenizer
    (synthetic data), give ``vocab_size`` (and ``mask_token_id`` for ``bert``).
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    train_tokens: str = "data/tokens/id/train.npy"
    val_tokens: str | None = "data/tokens/id/validation.npy"
    tokenizer: str | None = "data/tokenizer"
    vocab_size: int | None = None
    mask_token_id: int | None = None
    batch_size: int = 16
    grad_accum: int = 1
    seq_len: int = 128
    lr: float = 2e-3
    warmup_steps: int = 50
    schedule: str = "cosine"
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    grad_clip: float | None = 1.0
    mask_prob: float = 0.15
    total_steps: int = 1000
    checkpoint_every: int = 250
    log_max: int = 512
    eval_interval: int = 50
    eval_batches: int = 8
    seed: int = 0
    device: str = "cpu"
    num_threads: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.model, dict):
            self.model = ModelConfig.from_dict(self.model)
        self.betas = tuple(float(b) for b in self.betas)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; known: {SCHEDULES}")
        if self.batch_size % self.grad_accum:
            raise ValueError(
                f"batch_size={self.batch_size} not divisible by grad_accum={self.grad_accum}"
            )
        if self.seq_len > self.model.context:
            raise ValueError(
                f"seq_len={self.seq_len} exceeds the model context {self.model.context}"
            )
        if self.tokenizer is None and self.vocab_size is None:
            raise ValueError("give a tokenizer directory or vocab_size")

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> TrainConfig:
        """From a (merged) parameters mapping; unknown keys are an error. A model without
        ``context`` gets ``seq_len``."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - known)
        if unknown:
            raise KeyError(f"unknown training parameters {unknown}; known: {sorted(known)}")
        params = dict(params)
        model = dict(params.pop("model", {}))
        model.setdefault("context", params.get("seq_len", cls.seq_len))
        return cls(model=ModelConfig.from_dict(model), **params)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["betas"] = list(self.betas)
        return d

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len


# ----------------------------------------------------------------------------- schedules


def checkpoint_steps(total: int, every: int, log_max: int = 512) -> list[int]:
    """Pythia's checkpoint steps: 0, 1, 2, 4, …, ``log_max``, then every ``every`` steps, and
    ``total`` (all ≤ ``total``). ``checkpoint_steps(143000, 1000)`` is Pythia's 154 steps."""
    if total < 0 or every < 0:
        raise ValueError("total and every must be non-negative")
    steps = {0, total}
    p = 1
    while p <= min(log_max, total):
        steps.add(p)
        p *= 2
    if every:
        steps.update(range(every, total + 1, every))
    return sorted(steps)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate of update number ``step`` (1-based): linear warmup over ``warmup_steps``,
    then ``schedule`` down to ``min_lr_ratio·lr`` at ``total_steps``."""
    peak, floor = cfg.lr, cfg.lr * cfg.min_lr_ratio
    if cfg.warmup_steps and step <= cfg.warmup_steps:
        return peak * step / cfg.warmup_steps
    if cfg.schedule == "constant":
        return peak
    span = max(cfg.total_steps - cfg.warmup_steps, 1)
    progress = min(max(step - cfg.warmup_steps, 0) / span, 1.0)
    if cfg.schedule == "linear":
        return peak - (peak - floor) * progress
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


# ----------------------------------------------------------------------------- data


def sample_windows(tokens: np.ndarray, rng: np.random.Generator, n: int, length: int) -> np.ndarray:
    """``n`` random contiguous windows of ``length`` tokens, as an int64 array ``(n, length)``."""
    if len(tokens) < length + 1:
        raise ValueError(f"token array of {len(tokens)} tokens is shorter than a window ({length})")
    starts = rng.integers(0, len(tokens) - length + 1, size=n)
    return np.asarray(tokens[starts[:, None] + np.arange(length)], dtype=np.int64)


def mask_tokens(
    ids: np.ndarray,
    rng: np.random.Generator,
    *,
    mask_token_id: int,
    vocab_size: int,
    mask_prob: float = 0.15,
    special_ids: tuple[int, ...] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """BERT masking: each non-special position is selected with probability ``mask_prob``; a
    selected one becomes ``[MASK]`` (80%), a uniformly random token (10%) or stays (10%).
    Returns ``(inputs, labels)``, labels ``-100`` at unselected positions."""
    selectable = ~np.isin(ids, np.asarray(special_ids, dtype=ids.dtype))
    selected = (rng.random(ids.shape) < mask_prob) & selectable
    action = rng.random(ids.shape)
    random_tokens = rng.integers(0, vocab_size, size=ids.shape)
    inputs = ids.copy()
    inputs[selected & (action < 0.8)] = mask_token_id
    swap = selected & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_tokens[swap]
    labels = np.where(selected, ids, IGNORE_INDEX)
    return inputs, labels


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
    """Summed cross-entropy over target positions (``-100`` ignored). For the encoder the MLM
    head runs on masked positions only (sparse prediction: same loss, ~6× less head compute)."""
    if is_decoder:
        logits = model(input_ids=inputs).logits
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum"
        )
    hidden = model.base_model(input_ids=inputs).last_hidden_state
    keep = targets != IGNORE_INDEX
    return F.cross_entropy(model.cls(hidden[keep]), targets[keep], reduction="sum")


# ----------------------------------------------------------------------------- checkpoints


def step_dir(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / f"step-{step}"


def _rng_state(rng: np.random.Generator) -> dict[str, Any]:
    return rng.bit_generator.state


def _latest_resumable(run_dir: Path) -> Path | None:
    found = []
    for d in Path(run_dir).glob("step-*"):
        if d.is_dir() and d.name[5:].isdigit() and (d / "train_state.pt").is_file():
            found.append((int(d.name[5:]), d))
    return max(found)[1] if found else None


def _save_checkpoint(run_dir, model, step, state: dict, info: dict, keep_state: bool) -> Path:
    """Write ``step-N`` atomically (temp dir, then rename); move ``train_state.pt`` to it."""
    final = step_dir(run_dir, step)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with quiet_progress():  # "Writing model shards" at every checkpoint is noise
        model.save_pretrained(tmp)
    (tmp / "trainer_state.json").write_text(json.dumps(info, indent=1) + "\n")
    if keep_state:
        torch.save(state, tmp / "train_state.pt")
    previous = _latest_resumable(run_dir)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    if keep_state and previous is not None and previous != final:
        (previous / "train_state.pt").unlink()
    return final


def _load_weights(model, directory: Path) -> None:
    """Load ``save_pretrained`` weights into ``model`` in place (through ``from_pretrained``,
    which undoes the key renaming ``transformers`` applies on save, e.g. ``embed_out``)."""
    with quiet_progress():
        loaded = type(model).from_pretrained(
            directory, attn_implementation="eager", dtype=torch.float32
        )
    model.load_state_dict(loaded.state_dict(), strict=True)


def _read_metrics(path: Path, upto: int) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return [row for row in csv.DictReader(fh) if int(row["step"]) <= upto]


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.6g}"


# ----------------------------------------------------------------------------- loop


@torch.no_grad()
def evaluate(model, batches, is_decoder: bool, device) -> float:
    """Mean cross-entropy over fixed ``(inputs, targets)`` batches (eval mode, restored)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for inputs, targets in batches:
        x, y = torch.from_numpy(inputs).to(device), torch.from_numpy(targets).to(device)
        total += lm_loss_sum(model, x, y, is_decoder).item()
        count += int((y != IGNORE_INDEX).sum())
    model.train(was_training)
    return total / max(count, 1)


def make_optimizer(model, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on every matrix (embeddings and LM head included), none on
    biases and norm weights; fused kernel on CPU and CUDA."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    return torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
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
    torch.use_deterministic_algorithms(True, warn_only=True)
    if torch.device(cfg.device).type == "cpu":
        keep_freed_memory()
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)


def train(
    cfg: TrainConfig,
    run_dir: str | Path,
    *,
    max_steps: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Train (or resume, or do nothing if finished) the run in ``run_dir``; return ``run.json``.

    ``max_steps`` stops after that many updates without saving anything extra (a simulated
    kill): the next call resumes from the last checkpoint. ``progress=False`` replaces the
    progress bar by one line on stderr per evaluation (for logs). The returned summary is also
    written to ``run_dir/run.json`` when the run reaches ``total_steps``.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in run_dir.glob("step-*.tmp"):
        shutil.rmtree(stale)
    _configure_torch(cfg)
    device = torch.device(cfg.device)
    vocab, tokenizer = resolve_vocab(cfg)
    if tokenizer is not None and not (run_dir / "tokenizer").is_dir():
        tokenizer.save_pretrained(run_dir / "tokenizer")

    train_tokens = load_tokens(cfg.train_tokens, vocab.size)
    val_tokens = load_tokens(cfg.val_tokens, vocab.size) if cfg.val_tokens else None
    is_decoder = cfg.model.is_decoder
    micro = cfg.batch_size // cfg.grad_accum

    model = build_model(
        cfg.model,
        vocab.size,
        pad_token_id=vocab.pad,
        bos_token_id=vocab.bos,
        eos_token_id=vocab.eos,
        seed=cfg.seed,
    ).to(device)
    optimizer = make_optimizer(model, cfg)
    rng = np.random.default_rng(cfg.seed)
    eval_rng = np.random.default_rng([cfg.seed, 1])
    eval_set = []
    if val_tokens is not None:
        eval_cfg = replace(cfg, batch_size=micro, grad_accum=1)
        eval_set = [
            make_batch(val_tokens, eval_rng, eval_cfg, vocab) for _ in range(cfg.eval_batches)
        ]

    ckpt_steps = set(checkpoint_steps(cfg.total_steps, cfg.checkpoint_every, cfg.log_max))
    metrics_path = run_dir / "metrics.csv"
    start, wall, train_time = 0, 0.0, 0.0
    resume_from = _latest_resumable(run_dir)
    if resume_from is not None:
        state = torch.load(resume_from / "train_state.pt", weights_only=True)
        if state["config"] != cfg.to_dict():
            diff = sorted(k for k in state["config"] if state["config"][k] != cfg.to_dict().get(k))
            raise ValueError(
                f"{run_dir} holds a run with another configuration (differs in {diff}); "
                "use a fresh run directory"
            )
        _load_weights(model, resume_from)
        optimizer.load_state_dict(state["optimizer"])
        rng.bit_generator.state = state["data_rng"]
        torch.set_rng_state(state["torch_rng"])
        if device.type == "cuda" and state.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(state["cuda_rng"])
        start, wall, train_time = state["step"], state["wall_s"], state["train_s"]
    rows = _read_metrics(metrics_path, start)

    params = count_params(model)
    summary_base = {
        "config": cfg.to_dict(),
        "params": params,
        "matmul_params": matmul_params(model),
        "vocab_size": vocab.size,
        "tokens_per_step": cfg.tokens_per_step,
        "checkpoint_steps": sorted(ckpt_steps),
        "torch": torch.__version__,
        "num_threads": torch.get_num_threads(),
        "machine": platform.machine(),
    }
    fh = metrics_path.open("w", newline="")
    writer = csv.DictWriter(fh, fieldnames=METRIC_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    fh.flush()

    def state_dict(step: int) -> dict[str, Any]:
        return {
            "step": step,
            "config": cfg.to_dict(),
            "optimizer": optimizer.state_dict(),
            "data_rng": _rng_state(rng),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state() if device.type == "cuda" else None,
            "wall_s": wall,
            "train_s": train_time,
        }

    def checkpoint(step: int, loss: float | None, lr: float | None) -> None:
        info = {"step": step, "tokens": step * cfg.tokens_per_step, "loss": loss, "lr": lr}
        _save_checkpoint(run_dir, model, step, state_dict(step), info, keep_state=True)

    model.train()
    t_segment = time.perf_counter()
    if start == 0:
        val = evaluate(model, eval_set, is_decoder, device) if eval_set else None
        writer.writerow(
            {
                "step": 0,
                "tokens": 0,
                "loss": "",
                "lr": "",
                "val_loss": _fmt(val),
                "tokens_per_s": "",
            }
        )
        fh.flush()
        checkpoint(0, None, None)

    stop = cfg.total_steps if max_steps is None else min(cfg.total_steps, max_steps)
    bar = tqdm(
        total=cfg.total_steps, initial=start, disable=not progress, unit="step", dynamic_ncols=True
    )
    loss_value = None
    try:
        for step in range(start + 1, stop + 1):
            t0 = time.perf_counter()
            lr = lr_at(step, cfg)
            inputs, targets = make_batch(train_tokens, rng, cfg, vocab)
            loss_sum = train_step(model, optimizer, inputs, targets, cfg, lr, device)
            dt = time.perf_counter() - t0
            train_time += dt
            loss_value = loss_sum
            val = None
            if eval_set and (step % cfg.eval_interval == 0 or step == cfg.total_steps):
                val = evaluate(model, eval_set, is_decoder, device)
            tps = cfg.tokens_per_step / dt
            writer.writerow(
                {
                    "step": step,
                    "tokens": step * cfg.tokens_per_step,
                    "loss": _fmt(loss_value),
                    "lr": _fmt(lr),
                    "val_loss": _fmt(val),
                    "tokens_per_s": f"{tps:.1f}",
                }
            )
            bar.update(1)
            bar.set_postfix(loss=f"{loss_value:.3f}", tok_s=f"{tps:.0f}", refresh=False)
            if not progress and val is not None:  # one line per evaluation instead of a bar
                print(
                    f"step {step}/{cfg.total_steps}  loss {loss_value:.4f}  val_loss {val:.4f}  "
                    f"lr {lr:.3g}  {tps:,.0f} tok/s",
                    file=sys.stderr,
                    flush=True,
                )
            if step in ckpt_steps:
                fh.flush()
                now = time.perf_counter()
                wall, t_segment = wall + now - t_segment, now
                checkpoint(step, loss_value, lr)
    finally:
        bar.close()
        fh.close()
    wall += time.perf_counter() - t_segment
    if stop < cfg.total_steps:
        return {**summary_base, "stopped_at": stop}

    rows = _read_metrics(metrics_path, cfg.total_steps)
    tail = [float(r["loss"]) for r in rows[-20:] if r["loss"]]
    vals = [float(r["val_loss"]) for r in rows if r["val_loss"]]
    summary = {
        **summary_base,
        "final_step": cfg.total_steps,
        "tokens": cfg.total_steps * cfg.tokens_per_step,
        "final_train_loss": float(np.mean(tail)) if tail else None,
        "final_val_loss": vals[-1] if vals else None,
        "initial_val_loss": vals[0] if vals else None,
        "train_time_s": train_time,
        "wall_time_s": wall,
        "tokens_per_s": cfg.total_steps * cfg.tokens_per_step / max(train_time, 1e-9),
    }
    (run_dir / "run.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


# ----------------------------------------------------------------------------- entry point


def params_to_config(params_path: str | Path, section: str, base: str | None = None) -> TrainConfig:
    """The :class:`TrainConfig` of ``section`` of a parameters file: the ``common`` keys that
    are training fields (``seed``, ``device``), then section ``base`` (shared defaults), then
    ``section`` — nested mappings (``model``) merged key by key."""
    from geolib.config import deep_update, load_params

    data = load_params(params_path)
    names = {f.name for f in fields(TrainConfig)}
    merged = {k: v for k, v in data.get("common", {}).items() if k in names}
    for name in (base, section):
        if name is None:
            continue
        if name not in data:
            raise KeyError(f"{params_path}: no section {name!r} (sections: {sorted(data)})")
        merged = deep_update(merged, data[name])
    return TrainConfig.from_params(merged)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train one model (resumes if interrupted).")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--section", required=True, help="parameters section of this run")
    parser.add_argument("--base", default=None, help="section of shared defaults (e.g. train)")
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--max-steps", type=int, default=None, help="stop early (for testing)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    cfg = params_to_config(args.params, args.section, args.base)
    summary = train(cfg, args.run_dir, max_steps=args.max_steps, progress=not args.no_progress)
    keys = ("params", "final_val_loss", "train_time_s", "tokens_per_s")
    print(json.dumps({k: summary.get(k) for k in keys}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
