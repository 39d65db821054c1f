"""geolib.report.outputs: a chapter run's record (stage, parameters after overrides, commit,
inputs, versions, command), figure records, and the check that finds missing, altered and
stale figures."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from geolib.files import sha256_file
from geolib.report import outputs as pv


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A tiny repository: params.yaml, dvc.yaml with one notebook stage, one input, a commit."""
    (tmp_path / "params.yaml").write_text(
        yaml.safe_dump({"common": {"seed": 0}, "demo": {"n": 3}, "other": {"k": [1, 2]}})
    )
    stages = {
        "demo": {
            "cmd": "python scripts/run_notebook.py demo",
            "deps": ["data/in.csv", "data/folder"],
            "params": ["common", "demo", "other"],
        }
    }
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    (tmp_path / "data" / "folder").mkdir(parents=True)
    (tmp_path / "data" / "in.csv").write_text("a\n1\n")
    (tmp_path / "data" / "folder" / "x.txt").write_text("x")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_stage_record_holds_what_made_the_chapter(repo):
    r = pv.stage_record("demo", "params.yaml", {"n": 5})
    assert r["params"] == {"demo": {"seed": 0, "n": 5}, "other": {"k": [1, 2]}}
    assert r["params_sha256"] == pv.params_hash(r["params"])
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert r["git"] == {"commit": head.strip(), "dirty": False, "changed": [], "n_changed": 0}
    assert r["inputs"]["data/in.csv"] == sha256_file("data/in.csv")
    assert len(r["inputs"]["data/folder"]) == 64
    assert r["versions"]["numpy"] and r["date"]
    assert r["reproduce"] == """python scripts/run_notebook.py demo -y '{"n": 5}'"""
    assert pv.stage_record("demo", "params.yaml")["reproduce"] == "dvc repro demo"
    (repo / "data" / "folder" / "x.txt").write_text("y")  # an input changed: its hash, dirty
    r2 = pv.stage_record("demo", "params.yaml", {"n": 5})
    assert r2["inputs"]["data/folder"] != r["inputs"]["data/folder"] and r2["git"]["dirty"]


def test_check_finds_missing_altered_and_stale_figures(repo):
    figs = repo / "figures" / "demo"
    pv.write_stage_record(figs, pv.stage_record("demo", "params.yaml"))
    for name in ("a", "b"):
        (figs / f"{name}.png").write_bytes(b"png " + name.encode())
        (figs / f"{name}.svg").write_text("<svg/>")
    pv.record_figure(figs / "a", [figs / "a.png", figs / "a.svg"])
    pv.record_figure(figs / "b", [figs / "b.png", figs / "b.svg"])
    assert pv.check(repo / "figures", "params.yaml") == []
    (figs / "c.png").write_bytes(b"c")  # a figure saved without provenance
    (figs / "b.png").write_bytes(b"changed")  # a figure changed after it was recorded
    problems = pv.check(repo / "figures", "params.yaml")
    assert any("c.png: no provenance record" in p for p in problems)
    assert any("b.png: not the file" in p for p in problems)
    (figs / "c.png").unlink()
    (figs / "b.png").write_bytes(b"png b")
    assert pv.check(repo / "figures", "params.yaml") == []
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["other"]["k"] = [1, 2, 3]  # another section the stage reads changed: stale
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    problems = pv.check(repo / "figures", "params.yaml")
    assert len(problems) == 2 and all("stale" in p and "'other'" in p for p in problems)
    assert pv.main(["check", str(repo / "figures"), "--params", "params.yaml"]) == 1


def test_record_figure_needs_the_stage_record(tmp_path):
    with pytest.raises(FileNotFoundError, match="stage_outputs"):
        pv.record_figure(tmp_path / "fig", [])


def test_stage_outputs_writes_the_stage_record(repo):
    from geolib.report.outputs import stage_outputs

    out = stage_outputs("demo", {}, params_path="params.yaml")
    record = json.loads((out.figures / pv.STAGE_RECORD).read_text())
    assert record["stage"] == "demo" and record["params"]["demo"]["n"] == 3
    ex = stage_outputs("demo", {"n": 4}, params_path="params.yaml")
    assert ex.exploring
    assert json.loads((ex.figures / pv.STAGE_RECORD).read_text())["overrides"] == {"n": 4}


def test_caption_is_one_quiet_line_and_a_command():
    html = pv.caption_html(
        {"stage": "s", "params_sha256": "12345678", "git": {"commit": "abcdef0123"},
         "overrides": {}, "reproduce": "dvc repro s"}
    )  # fmt: skip
    assert "stage <code>s</code> · commit <code>abcdef0</code> · params <code>12345678" in html
    assert "<summary><small>reproduce</small></summary><pre>dvc repro s</pre>" in html


def test_the_lock_file_a_run_rewrites_is_not_dirty_code_is_and_is_named(repo):
    """During `make all` DVC rewrites and stages dvc.lock after every stage: a chapter built
    from a committed tree must still say its commit, clean. Changed code is dirty, and the
    provenance line names the files."""
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    (repo / "dvc.lock").write_text("schema: '2.0'\n")
    (repo / "code.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "dvc.lock", "code.py"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "lock"], cwd=repo, check=True)
    (repo / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    subprocess.run([*git, "add", "dvc.lock"], cwd=repo, check=True)  # DVC's autostage
    (repo / "figures").mkdir()
    (repo / "figures" / ".gitignore").write_text("/new_stage\n")  # DVC lists a new output
    assert pv.git_state(repo) == {
        "commit": pv.git_state(repo)["commit"],
        "dirty": False,
        "changed": [],
        "n_changed": 0,
    }
    (repo / "code.py").write_text("x = 2\n")
    for i in range(4):
        (repo / f"new{i}.py").write_text("")
    state = pv.git_state(repo)
    assert state["dirty"] and state["changed"][0] == "code.py" and len(state["changed"]) == 5
    record = {"stage": "s", "params_sha256": "1", "git": state, "reproduce": "dvc repro s"}
    line = pv.caption_html(record)
    assert f"{state['commit'][:7]} + uncommitted changes to code.py, new0.py, new1.py" in line
    assert "and 2 more</code>" in line
    for i in range(4, 30):  # more than the 20 paths a record keeps: the count stays true
        (repo / f"new{i}.py").write_text("")
    state = pv.git_state(repo)
    assert len(state["changed"]) == 20 and state["n_changed"] == 31
    assert "and 28 more</code>" in pv.caption_html({**record, "git": state})


def test_another_parameters_file_is_an_exploration_with_its_own_command(tmp_path):
    from geolib.report.outputs import reproduce_command

    assert reproduce_command("corpus", {}) == "dvc repro corpus"
    assert reproduce_command("corpus", {}, "params.yaml") == "dvc repro corpus"
    other = tmp_path / "other.yaml"
    assert reproduce_command("corpus", {}, other) == (
        f"python scripts/run_notebook.py corpus --params {other}"
    )
    assert reproduce_command("corpus", {"a": 1}, other) == (
        f"python scripts/run_notebook.py corpus --params {other} -y '{{\"a\": 1}}'"
    )
