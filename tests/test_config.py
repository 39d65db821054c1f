import re
import time

import pytest
import yaml

from geolib.config import (
    Replace,
    apply_profile,
    apply_profiles,
    deep_update,
    flatten,
    load_params,
    stage_params,
)


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


def test_a_profile_mapping_tagged_replace_takes_the_place_of_the_default_whole(tmp_path):
    """``!replace``: the keys inside may differ from the default's (the hub corpus's domains);
    the key itself must exist and be a mapping; an untagged mapping still merges key by key;
    the result is plain YAML again."""
    params = {"q": {"splits": {"id_test": "a", "ood_bible": "b"}, "n": 1}}
    profile_file = tmp_path / "p.yaml"
    profile_file.write_text("q:\n  splits: !replace\n    id_test: a\n    ood_c4_en: 1e-3\n")
    profile = load_params(profile_file)
    out = apply_profile(params, profile)
    assert out == {"q": {"splits": {"id_test": "a", "ood_c4_en": 0.001}, "n": 1}}
    assert type(out["q"]["splits"]) is dict
    yaml.safe_dump(out)  # a Replace left in would not dump
    assert params["q"]["splits"] == {"id_test": "a", "ood_bible": "b"}  # defaults untouched
    with pytest.raises(KeyError, match=r"q\.splits\.ood_c4_en"):  # untagged: merged, checked
        apply_profile(params, {"q": {"splits": {"ood_c4_en": "c"}}})
    with pytest.raises(KeyError, match="no mapping"):
        apply_profile(params, {"q": {"n": Replace({"x": 1})}})
    with pytest.raises(KeyError, match=r"q\.nope"):
        apply_profile(params, {"q": {"nope": Replace({"x": 1})}})
    with pytest.raises(KeyError, match="replaces a mapping with a str"):
        apply_profile(params, {"q": {"splits": "all"}})
    (tmp_path / "bad.yaml").write_text("q:\n  splits: !replace [1, 2]\n")
    with pytest.raises(ValueError, match="tags a mapping"):
        load_params(tmp_path / "bad.yaml")


def test_repository_profiles_only_override_existing_keys():
    """Every profile key must exist in params.yaml (a profile cannot drift from the defaults)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    defaults = load_params(root / "params.yaml")
    for profile in sorted((root / "profiles").glob("*.yaml")):
        apply_profiles(defaults, profile)


def _corpus_domains(params: dict) -> set[str]:
    """The domains the prepare stage writes under these parameters."""
    from geolib.data.hub_corpus import hub_domain

    data = params["data"]
    if data["source"] == "hub":
        return {"id"} | {hub_domain(s) for s in data["hub"]["ood_subsets"]}
    return set(data["domains"])


def _token_domains(tree) -> set[str]:
    """Every domain a ``data/tokens/<domain>/…`` path in ``tree`` names."""
    found: set[str] = set()
    if isinstance(tree, dict):
        for value in tree.values():
            found |= _token_domains(value)
    elif isinstance(tree, list):
        for value in tree:
            found |= _token_domains(value)
    elif isinstance(tree, str):
        found |= set(re.findall(r"data/tokens(?:_\d+)?/([^/]+)/", tree))
    return found


def test_every_profile_reads_only_the_domains_its_corpus_has():
    """With a profile applied, every token file a section names and every domain the pretrained
    probes list is one the prepare stage writes: the hub corpus's Paloma domains in the paper
    profile, the registries' in the default (the paper path named the registries' domains
    before, so its stages would have read files that never exist)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    defaults = load_params(root / "params.yaml")
    for profile in [None, *sorted((root / "profiles").glob("*.yaml"))]:
        params = defaults if profile is None else apply_profiles(defaults, profile)
        have = _corpus_domains(params)
        named = _token_domains(params) | set(
            params["gradient_energy_pretrained"]["measure"]["corpus"]
        )
        assert named <= have, f"{profile}: {sorted(named - have)} not in the corpus {have}"
        assert len(named) >= 4, named  # the check has something to check
    paper = apply_profiles(defaults, root / "profiles" / "paper.yaml")
    assert paper["data"]["source"] == "hub"
    assert "ood_bible" not in paper["quantization"]["eval_tokens"]


