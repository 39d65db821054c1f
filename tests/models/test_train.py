"""Tests of geolib.models.train: schedules, data, masking, learning, checkpoints and exact
resume."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file

from geolib.files import sha256_file
from geolib.models import train_config
from geolib.models.branch import Branch, branch_problem
from geolib.models.families import ModelConfig
from geolib.models.resume import RunIdentityError
from geolib.models.runs import METRIC_COLUMNS
from geolib.models.train import (
    IGNORE_INDEX,
    main,
    mask_tokens,
    sample_windows,
    train,
    train_step,
)
from geolib.models.train_config import (
    TrainConfig,
    attention_for,
    checkpoint_steps,
    lr_at,
    params_to_config,
    resolve_precision,
    run_checkpoints,
)
from tests.repo import repo_env

V = 64
MASK = V - 1


@pytest.fixture(scope="module")
def token_files(tmp_path_factory):
    """A learnable synthetic corpus (uint16): Zipf-distributed tokens (a unigram model already
    beats uniform, which even an encoder learns in a few steps), half of them replaced by a
    deterministic successor of the previous token (context helps)."""
    rng = np.random.default_rng(0)
    n = 12_000
    p = 1.0 / np.arange(1, V - 1) ** 1.2
    ids = rng.choice(V - 2, size=n, p=p / p.sum())
    follow = rng.random(n) < 0.5
    ids[1:][follow[1:]] = (ids[:-1][follow[1:]] + 7) % (V - 2)
    folder = tmp_path_factory.mktemp("tokens")
    np.save(folder / "train.npy", ids[:10_000].astype(np.uint16))
    np.save(folder / "validation.npy", ids[10_000:].astype(np.uint16))
    return folder / "train.npy", folder / "validation.npy"


def tiny_cfg(token_files, family="pythia", **kw) -> TrainConfig:
    d_ff = 48 if family == "olmo" else 64
    model = kw.pop("model", {})
    defaults = dict(
        train_tokens=str(token_files[0]),
        val_tokens=str(token_files[1]),
        tokenizer=None,
        vocab_size=V,
        mask_token_id=MASK if family == "bert" else None,
        batch_size=8,
        seq_len=32,
        lr=1e-2,
        warmup_steps=4,
        total_steps=24,
        checkpoint_every=10,
        log_max=4,
        eval_interval=8,
        eval_batches=2,
    )
    defaults.update(kw)
    mcfg = dict(family=family, d_model=32, n_layers=2, n_heads=2, d_ff=d_ff, context=32)
    mcfg.update(model)
    return TrainConfig(model=ModelConfig(**mcfg), **defaults)


def weights(step_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(step_dir / "model.safetensors")


# ----------------------------------------------------------------------------- pure functions


def test_checkpoint_steps_like_pythia():
    steps = checkpoint_steps(143_000, 1000)
    assert steps[:12] == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000]
    assert steps[-1] == 143_000 and len(steps) == 154  # Pythia's 154 checkpoints
    assert checkpoint_steps(10, 4) == [0, 1, 2, 4, 8, 10]
    assert checkpoint_steps(1000, 300, log_max=8) == [0, 1, 2, 4, 8, 300, 600, 900, 1000]
    assert checkpoint_steps(0, 5) == [0]
    assert checkpoint_steps(3, 0) == [0, 1, 2, 3]


def test_a_dense_window_adds_its_steps_to_pythias():
    default = checkpoint_steps(1000, 200)
    dense = checkpoint_steps(1000, 200, 512, dense_every=16, dense_until=192)
    window = list(range(16, 193, 16))
    assert sorted(set(default) | set(window)) == dense
    assert [s for s in dense if 16 <= s <= 192] == window  # every 16 steps, nothing else
    assert checkpoint_steps(40, 0, 0, dense_every=16, dense_until=100) == [0, 16, 32, 40]
    with pytest.raises(ValueError, match="non-negative"):
        checkpoint_steps(100, 10, dense_every=-1)


def test_a_dense_window_needs_both_ends_and_fits_the_run():
    cfg = TrainConfig(vocab_size=50, total_steps=100, dense_every=10, dense_until=60)
    assert run_checkpoints(cfg) == sorted({0, 1, 2, 4, 8, 16, 32, 64, 100} | set(range(10, 61, 10)))
    longer = TrainConfig(vocab_size=50, total_steps=100, dense_every=40, dense_until=500)
    assert [s for s in run_checkpoints(longer) if s % 40 == 0] == [0, 40, 80]  # ends with the run
    for bad in ({"dense_every": 10}, {"dense_until": 60}):
        with pytest.raises(ValueError, match="dense_every"):
            TrainConfig(vocab_size=50, total_steps=100, **bad)


@pytest.mark.parametrize("schedule", ["cosine", "linear", "constant"])
def test_lr_schedule(token_files, schedule):
    cfg = tiny_cfg(token_files, schedule=schedule, lr=1.0, warmup_steps=10, total_steps=110)
    lrs = [lr_at(s, cfg) for s in range(1, 111)]
    assert lrs[:10] == pytest.approx([(s + 1) / 10 for s in range(10)])
    assert max(lrs) == pytest.approx(1.0)
    end = {"cosine": 0.1, "linear": 0.1, "constant": 1.0}[schedule]
    assert lrs[-1] == pytest.approx(end)
    assert all(a >= b - 1e-12 for a, b in zip(lrs[9:], lrs[10:], strict=False))
    if schedule == "cosine":
        assert lr_at(60, cfg) == pytest.approx(0.55)  # half-way: mean of peak and floor


def test_wsd_holds_the_peak_then_decays_linearly_to_the_floor(token_files):
    cfg = tiny_cfg(
        token_files, schedule="wsd", decay_steps=20, lr=1.0, warmup_steps=10, total_steps=100
    )
    assert [lr_at(s, cfg) for s in (5, 10, 11, 80)] == [0.5, 1.0, 1.0, 1.0]
    assert lr_at(90, cfg) == pytest.approx(1.0 - 0.9 * 0.5)  # half-way down the decay
    assert lr_at(100, cfg) == pytest.approx(0.1) and lr_at(81, cfg) < 1.0
    with pytest.raises(ValueError, match="decay_steps .* goes with schedule 'wsd'"):
        tiny_cfg(token_files, schedule="wsd")
    with pytest.raises(ValueError, match="goes with schedule 'wsd' and only with it"):
        tiny_cfg(token_files, decay_steps=5)
    with pytest.raises(ValueError, match="exceeds the steps after the warmup"):
        tiny_cfg(token_files, schedule="wsd", decay_steps=21, warmup_steps=4, total_steps=24)
    with pytest.raises(ValueError, match="decay_steps"):
        tiny_cfg(token_files, schedule="wsd", decay_steps=0)


def test_sample_windows_are_contiguous():
    tokens = np.arange(1000, dtype=np.uint16)
    w = sample_windows(tokens, np.random.default_rng(0), 50, 17)
    assert w.shape == (50, 17) and w.dtype == np.int64
    assert (np.diff(w, axis=1) == 1).all() and w.min() >= 0 and w.max() <= 999
    with pytest.raises(ValueError, match="shorter"):
        sample_windows(tokens[:10], np.random.default_rng(0), 1, 17)


def test_mlm_masking_statistics():
    """15% of non-special positions selected; of those 80% [MASK], 10% random, 10% kept."""
    rng = np.random.default_rng(0)
    ids = rng.integers(3, 1000, size=(200, 512))
    ids[:, ::50] = 0  # special tokens are never selected
    inputs, labels = mask_tokens(
        ids, rng, mask_token_id=2, vocab_size=1000, mask_prob=0.15, special_ids=(0, 1, 2)
    )
    selectable = ids != 0
    selected = labels != IGNORE_INDEX
    assert not (selected & ~selectable).any()
    assert (labels[selected] == ids[selected]).all()
    assert (inputs[~selected] == ids[~selected]).all()
    frac = selected.sum() / selectable.sum()
    assert abs(frac - 0.15) < 0.003
    n = selected.sum()
    masked = (inputs[selected] == 2).sum() / n
    kept = (inputs[selected] == ids[selected]).sum() / n
    randomised = 1 - masked - kept
    assert abs(masked - 0.8) < 0.01
    # a random replacement equals the original token with probability 1/1000
    assert abs(kept - (0.1 + 0.1 / 1000)) < 0.01
    assert abs(randomised - 0.1 * (1 - 1 / 1000)) < 0.01


def test_config_checks(token_files):
    with pytest.raises(ValueError, match="schedule"):
        tiny_cfg(token_files, schedule="step")
    with pytest.raises(ValueError, match="grad_accum"):
        tiny_cfg(token_files, batch_size=6, grad_accum=4)
    with pytest.raises(ValueError, match="context"):
        tiny_cfg(token_files, seq_len=64)
    with pytest.raises(KeyError, match="unknown training parameters"):
        TrainConfig.from_params(
            {"lr": 1e-3, "learning_rate": 1e-3, "vocab_size": 5, "tokenizer": None}
        )


# ----------------------------------------------------------------------------- training


@pytest.mark.parametrize("family", ["pythia", "olmo", "bert"])
def test_loss_decreases(token_files, tmp_path, family):
    cfg = tiny_cfg(token_files, family, total_steps=40, eval_interval=40, checkpoint_every=0)
    summary = train(cfg, tmp_path / family, progress=False)
    assert summary["initial_val_loss"] == pytest.approx(np.log(V), abs=0.3)
    assert summary["final_val_loss"] < summary["initial_val_loss"] - 0.5
    assert summary["final_train_loss"] < np.log(V) - 0.5


def test_run_directory_layout(token_files, tmp_path):
    cfg = tiny_cfg(token_files)
    summary = train(cfg, tmp_path, progress=False)
    expected = checkpoint_steps(24, 10, log_max=4)
    assert expected == [0, 1, 2, 4, 10, 20, 24]
    assert sorted(int(p.name[5:]) for p in tmp_path.glob("step-*")) == expected
    for step in expected:
        folder = tmp_path / f"step-{step}"
        assert (folder / "model.safetensors").is_file() and (folder / "config.json").is_file()
        info = json.loads((folder / "trainer_state.json").read_text())
        assert info["step"] == step and info["tokens"] == step * 8 * 32
    # only the last two checkpoints keep the optimizer state (the latest and a fallback)
    kept = sorted(p.parent.name for p in tmp_path.glob("step-*/train_state.pt"))
    assert kept == ["step-20", "step-24"]
    for step in expected:  # every step's manifest lists exactly its files, with their hashes
        folder = tmp_path / f"step-{step}"
        hashes = json.loads((folder / "manifest.json").read_text())["sha256"]
        assert set(hashes) == {p.name for p in folder.iterdir()} - {"manifest.json"}
        assert all(sha256_file(folder / n) == h for n, h in hashes.items())
    lines = (tmp_path / "metrics.csv").read_text().splitlines()
    assert lines[0].split(",") == list(METRIC_COLUMNS)
    assert len(lines) == 1 + 25
    val_steps = [int(r.split(",")[0]) for r in lines[1:] if r.split(",")[4]]
    assert val_steps == [0, 8, 16, 24]
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["params"] == summary["params"] > 0
    assert run["checkpoint_steps"] == expected and run["tokens"] == 24 * 8 * 32
    assert run["config"]["model"]["family"] == "pythia"
    # a finished run is not retrained
    before = (tmp_path / "step-24" / "model.safetensors").stat().st_mtime_ns
    train(cfg, tmp_path, progress=False)
    assert (tmp_path / "step-24" / "model.safetensors").stat().st_mtime_ns == before


@pytest.mark.parametrize("family", ["pythia", "bert", pytest.param("olmo", marks=pytest.mark.slow)])
def test_resume_is_bitwise_identical(token_files, tmp_path, family):
    """Stop (simulated kill) twice between checkpoints; the resumed run ends with exactly the
    weights and metrics of an uninterrupted run (dropout on, gradient accumulation on)."""
    cfg = tiny_cfg(token_files, family, grad_accum=2, model={"dropout": 0.1})
    train(cfg, tmp_path / "a", progress=False)
    out = train(cfg, tmp_path / "b", progress=False, max_steps=7)
    assert out["stopped_at"] == 7 and not (tmp_path / "b" / "run.json").exists()
    assert (tmp_path / "b" / "step-4" / "train_state.pt").is_file()
    train(cfg, tmp_path / "b", progress=False, max_steps=15)
    train(cfg, tmp_path / "b", progress=False)
    for step in (4, 10, 24):
        wa, wb = weights(tmp_path / "a" / f"step-{step}"), weights(tmp_path / "b" / f"step-{step}")
        assert wa.keys() == wb.keys()
        assert all(torch.equal(wa[k], wb[k]) for k in wa), f"weights differ at step {step}"

    def losses(run):
        lines = (run / "metrics.csv").read_text().splitlines()[1:]
        return [r.split(",")[:5] for r in lines]  # everything but tokens/s

    assert losses(tmp_path / "a") == losses(tmp_path / "b")


@pytest.mark.parametrize("family", ["pythia", "bert"])
def test_bf16_resume_is_bitwise_identical(token_files, tmp_path, family):
    """bf16 autocast training is as exactly resumable as float32 on one machine, and its
    checkpoints stay float32."""
    cfg = tiny_cfg(token_files, family, precision="bf16", model={"attn_implementation": "eager"})
    train(cfg, tmp_path / "a", progress=False)
    train(cfg, tmp_path / "b", progress=False, max_steps=13)
    train(cfg, tmp_path / "b", progress=False)
    for step in (10, 24):
        wa, wb = weights(tmp_path / "a" / f"step-{step}"), weights(tmp_path / "b" / f"step-{step}")
        assert all(w.dtype == torch.float32 for w in wa.values())
        assert all(torch.equal(wa[k], wb[k]) for k in wa), f"weights differ at step {step}"
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["config"]["precision"] == "bf16"


@pytest.mark.parametrize("family", ["pythia", "olmo", "bert"])
def test_bf16_step_runs_the_forward_in_bf16_and_stays_close(token_files, family):
    """The same first update in float32 and under bf16 autocast: the losses differ (autocast
    applied) by less than bf16's rounding allows (8 bits of mantissa: ~0.4% per operation)."""
    from geolib.models.families import build_model
    from geolib.models.train import Vocab, make_batch, make_optimizer

    losses = {}
    for precision in ("fp32", "bf16"):
        cfg = tiny_cfg(token_files, family, precision=precision)
        tokens = np.load(token_files[0])
        vocab = Vocab(V, mask=MASK if family == "bert" else None)
        inputs, targets = make_batch(tokens, np.random.default_rng(0), cfg, vocab)
        model = build_model(cfg.model, V, seed=0)
        opt = make_optimizer(model, cfg)
        losses[precision] = train_step(model, opt, inputs, targets, cfg, 1e-3, "cpu")
    assert losses["fp32"] != losses["bf16"]
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=2e-2)


