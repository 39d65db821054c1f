"""The sweep's stages: progress from the measures folders."""

import json
import os

import pytest

from geolib.experiments.sweep import status


def test_status_counts_measured_runs_and_paces_them_by_their_files_times(tmp_path):
    names = ["a", "b", "c", "d", "e"]
    for i, name in enumerate(names[:3]):  # measured at 1000, 1030, 1060
        (tmp_path / name).mkdir()
        path = tmp_path / name / "measures.json"
        path.write_text(json.dumps({"timing": {"train_seconds": 5.0}}))
        os.utime(path, (1000.0 + 30 * i, 1000.0 + 30 * i))
    (tmp_path / "d").mkdir()  # started, not measured: not done
    s = status(tmp_path, names, now=1100.0)
    assert (s["done"], s["total"], s["elapsed_s"]) == (3, 5, 100.0)
    assert s["eta_s"] == pytest.approx(30.0 * 2)  # 30 s a point, two to go
    assert status(tmp_path, ["a", "x"])["eta_s"] is None  # one measured: no pace yet
    assert status(tmp_path, ["x"]) == {"done": 0, "total": 1, "elapsed_s": 0.0, "eta_s": None}


@pytest.mark.parametrize("argv", [["measure"], ["measure", "S-b8", "--all"]])
def test_measure_takes_point_names_or_all(argv, capsys):
    from geolib.experiments.sweep import main

    with pytest.raises(SystemExit):
        main(argv)
    assert "point names or --all" in capsys.readouterr().err