def test_the_sweep_rows_premise_reads_the_study_of_the_same_models():
    """The premise of every sweep row reads the training-length study at the size that holds
    each sweep size's model, trained on the sweep's tokens, in the default and paper profiles
    (the smoke profile's study keeps one tiny size: its premise fails, and says so)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    defaults = load_params(root / "params.yaml")
    for params in (defaults, apply_profiles(defaults, root / "profiles" / "paper.yaml")):
        premise = params["geometry_performance"]["sweep_v3"]["w_premise"]
        assert set(premise["sizes"]) == set(params["sweep"]["sizes"])
        for size, studied in premise["sizes"].items():
            assert params["sweep"]["sizes"][size] == params["training_length"]["sizes"][studied]
        study, sweep = params["training_length"]["train"], params["sweep"]["base"]
        for key in ("train_tokens", "val_tokens", "tokenizer"):
            assert study[key] == sweep[key], key
        assert premise["study"] == f"{params['training_length']['out_dir']}/settling.csv"


#: keys a rehearsal may cut: sizes, counts, step counts (and the steps that follow them) and
#: budgets, subspace ranks, by name; a list may also be cut to a subset of the paper's (fewer
#: runs, levels)
_SIZE_KEY = re.compile(
    r"n_\w+|\w+_n_points|\w*n_boot|n_t|\w*_steps|steps|seq_len|batch_size|d_model|d_ff|n_heads"
    r"|n_layers|vocab_size|token_budget|min_tokens_per_param|max_\w+|min_occurrences|log_max|checkpoint_every"
    r"|eval_interval|eval_batches|\w*seeds|key_rank|a[57]_source|early_max|jitter_from"
    r"|frozen_sources|ranks"
    r"|tokens|n-boot|batch-size|seq-len"  # the same sizes as `geolib measure` spells them
)


def test_the_rehearsal_is_the_paper_profile_with_only_sizes_counts_and_budgets_cut():
    """profiles/rehearsal.yaml: against the paper profile, every key it changes is
    a size, a count or a budget, or a list cut to a subset (common.device aside: this machine
    has no GPU), or a released model, a size of the training-length study, a saturation width
    or a ladder rung left out; the hub corpus, the hub names and the design's levels stay the
    paper's."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    defaults = load_params(root / "params.yaml")
    paper = flatten(apply_profiles(defaults, root / "profiles" / "paper.yaml"))
    rehearsal = flatten(apply_profiles(defaults, root / "profiles" / "rehearsal.yaml"))
    # the released models, the study's sizes, the saturation widths and the ladder's rungs may
    # be cut to some of the paper's (each kept one unchanged but for its sizes)
    dropped = set(paper) - set(rehearsal)
    assert set(rehearsal) <= set(paper)
    droppable = (
        "pretrained.models.",
        "training_length.sizes.",
        "training_length.min_tokens_per_param.",  # a size's own budget goes with the size
        "saturation.widths.",
        "scale.rungs.",
    )
    assert all(k.startswith(droppable) for k in dropped), sorted(dropped)
    assert any(k.startswith("pretrained.models.") for k in rehearsal)
    changed = {k for k in rehearsal if paper[k] != rehearsal[k]}
    assert len(changed) > 50  # the cuts are there (and the check has something to check)

    def cut(key: str) -> bool:
        new, old = rehearsal[key], paper[key]
        if key == "common.device" or _SIZE_KEY.fullmatch(key.split(".")[-1]):
            return True
        if key.startswith("training_length.min_tokens_per_param."):  # a budget per size
            return True
        return isinstance(new, list) and isinstance(old, list) and set(new) <= set(old)

    assert sorted(k for k in changed if not cut(k)) == []
    assert rehearsal["data.source"] == "hub" and rehearsal["common.device"] == "cpu"
    # the pattern does not wave through what a rehearsal must not change
    for key in ("quantization.eval_tokens", "data.source", "sweep.factorial.lr", "sweep.center"):
        assert not _SIZE_KEY.fullmatch(key.split(".")[-1])


def test_profile_chains_apply_in_order_and_refuse_cycles(tmp_path):
    params = {"a": {"x": 1, "y": 1, "z": 1}}
    (tmp_path / "base.yaml").write_text("a:\n  x: 2\n  y: 2\n")
    (tmp_path / "top.yaml").write_text("_profile:\n  extends: base\na:\n  y: 3\n")
    assert apply_profiles(params, tmp_path / "top.yaml") == {"a": {"x": 2, "y": 3, "z": 1}}
    (tmp_path / "base.yaml").write_text("_profile:\n  extends: [top]\na:\n  x: 2\n")
    with pytest.raises(ValueError, match="cycle"):
        apply_profiles(params, tmp_path / "top.yaml")
    (tmp_path / "lost.yaml").write_text("_profile:\n  extends: nowhere\n")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        apply_profiles(params, tmp_path / "lost.yaml")
    (tmp_path / "odd.yaml").write_text("_profile:\n  inherits: base\n")
    with pytest.raises(KeyError, match="only 'extends'"):
        apply_profiles(params, tmp_path / "odd.yaml")


def test_bad_sections_and_yaml_name_the_file_and_section(tmp_path):
    path = tmp_path / "p.yaml"
    for text, message in (
        ("s:\n", "section 's' must be a mapping, got NoneType"),
        ("s: 3\n", "section 's' must be a mapping, got int"),
        ("s: {}\n", "section 's' must be a non-empty mapping, got empty"),
        ("s: {a: 1}\ncommon: [1]\n", "section 'common' must be a mapping"),
    ):
        path.write_text(text)
        with pytest.raises(ValueError, match=f"{path}: {message}"):
            stage_params(path, "s")
    path.write_text("s: [1, 2\n")
    with pytest.raises(ValueError, match=f"{path}: not valid YAML"):
        load_params(path)


