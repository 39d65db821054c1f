"""The run-directory layout: names, completeness, the resume rule, atomic writes, readers."""

import json
import os

import numpy as np
import pytest

from geolib.models import runs


def make_step(run_dir, step, *, complete=True, resumable=False):
    folder = runs.step_dir(run_dir, step)
    folder.mkdir(parents=True)
    (folder / runs.CONFIG_FILE).write_text("{}")
    if complete:
        (folder / runs.WEIGHT_FILE).write_bytes(b"w")
    if resumable:
        (folder / runs.RESUME_STATE).write_bytes(b"s")
    return folder


def test_steps_sorted_numerically_and_only_complete_ones_available(tmp_path):
    for step in (10, 2, 0, 128):
        make_step(tmp_path, step)
    make_step(tmp_path, 64, complete=False)
    (tmp_path / "step-x").mkdir()
    (tmp_path / "step-5.tmp").mkdir()
    (tmp_path / "step-7").write_text("a file, not a checkpoint")
    assert list(runs.step_dirs(tmp_path)) == [0, 2, 10, 64, 128]
    assert runs.available_steps(tmp_path) == [0, 2, 10, 128]
    assert runs.available_steps(tmp_path / "missing") == []
    assert runs.is_run_dir(tmp_path) and not runs.is_run_dir(tmp_path / "missing")


def test_latest_resumable_is_the_last_step_with_state(tmp_path):
    assert runs.latest_resumable(tmp_path) is None
    make_step(tmp_path, 4, resumable=True)
    make_step(tmp_path, 16, resumable=True)
    make_step(tmp_path, 32)
    assert runs.latest_resumable(tmp_path) == tmp_path / "step-16"


def test_publish_step_keeps_two_resume_states_and_replaces_a_stale_folder(tmp_path):
    make_step(tmp_path, 2, resumable=True)
    runs.write_manifest(tmp_path / "step-2")
    make_step(tmp_path, 4, resumable=True)
    make_step(tmp_path, 8)  # an older, state-less copy of step 8 to be replaced
    tmp = tmp_path / "step-8.tmp"
    tmp.mkdir()
    (tmp / runs.RESUME_STATE).write_bytes(b"new")
    (tmp / runs.WEIGHT_FILE).write_bytes(b"w8")
    runs.publish_step(tmp, tmp_path / "step-8")
    assert not tmp.exists()
    assert (tmp_path / "step-8" / runs.RESUME_STATE).read_bytes() == b"new"
    assert (tmp_path / "step-4" / runs.RESUME_STATE).exists()  # the fallback is kept
    assert not (tmp_path / "step-2" / runs.RESUME_STATE).exists()  # older states are not
    assert runs.RESUME_STATE not in runs.read_manifest(tmp_path / "step-2")
    assert not (tmp_path / "step-8" / runs.CONFIG_FILE).exists(), "the old folder is replaced"
    assert runs.resumable(tmp_path) == [tmp_path / "step-8", tmp_path / "step-4"]


def test_manifest_proves_the_files(tmp_path):
    folder = make_step(tmp_path, 3, resumable=True)
    with pytest.raises(runs.IntegrityError, match="manifest.json is missing"):
        runs.verify_manifest(folder, [runs.WEIGHT_FILE])
    runs.write_manifest(folder)
    names = [runs.WEIGHT_FILE, runs.CONFIG_FILE, runs.RESUME_STATE]
    runs.verify_manifest(folder, names)  # as written
    (folder / runs.WEIGHT_FILE).write_bytes(b"W")  # same size, one byte changed
    with pytest.raises(runs.IntegrityError, match="model.safetensors: content changed"):
        runs.verify_manifest(folder, names)
    (folder / runs.WEIGHT_FILE).unlink()
    with pytest.raises(runs.IntegrityError, match="model.safetensors is missing"):
        runs.verify_manifest(folder, names)
    with pytest.raises(runs.IntegrityError, match="not in"):
        runs.verify_manifest(folder, ["other.bin"])
    (folder / runs.MANIFEST).write_text("[1, 2]")
    with pytest.raises(runs.IntegrityError, match="not a manifest"):
        runs.verify_manifest(folder, names)


def test_manifest_command_seals_old_runs(tmp_path):
    make_step(tmp_path, 1)
    make_step(tmp_path, 2)
    assert runs.main(["manifest", str(tmp_path)]) == 0
    for step in (1, 2):
        runs.verify_manifest(tmp_path / f"step-{step}", [runs.WEIGHT_FILE, runs.CONFIG_FILE])


