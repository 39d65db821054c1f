"""geolib.report.compute: the compute behind each chapter, from the run log and dvc.lock."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from geolib.report import compute

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ["started_utc", "stage", "exit", "wall_s", "cpu_s", "user_s", "system_s",
           "peak_rss_gib", "lanes", "ran"]  # fmt: skip

# data -> train -> {tables_a -> chapter a, tables_b -> chapter b}; theory -> chapter t; book
LOCK = {
    "schema": "2.0",
    "stages": {
        "data": {"deps": [{"path": "src/data.py"}], "outs": [{"path": "data/corpus"}]},
        "train": {
            "deps": [{"path": "data/corpus/train.bin"}],  # a file under data's output folder
            "outs": [{"path": "runs/model"}],
        },
        "tables_a": {"deps": [{"path": "runs"}], "outs": [{"path": "data/results/a"}]},
        "tables_b": {"deps": [{"path": "runs/model"}], "outs": [{"path": "data/results/b"}]},
        "a": {"deps": [{"path": "data/results/a"}], "outs": [{"path": "book/chapters/a.ipynb"}]},
        "b": {
            "deps": [{"path": "data/results/b/t.csv"}],
            "outs": [{"path": "book/chapters/b.ipynb"}, {"path": "figures/b"}],
        },
        "t": {"deps": [{"path": "src/theory.py"}], "outs": [{"path": "book/chapters/t.ipynb"}]},
        "book": {"deps": [{"path": "book/chapters"}], "outs": [{"path": "book/_build"}]},
    },
}


UPSTREAM = compute.upstream_stages(LOCK)
CHAPTERS = compute.chapter_stages(LOCK)


def row(stage, wall, cpu=None, started="2026-12-01T10:00:00Z", exit="0", ran="1", rss=0.5):
    cpu = wall if cpu is None else cpu
    return {"started_utc": started, "stage": stage, "exit": exit, "wall_s": str(wall),
            "cpu_s": str(cpu), "user_s": str(cpu), "system_s": "0", "peak_rss_gib": str(rss),
            "lanes": "2", "ran": ran}  # fmt: skip


def write_log(path: Path, rows: list[dict[str, str]], columns: list[str] = COLUMNS) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_the_latest_run_that_computed_counts_failed_and_skipped_runs_do_not(tmp_path):
    rows = [
        row("train", 100, started="2026-12-01T10:00:00Z"),
        row("train", 90, started="2026-12-02T10:00:00Z"),  # the latest that ran
        row("train", 3, started="2026-12-03T10:00:00Z", ran="0"),  # DVC skipped it
        row("train", 50, started="2026-12-04T10:00:00Z", exit="1"),  # failed
        row("data", 10, started="2026-12-01T10:00:00Z", ran=""),  # a log before `ran`: counts
        row("data", 12, started="2026-12-01T10:00:00Z"),  # a tie: the later row
    ]
    runs = compute.latest_runs(compute.read_run_log(write_log(tmp_path / "l.csv", rows)))
    assert sorted(runs) == ["data", "train"]
    assert runs["train"].wall_s == 90 and runs["train"].started_utc.startswith("2026-12-02")
    assert runs["data"].wall_s == 12


def test_a_log_from_before_the_ran_column_is_read(tmp_path):
    log = write_log(tmp_path / "l.csv", [row("data", 10)], COLUMNS[:-1])
    assert compute.latest_runs(compute.read_run_log(log))["data"].cpu_s == 10


def test_bad_logs_are_refused_with_the_line(tmp_path):
    assert compute.read_run_log(tmp_path / "none.csv") == []  # no log: nothing recorded
    with pytest.raises(ValueError, match="no columns"):
        compute.read_run_log(write_log(tmp_path / "a.csv", [], ["stage", "wall_s"]))
    bad = write_log(tmp_path / "b.csv", [row("data", 1), {**row("train", 1), "cpu_s": "x"}])
    with pytest.raises(ValueError, match="line 3"):
        compute.latest_runs(compute.read_run_log(bad))
    with pytest.raises(ValueError, match="negative"):
        compute.latest_runs([row("data", -1)])


def test_upstream_follows_outputs_into_deps_files_and_folders():
    up = compute.upstream_stages(LOCK)
    assert up["data"] == set()
    assert up["train"] == {"data"}  # a dep file under an output folder
    assert up["tables_a"] == {"train"}  # a dep folder holding an output
    assert up["b"] == {"tables_b"}
    assert up["book"] == {"a", "b", "t"}
    assert compute.closure(up, "b") == {"b", "tables_b", "train", "data"}
    assert compute.chapter_stages(LOCK) == {"a": "a", "b": "b", "t": "t"}
    with pytest.raises(ValueError, match="dvc.lock"):
        compute.upstream_stages({"schema": "2.0"})


def test_pipeline_stages_expand_foreach_from_params_and_filter_the_lock():
    dvc_yaml = {
        "stages": {
            "data": {"cmd": "x"},
            "train": {"foreach": "${runs.names}", "do": {"cmd": "t ${item}"}},
            "inline": {"foreach": ["p", "q"], "do": {"cmd": "i"}},
            "by_key": {"foreach": {"k1": {"a": 1}, "k2": {"a": 2}}, "do": {"cmd": "k"}},
        }
    }
    params = {"runs": {"names": ["s", "m"]}}
    want = {"data", "train@s", "train@m", "inline@p", "inline@q", "by_key@k1", "by_key@k2"}
    assert compute.pipeline_stages(dvc_yaml, params) == want
    with pytest.raises(ValueError, match="not in the params"):
        compute.pipeline_stages(dvc_yaml, {"runs": {}})
    with pytest.raises(ValueError, match="neither a list"):
        compute.pipeline_stages({"stages": {"x": {"foreach": "runs", "do": {}}}}, params)
    lock = {"schema": "2.0", "stages": {"data": {}, "train@s": {}, "train@old": {}}}
    kept = compute.pipeline_lock(lock, want)
    assert kept == {"schema": "2.0", "stages": {"data": {}, "train@s": {}}}
    assert lock["stages"].keys() == {"data", "train@s", "train@old"}  # not changed in place


def test_the_committed_pipeline_expands_as_dvc_lists_it():
    """The stage names against ``dvc stage list`` itself (DVC's own expansion)."""
    import subprocess
    import sys

    import yaml

    dvc = Path(sys.executable).parent / "dvc"
    out = subprocess.run(
        [str(dvc), "stage", "list", "--name-only"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    ours = compute.pipeline_stages(yaml.safe_load((ROOT / "dvc.yaml").read_text()), params)
    assert ours == set(out.stdout.split())


def test_chapter_sums_are_their_stages_sums_and_alone_excludes_the_shared_ones():
    walls = {"data": 10, "train": 200, "tables_a": 30, "tables_b": 40, "a": 15, "b": 16}
    runs = compute.latest_runs([row(s, w, cpu=w / 2, rss=w / 100) for s, w in walls.items()])
    a, b, t = compute.chapters_compute(UPSTREAM, CHAPTERS, runs, ["a", "b", "t"])
    assert a.needed.stages == ("a", "data", "tables_a", "train")
    assert a.needed.wall_s == 10 + 200 + 30 + 15 and a.needed.cpu_s == a.needed.wall_s / 2
    assert a.needed.peak_rss_gib == 2.0  # the largest single process: train's
    assert a.alone.stages == ("a", "tables_a") and a.alone.wall_s == 45
    assert b.alone.stages == ("b", "tables_b") and b.needed.wall_s == 10 + 200 + 40 + 16
    # t never ran: counted as missing, not as zero seconds hidden in a sum
    assert t.needed.missing == ("t",) and t.needed.recorded == 0
    with pytest.raises(ValueError, match="no stage of dvc.lock writes"):
        compute.chapters_compute(UPSTREAM, CHAPTERS, runs, ["a", "nope"])


def test_total_counts_each_stage_once_and_names_what_is_missing():
    runs = compute.latest_runs(
        [
            row("data", 10, started="2026-12-01T09:00:00Z"),
            row("train", 20, started="2026-12-03T08:00:00Z"),
        ]
    )
    c = compute.total(["train", "data", "train", "a"], runs)
    assert c.stages == ("a", "data", "train") and c.missing == ("a",) and c.recorded == 2
    assert c.wall_s == 30 and c.first_utc < c.last_utc and c.lanes == (2,)
    empty = compute.total([], runs)
    assert empty.wall_s == 0 and empty.recorded == 0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0 s"), (89.4, "89 s"), (90, "1.5 min"), (5399, "90.0 min"), (5400, "1.50 h")],
)
def test_durations_read_at_a_glance(seconds, text):
    assert compute.duration(seconds) == text


def test_the_sections_state_the_numbers_and_what_is_missing():
    walls = {"data": 10, "train": 6000, "tables_a": 30, "tables_b": 40, "a": 15, "b": 16}
    runs = compute.latest_runs([row(s, w, cpu=2 * w) for s, w in walls.items()])
    chapters = compute.chapters_compute(UPSTREAM, CHAPTERS, runs, ["a", "b", "t"])
    build = compute.total([s for s in LOCK["stages"] if s != "book"], runs)
    intro = compute.intro_markdown(chapters, build, "_data/compute.csv", {"a": "Chapter A"})
    assert f"**{compute.duration(2 * sum(walls.values()))} of CPU time**" in intro
    assert "1 of the 7 stages have no recorded run" in intro and "`t`" in intro
    # a: data + train + tables_a + a = 6,055 s wall (1.68 h), 12,110 s CPU; alone tables_a + a
    nb = "\u00a0"  # a cell's duration stays on one line
    want = f"| 4 | 1.68{nb}h | 3.36{nb}h | 2 | 45{nb}s | 1.5{nb}min |"
    assert f"| [Chapter A](chapters/a.ipynb) {want}" in intro
    assert "| [t](chapters/t.ipynb) | 0 of 1 | — | — | 0 of 1 | — | — |" in intro
    assert 'href="_data/compute.csv"' in intro
    text = compute.chapter_markdown(chapters[0], runs)
    assert (
        text.startswith("## Compute") and "**1.68 h of wall time and 3.36 h of CPU time**" in text
    )
    assert "2 serve this chapter alone" in text and "Longest: `train` 1.67 h" in text
    assert "no recorded run" not in text
    assert "not shown" in compute.chapter_markdown(chapters[2], runs)
    assert "not shown" in compute.intro_markdown(chapters, compute.total([], {}), "x", {})


def test_stage_rows_name_the_chapters_that_need_each_stage():
    runs = compute.latest_runs([row("train", 5)])
    up = compute.upstream_stages(LOCK)
    rows = {r["stage"]: r for r in compute.stage_rows(runs, up, compute.chapter_stages(LOCK))}
    assert rows["train"]["chapters"] == "a b" and rows["train"]["wall_s"] == 5
    assert rows["t"]["chapters"] == "t" and rows["t"]["wall_s"] == ""
    assert rows["book"]["chapters"] == ""


def test_the_book_extension_appends_the_section_to_chapter_notebooks_only(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "compute_sections", ROOT / "book" / "_ext" / "compute_sections.py"
    )
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    (tmp_path / "_generated").mkdir()
    sections = {"chapters/a": "## Compute\n\nA took 1 s."}
    (tmp_path / "_generated" / "compute.json").write_text(json.dumps({"chapters": sections}))
    suffix = {"chapters/a": ".ipynb", "chapters/b": ".ipynb", "intro": ".md"}
    env = SimpleNamespace(doc2path=lambda d: str(tmp_path / f"{d}{suffix[d]}"))
    app = SimpleNamespace(srcdir=str(tmp_path), env=env)
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# A"}], "nbformat": 4}
    source = [json.dumps(nb)]
    ext._append(app, "chapters/a", source)
    cells = json.loads(source[0])["cells"]
    assert [c["source"] for c in cells] == ["# A", sections["chapters/a"]]
    assert cells[-1]["id"] == "compute-section"  # nbformat 4.5 wants an id on every cell
    for doc, text in [("chapters/b", json.dumps(nb)), ("intro", "# Intro")]:
        source = [text]
        ext._append(app, doc, source)
        assert source == [text]  # no section for it: untouched
    (tmp_path / "_generated" / "compute.json").unlink()
    source = [json.dumps(nb)]
    ext._append(app, "chapters/a", source)  # built by hand, no compute file: untouched
    assert source == [json.dumps(nb)]