def test_precision_auto_resolves_by_hardware(token_files, monkeypatch):
    """``auto`` becomes bf16 only where the CPU reports AMX-BF16; the attention ``auto``
    follows the precision; the run records the resolved values, never "auto"."""
    monkeypatch.setattr(train_config, "cpu_has_amx_bf16", lambda: True)
    cfg = tiny_cfg(token_files, precision="auto", model={"attn_implementation": "auto"})
    assert (cfg.precision, cfg.model.attn_implementation) == ("bf16", "eager")
    assert cfg.to_dict()["precision"] == "bf16"
    monkeypatch.setattr(train_config, "cpu_has_amx_bf16", lambda: False)
    cfg = tiny_cfg(token_files, precision="auto", model={"attn_implementation": "auto"})
    assert (cfg.precision, cfg.model.attn_implementation) == ("fp32", "sdpa")
    assert resolve_precision("cpu") == "fp32"
    # a given attention is kept; a GPU trains bf16 with SDPA
    cfg = tiny_cfg(token_files, precision="auto", model={"attn_implementation": "sdpa"})
    assert cfg.model.attn_implementation == "sdpa"
    assert attention_for("bf16", "cuda") == "sdpa" and attention_for("bf16", "cpu") == "eager"
    if not torch.cuda.is_available():
        assert resolve_precision("cuda") == "fp32"
    with pytest.raises(ValueError, match="precision must be one of"):
        tiny_cfg(token_files, precision="fp16")


