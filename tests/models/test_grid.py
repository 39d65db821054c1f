"""The designs: the sweep's grid (expansion, names, per-point configurations, threads) and the
saturation runs (names, configurations differing in the block layout only)."""

import copy
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from geolib.config import load_params
from geolib.models import grid
from geolib.models.grid import (
    LrScaling,
    Point,
    branch_plan,
    cells,
    check_cells_listed,
    check_grid,
    check_points_listed,
    decay_exponent,
    expand,
    point_config,
    point_dir,
    threads_for,
)
from geolib.models.train_config import checkpoint_steps, lr_at

ROOT = Path(__file__).resolve().parents[2]
PARAMS = load_params(ROOT / "params.yaml")

SPEC = {
    "sizes": {"S": {}, "M": {}},
    "factorial": {
        "size": ["S", "M"],
        "batch_size": [8, 32],
        "weight_decay": [0.0, 1.0],
        "lr": [0.001],
        "final_lr_ratio": [0.1],
        "seed": [0],
    },
    "center": {"batch_size": 8, "weight_decay": 1.0, "lr": 0.001, "final_lr_ratio": 0.1, "seed": 0},
    "vary": {"final_lr_ratio": [0.0], "lr": [0.004]},
    "vary_sizes": ["S"],
    "replicate_seeds": [1, 2],
}


def test_expansion_counts_order_and_no_duplicates():
    points = expand(SPEC)
    assert len(points) == 2 * 2 * 2 + 2 + 2
    assert points[0] == Point("S", 8, 0.0, 0.001, 0.1, 0)
    assert points[-1] == Point("S", 8, 1.0, 0.001, 0.1, 2)
    assert len({p.name for p in points}) == len(points)
    # each one-factor variation differs from the centre in exactly that factor
    centre = Point("S", **SPEC["center"])
    for p in points[8:]:
        diffs = [f for f, v in p.as_dict().items() if v != centre.as_dict()[f]]
        assert len(diffs) == 1


def test_a_point_listed_twice_is_an_error():
    spec = {**SPEC, "vary": {"weight_decay": [0.0]}}  # S-b8-wd0 is already in the factorial
    with pytest.raises(ValueError, match="more than once.*S-b8-wd0-lr0.001-f0.1-s0-tD"):
        expand(spec)


def test_bad_specs():
    with pytest.raises(KeyError, match="lacks"):
        expand({**SPEC, "factorial": {k: v for k, v in SPEC["factorial"].items() if k != "lr"}})
    with pytest.raises(KeyError, match="does not define"):
        expand({**SPEC, "sizes": {"S": {}}})
    with pytest.raises(KeyError, match="not a factor"):
        expand({**SPEC, "vary": {"size": ["M"]}})


@pytest.mark.parametrize("point", expand(SPEC), ids=lambda p: p.name)
def test_names_round_trip(point):
    assert Point.from_name(point.name) == point


@pytest.mark.parametrize(
    "bad",
    [
        "S-b8-wd0-lr0.001-f0.1",
        "S-b08-wd0-lr0.001-f0.1-s0-tD",
        "S-b8-wd0.0-lr0.001-f0.1-s0-tD",
        "S-b8-wd0-lr0.001-f0.1-s0",  # no budget
        "S-b8-wd0-lr0.001-f0.1-s0-tX",  # not a budget label
    ],
)
def test_non_canonical_names_are_rejected(bad):
    with pytest.raises(ValueError):
        Point.from_name(bad)


def test_repository_grid_is_listed_and_large_enough():
    """params.yaml's explicit list (what DVC expands) equals the design, ≥ 24 models plus
    ≥ 3 seeds of a replicated point."""
    names = check_points_listed(PARAMS["sweep"])
    assert len(names) >= 24 + 2
    for budget in ("D", "2D"):  # the same design at each budget
        seeds = [
            Point.from_name(n)
            for n in names
            if n.startswith("S-b32-wd0.1-lr0.004-f0.1-") and n.endswith(f"-t{budget}")
        ]
        assert sorted(p.seed for p in seeds) == [0, 1, 2]
    by_budget = {}
    for n in names:
        p = Point.from_name(n)
        by_budget.setdefault(p.budget, []).append(p.design_point)
    assert by_budget["D"] == by_budget["2D"]


