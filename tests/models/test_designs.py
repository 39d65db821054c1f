"""geolib.models.designs: one command line for the training designs (named runs and the sweep's
cells: each design's names and its DVC stage), importing only the design asked for."""

from __future__ import annotations

import copy
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from geolib.config import load_params
from geolib.models import designs

ROOT = Path(__file__).resolve().parents[2]
PARAMS = load_params(ROOT / "params.yaml")
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def _names(capsys, tmp_path, design: str, params: dict) -> list[str]:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    assert designs.main([design, "--params", str(path), "names"]) == 0
    return capsys.readouterr().out.split()


def test_names_of_the_ladder(capsys, tmp_path):
    params = copy.deepcopy(PARAMS)
    params["scale"]["rungs"] = {"tiny": {"d_model": 8, "n_layers": 1, "n_heads": 1, "d_ff": 8}}
    params["scale"]["seeds"] = [4]
    params["scale"]["names"] = ["tiny", "tiny-s4"]
    assert _names(capsys, tmp_path, "ladder", params) == ["tiny", "tiny-s4"]


def test_names_of_the_replicates(capsys, tmp_path):
    params = copy.deepcopy(PARAMS)
    params["replicas"]["names"] = ["pythia-s5"]
    params["replicas"] |= {"models": ["pythia"], "seeds": [5], "seeds_of": {}}
    assert _names(capsys, tmp_path, "replicas", params) == ["pythia-s5"]


def test_names_of_the_training_length_study(capsys, tmp_path):
    params = copy.deepcopy(PARAMS)
    spec = params["training_length"]
    size = next(iter(spec["sizes"]))
    spec |= {"sizes": {size: spec["sizes"][size]}, "seeds": [7], "names": [f"{size}-s7"]}
    assert _names(capsys, tmp_path, "length", params) == [f"{size}-s7"]


def test_names_of_the_saturation_runs(capsys, tmp_path):
    params = copy.deepcopy(PARAMS)
    spec = params["saturation"]
    width = next(iter(spec["widths"]))
    spec |= {"widths": {width: spec["widths"][width]}, "seeds": [3]}
    spec["names"] = [f"{layout}-{width}-s3" for layout in spec["layouts"]]
    assert _names(capsys, tmp_path, "saturation", params) == spec["names"]


def test_names_of_the_sweep_are_its_cells(capsys, tmp_path):
    """The sweep's units are its cells (one size at one batch size), as its stages name them."""
    params = copy.deepcopy(PARAMS)
    assert _names(capsys, tmp_path, "sweep", params) == params["sweep"]["cells"]


def test_a_design_that_trains_its_units_gets_the_name_jobs_and_supersede_folder(tmp_path):
    """A ``trainer`` design (the sweep's cells): ``train NAME`` checks the device, then calls the
    trainer once with the parameters file, the name, ``--jobs`` and ``--supersede-into``."""
    calls = []
    module = types.ModuleType("fake_design", "A fake design.")
    module.listed = lambda params: ["c1", "c2"]
    module.trainer = lambda path, name, **kw: calls.append(
        (path, name, kw["jobs"], kw["supersede_into"])
    )
    design = designs.Design("fake_design", "cell", "fake_train", "listed", trainer="trainer")
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"common": {"device": "cpu"}}))
    argv = ["--params", str(path), "train", "c2", "--jobs", "3", "--supersede-into", "old"]
    assert designs._command("fake", design, module, argv) == 0
    assert calls == [(str(path), "c2", 3, "old")]


def test_a_design_of_named_runs_trains_the_run_its_build_gives(tmp_path, monkeypatch, capsys):
    """A ``build`` design (the ladder, the replicates, …): ``train NAME`` checks the device,
    builds the run's configuration and folder from the parameters file, and trains it with the
    one training loop and the supersede folder; it takes no ``--jobs``."""
    cfg = types.SimpleNamespace(total_steps=4, tokens_per_step=32)
    module = types.ModuleType("fake_runs", "Fake named runs.")
    module.listed = lambda params: ["r1"]
    module.build = lambda path, name: (cfg, tmp_path / name)
    calls = []
    monkeypatch.setattr(designs, "train", lambda c, d, **kw: calls.append((c, d, kw)))
    design = designs.Design("fake_runs", "run", "fake_train", "listed", "build")
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"common": {"device": "cpu"}}))
    argv = ["--params", str(path), "train", "r1", "--supersede-into", "old"]
    assert designs._command("fake", design, module, argv) == 0
    assert calls == [(cfg, tmp_path / "r1", {"progress": False, "supersede_into": "old"})]
    assert "r1: 4 steps, 128 tokens" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        designs._command("fake", design, module, [*argv, "--jobs", "2"])