def test_resume_refuses_another_config(token_files, tmp_path):
    train(tiny_cfg(token_files), tmp_path, progress=False, max_steps=3)
    with pytest.raises(ValueError, match="another configuration.*lr"):
        train(tiny_cfg(token_files, lr=5e-3), tmp_path, progress=False)


def test_one_merge_layers_common_then_each_layer_key_by_key():
    from geolib.models.train_config import merged_config

    params = {"common": {"seed": 4, "device": "cpu", "not_training": 1}}
    train = {"lr": 1e-3, "seed": 0, "model": {"d_model": 32, "n_heads": 2}}
    design = {"lr": 2e-3, "model": {"n_heads": 4, "family": "olmo"}}
    merged = merged_config(params, train, design)
    assert merged == {
        "seed": 0, "device": "cpu", "lr": 2e-3,
        "model": {"d_model": 32, "n_heads": 4, "family": "olmo"},
    }  # fmt: skip
    assert train["model"] == {"d_model": 32, "n_heads": 2}  # the layers are not modified
    assert merged_config({}, design) == design and merged_config(params) == {
        "seed": 4, "device": "cpu"
    }  # fmt: skip


def test_entry_point_with_base_section(token_files, tmp_path):
    params = {
        "common": {"seed": 0, "device": "cpu", "unrelated": 1},
        "train": {**tiny_cfg(token_files).to_dict(), "model": {"d_model": 32, "n_heads": 2}},
        "train_x": {"model": {"family": "olmo", "d_ff": 48, "n_layers": 1}, "lr": 3e-3},
    }
    del params["train"]["seed"], params["train"]["device"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    cfg = params_to_config(path, "train_x", base="train")
    assert cfg.model.family == "olmo" and cfg.model.d_model == 32 and cfg.model.n_layers == 1
    assert cfg.lr == 3e-3 and cfg.batch_size == 8 and cfg.seed == 0
    args = ["--params", str(path), "--base", "train", "--section", "train_x"]
    assert (
        main([*args, "--run-dir", str(tmp_path / "run"), "--max-steps", "2", "--no-progress"]) == 0
    )
    assert (tmp_path / "run" / "step-2" / "train_state.pt").is_file()


@pytest.mark.slow
def test_resume_after_sigkill(token_files, tmp_path):
    """A real kill (SIGKILL mid-run) of ``python -m geolib.models.train``, then a restart."""
    cfg = tiny_cfg(token_files, total_steps=300, checkpoint_every=50)
    params = {"run": cfg.to_dict()}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    cmd = [sys.executable, "-m", "geolib.models.train", "--params", str(path), "--section", "run"]
    env = repo_env()
    proc = subprocess.Popen([*cmd, "--run-dir", str(tmp_path / "b"), "--no-progress"], env=env)
    deadline = time.time() + 120
    while not (tmp_path / "b" / "step-100").exists() and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "b" / "run.json").exists()
    subprocess.run([*cmd, "--run-dir", str(tmp_path / "b"), "--no-progress"], env=env, check=True)
    subprocess.run([*cmd, "--run-dir", str(tmp_path / "a"), "--no-progress"], env=env, check=True)
    wa, wb = weights(tmp_path / "a" / "step-300"), weights(tmp_path / "b" / "step-300")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


