"""The sweep's stages: progress from the measures folders."""

import json

import pytest

from geolib.experiments.sweep import status


def test_status_counts_measured_runs(tmp_path):
    names = ["a", "b", "c", "d"]
    for i, name in enumerate(names[:2]):
        (tmp_path / name).mkdir()
        timing = {"started": 1000.0 + 30 * i, "seconds": 25.0, "jobs": 1}
        (tmp_path / name / "measures.json").write_text(json.dumps({"timing": timing}))
    (tmp_path / "c").mkdir()  # started, not measured: not done
    s = status(tmp_path, names, now=1060.0)
    assert (s["done"], s["total"], s["elapsed_s"]) == (2, 4, 60.0)
    assert s["eta_s"] == pytest.approx(60.0 / 2 * 2)
    assert status(tmp_path, ["x"])["eta_s"] is None


@pytest.mark.parametrize("argv", [["measure"], ["measure", "S-b8", "--all"]])
def test_measure_takes_point_names_or_all(argv, capsys):
    from geolib.experiments.sweep import main

    with pytest.raises(SystemExit):
        main(argv)
    assert "point names or --all" in capsys.readouterr().err