def test_the_sweep_trains_a_cell_or_one_point_and_refuses_other_names(monkeypatch):
    """The sweep's trainer: a cell trains its points (stage ``sweep_train@CELL``), a point
    trains alone (a cluster job); any other name is refused with the cells named."""
    from geolib.models import grid

    done = []
    monkeypatch.setattr(grid, "_train_cell", lambda p, params, names, *a: done.append(names))
    monkeypatch.setattr(grid, "train_point", lambda p, name, **kw: done.append(("point", name)))
    path = ROOT / "params.yaml"
    cell, point = PARAMS["sweep"]["cells"][0], PARAMS["sweep"]["points"][-1]
    in_cell = [n for n in PARAMS["sweep"]["points"] if grid.Point.from_name(n).cell == cell]
    assert grid.train_unit(path, cell, log=lambda _: None) == in_cell
    assert grid.train_unit(path, point, log=lambda _: None) == [point]
    assert done == [in_cell, ("point", point)]
    with pytest.raises(KeyError, match="neither a cell nor a point"):
        grid.train_unit(path, "S-b4-s0", log=lambda _: None)


@pytest.mark.parametrize(("build", "trainer"), [(None, None), ("b", "t")])
def test_a_design_is_built_or_trained_by_itself_not_both(build, trainer):
    with pytest.raises(ValueError, match="give build or trainer"):
        designs.Design("m", "run", "s_train", "listed", build=build, trainer=trainer)


def test_names_must_match_the_stage_list(tmp_path):
    """The design's expansion is checked against the list DVC's ``foreach`` reads."""
    params = copy.deepcopy(PARAMS)
    params["replicas"]["names"] = ["pythia-s99"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ValueError, match="replicas.names must equal"):
        designs.main(["replicas", "--params", str(path), "names"])


@pytest.mark.parametrize("argv", [[], ["grid", "names"], ["--params", "p.yaml", "ladder"]])
def test_an_unknown_design_is_refused_with_the_designs_named(argv, capsys):
    assert designs.main(argv) == 2
    out = capsys.readouterr().err
    assert "DESIGN is one of ['ladder', 'length', 'replicas', 'saturation', 'sweep']" in out


def test_help_prints_every_design_and_its_stage(capsys):
    assert designs.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"``{d}``" in out and f"``{x.stage}``" in out for d, x in designs.DESIGNS.items())


@pytest.mark.parametrize("name", sorted(designs.DESIGNS))
def test_each_design_is_the_command_of_its_stage(name):
    """The stage a design names trains with this command line and that design; its module has
    the two functions the design names."""
    d = designs.DESIGNS[name]
    cmd = STAGES[d.stage]["do"]["cmd"]
    assert cmd.startswith(f"python -m geolib.models.designs {name} train ${{item}}")
    module = __import__(d.module, fromlist=["_"])
    assert callable(getattr(module, d.listed)) and callable(getattr(module, d.build or d.trainer))


def test_only_the_design_asked_for_is_imported():
    """A fresh interpreter: listing the replicates imports neither the ladder nor the length
    design (so that their edits retrain nothing of the replicates' stage)."""
    code = (
        "import sys; from geolib.models import designs; designs.main(['replicas', 'names']); "
        "print(sorted(m for m in sys.modules if m.startswith('geolib.models.')), file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = done.stderr.strip().splitlines()[-1]
    assert "geolib.models.replicas" in loaded
    others = ("geolib.models.ladder", "geolib.models.length", "geolib.models.grid")
    assert not [m for m in others if m in loaded]