# ----------------------------------------------------------------------------- integrity


def test_numbers_are_checked_when_the_config_is_built(token_files):
    cfg = tiny_cfg(token_files, lr="1e-3", batch_size=8.0, grad_clip=None)
    assert cfg.lr == 1e-3 and isinstance(cfg.batch_size, int)  # coerced, not refused
    bad = {
        "lr": ("abc", "TrainConfig.lr must be a number"),
        "grad_accum": (0, "TrainConfig.grad_accum must be >= 1"),
        "eval_interval": (0, "TrainConfig.eval_interval must be >= 1"),
        "mask_prob": (2, "TrainConfig.mask_prob must be < 1"),
        "total_steps": (-1, "TrainConfig.total_steps must be >= 1"),
        "warmup_steps": (2.5, "TrainConfig.warmup_steps must be an integer"),
        "weight_decay": (float("nan"), "TrainConfig.weight_decay is NaN"),
        "betas": ((0.9,), "TrainConfig.betas must be two numbers"),
        "seed": (True, "TrainConfig.seed must be a number"),
        "grad_clip": (float("inf"), "TrainConfig.grad_clip must be finite"),
    }
    for key, (value, message) in bad.items():
        with pytest.raises(ValueError, match=message.replace(".", r"\.")):
            tiny_cfg(token_files, **{key: value})
    for key in ("lr", "weight_decay"):  # YAML's .inf and -.inf
        for value in (float("inf"), "-inf"):
            with pytest.raises(ValueError, match=rf"TrainConfig\.{key} must be finite"):
                tiny_cfg(token_files, **{key: value})
    with pytest.raises(ValueError, match=r"ModelConfig\.tie_embeddings must be true or false"):
        ModelConfig(tie_embeddings="false")
    with pytest.raises(ValueError, match=r"ModelConfig\.d_model must be >= 1"):
        ModelConfig(d_model=0)
    with pytest.raises(ValueError, match=r"ModelConfig\.dropout must be < 1"):
        ModelConfig(dropout=1.0)