def test_listed_points_that_drift_from_the_design_are_named():
    spec = dict(PARAMS["sweep"])
    spec["points"] = spec["points"][:-1] + ["S-b8-wd9-lr0.001-f0.1-s0-tD"]
    with pytest.raises(ValueError, match=r"listed but not designed \['S-b8-wd9"):
        check_points_listed(spec)


def test_point_config_matches_tokens_and_factors():
    point = Point.from_name("M-b128-wd2-lr0.004-f0.01-s1-tD")
    cfg = point_config(PARAMS, point)
    base = PARAMS["sweep"]["base"]
    assert cfg.total_steps == base["token_budget"] // (128 * base["seq_len"])
    assert cfg.total_steps * cfg.tokens_per_step <= base["token_budget"]
    twice = point_config(PARAMS, replace(point, budget="2D"))
    assert twice.total_steps == 2 * base["token_budget"] // (128 * base["seq_len"])
    assert twice.to_dict() == {
        **cfg.to_dict(),
        "total_steps": twice.total_steps,
        "decay_steps": twice.decay_steps,
        "eval_interval": twice.total_steps,
    }
    # one warmup for both budgets (the smaller's share); each decays over its own last share
    assert (
        twice.warmup_steps == cfg.warmup_steps == round(base["warmup_fraction"] * cfg.total_steps)
    )
    assert base["schedule"] == "wsd"
    for c in (cfg, twice):
        assert c.decay_steps == round(base["decay_fraction"] * c.total_steps)
    with pytest.raises(KeyError, match="no budget '4D'"):
        point_config(PARAMS, replace(point, budget="4D"))
    # the named lr holds at the reference batch 32; batch 128 gets sqrt(4) = 2 times it
    assert base["lr_scaling"] == {"reference_batch": 32, "exponent": 0.5}
    assert (cfg.batch_size, cfg.weight_decay, cfg.lr, cfg.min_lr_ratio, cfg.seed) == (
        128,
        2.0,
        pytest.approx(0.008),
        0.01,
        1,
    )
    assert cfg.model.d_model == PARAMS["sweep"]["sizes"]["M"]["d_model"]
    assert cfg.model.family == "olmo" and cfg.eval_interval == cfg.total_steps
    with pytest.raises(KeyError, match="no size 'L'"):
        point_config(PARAMS, Point("L", 8, 0.0, 0.001, 0.1, 0))


def test_decay_exponent_is_the_sum_of_lr_times_wd():
    cfg = point_config(PARAMS, Point.from_name("S-b128-wd2-lr0.004-f0.1-s0-tD"))
    from geolib.models.train_config import lr_at

    assert decay_exponent(cfg) == pytest.approx(
        2.0 * sum(lr_at(t, cfg) for t in range(1, cfg.total_steps + 1))
    )
    constant = cfg.__class__(
        **{**cfg.to_dict(), "schedule": "constant", "warmup_steps": 0, "decay_steps": None}
    )
    assert decay_exponent(constant) == pytest.approx(2.0 * 0.008 * cfg.total_steps)
    no_wd = point_config(PARAMS, Point.from_name("S-b8-wd0-lr0.001-f0.1-s0-tD"))
    assert decay_exponent(no_wd) == 0.0


def test_lr_scaling_follows_the_batch_and_refuses_bad_settings():
    sqrt = LrScaling(32, 0.5)
    assert sqrt.peak_lr(0.004, 32) == 0.004
    assert sqrt.peak_lr(0.004, 8) == pytest.approx(0.002)
    assert sqrt.peak_lr(0.004, 128) == pytest.approx(0.008)
    assert LrScaling.from_params(None).peak_lr(0.004, 128) == 0.004  # absent: none
    assert LrScaling(32, 1.0).peak_lr(0.001, 64) == pytest.approx(0.002)  # linear
    with pytest.raises(KeyError, match="unknown key"):
        LrScaling.from_params({"reference_batch": 32, "exponent": 0.5, "power": 1})
    with pytest.raises(ValueError, match="exponent"):
        LrScaling.from_params({"reference_batch": 32, "exponent": 2.0})
    with pytest.raises(ValueError, match="reference_batch"):
        LrScaling.from_params({"reference_batch": 0, "exponent": 0.5})
    # a sweep point trains at the scaled rate; without the key, at the named one
    params = {**PARAMS, "sweep": {**PARAMS["sweep"], "base": dict(PARAMS["sweep"]["base"])}}
    point = Point.from_name("S-b8-wd0.1-lr0.004-f0.1-s0-tD")
    assert point_config(params, point).lr == pytest.approx(0.002)
    del params["sweep"]["base"]["lr_scaling"]
    assert point_config(params, point).lr == 0.004


