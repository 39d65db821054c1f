"""The per-model stage of A4, A6, A7: what it writes reads back as exactly what it computed, the
chapter decides the same on it, and a table computed with other numbers is never read."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from geolib.experiments.gradient_energy_models import main, run_stage
from geolib.verdicts.chapters import energy_tables as et
from geolib.verdicts.chapters import gradient_energy as ge
from tests.verdicts.chapters.test_gradient_energy import (
    SECTION,
    VERDICTS,
    a6_models,
    decoders,
    imprinted,
    tables,
)

ALTERNATIVES = {
    "a4_v3": {"k = 2": {"k": 2}, "k = 16": {"k": 16}, "every": {"steps": "all"}},
    "a6_v3": {"half": {"progress": 0.5}, "every": {"steps": "all"}},
    "a7_v3": {
        "null 0": {"null_source": 0},
        "after": {"after_warmup": 2},
        "often": {"threshold": 0.6},
    },
}


def declared(**change):
    raw = {**SECTION, "verdict_steps": [0, 1, 16, 64, 256, 1000]}
    for key, alts in ALTERNATIVES.items():
        raw[key] = {**raw[key], "alternatives": alts}
    return {**raw, **change}


def edge_peak():
    """A decoder whose refit R peaks at the first checkpoint searched (step 1): no checkpoint
    before its peak, a missing step number in a whole-number column."""

    def r(step, layer, source):
        return 50.0 if (source == "refit" and step == 1) else imprinted(step, layer, source)

    return {"edge-s9": {"decoder": True, "r": r}}


def write_stage(t: et.Tables, folder) -> None:
    folder.mkdir()
    t.r_energy.to_csv(folder / "r_energy.csv", index=False)
    t.losses.to_csv(folder / "losses.csv", index=False)
    (folder / "summary.json").write_text(json.dumps(t.summary))


def built(tmp_path, **change):
    """A gradient-energy stage's tables on disk (decoders and encoders, and a warm-up
    alternative), the per-model stage run on them, and both as the chapter loads them."""
    models = {**decoders(imprinted), **a6_models([40, 50, 60], [5, 8]), **edge_peak()}
    t, warm = tables(models), tables(decoders(imprinted, n=2))
    write_stage(t, tmp_path / "ge")
    write_stage(warm, tmp_path / "warm")
    raw = declared(out_dir=str(tmp_path / "ge"), **change)
    out = tmp_path / "models"
    run_stage({"out_dir": str(out)}, raw, VERDICTS, tmp_path / "warm")
    loaded = et.load_tables(tmp_path / "ge", out, tmp_path / "warm")
    # what a notebook rerun with overrides reads: the same tables, computed when asked
    computed = et.load_tables(tmp_path / "ge", None, tmp_path / "warm")
    return raw, loaded, computed, out


def test_the_written_tables_read_back_as_computed_and_decide_the_same(tmp_path):
    raw, loaded, computed, out = built(tmp_path)
    s = ge.Section.from_params(raw, VERDICTS)
    for claim, decide, alts in (
        ("A4", ge.a4_v3, ALTERNATIVES["a4_v3"]),
        ("A6", ge.a6_v3, ALTERNATIVES["a6_v3"]),
        ("A7", ge.a7_v3, ALTERNATIVES["a7_v3"]),
    ):
        for change in [{}, *alts.values()]:
            a, b = decide(loaded, s, change), decide(computed, s, change)
            assert (str(a.verdict), a.verdict.numbers, a.key_number, a.detail) == (
                str(b.verdict),
                b.verdict.numbers,
                b.key_number,
                b.detail,
            ), (claim, change)
            if b.per_model is not None and len(b.per_model):
                # every float exactly as computed; step numbers as whole numbers
                pd.testing.assert_frame_equal(
                    a.per_model,
                    b.per_model.reset_index(drop=True),
                    check_dtype=False,
                    check_exact=True,
                )
    views = json.loads((out / "views.json").read_text())
    assert "k = 16" not in views["A4"]  # a rank the stage did not measure: not written
    assert ge.a4_v3(loaded, s, {"k": 16}).verdict.status == "not yet run"
    assert views["A7"]["often"] == views["A7"]["primary"]
    assert sorted(views["warmup"]["A7"]) == ["primary"]
    a7 = pd.read_csv(out / "a7.csv")
    assert set(a7["view"]) == set(views["A7"])
    assert a7["run"].nunique() == len(loaded.summary["runs"])  # every run, learned or not
    default, longer, _ = ge.warmup_per_model(loaded, s, None, 4)
    assert longer["model"].tolist() == ["dec-s0", "dec-s1"]
    edge = ge.a7_v3(loaded, s).per_model.set_index("model").loc["edge-s9"]
    assert edge["peak_step"] == 1 and pd.isna(edge["before_peak"]) and edge["after_peak"] == 16


def test_a_table_computed_with_other_numbers_is_never_read(tmp_path):
    raw, loaded, _, _ = built(tmp_path)
    other = ge.Section.from_params({**raw, "early_share": 0.5}, VERDICTS)
    with pytest.raises(
        ValueError, match="no A4 table computed with .*dvc repro gradient_energy_models"
    ):
        ge.a4_v3(loaded, other)
    with pytest.raises(ValueError, match="no A6 table"):
        ge.a6_v3(loaded, ge.Section.from_params(raw, VERDICTS), {"progress": 0.7})


def test_the_stage_reads_its_sections_and_names_missing_tables(tmp_path, monkeypatch):
    raw, _, _, _ = built(tmp_path)
    params = {
        "gradient_energy": raw,
        "warmup_gradient_energy": {**raw, "out_dir": str(tmp_path / "warm")},
        "gradient_energy_models": {"out_dir": str(tmp_path / "cli")},
        "verdicts": VERDICTS,
    }
    path = tmp_path / "params.yaml"
    path.write_text(json.dumps(params))  # JSON is YAML
    assert main(["--params", str(path)]) == 0
    assert (tmp_path / "cli" / "warmup_a7.csv").is_file()
    with pytest.raises(FileNotFoundError, match="run the gradient_energy stage first"):
        run_stage(
            {"out_dir": str(tmp_path / "x")}, {**raw, "out_dir": str(tmp_path)}, VERDICTS, None
        )
    with pytest.raises(ValueError, match="learned_margin"):
        run_stage({"out_dir": str(tmp_path / "x")}, raw, {"learned_margin": -1}, None)


def test_per_model_tables_of_other_measures_are_refused(tmp_path):
    raw, _, _, out = built(tmp_path)
    r = pd.read_csv(tmp_path / "ge" / "r_energy.csv")
    r.assign(r_energy=r["r_energy"] * 2).to_csv(tmp_path / "ge" / "r_energy.csv", index=False)
    with pytest.raises(ValueError, match="computed from other tables .*dvc repro"):
        et.load_tables(tmp_path / "ge", out, tmp_path / "warm")
    # the warm-up alternative measured after the per-model stage ran: named, not a KeyError
    run_stage({"out_dir": str(out)}, raw, VERDICTS, None)
    with pytest.raises(ValueError, match="records no per-model tables of .*warm"):
        et.load_tables(tmp_path / "ge", out, tmp_path / "warm")


def test_a_learned_model_without_its_row_is_an_error(tmp_path):
    _, loaded, _, _ = built(tmp_path)
    args = {"k": 4, "progress": 0.9, "steps": None}
    with pytest.raises(ValueError, match=r"no A6 row for \['runs/gone'\]"):
        loaded.models.rows("A6", args, ["runs/dec-s0", "runs/gone"])
    # A7 leaves out a run with no checkpoint in its searched window: no error
    a7 = {
        "k": 4,
        "frozen_sources": SECTION["frozen_sources"],
        "early_share": 0.3,
        "margin": 0.25,
        "after_warmup": 0.0,
        "warmup_steps": 50,
        "null_source": None,
    }
    assert loaded.models.rows("A7", a7, ["runs/gone"]).empty
