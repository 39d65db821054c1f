import pytest
import yaml

from geolib.config import deep_update, flatten, load_params, stage_params


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


def test_repository_profiles_only_override_existing_keys():
    """Every profile key must exist in params.yaml (a profile cannot drift from the defaults)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    defaults = flatten(load_params(root / "params.yaml"))
    for profile in sorted((root / "profiles").glob("*.yaml")):
        extra = set(flatten(load_params(profile))) - set(defaults)
        assert not extra, f"{profile.name}: {sorted(extra)}"