def _corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 2, len(data), 97):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_resume_falls_back_past_a_damaged_state(token_files, tmp_path, capsys):
    cfg = tiny_cfg(token_files)
    train(cfg, tmp_path / "a", progress=False)
    run = tmp_path / "b"
    train(cfg, run, progress=False, max_steps=12)  # states at steps 4 and 10
    _corrupt(run / "step-10" / "train_state.pt")
    train(cfg, run, progress=False)
    err = capsys.readouterr().err
    assert "cannot resume from step-10" in err and "content changed" in err
    assert "removed step-10" in err
    wa, wb = weights(tmp_path / "a" / "step-24"), weights(run / "step-24")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)  # the fallback changed nothing
    for step in (10, 20, 24):  # the steps after the fallback were rewritten, bitwise
        ra = (tmp_path / "a" / f"step-{step}" / "model.safetensors").read_bytes()
        assert (run / f"step-{step}" / "model.safetensors").read_bytes() == ra


def test_resume_without_an_intact_state_says_what_to_delete(token_files, tmp_path):
    from geolib.models.resume import ResumeError

    cfg = tiny_cfg(token_files)
    train(cfg, tmp_path, progress=False, max_steps=12)
    _corrupt(tmp_path / "step-10" / "model.safetensors")
    (tmp_path / "step-4" / "train_state.pt").write_bytes(b"not a state")
    with pytest.raises(ResumeError, match=rf"rm -r {tmp_path}"):
        train(cfg, tmp_path, progress=False)


