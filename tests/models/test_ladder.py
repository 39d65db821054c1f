"""The ladder of model sizes: rung names and shapes, configurations that differ from the default
pythia run in the shape only, the non-embedding parameter count against its closed form, and
the scale sections that must measure the rungs exactly as the chapters measure the centre."""

import copy
import json
from dataclasses import asdict
from pathlib import Path

import pytest
from torch import nn

from geolib.config import apply_profile, load_params, stage_params
from geolib.models import ladder, runs
from geolib.models.families import ModelConfig, build_model, count_params
from geolib.models.train_config import params_to_config

ROOT = Path(__file__).resolve().parents[2]
PARAMS = load_params(ROOT / "params.yaml")
MEASURED = ("gradient_energy", "residual_isotropy", "frequency_collapse")


def _profile(name):
    if name is None:
        return PARAMS
    return apply_profile(PARAMS, load_params(ROOT / f"profiles/{name}.yaml"))


@pytest.mark.parametrize(
    "rungs",
    [{}, None, {"a": {}}, {"a": {"d_model": 32, "lr": 0.1}}, {"a": {"family": "olmo"}}],
)
def test_bad_rungs_are_refused(rungs):
    with pytest.raises(ValueError, match="scale.rungs"):
        ladder.names({"rungs": rungs})


def test_listed_names_must_equal_the_rungs_each_with_its_seeds():
    params = copy.deepcopy(PARAMS)
    seeds = params["scale"]["seeds"]
    assert seeds, "the ladder declares seeds beyond the default"
    expected = [n for r in params["scale"]["rungs"] for n in [r, *(f"{r}-s{s}" for s in seeds)]]
    assert ladder.check_listed(params) == expected
    params["scale"]["names"] = list(reversed(params["scale"]["names"]))
    with pytest.raises(ValueError, match="scale.names must list"):
        ladder.check_listed(params)


def test_names_put_each_rungs_seeds_after_it_and_parse_back():
    scale = {"rungs": {"a": {"d_model": 8}, "b": {"d_model": 16}}, "seeds": [3, 1]}
    got = ladder.names(scale)
    assert got == ["a", "a-s3", "a-s1", "b", "b-s3", "b-s1"]
    assert [ladder.parse(n) for n in got] == [
        ("a", None),
        ("a", 3),
        ("a", 1),
        ("b", None),
        ("b", 3),
        ("b", 1),
    ]
    assert ladder.names({"rungs": scale["rungs"]}) == ["a", "b"]  # no seeds: one model a rung


@pytest.mark.parametrize(
    "seeds, default, match",
    [
        ([1, 1], 0, "distinct"),
        ([0, 1], 0, "differ from the default seed 0"),
        ([2], 2, "2"),
        ("1", 0, "list of integer"),
        ([1.5], 0, "list of integer"),
    ],
)
def test_bad_seeds_are_refused(seeds, default, match):
    with pytest.raises(ValueError, match=match):
        ladder.names({"rungs": {"a": {"d_model": 8}}, "seeds": seeds}, default)


def test_a_rung_name_that_reads_as_seeded_is_refused():
    with pytest.raises(ValueError, match="may not end in -s<seed>"):
        ladder.names({"rungs": {"a-s1": {"d_model": 8}}})


def test_a_seeded_rung_differs_from_its_rung_in_the_seed_only():
    base, _ = ladder.rung(ROOT / "params.yaml", "xs")
    seed = PARAMS["scale"]["seeds"][0]
    cfg, run_dir = ladder.rung(ROOT / "params.yaml", f"xs-s{seed}")
    assert run_dir == Path(f"runs/ladder/xs-s{seed}")
    mine, theirs = asdict(cfg), asdict(base)
    assert {k for k in mine if mine[k] != theirs[k]} == {"seed"}
    assert cfg.seed == seed != base.seed == PARAMS["train_pythia"]["seed"]  # the family's seed