def test_exponent_floats_without_a_dot_are_numbers(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("s: {lr: 1e-3, big: 2E5, n: [1e-2, x1e3], sha: 0123e45abc, q: '5e-1'}\n")
    assert yaml.safe_load(path.read_text())["s"]["lr"] == "1e-3"  # what PyYAML alone gives
    p = stage_params(path, "s")
    assert p["lr"] == 1e-3 and p["big"] == 2e5 and p["n"] == [1e-2, "x1e3"]
    assert p["sha"] == "0123e45abc" and p["q"] == 0.5


def test_checked_number():
    from geolib.config import checked_flag, checked_number

    assert checked_number("x", "8", int, low=1) == 8
    assert (
        checked_number("x", 2.0, int) == 2 and checked_number("x", None, int, optional=True) is None
    )
    for value, message in ((True, "number"), ("a", "number"), (1.5, "integer"), (0, ">= 1")):
        with pytest.raises(ValueError, match=f"x must be .*{message}|x must be an {message}"):
            checked_number("x", value, int, low=1)
    with pytest.raises(ValueError, match="x must be > 0"):
        checked_number("x", 0.0, float, low=0, low_open=True)
    with pytest.raises(ValueError, match="x must be <= 1"):
        checked_number("x", 1.5, float, high=1)
    assert checked_flag("f", False) is False
    with pytest.raises(ValueError, match="f must be true or false"):
        checked_flag("f", "no")


def _write(tmp_path, text: str):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    return path


def test_a_key_given_twice_is_refused_as_dvc_refuses_it(tmp_path):
    path = _write(tmp_path, "common:\n  seed: 0\nstage:\n  a: 1\ncommon:\n  seed: 3\n")
    with pytest.raises(ValueError, match=r"key 'common' given twice \(first on line 1\)"):
        load_params(path)
    nested = _write(tmp_path, "stage:\n  a: 1\n  b: 2\n  a: 3\n")
    with pytest.raises(ValueError, match="key 'a' given twice"):
        load_params(nested)


def test_an_alias_bomb_is_refused_quickly(tmp_path):
    lines = ['x:\n  l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n']
    for i in range(1, 9):
        refs = ", ".join([f"*l{i - 1}"] * 9)
        lines.append(f"  l{i}: &l{i} [{refs}]\n")
    path = _write(tmp_path, "".join(lines))
    assert path.stat().st_size < 1000  # ~10⁹ values once expanded
    with pytest.raises(ValueError, match="alias bomb"):
        load_params(path)
    # the anchors params.yaml itself uses still work
    ok = _write(tmp_path, "a: &a\n  k: 1e-3\nb:\n  <<: *a\n  j: 2\n")
    assert load_params(ok)["b"] == {"k": 0.001, "j": 2}


def test_merges_of_merges_do_not_grow(tmp_path):
    """Each level merges its predecessor 9 times: ~4·10⁸ keys at level 8 if merged keys were
    repeated. PyYAML (6.0.4) keeps a merged key once, so it loads at once, to the 9 keys."""
    lines = ["m0: &m0 {" + ", ".join(f"k{j}: {j}" for j in range(9)) + "}\n"]
    for i in range(1, 9):
        lines.append(f"m{i}: &m{i}\n  <<: [{', '.join([f'*m{i - 1}'] * 9)}]\n")
    path = _write(tmp_path, "".join(lines))
    assert path.stat().st_size < 1000
    t0 = time.perf_counter()
    assert load_params(path)["m8"] == {f"k{j}": j for j in range(9)}
    assert time.perf_counter() - t0 < 30  # not a timing test: growth would take hours
    merged = _write(tmp_path, "a: &a {x: 1}\nb: &b {y: 2}\nc:\n  <<: [*a, *b]\n  z: 3\n")
    assert load_params(merged)["c"] == {"x": 1, "y": 2, "z": 3}


def test_a_key_that_is_not_a_scalar_is_named(tmp_path):
    path = _write(tmp_path, "stage:\n  ? [1, 2]\n  : 3\n")
    with pytest.raises(ValueError, match="a key must be a scalar, got list"):
        load_params(path)


def test_a_section_that_is_not_a_mapping_is_named(tmp_path):
    for text, what in (
        ("stage: [1, 2]\n", "list"),
        ("stage:\n", "NoneType"),
        ("stage: 3\n", "int"),
    ):
        with pytest.raises(ValueError, match=rf"section 'stage' must be a mapping, got {what}"):
            load_params(_write(tmp_path, text))


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path):
    path = _write(tmp_path, "stage:\n  a: 1\n" + "#" * (4 * 2**20) + "\n")
    with pytest.raises(ValueError, match="more than a parameters file holds"):
        load_params(path)