def test_a_run_is_tied_to_its_data_not_its_path(token_files, tmp_path):
    import shutil

    data = tmp_path / "data"
    data.mkdir()
    for f in token_files:
        shutil.copy(f, data / f.name)
    cfg = tiny_cfg((data / "train.npy", data / "validation.npy"))
    train(cfg, tmp_path / "run", progress=False, max_steps=5)
    ids = np.load(data / "train.npy")
    np.save(data / "train.npy", ids[::-1].copy())  # other data under the same path
    with pytest.raises(ValueError, match="trained on other data.*train_tokens"):
        train(cfg, tmp_path / "run", progress=False)
    info = json.loads((tmp_path / "run" / "step-4" / "trainer_state.json").read_text())
    assert info["step"] == 4


_KILLER = """
import json, os, signal, sys
from geolib.models import runs, train as T
from geolib.models.train_config import TrainConfig

cfg = TrainConfig(**json.loads(open(sys.argv[1]).read()))
where, at, calls = sys.argv[3], int(sys.argv[4]), [0]

def killing(f):  # SIGKILL this process at the at-th call of f, before f runs
    def g(*a, **k):
        calls[0] += 1
        if calls[0] == at:
            os.kill(os.getpid(), signal.SIGKILL)
        return f(*a, **k)
    return g

if where == "step":            # between checkpoints, before an update
    T.train_step = killing(T.train_step)
elif where == "checkpoint":    # inside a checkpoint write: files in step-N.tmp, no manifest
    runs.write_manifest = killing(runs.write_manifest)
elif where == "publish":       # after the rename, while older states are being pruned
    runs._forget_in_manifest = killing(runs._forget_in_manifest)
T.train(cfg, sys.argv[2], progress=False)
"""