def test_threads_split_the_cores():
    assert threads_for(1, 2) == 2 and threads_for(2, 2) == 1 and threads_for(4, 2) == 1
    assert threads_for(2, 16) == 8
    with pytest.raises(ValueError):
        threads_for(0, 2)


def test_a_batch_too_large_for_the_budget_is_refused_when_the_parameters_are_read():
    """A profile adding batch 16384 (two steps at the default budget) fails at check_grid, naming
    the point, before any stage runs; the repository's grid passes."""
    assert len(check_grid(PARAMS)) == len(PARAMS["sweep"]["points"])
    params = copy.deepcopy(PARAMS)
    params["sweep"]["factorial"]["batch_size"].append(16384)
    params["sweep"]["points"] = [p.name for p in expand(params["sweep"])]
    params["sweep"]["cells"] = list(cells(params["sweep"]["points"]))
    with pytest.raises(ValueError, match=r"S-b16384-.*only \d+ steps"):
        check_grid(params)


SATURATION = {
    "layouts": {"parallel": True, "sequential": False},
    "widths": {"d8": {"d_model": 8, "n_heads": 2, "d_ff": 16}},
    "seeds": [0, 1],
}


def test_names_round_trip_and_listed():
    runs = grid.saturation_runs(SATURATION)
    assert [r.name for r in runs] == [
        "parallel-d8-s0",
        "sequential-d8-s0",
        "parallel-d8-s1",
        "sequential-d8-s1",
    ]
    assert all(grid.Run.from_name(r.name) == r for r in runs)
    assert grid.check_names_listed({**SATURATION, "names": [r.name for r in runs]})
    with pytest.raises(ValueError, match="must equal"):
        grid.check_names_listed({**SATURATION, "names": ["parallel-d8-s0"]})
    with pytest.raises(ValueError, match="not a saturation run"):
        grid.Run.from_name("parallel-d8")


def test_params_design_and_configs():
    params = load_params("params.yaml")
    spec = params["saturation"]
    names = grid.check_names_listed(spec)
    cfgs = {n: grid.saturation_config(params, grid.Run.from_name(n)) for n in names}
    for name, cfg in cfgs.items():
        layout = grid.Run.from_name(name).layout
        assert cfg.model.family == "pythia"
        assert cfg.model.parallel_residual is spec["layouts"][layout]
    # the two layouts of one width and seed differ in the block layout only
    a, b = cfgs["parallel-d32-s0"].to_dict(), cfgs["sequential-d32-s0"].to_dict()
    diff = {k for k in a["model"] if a["model"][k] != b["model"][k]}
    assert diff == {"parallel_residual"} and {k for k in a if a[k] != b[k]} == {"model"}
    steps = checkpoint_steps(
        spec["train"]["total_steps"], spec["train"]["checkpoint_every"], spec["train"]["log_max"]
    )
    late = [s for s in steps if s >= spec["second_half_from"] * steps[-1]]
    assert steps[:3] == [0, 1, 2] and len(late) >= 5  # log-spaced early, dense late
    with pytest.raises(KeyError, match="unknown layout"):
        grid.saturation_config(params, grid.Run("other", "d32", 0))


def test_cells_group_points_by_size_and_batch_and_must_be_listed():
    """Every listed point is in exactly one cell, the cell of its size and batch size; the
    listed cells must be those, in the points' order; a point's run lives in its cell."""
    spec = PARAMS["sweep"]
    groups = check_cells_listed(spec)
    assert sorted(n for names in groups.values() for n in names) == sorted(spec["points"])
    for cell, names in groups.items():
        assert {f"{Point.from_name(n).size}-b{Point.from_name(n).batch_size}" for n in names} == {
            cell
        }
    assert cells(["M-b8-wd0-lr0.001-f0.1-s0-tD", "S-b8-wd0-lr0.001-f0.1-s0-tD"]) == {
        "M-b8": ["M-b8-wd0-lr0.001-f0.1-s0-tD"],
        "S-b8": ["S-b8-wd0-lr0.001-f0.1-s0-tD"],
    }
    name = "S-b32-wd2-lr0.004-f0.1-s1-tD"
    assert point_dir({"run_root": "runs/sweep"}, name) == Path("runs/sweep/S-b32") / name
    for wrong in (spec["cells"][::-1], spec["cells"][:-1], [*spec["cells"], "L-b8"]):
        with pytest.raises(ValueError, match=r"sweep\.cells must be \['S-b8', 'S-b32'"):
            check_cells_listed({**spec, "cells": wrong})


