"""A tiny trained run for stage tests: d = 16, a few steps, checkpoints every few steps."""

from __future__ import annotations

import hashlib
from pathlib import Path

from geolib.models.families import ModelConfig
from geolib.models.train import TrainConfig, train

OLD_WARMUP = 50


def train_tiny(
    run_dir: Path,
    *,
    tokenizer: Path,
    train_tokens: Path,
    family: str = "pythia",
    n_layers: int = 2,
    total_steps: int = 8,
    checkpoint_every: int = 4,
    log_max: int = 2,
    max_steps: int | None = None,
    **overrides,
) -> Path:
    """Train a 16-wide model of ``family`` into ``run_dir`` (batch 4 × 16 tokens); ``overrides``
    are further ``TrainConfig`` fields (``mask_prob``, ``optimizer``, ``lr`` …); ``max_steps``
    stops early (a simulated kill), as in :func:`geolib.models.train.train`."""
    if "warmup_steps" not in overrides and total_steps < OLD_WARMUP:
        # the schedule these fixtures were made with (a 50-step warmup over fewer steps: the
        # rate rises by peak/50 a step), said now as a warmup over the whole run, since a
        # warmup longer than the run is refused; the same rates, so the same runs
        peak = overrides.get("lr", TrainConfig.lr)
        overrides.update(warmup_steps=total_steps, lr=peak * total_steps / OLD_WARMUP)
    cfg = TrainConfig(
        model=ModelConfig(
            family=family, d_model=16, n_layers=n_layers, n_heads=2, d_ff=32, context=16
        ),
        train_tokens=str(train_tokens),
        val_tokens=None,
        tokenizer=str(tokenizer),
        batch_size=4,
        seq_len=16,
        total_steps=total_steps,
        checkpoint_every=checkpoint_every,
        log_max=log_max,
        **overrides,
    )
    train(cfg, run_dir, progress=False, max_steps=max_steps)
    return run_dir


def tree_hashes(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder``, by relative path (to show a run untouched)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def tiny_corpus(root: Path, **files: tuple[int, int]) -> Path:
    """The test vocabulary's tokenizer in ``root/tokenizer`` and uniform token files: each
    ``name=(high, n)`` writes ``root/<name>.npy``, ``n`` ids in ``[3, high)`` (no specials), from
    one seeded generator in the order given. Returns the tokenizer folder."""
    import numpy as np

    from tests.models.test_checkpoints import make_tokenizer

    tokenizer = make_tokenizer(root / "tokenizer")
    rng = np.random.default_rng(0)
    for name, (high, n) in files.items():
        np.save(root / f"{name}.npy", rng.integers(3, high, n).astype(np.uint16))
    return tokenizer


def tiny_train_section(train_tokens: str, val_tokens: str) -> dict:
    """A ``train`` section of a parameters file over the synthetic corpus of
    ``tests.models.test_train.token_files`` (its own vocabulary, no tokenizer folder)."""
    from tests.models.test_train import V

    return {
        "train_tokens": train_tokens,
        "val_tokens": val_tokens,
        "tokenizer": None,
        "vocab_size": V,
    }


def probe_section(root: Path, out: Path, **keys) -> dict:
    """A probe stage's section over the conftest's decoder + encoder runs (``root``), writing
    to ``out``: the keys gradient_energy and residual_isotropy share, plus ``keys``."""
    return {
        "seed": 0,
        "device": "cpu",
        "runs": [str(root / "pythia"), str(root / "bert")],
        "revisions": None,
        "tokens": str(root / "val.npy"),
        "text": None,  # hub models only
        "max_text_tokens": 1000,
        "seq_len": 16,
        "n_eval": 10,
        "batch_size": 4,
        "mask_prob": None,  # the runs' own: 0.3
        "ranks": [1, 2],
        "n_controls": 5,
        "out_dir": str(out),
        **keys,
    }


def run_quietly(experiment, section: dict) -> dict:
    """``experiment.run_stage(section)`` with torch seeded and no progress lines."""
    import torch

    torch.manual_seed(0)
    return experiment.run_stage(section, log=lambda *_: None)
