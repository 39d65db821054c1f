"""Chapter output locations: the pipeline's folders by default, an exploration folder under
overrides, so a rerun with other parameters cannot overwrite a DVC out."""

from pathlib import Path

import pytest

from geolib.report.outputs import StageOutputs, overrides_tag, stage_outputs


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
