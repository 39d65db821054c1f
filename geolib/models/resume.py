"""Checkpoints and exact resume: what a run writes at each checkpoint, what makes a run *the
same run* (its configuration, its data and the training code), and restoring from the newest
intact checkpoint.

A run's identity is checked before anything is loaded. A run directory that holds another run
is refused with advice that keeps the work; given ``supersede_into`` (the pipeline's training
stages pass ``runs/.superseded``), it is moved there whole and training starts afresh. That is
what lets DVC keep training outputs between runs (``persist: true``): an interrupted
``dvc repro`` resumes, a changed configuration or training code retrains, and nothing is
deleted.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from geolib.files import sha256_file
from geolib.models import runs
from geolib.models.families import quiet_progress

if TYPE_CHECKING:
    from geolib.models.train_config import TrainConfig

#: the modules whose code computes a run's weights: a run trained by other code is another run.
#: The training stages in ``dvc.yaml`` list these files among their deps (a test checks it).
TRAINING_CODE = (
    "geolib.config",
    "geolib.data.tokens",
    "geolib.data.windows",
    "geolib.files",
    "geolib.models.branch",
    "geolib.models.device",
    "geolib.models.families",
    "geolib.models.resume",
    "geolib.models.runs",
    "geolib.models.train",
    "geolib.models.train_config",
)

#: configuration keys that say where and on how many threads a run computes, not what: a
#: finished run is the same run whatever they are now (nothing is computed again)
EXECUTION_KEYS = ("num_threads", "device")


def code_hashes() -> dict[str, str]:
    """SHA-256 of each file of :data:`TRAINING_CODE`, keyed by its path in the package
    (``geolib/models/train.py``)."""
    out = {}
    for name in TRAINING_CODE:
        path = Path(importlib.import_module(name).__file__)
        out["/".join(name.split(".")) + ".py"] = sha256_file(path)
    return out


def data_hashes(cfg: TrainConfig) -> dict[str, str]:
    """SHA-256 of the token files a run reads: a run is tied to its data, not to its paths."""
    files = {"train_tokens": cfg.train_tokens, "val_tokens": cfg.val_tokens}
    return {k: sha256_file(v) for k, v in files.items() if v is not None}


# ----------------------------------------------------------------------------- writing


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (disk full, most often); the run keeps its last good
    checkpoint and resumes from it once there is room."""


#: below this much free space, a failed write is reported as a full disk
LOW_SPACE_BYTES = 64 * 2**20


def save_checkpoint(run_dir: Path, model, step: int, info: dict, resume_state: dict) -> Path:
    """Write ``step-N`` (weights, ``trainer_state.json``, ``train_state.pt``, a manifest with
    the step) into ``step-N.tmp``, then rename it into place. A failed write (a full disk
    raises torch's ``enforce fail at inline_container.cc``, ``OSError`` or safetensors'
    ``SafetensorError``) removes the temporary folder and raises :class:`CheckpointWriteError`
    naming the step and the path; the checkpoints before it are untouched."""
    final = runs.step_dir(run_dir, step)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with quiet_progress():  # "Writing model shards" at every checkpoint is noise
            model.save_pretrained(tmp)
        (tmp / runs.TRAINER_STATE).write_text(json.dumps(info, indent=1) + "\n")
        torch.save(resume_state, tmp / runs.RESUME_STATE)
        runs.write_manifest(tmp, step)
    except Exception as exc:  # noqa: BLE001 - each writer has its own error type for a full disk
        shutil.rmtree(tmp, ignore_errors=True)
        free = shutil.disk_usage(run_dir).free
        what = "no space left" if free < LOW_SPACE_BYTES else "could not write the checkpoint"
        kept = runs.available_steps(run_dir)
        raise CheckpointWriteError(
            f"{what} while writing step {step} to {tmp} ({free / 2**20:.0f} MiB free; "
            f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}); the temporary folder "
            f"was removed, the last good checkpoint is step {kept[-1] if kept else 'none'}, "
            "and training resumes from it when rerun"
        ) from exc
    runs.publish_step(tmp, final)
    return final


def load_weights(model, directory: Path) -> None:
    """Load ``save_pretrained`` weights into ``model`` in place (through ``from_pretrained``,
    which undoes the key renaming ``transformers`` applies on save, e.g. ``embed_out``)."""
    with quiet_progress():
        loaded = type(model).from_pretrained(
            directory, attn_implementation="eager", dtype=torch.float32
        )
    model.load_state_dict(loaded.state_dict(), strict=True)