def test_incomplete_last_metrics_row_is_dropped(tmp_path, capsys):
    rows = [
        {"step": s, "tokens": 8 * s, "loss": "1", "lr": "0.1", "val_loss": "", "tokens_per_s": "9"}
        for s in range(3)
    ]
    runs.write_metrics(tmp_path, rows)
    path = tmp_path / runs.METRICS
    path.write_text(path.read_text() + "3,24,0.9")  # a row a kill cut short
    assert [r["step"] for r in runs.metric_rows(tmp_path)] == ["0", "1", "2"]
    assert "dropped the incomplete last row (line 5)" in capsys.readouterr().err
    path.write_text(path.read_text().replace("1,8,1,0.1,,9", "1,8,1"))  # inside: an error
    with pytest.raises(ValueError, match="line 3 is incomplete"):
        runs.metric_rows(tmp_path)
    runs.write_metrics(tmp_path, [rows[0], rows[2], rows[1]])
    with pytest.raises(ValueError, match="step 1 does not increase"):
        runs.metric_rows(tmp_path)


def test_remove_partial(tmp_path):
    (tmp_path / "step-3.tmp").mkdir()
    make_step(tmp_path, 2)
    assert runs.remove_partial(tmp_path) == [tmp_path / "step-3.tmp"]
    assert [p.name for p in tmp_path.iterdir()] == ["step-2"]


def test_step_dir_rejects_negative_steps(tmp_path):
    with pytest.raises(ValueError, match="non-negative"):
        runs.step_dir(tmp_path, -1)


def test_metrics_round_trip_and_truncation(tmp_path):
    rows = [
        {"step": 0, "tokens": 0, "loss": "", "lr": "", "val_loss": "7.5", "tokens_per_s": ""},
        {
            "step": 1,
            "tokens": 8,
            "loss": "7.25",
            "lr": "0.001",
            "val_loss": "",
            "tokens_per_s": "9",
        },
        {"step": 2, "tokens": 16, "loss": "7", "lr": "0.002", "val_loss": "", "tokens_per_s": "9"},
    ]
    runs.write_metrics(tmp_path, rows)
    assert [r["step"] for r in runs.metric_rows(tmp_path, upto=1)] == ["0", "1"]
    assert runs.metric_rows(tmp_path)[1]["loss"] == "7.25"
    table = runs.read_metrics(tmp_path)
    assert list(table.columns) == list(runs.METRIC_COLUMNS)
    assert np.isnan(table["loss"].iloc[0]) and table["val_loss"].iloc[0] == 7.5
    assert not list(tmp_path.glob(".*.tmp")), "no temporary file left behind"
    assert runs.format_metric(None) == "" and runs.format_metric(1 / 3) == "0.333333"


def test_metric_readers_on_missing_and_foreign_files(tmp_path):
    assert runs.metric_rows(tmp_path) == []
    with pytest.raises(FileNotFoundError, match="no metrics.csv"):
        runs.read_metrics(tmp_path)
    (tmp_path / runs.METRICS).write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="columns"):
        runs.metric_rows(tmp_path)


def test_run_info(tmp_path):
    with pytest.raises(FileNotFoundError, match="has not finished"):
        runs.read_run_info(tmp_path)
    runs.write_run_info(tmp_path, {"params": 3})
    assert runs.read_run_info(tmp_path) == {"params": 3}
    (tmp_path / runs.RUN_INFO).write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="JSON object"):
        runs.read_run_info(tmp_path)


def test_sole_writer_refuses_a_second_writer_and_leaves_no_lock(tmp_path):
    from geolib.models.runs import LOCK, RunLockedError, sole_writer

    with sole_writer(tmp_path):
        assert (tmp_path / LOCK).read_text().strip() == str(os.getpid())
        with pytest.raises(
            RunLockedError, match=rf"{tmp_path} is being written .*pid {os.getpid()}"
        ):
            with sole_writer(tmp_path):
                pass
    assert not (tmp_path / LOCK).exists()
    with sole_writer(tmp_path):  # free again
        pass


def test_verify_folder_catches_added_removed_and_edited_files(tmp_path):
    from geolib.models.runs import IntegrityError, verify_folder, write_manifest

    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "b.txt").write_text("b")
    write_manifest(tmp_path)
    verify_folder(tmp_path)
    (tmp_path / "c.txt").write_text("new")
    with pytest.raises(IntegrityError, match=r"\['c.txt'\] are not in its manifest"):
        verify_folder(tmp_path)
    (tmp_path / "c.txt").unlink()
    (tmp_path / "b.txt").write_text("B")
    with pytest.raises(IntegrityError, match="b.txt: content changed"):
        verify_folder(tmp_path)
    (tmp_path / "b.txt").unlink()
    with pytest.raises(IntegrityError, match="b.txt is missing"):
        verify_folder(tmp_path)


def test_verify_step_reads_manifest_and_trainer_state(tmp_path):
    import json

    from geolib.models.runs import IntegrityError, verify_step, write_manifest

    folder = tmp_path / "step-4"
    folder.mkdir()
    (folder / "trainer_state.json").write_text(json.dumps({"step": 4}))
    write_manifest(folder)
    with pytest.raises(IntegrityError, match="records no step"):
        verify_step(folder, 4)
    write_manifest(folder, 4)
    verify_step(folder, 4)
    with pytest.raises(IntegrityError, match="holds step 4 .* not 5: .* swapped"):
        verify_step(folder, 5)
