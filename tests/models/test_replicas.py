"""Paper A's seed replicates: names, configurations that differ from the default run in the seed
only, the grouping analysis stages decide claims by, and the lists in params and profiles."""

import copy
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from geolib.config import apply_profile, load_params
from geolib.models import replicas, runs
from geolib.models.train import params_to_config

ROOT = Path(__file__).resolve().parents[2]
PARAMS = load_params(ROOT / "params.yaml")
#: the analysis sections whose verdicts are decided per seed
PER_SEED_SECTIONS = ("gradient_energy", "residual_isotropy", "frequency_collapse")


def test_names_are_models_by_seeds():
    section = {"models": ["pythia", "olmo_sgd"], "seeds": [3, 1]}
    assert replicas.names(section) == ["pythia-s3", "pythia-s1", "olmo_sgd-s3", "olmo_sgd-s1"]
    assert [replicas.parse(n) for n in replicas.names(section)][-1] == ("olmo_sgd", 1)


@pytest.mark.parametrize(
    "section",
    [
        {"models": ["pythia"], "seeds": [0, 1]},  # seed 0 is the default run itself
        {"models": ["pythia"], "seeds": [1, 1]},
        {"models": ["pythia", "pythia"], "seeds": [1]},
        {"models": ["pythia"], "seeds": [1.5]},  # not truncated to 1: refused
        {"models": ["pythia"], "seeds": 1},
    ],
)
def test_bad_sections_are_refused(section):
    with pytest.raises(ValueError, match="replicas"):
        replicas.names(section)


@pytest.mark.parametrize("bad", ["pythia", "pythia-1", "Pythia-s1", "pythia-s1x", "-s1"])
def test_bad_names_are_refused(bad):
    with pytest.raises(ValueError, match="pythia-s1"):
        replicas.parse(bad)


def test_listed_names_must_equal_the_design():
    params = copy.deepcopy(PARAMS)
    assert replicas.check_listed(params) == params["replicas"]["names"]
    params["replicas"]["names"] = params["replicas"]["names"][:-1]
    with pytest.raises(ValueError, match="replicas.names must equal"):
        replicas.check_listed(params)


@pytest.mark.parametrize("profile", [None, "smoke"])
def test_every_replicate_is_listed_and_analysed(profile):
    """The DVC list equals the design, and each per-seed analysis reads the replicates of every
    default run it reads."""
    params = PARAMS
    if profile:
        params = apply_profile(PARAMS, load_params(ROOT / f"profiles/{profile}.yaml"))
    root = params["replicas"]["run_root"]
    names = replicas.check_listed(params)
    for section in [*PER_SEED_SECTIONS, "training"]:
        listed = params[section]["runs"] + params[section].get("replicas", [])
        defaults = [Path(r).name for r in params[section]["runs"]]
        want = [f"{root}/{n}" for n in names if replicas.parse(n)[0] in defaults]
        assert want and set(want) <= set(listed), section


def test_replica_differs_from_the_default_run_in_the_seed_only():
    cfg, run_dir = replicas.replica(ROOT / "params.yaml", "olmo-s2")
    default = params_to_config(ROOT / "params.yaml", "train_olmo", base="train")
    assert run_dir == Path("runs/replicas/olmo-s2")
    assert cfg.seed == 2 and default.seed == PARAMS["common"]["seed"] == 0
    mine, theirs = asdict(cfg), asdict(default)
    assert {k for k in mine if mine[k] != theirs[k]} == {"seed"}
    with pytest.raises(ValueError, match="not a replicate"):
        replicas.replica(ROOT / "params.yaml", "olmo-s9")


def _run(path: Path, family: str, seed: int) -> str:
    path.mkdir(parents=True)
    info = {"config": {"seed": seed, "model": {"family": family}}, "params": 1000 + seed}
    runs.write_run_info(path, {**info, "tokens": 4096})
    return str(path)


def test_per_seed_groups_runs_by_their_recorded_seed(tmp_path):
    a0, b0 = _run(tmp_path / "a", "pythia", 0), _run(tmp_path / "b", "bert", 0)
    a1 = _run(tmp_path / "x" / "whatever", "pythia", 1)  # the folder name says nothing
    seen = []
    out = replicas.per_seed([a0, a1, b0, "org/hub-model"], lambda rs: seen.append(rs) or len(rs))
    assert out["runs"][a1] == {"family": "pythia", "seed": 1, "params": 1001, "tokens": 4096}
    hub = {"family": "org/hub-model", "seed": None, "params": None, "tokens": None}
    assert out["runs"]["org/hub-model"] == hub
    assert out["by_seed"] == {"0": 2, "1": 1, "None": 1}
    assert seen[0] == [a0, b0]  # listed order kept
    one = replicas.per_seed([a0, b0], len)
    assert "by_seed" not in one  # one seed: nothing to decide per seed


def test_names_command_prints_the_design(capsys, tmp_path):
    params = copy.deepcopy(PARAMS)
    params["replicas"]["names"] = ["pythia-s5"]
    params["replicas"] |= {"models": ["pythia"], "seeds": [5]}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    assert replicas.main(["--params", str(path), "names"]) == 0
    assert capsys.readouterr().out.split() == ["pythia-s5"]
