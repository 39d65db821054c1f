import pytest
import yaml

from geolib.config import apply_profile, deep_update, flatten, load_params, stage_params


@pytest.fixture
def params_file(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"common": {"seed": 1}, "s": {"n": 3, "seed": 2}}))
    return path


def test_stage_params_merge_order(params_file):
    assert stage_params(params_file, "s") == {"seed": 2, "n": 3}
    assert stage_params(params_file, "s", {"n": 5}) == {"seed": 2, "n": 5}


def test_unknown_override_and_section(params_file):
    with pytest.raises(KeyError, match="unknown parameter"):
        stage_params(params_file, "s", {"m": 1})
    with pytest.raises(KeyError, match="no section"):
        stage_params(params_file, "t")


def test_missing_and_malformed(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_params(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="mapping"):
        load_params(tmp_path / "bad.yaml")


def test_flatten_and_deep_update():
    assert flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": 2}) == {
        "a.b": 1,
        "a.c.d": [1, 2],
        "e": 2,
    }
    assert deep_update({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}}) == {"a": {"b": 1, "c": 3}}


def test_apply_profile_replaces_only_existing_keys():
    params = {"common": {"seed": 0}, "train": {"model": {"d": 64, "n": 2}, "steps": 10}}
    out = apply_profile(params, {"train": {"model": {"d": 8}}})
    assert out["train"] == {"model": {"d": 8, "n": 2}, "steps": 10}
    assert params["train"]["model"]["d"] == 64, "the defaults are not modified"
    with pytest.raises(KeyError, match=r"train\.model\.dd"):
        apply_profile(params, {"train": {"model": {"dd": 8}}})


def test_repository_profiles_only_override_existing_keys():
    """Every profile key must exist in params.yaml (a profile cannot drift from the defaults)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    defaults = load_params(root / "params.yaml")
    for profile in sorted((root / "profiles").glob("*.yaml")):
        apply_profile(defaults, load_params(profile))