@dataclass
class Clock:
    """Seconds spent in training steps (``train_s``) and in all (``wall_s``), across resumes."""

    train_s: float = 0.0
    wall_s: float = 0.0
    since: float = field(default_factory=time.perf_counter)

    def lap(self) -> None:
        """Add the wall time since the last lap."""
        now = time.perf_counter()
        self.wall_s, self.since = self.wall_s + now - self.since, now


def resume_state(
    step: int,
    cfg: TrainConfig,
    optimizer,
    rng,
    clock: Clock,
    data: dict[str, str],
    code: dict[str, str],
) -> dict[str, Any]:
    """Everything besides the weights that an exact resume after ``step`` needs."""
    cuda = torch.device(cfg.device).type == "cuda"
    return {
        "step": step,
        "config": cfg.to_dict(),
        "data_sha256": data,
        "code_sha256": code,
        "optimizer": optimizer.state_dict(),
        "data_rng": rng.bit_generator.state,
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state(torch.device(cfg.device)) if cuda else None,
        "wall_s": clock.wall_s,
        "train_s": clock.train_s,
    }


# ----------------------------------------------------------------------------- identity


class ResumeError(RuntimeError):
    """A run directory cannot be resumed (the message says what to delete)."""


class RunIdentityError(ValueError):
    """A run directory holds another run (other configuration, data or training code)."""


def _differing(was: Mapping[str, Any] | None, now: Mapping[str, Any]) -> list[str]:
    """The keys whose values differ, over both mappings' keys (a key added since, with the
    value ``None``, is the same run)."""
    was = was or {}
    return sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k))


def _identity_advice(run_dir: Path, diff: list[str], was: dict, finished: bool) -> str:
    """The refusal of a run directory that holds another configuration, with advice that
    keeps the work in it."""
    kept = "It is left as it is (nothing was deleted)."
    if set(diff) <= set(EXECUTION_KEYS):
        started = ", ".join(f"{k}={was.get(k)!r}" for k in diff)
        how = "the same setting"
        if "num_threads" in diff:
            how += f" (GEOLIB_JOBS such that cores ÷ jobs = {was.get('num_threads')})"
        return (
            f"{run_dir} holds an unfinished run started with {started}: resume it with {how}, "
            f"so that it stays bitwise the run an uninterrupted one would be. {kept}"
        )
    state = "finished" if finished else "unfinished"
    return (
        f"{run_dir} holds a {state} run with another configuration (differs in {diff}). {kept} "
        f"To train this configuration, give it another run directory, or move this one aside "
        f"(mv {run_dir} {run_dir}.old, or --supersede-into DIR) and rerun"
    )


def identity_problem(
    run_dir: Path,
    state: Mapping[str, Any],
    cfg: TrainConfig,
    data: dict[str, str],
    code: dict[str, str],
    finished: bool,
) -> str | None:
    """Why the run recorded in ``state`` (a resume state, or a divergence record) is not the run
    of ``cfg`` on ``data`` by ``code``; ``None`` when it is."""
    diff = _differing(state.get("config"), cfg.to_dict())
    if diff and not (finished and set(diff) <= set(EXECUTION_KEYS)):
        return _identity_advice(run_dir, diff, dict(state.get("config") or {}), finished)
    changed = _differing(state.get("data_sha256"), data)
    if changed:
        return (
            f"{run_dir} was trained on other data: the content of {changed} "
            f"({', '.join(str(getattr(cfg, k, '?')) for k in changed)}) changed since the run "
            "began; use a fresh run directory (or --supersede-into DIR)"
        )
    if "code_sha256" not in state:
        return f"{run_dir} was trained by code older than the record of code hashes"
    edited = _differing(state["code_sha256"], code)
    if edited:
        return (
            f"{run_dir} was trained by other code: {edited} changed since; keep it as it is "
            "with the code it was trained by, or move it aside (--supersede-into DIR) to retrain"
        )
    return None