def test_resume_after_sigkill_at_random_points(token_files, tmp_path):
    """A separate process is killed with SIGKILL at a seeded random point (an update, a
    checkpoint write, the pruning after one), then resumed: every metrics row (but tokens/s)
    and every checkpoint's weights equal an uninterrupted run's, bitwise."""
    cfg = tiny_cfg(token_files)
    train(cfg, tmp_path / "ref", progress=False)
    script = tmp_path / "killer.py"
    script.write_text(_KILLER)
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_dict()))
    env = repo_env()
    rng = np.random.default_rng(2026)
    cases = [
        ("step", int(rng.integers(2, 24))),
        ("checkpoint", int(rng.integers(2, 7))),
        ("publish", int(rng.integers(1, 4))),
    ]

    def rows(run):
        return [r.split(",")[:5] for r in (run / "metrics.csv").read_text().splitlines()]

    for where, at in cases:
        run = tmp_path / f"{where}-{at}"
        argv = [sys.executable, str(script), str(tmp_path / "cfg.json"), str(run), where, str(at)]
        proc = subprocess.run(argv, env=env, capture_output=True)
        assert proc.returncode == -signal.SIGKILL, (where, at, proc.stderr[-2000:])
        assert not (run / "run.json").exists()
        train(cfg, run, progress=False)
        assert rows(run) == rows(tmp_path / "ref"), (where, at)
        assert not list(run.glob("step-*.tmp"))
        for folder in sorted((tmp_path / "ref").glob("step-*")):
            ref = (folder / "model.safetensors").read_bytes()
            assert (run / folder.name / "model.safetensors").read_bytes() == ref, (where, at)


def test_a_diverging_run_stops_marked_and_is_refused_everywhere(token_files, tmp_path):
    """lr 1000: the loss leaves [0, 3 ln |V|] within a few steps. Training stops with an error
    naming the run, writes diverged.json and no run.json; resuming, loading a checkpoint and
    reading the run's summary all refuse it by name."""
    from geolib.models import checkpoints, runs
    from geolib.models.train import divergence_threshold

    assert divergence_threshold(V) == pytest.approx(3 * np.log(V))
    cfg = tiny_cfg(token_files, lr=1000.0, warmup_steps=1, grad_clip=None)
    run = tmp_path / "run"
    with pytest.raises(runs.DivergedRunError, match="training diverged at step"):
        train(cfg, run, progress=False)
    info = json.loads((run / runs.DIVERGED).read_text())
    assert not info["loss"] <= info["threshold"] and 1 <= info["step"] < cfg.total_steps
    assert not (run / runs.RUN_INFO).exists()
    for read in (
        lambda: train(cfg, run, progress=False),
        lambda: checkpoints.load(run, 0),
        lambda: runs.read_run_info(run),
    ):
        with pytest.raises(runs.DivergedRunError, match=f"{run} diverged at step {info['step']}"):
            read()
    # a normal run of the same shape finishes below the threshold, unmarked
    ok = tmp_path / "ok"
    summary = train(tiny_cfg(token_files), ok, progress=False)
    assert summary["final_train_loss"] < divergence_threshold(V)
    assert not (ok / runs.DIVERGED).exists()


