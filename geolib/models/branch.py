"""The cooldown branch: a run on the warmup-stable-decay schedule that starts from another run's
checkpoint inside both runs' stable phase, and ends bitwise as the run trained from step 0 would,
at the cost of its own steps after the branch point (the sweep's D runs from their 2D runs).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geolib.models import runs
from geolib.models.resume import Trainee, restore
from geolib.models.train_config import TrainConfig, lr_at

#: configuration keys a cooldown branch may set apart from the run it starts from: the run's
#: length and when it evaluates and checkpoints (everything else, threads and device included,
#: must match for the branch to end bitwise as the run trained from step 0)
BRANCH_KEYS = ("total_steps", "decay_steps", "eval_interval", "checkpoint_every", "log_max")


@dataclass(frozen=True)
class Branch:
    """Where a fresh run starts: the checkpoint at ``step`` of the run in ``parent`` (a run
    directory), the warmup-stable-decay schedule's cooldown branch. Allowed where it changes no
    number (:func:`branch_problem`): then both runs made the same updates on the same windows
    up to ``step``, and the branch ends bitwise as the run trained from step 0 would, at the
    cost of its steps after ``step`` only."""

    parent: Path
    step: int


def branch_problem(parent: Mapping[str, Any], cfg: TrainConfig, step: int) -> str | None:
    """Why a run of ``cfg`` cannot start at ``step`` from a run configured as ``parent`` (its
    :meth:`TrainConfig.to_dict`); ``None`` where it can: the configurations differ in
    :data:`BRANCH_KEYS` only, ``step`` lies inside both runs, and the learning rate is the same
    at every step up to it (a shared warmup and stable phase)."""
    now = cfg.to_dict()
    diff = sorted(
        k for k in set(parent) | set(now) if k not in BRANCH_KEYS and parent.get(k) != now.get(k)
    )
    if diff:
        return f"the configurations differ in {diff}, not only in {list(BRANCH_KEYS)}"
    theirs = TrainConfig(**{**parent, "model": dict(parent["model"])})
    if not 0 < step < min(cfg.total_steps, theirs.total_steps + 1):
        return (
            f"step {step} is not inside both runs (the branch trains {cfg.total_steps} steps, "
            f"the run it starts from {theirs.total_steps})"
        )
    for t in range(1, step + 1):
        if lr_at(t, theirs) != lr_at(t, cfg):
            return (
                f"the learning rates differ at step {t} ({lr_at(t, theirs):.6g} against "
                f"{lr_at(t, cfg):.6g}): a branch starts inside both runs' shared warmup and "
                "stable phase"
            )
    return None


def start_branch(
    branch: Branch, cfg: TrainConfig, into: Trainee, data: dict[str, str], code: dict[str, str]
) -> int:
    """Restore ``branch``'s checkpoint into ``into`` and return its step; 0 (train from step
    0: the same weights at the full cost) where the parent no longer keeps that checkpoint's
    resume state. A parent the branch cannot start from is refused (:class:`RunIdentityError`)."""
    folder = runs.step_dirs(branch.parent).get(branch.step)
    if folder is None or not (folder / runs.RESUME_STATE).is_file():
        print(
            f"{branch.parent} keeps no resumable checkpoint at step {branch.step}: training "
            "from step 0 instead (the same weights, at the full cost)",
            file=sys.stderr,
            flush=True,
        )
        return 0

    def check(state: Mapping[str, Any]) -> str | None:
        if state["data_sha256"] != data or state["code_sha256"] != code:
            why = "it was trained on other data or by other code"
        else:
            why = branch_problem(state["config"], cfg, branch.step)
        return f"cannot branch from {folder}: {why}" if why else None

    return restore(folder, cfg, into, data, code, check=check)
