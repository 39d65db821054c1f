"""Paper A's seed replicates: names, configurations that differ from the default run in the seed
only, the grouping analysis stages decide claims by, and the lists in params and profiles."""

import copy
import json
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from geolib.config import apply_profile, load_params
from geolib.models import replicas, runs
from geolib.models.train_config import params_to_config

ROOT = Path(__file__).resolve().parents[2]
PARAMS = load_params(ROOT / "params.yaml")
#: the analysis sections whose verdicts are decided per seed
PER_SEED_SECTIONS = ("gradient_energy", "residual_isotropy", "frequency_collapse")


def test_names_are_models_by_seeds():
    section = {"models": ["pythia", "olmo_sgd"], "seeds": [3, 1]}
    assert replicas.names(section) == ["pythia-s3", "pythia-s1", "olmo_sgd-s3", "olmo_sgd-s1"]
    assert [replicas.parse(n) for n in replicas.names(section)][-1] == ("olmo_sgd", 1)
    own = section | {"seeds_of": {"olmo_sgd": [7]}}
    want = ["pythia-s3", "pythia-s1", "olmo_sgd-s7"]
    assert replicas.names(own, {"pythia": 0, "olmo_sgd": 3}) == want


def test_a_models_default_seed_is_its_sections():
    params = {
        "common": {"seed": 0},
        "train_pythia": {"seed": 3},
        "train_olmo": {},
        "replicas": {"models": ["pythia", "olmo"], "seeds": [0, 4]},
    }
    assert replicas.default_seeds(params) == {"pythia": 3, "olmo": 0}
    with pytest.raises(ValueError, match="default seed 0"):  # olmo's default run is seed 0
        replicas.names(params["replicas"], replicas.default_seeds(params))
    params["replicas"]["seeds_of"] = {"olmo": [4]}
    assert replicas.names(params["replicas"], replicas.default_seeds(params)) == [
        "pythia-s0", "pythia-s4", "olmo-s4"
    ]  # fmt: skip


@pytest.mark.parametrize(
    "section",
    [
        {"models": ["pythia"], "seeds": [0, 1]},  # seed 0 is the default run itself
        {"models": ["pythia"], "seeds": [1, 1]},
        {"models": ["pythia", "pythia"], "seeds": [1]},
        {"models": ["pythia"], "seeds": [1.5]},  # not truncated to 1: refused
        {"models": ["pythia"], "seeds": 1},
        {"models": ["pythia"], "seeds": [1], "seeds_of": {"olmo": [2]}},  # not a replicated model
        {"models": ["pythia"], "seeds": [1], "seeds_of": {"pythia": [2, 2]}},
        {"models": ["pythia"], "seeds": [1], "seeds_of": [2]},
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
    cfg, run_dir = replicas.replica(ROOT / "params.yaml", "olmo-s5")
    default = params_to_config(ROOT / "params.yaml", "train_olmo", base="train")
    assert run_dir == Path("runs/replicas/olmo-s5")
    assert cfg.seed == 5 and default.seed == PARAMS["train_olmo"]["seed"] == 3
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


@pytest.mark.parametrize("profile", [None, "smoke"])
def test_the_warmup_alternative_differs_from_olmo_in_its_warmup_only(profile):
    """A7's alternative is olmo with a longer warm-up and nothing else; the chapter's declared
    shift and tolerance are those of the trained configurations."""
    params = PARAMS
    if profile:
        params = apply_profile(PARAMS, load_params(ROOT / f"profiles/{profile}.yaml"))
    path = ROOT / "params.yaml"
    if profile:
        path = Path(pytest.importorskip("tempfile").mkdtemp()) / "params.yaml"
        path.write_text(yaml.safe_dump(params))
    olmo = asdict(params_to_config(path, "train_olmo", base="train"))
    longer = asdict(params_to_config(path, "train_olmo_warmup2", base="train"))
    assert {k for k in olmo if olmo[k] != longer[k]} == {"warmup_steps"}
    declared = params["gradient_energy"]["a7_warmup"]
    assert declared["shift_steps"] == longer["warmup_steps"] - olmo["warmup_steps"] > 0
    assert declared["family"] == olmo["model"]["family"]
    dense = {asdict(params_to_config(path, f"train_{m}", base="train"))["dense_every"]
             for m in ("pythia", "olmo", "olmo_sgd", "bert", "olmo_warmup2")}  # fmt: skip
    assert dense == {declared["tolerance"]}  # one step of the dense checkpoints, everywhere
    warm = params["warmup_gradient_energy"]["runs"]
    names = replicas.check_listed(params)
    assert [Path(r).name for r in warm] == ["olmo_warmup2"] + [
        n for n in names if n.startswith("olmo_warmup2-")
    ]


def test_the_paper_a_models_are_of_the_confirmatory_seeds():
    seeds = set(PARAMS["verdicts"]["confirmatory_seeds"])
    defaults = replicas.default_seeds(PARAMS)
    replicated = {replicas.parse(n)[1] for n in PARAMS["replicas"]["names"]}
    assert set(defaults.values()) | replicated <= seeds
    record = json.loads((ROOT / PARAMS["verdicts"]["exploratory_record"]).read_text())
    assert not set(record["seeds"]) & seeds  # the record holds the seen seeds only


def test_the_verdict_steps_are_the_seen_designs_checkpoints():
    """A4 and A6 read the checkpoints the seen seeds had (the dense ones serve A7's peak)."""
    from geolib.models.train_config import checkpoint_steps, run_checkpoints

    for model in ("pythia", "olmo", "bert"):
        cfg = params_to_config(ROOT / "params.yaml", f"train_{model}", base="train")
        seen = checkpoint_steps(cfg.total_steps, cfg.checkpoint_every, cfg.log_max)
        assert PARAMS["gradient_energy"]["verdict_steps"] == seen
        assert set(seen) < set(run_checkpoints(cfg))  # the dense window adds steps