# ----------------------------------------------------------------------------- cooldown branches


def _wsd(token_files, total: int, decay: int, **kw) -> TrainConfig:
    return tiny_cfg(
        token_files,
        schedule="wsd",
        total_steps=total,
        decay_steps=decay,
        warmup_steps=4,
        eval_interval=total,
        checkpoint_every=0,
        log_max=0,
        **kw,
    )


def _losses(run: Path) -> list[list[str]]:
    lines = (run / "metrics.csv").read_text().splitlines()[1:]
    return [r.split(",")[:5] for r in lines]  # everything but tokens/s


def test_a_cooldown_branch_ends_bitwise_as_the_run_trained_from_step_0(token_files, tmp_path):
    """A 16-step run branched at step 12 from a 32-step run (both warmup-stable-decay, one
    warmup) has the weights and metrics of the 16-step run trained from step 0; the longer run,
    stopped there and resumed, ends as it would have uninterrupted."""
    short, long = _wsd(token_files, 16, 4), _wsd(token_files, 32, 8)
    assert branch_problem(long.to_dict(), short, 12) is None
    train(short, tmp_path / "alone", progress=False)
    train(long, tmp_path / "long-alone", progress=False)
    out = train(long, tmp_path / "long", progress=False, max_steps=12, also_checkpoint=(12,))
    assert out["stopped_at"] == 12
    branched = train(
        short, tmp_path / "short", progress=False, branch=Branch(tmp_path / "long", 12)
    )
    train(long, tmp_path / "long", progress=False, also_checkpoint=(12,))
    for a, b, step in (("alone", "short", 16), ("long-alone", "long", 32)):
        wa, wb = weights(tmp_path / a / f"step-{step}"), weights(tmp_path / b / f"step-{step}")
        assert all(torch.equal(wa[k], wb[k]) for k in wa), f"{b} differs from {a}"
        assert _losses(tmp_path / a) == _losses(tmp_path / b)
    assert sorted(p.name for p in (tmp_path / "short").glob("step-*")) == [
        "step-0",
        "step-12",
        "step-16",
    ]
    assert (
        branched["final_val_loss"]
        == json.loads((tmp_path / "alone" / "run.json").read_text())["final_val_loss"]
    )


def test_a_branch_where_a_number_would_change_is_refused(token_files, tmp_path, capsys):
    """Another setting, a step past the shorter run's stable phase or outside it: refused
    (before the parent's state loads); a parent that no longer keeps the state of that
    checkpoint: trained from step 0 instead, with a note, to the same weights."""
    long, short = _wsd(token_files, 32, 8), _wsd(token_files, 16, 4)
    theirs = long.to_dict()
    assert "differ in ['lr']" in branch_problem(theirs, _wsd(token_files, 16, 4, lr=2e-2), 12)
    assert "differ in ['seed']" in branch_problem(theirs, _wsd(token_files, 16, 4, seed=1), 12)
    # the 16-step run decays from step 12 on: at step 13 it no longer has the longer run's rate
    assert "learning rates differ at step 13" in branch_problem(theirs, short, 14)
    assert "not inside both runs" in branch_problem(theirs, short, 16)
    train(long, tmp_path / "long", progress=False, max_steps=12, also_checkpoint=(12,))
    with pytest.raises(
        RunIdentityError, match=r"cannot branch from .*step-12.*differ in \['seed'\]"
    ):
        train(
            _wsd(token_files, 16, 4, seed=1),
            tmp_path / "other-seed",
            progress=False,
            branch=Branch(tmp_path / "long", 12),
        )
    (tmp_path / "long" / "step-12" / "train_state.pt").unlink()
    train(short, tmp_path / "short", progress=False, branch=Branch(tmp_path / "long", 12))
    assert (
        "keeps no resumable checkpoint at step 12: training from step 0" in capsys.readouterr().err
    )
    train(short, tmp_path / "alone", progress=False)
    wa, wb = weights(tmp_path / "alone" / "step-16"), weights(tmp_path / "short" / "step-16")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