def test_a_rung_differs_from_the_default_run_in_its_shape_only():
    cfg, run_dir = ladder.rung(ROOT / "params.yaml", "s")
    default = params_to_config(ROOT / "params.yaml", "train_pythia", base="train")
    assert run_dir == Path("runs/ladder/s")
    mine, theirs = asdict(cfg), asdict(default)
    assert {k for k in mine if mine[k] != theirs[k]} == {"model"}
    changed = {k for k in mine["model"] if mine["model"][k] != theirs["model"][k]}
    assert changed and changed <= set(ladder.SHAPE)
    assert {k: mine["model"][k] for k in ladder.SHAPE} == PARAMS["scale"]["rungs"]["s"]
    with pytest.raises(ValueError, match="not a rung"):
        ladder.rung(ROOT / "params.yaml", "xxl")


@pytest.mark.parametrize("profile", [None, "smoke", "paper"])
def test_the_ladder_spans_what_the_trend_rule_needs(profile):
    """Distinct sizes (the rungs, and the centre where the profile reads it) and their span meet
    the committed rule; the paper profile, which reads the rungs alone, keeps the default's."""
    params = _profile(profile)
    shapes = [params["scale"]["rungs"][ladder.parse(n)[0]] for n in ladder.check_listed(params)]
    if params["scale"]["centre_runs"]:
        shapes.append(params["train"]["model"] | params["train_pythia"]["model"])
    else:
        assert PARAMS["scale"]["rungs"].items() <= params["scale"]["rungs"].items()
    sizes = {12 * s["n_layers"] * s["d_model"] ** 2 for s in shapes}
    rule = params["scale"]["trend_rule"]
    assert len(sizes) >= rule["min_sizes"]
    assert max(sizes) / min(sizes) >= rule["min_span"]


@pytest.mark.parametrize("profile", [None, "smoke"])
def test_scale_sections_measure_the_rungs_as_the_chapters_measure_the_centre(profile):
    params = _profile(profile)
    rungs = [f"{params['scale']['run_root']}/{n}" for n in ladder.check_listed(params)]
    for section in MEASURED:
        mine, theirs = params[f"scale_{section}"], params[section]
        assert {k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k)} == {
            "runs",
            "out_dir",
        }, section
        assert mine["runs"] == rungs
        assert set(params["scale"]["centre_runs"]) <= set(theirs["runs"])


def test_the_merge_keys_of_params_yaml_are_resolved_when_read():
    assert (
        stage_params(ROOT / "params.yaml", "scale_gradient_energy")["key_rank"]
        == (PARAMS["gradient_energy"]["key_rank"])
    )


def _neox_non_embedding(d: int, n_layers: int, d_ff: int) -> int:
    """GPT-NeoX by hand: per block two LayerNorms, QKV and output projections and the MLP, with
    biases; then the final LayerNorm."""
    block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d)
    return n_layers * block + 2 * d


@pytest.mark.parametrize("d, n_layers, heads", [(32, 2, 1), (64, 3, 2)])
def test_non_embedding_params_of_pythia_match_the_closed_form(d, n_layers, heads):
    cfg = ModelConfig(family="pythia", d_model=d, n_layers=n_layers, n_heads=heads, d_ff=4 * d)
    model = build_model(cfg, 100)
    n = ladder.non_embedding_params(model)
    assert n == _neox_non_embedding(d, n_layers, 4 * d)
    assert count_params(model) - n == 2 * 100 * d  # untied: input table and LM head


def test_a_tied_head_is_taken_out_once_and_position_tables_too():
    cfg = ModelConfig(family="bert", d_model=32, n_layers=1, n_heads=2, d_ff=64, context=16)
    model = build_model(cfg, 100)
    tables = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Embedding))
    assert count_params(model) - ladder.non_embedding_params(model) == tables  # head tied


def test_run_size_rebuilds_the_model_of_a_run_json(tmp_path):
    model = {"family": "pythia", "d_model": 32, "n_layers": 2, "n_heads": 1, "d_ff": 128}
    runs.write_run_info(tmp_path, {"config": {"model": model}, "vocab_size": 50, "params": 7})
    got = ladder.run_size(tmp_path)
    assert got == {
        "non_embedding": _neox_non_embedding(32, 2, 128),
        "params": 7,
        "d_model": 32,
        "n_layers": 2,
    }
    json.loads((tmp_path / "run.json").read_text())  # written as JSON
