"""Chapter output locations: the pipeline's folders by default, an exploration folder under
overrides, so a rerun with other parameters cannot overwrite a DVC out."""

import json
from pathlib import Path

import pytest
import yaml

from geolib.report.outputs import StageOutputs, check_overrides, overrides_tag, stage_outputs


def test_default_outputs_are_the_stage_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = stage_outputs("corpus", {})
    assert out == StageOutputs(
        "corpus",
        Path("."),
        Path("figures/corpus"),
        Path("data/results/corpus"),
        Path("data/claims/corpus.json"),
    )
    assert not out.exploring
    assert (tmp_path / "figures/corpus").is_dir() and (tmp_path / "data/results/corpus").is_dir()
    assert not (tmp_path / "explore").exists()


def test_overrides_go_to_an_exploration_folder_named_by_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = stage_outputs("corpus", {"zipf_n_boot": 5, "seed": 1})
    assert out.exploring
    assert out.root == Path("explore") / f"corpus-{overrides_tag({'seed': 1, 'zipf_n_boot': 5})}"
    for path in (out.figures, out.results, out.claims):
        assert out.root in path.parents
        assert not str(path).startswith(("figures", "data"))
    assert (tmp_path / out.root / "overrides.json").read_text().count('"zipf_n_boot": 5') == 1
    assert not (tmp_path / "figures").exists() and not (tmp_path / "data").exists()


def test_overrides_tag_is_order_independent_and_value_sensitive():
    assert overrides_tag({"a": 1, "b": [1, 2]}) == overrides_tag({"b": [1, 2], "a": 1})
    assert overrides_tag({"a": 1}) != overrides_tag({"a": 2})
    assert len(overrides_tag({"a": 1})) == 8


def test_create_false_makes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stage_outputs("corpus", {"a": 1}, create=False)
    stage_outputs("corpus", None, create=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad", ["", "a/b", ".hidden"])
def test_bad_stage_name(bad):
    with pytest.raises(ValueError, match="not a stage name"):
        stage_outputs(bad, create=False)


def test_another_parameters_file_goes_to_an_exploration_folder(tmp_path, monkeypatch):
    """--params other.yaml without overrides once wrote into data/claims/<stage>.json: a file
    other than params.yaml is an exploration, named by its content, recorded with its hash."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("corpus: {seed: 0}\n")
    (tmp_path / "other.yaml").write_text("corpus: {seed: 1}\n")
    assert not stage_outputs("corpus", {}, create=False, params_path="params.yaml").exploring
    assert not stage_outputs("corpus", {}, create=False, params_path="./params.yaml").exploring
    out = stage_outputs("corpus", {}, params_path="other.yaml")
    assert out.exploring and not (tmp_path / "data").exists()
    recorded = json.loads((tmp_path / out.root / "overrides.json").read_text())
    assert recorded["parameters file"].startswith("other.yaml (sha256 ")
    again = stage_outputs("corpus", {}, create=False, params_path="other.yaml")
    assert again.root == out.root
    (tmp_path / "other.yaml").write_text("corpus: {seed: 2}\n")  # another content, another folder
    assert stage_outputs("corpus", {}, create=False, params_path="other.yaml").root != out.root
    with_overrides = stage_outputs("corpus", {"seed": 3}, create=False, params_path="other.yaml")
    assert with_overrides.root not in (out.root, stage_outputs("corpus", {"seed": 3}).root)


def test_overrides_keep_the_kind_of_each_parameter():
    defaults = {
        "n_points": 128,
        "scale": 0.5,
        "flag": True,
        "name": "a",
        "levels": [1, 2],
        "model": {"d": 8, "act": "gelu"},
        "maybe": None,
    }
    ok = {"n_points": 64, "scale": 2, "flag": False, "levels": [], "model": {"d": 16}, "maybe": [1]}
    check_overrides(defaults, ok)
    bad = {
        "n_points": (
            [16, 32],
            "n_points: the parameters give an integer (128), the override a list",
        ),
        "scale": ("0.1", "scale: the parameters give a number (0.5), the override a string"),
        "flag": (1, "flag: the parameters give true/false (True), the override an integer"),
        "n_points ": (1, None),
    }
    for key, (value, message) in bad.items():
        if message is None:
            with pytest.raises(KeyError, match="unknown parameter 'n_points '"):
                check_overrides(defaults, {key: value})
            continue
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            check_overrides(defaults, {key: value})
    with pytest.raises(ValueError, match=r"override model\.d: the parameters give an integer"):
        check_overrides(defaults, {"model": {"d": 1.5}})
    with pytest.raises(KeyError, match=r"unknown parameter 'model\.width'"):
        check_overrides(defaults, {"model": {"width": 1}})


def runner(monkeypatch):
    """``scripts/run_notebook.py`` loaded as a module, run from the root, with papermill
    replaced by a failure: a test passes only if the runner refuses before any notebook runs."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("rn", root / "scripts" / "run_notebook.py")
    rn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rn)
    monkeypatch.chdir(root)  # main() moves to the root; restored after the test
    monkeypatch.setattr(rn.pm, "execute_notebook", lambda *a, **k: pytest.fail("notebook ran"))
    return rn


def test_run_notebook_refuses_a_bad_override_before_the_notebook_starts(monkeypatch):
    """The issue's case: {n_points: [16, 32]} for chord_arc ran, and its summary reported a
    check that never ran. Refused before papermill is called."""
    rn = runner(monkeypatch)
    params = yaml.safe_load((Path(rn.ROOT) / "params.yaml").read_text())
    key = next(k for k, v in params["chord_arc"].items() if type(v) is int)
    with pytest.raises(ValueError, match=rf"override {key}: the parameters give an integer"):
        rn.main(["chord_arc", "-y", f"{{{key}: [16, 32]}}"])


def test_run_notebook_refuses_fields_that_cannot_go_together_before_the_notebook_starts(
    monkeypatch,
):
    """A new user's first try: {dim: 32} for metric_validation passes the kind check (an
    integer for an integer) but leaves k = 64 above the dimension; named before any cell."""
    rn = runner(monkeypatch)
    with pytest.raises(ValueError, match=r"k_values must be in \[1, dim=32\]: 64$"):
        rn.main(["metric_validation", "-y", "{dim: 32}"])


def test_run_notebook_refuses_a_chapters_bad_section_before_the_notebook_starts(monkeypatch):
    """A chapter's whole section is read (its schema, its rules, its earlier rules) before
    papermill is called: every problem of the schema named at once."""
    rn = runner(monkeypatch)
    with pytest.raises(
        ValueError,
        match=r"^section gradient_energy: ci_level must be in \(0, 1\): 1; early_share must be in "
        r"\(0, 1\]: 0$",
    ):
        rn.main(["gradient_energy", "-y", "{early_share: 0, ci_level: 1}"])
    # what only the chapter's module knows: a step listed twice would count a checkpoint twice
    with pytest.raises(ValueError, match=r"verdict_steps repeats a step: \[1, 1\]"):
        rn.main(["gradient_energy", "-y", "{verdict_steps: [1, 1]}"])
    # a sweep chapter: its module checks the shared section (which has no schema of its own)
    with pytest.raises(ValueError, match=r"n_boot must be in \[100, inf\]: 10"):
        rn.main(["training_knobs", "-y", "{n_boot: 10}"])