def _load_state(folder: Path) -> dict[str, Any]:
    """The resume state of a checkpoint, checked against its manifest and step (loaded onto
    the CPU whatever device wrote it; the optimizer moves it to its parameters' device)."""
    runs.verify_manifest(
        folder, [runs.RESUME_STATE, runs.WEIGHT_FILE, runs.CONFIG_FILE, runs.TRAINER_STATE]
    )
    runs.verify_step(folder, runs.folder_step(folder))
    try:
        return torch.load(folder / runs.RESUME_STATE, weights_only=True, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - any unreadable state is the same integrity fault
        raise runs.IntegrityError(f"{folder / runs.RESUME_STATE} cannot be read: {exc}") from exc


def superseded_reason(
    run_dir: Path, cfg: TrainConfig, data: dict[str, str], code: dict[str, str]
) -> str | None:
    """Why ``run_dir`` holds something other than a resumable or finished run of ``cfg``
    (another run, a diverged run of other settings, checkpoints none of which can resume);
    ``None`` for an empty folder or the same run."""
    diverged = run_dir / runs.DIVERGED
    if diverged.is_file():
        info = json.loads(diverged.read_text())
        return identity_problem(run_dir, info, cfg, data, code, finished=False)
    for folder in runs.resumable(run_dir):
        try:
            state = _load_state(folder)
        except runs.IntegrityError:
            continue
        finished = int(state["step"]) == cfg.total_steps
        return identity_problem(run_dir, state, cfg, data, code, finished)
    if runs.step_dirs(run_dir):
        return f"no checkpoint of {run_dir} can resume"
    return None


# ----------------------------------------------------------------------------- restoring


@dataclass
class Trainee:
    """What a checkpoint restores into: the model, its optimizer, the data RNG (the order of
    the training windows) and the clock."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    rng: np.random.Generator
    clock: Clock


def restore(
    folder: Path,
    cfg: TrainConfig,
    into: Trainee,
    data: dict[str, str],
    code: dict[str, str],
    *,
    check: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> int:
    """Load the checkpoint in ``folder`` into ``into`` (model, optimizer, data RNG, clock);
    return its step. Its files must match its manifest (:class:`runs.IntegrityError` otherwise); a
    checkpoint of another run is refused (:class:`RunIdentityError`) before anything loads.
    ``check`` (the checkpoint's state → a problem or ``None``) replaces that identity check where
    a run starts from another run's checkpoint (a cooldown branch)."""
    state = _load_state(folder)
    if check is None:
        finished = int(state["step"]) == cfg.total_steps
        problem = identity_problem(folder.parent, state, cfg, data, code, finished)
    else:
        problem = check(state)
    if problem:
        raise RunIdentityError(problem)
    load_weights(into.model, folder)
    into.optimizer.load_state_dict(state["optimizer"])
    into.rng.bit_generator.state = state["data_rng"]
    torch.set_rng_state(state["torch_rng"])
    device = torch.device(cfg.device)
    if device.type == "cuda" and state.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(state["cuda_rng"], device)
    into.clock.train_s, into.clock.wall_s = state["train_s"], state["wall_s"]
    return int(state["step"])


def resume(
    run_dir: Path, cfg: TrainConfig, into: Trainee, data: dict[str, str], code: dict[str, str]
) -> int | None:
    """Restore the newest intact resumable checkpoint of ``run_dir`` and return its step
    (``None`` for a fresh run). A damaged one is skipped with a note, and the checkpoints after
    the one used are removed (training recomputes them, bitwise the same); if none is intact,
    :class:`ResumeError` says what to delete."""
    candidates = runs.resumable(run_dir)
    problems = []
    for folder in candidates:
        try:
            step = restore(folder, cfg, into, data, code)
        except runs.IntegrityError as exc:
            problems.append(str(exc))
            print(f"cannot resume from {folder.name}: {exc}", file=sys.stderr)
            continue
        for later, path in runs.step_dirs(run_dir).items():
            if later > step:
                shutil.rmtree(path)
                print(f"removed {path.name} (after the checkpoint resumed from)", file=sys.stderr)
        if step < cfg.total_steps:
            print(f"resuming {run_dir} from step {step}", file=sys.stderr, flush=True)
        return step
    if candidates:
        raise ResumeError(
            f"no checkpoint of {run_dir} can resume: " + "; ".join(problems) + ". Training "
            f"is deterministic: delete the run directory (rm -r {run_dir}) to retrain it from "
            "step 0, which rewrites the same checkpoints (or pass --supersede-into DIR)"
        )
    return None