def test_a_cell_trains_its_points_into_their_folders(tmp_path, monkeypatch):
    """A cell's unit trains each of its points, in listed order, through train_point
    (stand-in trainer); an unknown cell is refused naming the cells."""
    calls = []

    def fake_train(cfg, run_dir, progress, supersede_into, branch, max_steps, also_checkpoint):
        calls.append((run_dir.name, max_steps, branch and (branch.parent.name, branch.step)))

    monkeypatch.setattr(grid, "train", fake_train)
    params = copy.deepcopy(PARAMS)
    params["sweep"]["run_root"] = str(tmp_path)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    names = grid.train_unit(path, "M-b128", log=lambda m: None)
    assert names == [n for n in params["sweep"]["points"] if n.startswith("M-b128-")]
    # each 2D run trains to where its D branch's decay begins, the branch, then the rest
    expected = []
    for name in names:
        if name.endswith("-tD"):
            continue
        kid = name.removesuffix("-t2D") + "-tD"
        cfg = point_config(params, Point.from_name(kid))
        step = cfg.total_steps - cfg.decay_steps
        expected += [(name, step, None), (kid, None, (name, step)), (name, None, None)]
    assert calls == expected
    with pytest.raises(
        KeyError, match=r"'M-b64' is neither a cell nor a point of the sweep; cells: \['S-b8'"
    ):
        grid.train_unit(path, "M-b64")


def test_every_smaller_budget_branches_from_the_largest_where_its_decay_begins():
    """The repository's sweep: every D point starts from its 2D run at the end of its own
    stable phase, a step inside the 2D run's stable phase (the rates agree up to it); with a
    cosine schedule nothing branches."""
    names = check_points_listed(PARAMS["sweep"])
    plan = branch_plan(PARAMS, names)
    assert sorted(plan) == sorted(n for n in names if n.endswith("-tD"))
    for kid, (parent, step) in plan.items():
        assert parent == kid.removesuffix("-tD") + "-t2D"
        mine = point_config(PARAMS, Point.from_name(kid))
        theirs = point_config(PARAMS, Point.from_name(parent))
        assert step == mine.total_steps - mine.decay_steps > mine.warmup_steps
        assert step < theirs.total_steps - theirs.decay_steps
        assert [lr_at(t, mine) for t in range(1, step + 1)] == [
            lr_at(t, theirs) for t in range(1, step + 1)
        ]
    cosine = copy.deepcopy(PARAMS)
    del cosine["sweep"]["base"]["decay_fraction"]
    cosine["sweep"]["base"]["schedule"] = "cosine"
    assert branch_plan(cosine, names) == {}
    cosine["sweep"]["base"]["decay_fraction"] = 0.2
    with pytest.raises(ValueError, match="decay_fraction .* goes with schedule wsd"):
        point_config(cosine, Point.from_name(names[0]))


def test_budgets_expand_every_point_and_are_labelled_by_their_multiple():
    spec = {**SPEC, "budgets": {"D": 1, "2D": 2}}
    points = expand(spec)
    assert len(points) == 2 * len(expand(SPEC))
    assert [p.budget for p in points] == ["D"] * (len(points) // 2) + ["2D"] * (len(points) // 2)
    assert expand(SPEC) == points[: len(points) // 2]  # no budgets: the one budget D
    assert (
        points[-1].name.endswith("-s2-t2D") and points[-1].design_point == points[11].design_point
    )
    with pytest.raises(ValueError, match="labelled 2D"):
        expand({**SPEC, "budgets": {"D": 1, "twice": 2}})
    with pytest.raises(ValueError, match="sweep.budgets.D"):
        expand({**SPEC, "budgets": {"D": 0}})
    with pytest.raises(ValueError, match="budget must be a label"):
        Point("S", 8, 0.0, 0.001, 0.1, 0, budget="big")


@pytest.mark.parametrize(
    ("flags", "key"), [(["--bare"], "points"), (["--cells"], "cells")], ids=["points", "cells"]
)
def test_the_points_command_prints_the_expansion_the_lists_must_equal(capsys, flags, key):
    assert grid.main(["--params", str(ROOT / "params.yaml"), "points", *flags]) == 0
    assert capsys.readouterr().out.split() == PARAMS["sweep"][key]
