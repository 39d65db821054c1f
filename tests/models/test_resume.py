"""Tests of geolib.models.resume: a run's identity (configuration, data, training code), moving
a superseded run aside, checkpoint-write failures, and an interrupted ``dvc repro`` of a
training stage resuming where it stopped."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors import SafetensorError
from safetensors.torch import load_file

from geolib.models import resume, runs
from geolib.models import train as train_mod
from geolib.models.train import train
from tests.models.test_train import tiny_cfg, token_files  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[2]


def test_code_hashes_cover_the_training_code_and_every_training_stage_depends_on_it():
    hashes = resume.code_hashes()
    assert sorted(hashes) == sorted(m.replace(".", "/") + ".py" for m in resume.TRAINING_CODE)
    assert all((ROOT / path).is_file() and len(h) == 64 for path, h in hashes.items())
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    trainers = {
        name: spec.get("do", spec)
        for name, spec in stages.items()
        if "--supersede-into" in spec.get("do", spec)["cmd"]
    }
    assert len(trainers) == 10  # the four default models, the warm-up alternative, five designs
    for name, spec in trainers.items():
        assert set(hashes) <= set(spec["deps"]), name
        out = spec["outs"][0]
        assert isinstance(out, dict) and next(iter(out.values()))["persist"] is True, name


def test_other_code_is_another_run(token_files, tmp_path, monkeypatch):  # noqa: F811
    """A finished run, then the training code changes: refused naming the file (nothing
    moved); with supersede_into the run is moved aside whole and trained afresh."""
    cfg = tiny_cfg(token_files)
    run, aside = tmp_path / "run", tmp_path / "aside"
    first = train(cfg, run, progress=False)
    assert first["code_sha256"] == resume.code_hashes()
    edited = {**resume.code_hashes(), "geolib/models/train.py": "0" * 64}
    monkeypatch.setattr(train_mod, "code_hashes", lambda: edited)
    with pytest.raises(resume.RunIdentityError, match=r"other code: \['geolib/models/train.py'\]"):
        train(cfg, run, progress=False)
    assert (run / runs.RUN_INFO).is_file() and not aside.exists()
    second = train(cfg, run, progress=False, supersede_into=aside)
    assert second["code_sha256"] == edited
    (moved,) = aside.iterdir()
    assert json.loads((moved / runs.RUN_INFO).read_text())["code_sha256"] == first["code_sha256"]
    assert sorted(p.name for p in moved.glob("step-*")) == sorted(
        p.name for p in run.glob("step-*")
    )
    w_old, w_new = (
        load_file(moved / "step-24" / runs.WEIGHT_FILE),
        load_file(run / "step-24" / runs.WEIGHT_FILE),
    )
    assert all(torch.equal(w_old[k], w_new[k]) for k in w_old)  # same code in truth: same bits
    # the same run again is left as it is (no second copy)
    assert train(cfg, run, progress=False, supersede_into=aside) == second
    assert len(list(aside.iterdir())) == 1


def test_another_configuration_is_moved_aside_only_when_asked(token_files, tmp_path):  # noqa: F811
    run, aside = tmp_path / "run", tmp_path / "aside"
    train(tiny_cfg(token_files), run, progress=False, max_steps=3)
    other = tiny_cfg(token_files, lr=5e-3)
    with pytest.raises(resume.RunIdentityError, match=r"another configuration.*\['lr'\]"):
        train(other, run, progress=False)
    summary = train(other, run, progress=False, supersede_into=aside)
    assert summary["config"]["lr"] == 5e-3
    (moved,) = aside.iterdir()
    assert moved.name.startswith(f"{tmp_path.name}.run-") and (moved / "step-0").is_dir()
    assert not (moved / runs.RUN_INFO).exists()  # the unfinished run, as it was


def test_a_diverged_run_is_refused_unless_another_run_replaces_it(token_files, tmp_path):  # noqa: F811
    cfg = tiny_cfg(token_files, lr=1000.0, warmup_steps=1, grad_clip=None)
    run, aside = tmp_path / "run", tmp_path / "aside"
    with pytest.raises(runs.DivergedRunError):
        train(cfg, run, progress=False)
    info = json.loads((run / runs.DIVERGED).read_text())
    assert info["config"] == cfg.to_dict() and info["code_sha256"] == resume.code_hashes()
    with pytest.raises(runs.DivergedRunError):  # the same settings would diverge again
        train(cfg, run, progress=False, supersede_into=aside)
    assert not aside.exists()
    summary = train(tiny_cfg(token_files), run, progress=False, supersede_into=aside)
    assert summary["final_step"] == 24 and not (run / runs.DIVERGED).exists()
    (moved,) = aside.iterdir()
    assert (moved / runs.DIVERGED).is_file()


def test_identity_compares_every_key_of_both_configurations(token_files, tmp_path):  # noqa: F811
    cfg = tiny_cfg(token_files)
    code, data = resume.code_hashes(), resume.data_hashes(cfg)
    state = {"config": cfg.to_dict(), "data_sha256": data, "code_sha256": code}
    assert resume.identity_problem(tmp_path, state, cfg, data, code, finished=False) is None
    older = {**state, "config": {k: v for k, v in cfg.to_dict().items() if k != "lr"}}
    assert "['lr']" in resume.identity_problem(tmp_path, older, cfg, data, code, False)
    added = {**state, "config": {**cfg.to_dict(), "retired_key": 1}}
    assert "['retired_key']" in resume.identity_problem(tmp_path, added, cfg, data, code, False)
    no_code = {k: v for k, v in state.items() if k != "code_sha256"}
    assert "older than" in resume.identity_problem(tmp_path, no_code, cfg, data, code, False)
    device = {**state, "config": {**cfg.to_dict(), "device": "cuda"}}
    advice = resume.identity_problem(tmp_path, device, cfg, data, code, finished=False)
    assert "device='cuda'" in advice and "GEOLIB_JOBS" not in advice
    assert resume.identity_problem(tmp_path, device, cfg, data, code, finished=True) is None
    threads = {**state, "config": {**cfg.to_dict(), "num_threads": 7}}
    assert "GEOLIB_JOBS" in resume.identity_problem(tmp_path, threads, cfg, data, code, False)


def test_set_aside_keeps_the_lock_and_never_overwrites(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / runs.LOCK).write_text("1\n")
    (run / "step-0").mkdir()
    (run / "metrics.csv").write_text("x\n")
    a = runs.set_aside(run, tmp_path / "aside")
    (run / "metrics.csv").write_text("y\n")
    b = runs.set_aside(run, tmp_path / "aside")
    assert a != b and a.parent == b.parent
    assert sorted(p.name for p in a.iterdir()) == ["metrics.csv", "step-0"]
    assert (a / "metrics.csv").read_text() == "x\n" and (b / "metrics.csv").read_text() == "y\n"
    assert [p.name for p in run.iterdir()] == [runs.LOCK]


def test_sole_writer_locks_the_file_that_is_there(tmp_path, monkeypatch):
    """The holder finishes (and unlinks its lock file) between our open and our flock: we
    must not hold a lock on the unlinked file while a third trainer locks a new one."""
    real = fcntl.flock
    calls = []

    def flock(fd, op):
        calls.append(fd)
        if len(calls) == 1:
            (tmp_path / runs.LOCK).unlink()
        return real(fd, op)

    monkeypatch.setattr(runs.fcntl, "flock", flock)
    with runs.sole_writer(tmp_path):
        assert len(calls) == 2  # retried on the file now at the path
        fd = os.open(tmp_path / runs.LOCK, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                real(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert not (tmp_path / runs.LOCK).exists()


def test_any_failed_weight_write_is_a_checkpoint_error(token_files, tmp_path, monkeypatch):  # noqa: F811
    """safetensors reports a full disk as its own SafetensorError (not an OSError)."""
    from transformers import PreTrainedModel

    def full(self, *a, **k):
        raise SafetensorError("Error while serializing: IoError(No space left on device)")

    cfg = tiny_cfg(token_files)
    train(cfg, tmp_path / "run", progress=False, max_steps=10)
    monkeypatch.setattr(PreTrainedModel, "save_pretrained", full)
    with pytest.raises(resume.CheckpointWriteError, match="step 20.*SafetensorError"):
        train(cfg, tmp_path / "run", progress=False)
    steps = sorted(runs.available_steps(tmp_path / "run"))
    assert steps[-1] == 10 and not list((tmp_path / "run").glob("*.tmp"))


def _dvc(*args: str, cwd: Path, env: dict, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, env=env, text=True, **kw)


def test_an_interrupted_dvc_repro_resumes_and_ends_bitwise_identical(token_files, tmp_path):  # noqa: F811
    """A training stage declared as in dvc.yaml (persist, --supersede-into), killed mid-run
    (SIGKILL to dvc and the trainer): the rerun resumes from the last checkpoint and ends with
    the weights of an uninterrupted run; then a changed parameter retrains, keeping the old
    run in runs/.superseded."""
    cfg = tiny_cfg(token_files, total_steps=120, checkpoint_every=20, log_max=1, num_threads=1)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "params.yaml").write_text(yaml.safe_dump({"run": cfg.to_dict()}))
    train_cmd = "python -m geolib.models.train --params params.yaml --section run --no-progress"
    stage = {
        "cmd": f"{train_cmd} --run-dir runs/r --supersede-into runs/.superseded",
        "params": ["run"],
        "outs": [{"runs/r": {"persist": True}}],
    }
    (repo / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"train": stage}}))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DVC_NO_ANALYTICS": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    _dvc("init", "--no-scm", "-q", cwd=repo, env=env, check=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dvc", "repro", "-q"], cwd=repo, env=env, start_new_session=True
    )
    deadline = time.time() + 120
    while not (repo / "runs/r/step-40").is_dir() and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (repo / "runs/r/step-40").is_dir() and not (repo / "runs/r/run.json").exists()

    again = _dvc("repro", cwd=repo, env=env, capture_output=True)
    assert again.returncode == 0, again.stderr
    resumed = [line for line in again.stderr.splitlines() if "resuming" in line]
    assert resumed and int(resumed[0].rsplit(" ", 1)[1]) >= 40, again.stderr
    subprocess.run(
        [sys.executable, *train_cmd.split()[1:], "--run-dir", "ref"], cwd=repo, env=env, check=True
    )
    wa = load_file(repo / "runs/r/step-120" / runs.WEIGHT_FILE)
    wb = load_file(repo / "ref/step-120" / runs.WEIGHT_FILE)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)

    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["run"]["lr"] = 5e-3
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    third = _dvc("repro", cwd=repo, env=env, capture_output=True)
    assert third.returncode == 0 and "moved to runs/.superseded" in third.stderr, third.stderr
    (moved,) = (repo / "runs/.superseded").iterdir()
    assert json.loads((moved / runs.RUN_INFO).read_text())["config"]["lr"] == cfg.lr
    assert json.loads((repo / "runs/r" / runs.RUN_INFO).read_text())["config"]["lr"] == 5e-3
