"""geolib.verdicts.chapters.released: the released models' datasheets and measured tables, read in
the parameters' order, with clear errors for a missing stage output."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from geolib.verdicts.chapters.released import COLUMNS, load_released

SHEET = {
    "title": "Tiny-1M, 4-bit GGUF",
    "architecture": "LlamaForCausalLM",
    "parameters": 1_234_567,
    "layers": 2,
    "d_model": 8,
    "vocab_size": 512,
    "package": "tiny",
    "version": "1.0",
    "artifact_sha256": "ab" * 32,
    "caveats": ["one checkpoint"],
}


def r_energy(losses: dict[str, float]) -> pd.DataFrame:
    """Rows of `geolib measure`'s r_energy.csv: per domain, layers embed/block1/block2 at k=1
    and 4, T refitted (and a frozen source that the profile must leave out)."""
    rows = []
    for domain, loss in losses.items():
        for i, layer in enumerate(["embed", "block1", "block2"]):
            for k in (1, 4):
                for source in ("refit", "step-0"):
                    r = 2.0 + i + k if source == "refit" else 99.0
                    rows.append(
                        {
                            "run": "m.gguf",
                            "text": f"corpus:{domain}",
                            "layer": layer,
                            "layer_index": i,
                            "k": k,
                            "source": source,
                            "r_energy": r,
                            "ci_low": r - 1.5,
                            "ci_high": r + 1,
                            "ceiling": 10.0 * r,
                            "fraction_of_ceiling": 0.1,
                            "eval_loss": loss,
                        }  # fmt: skip
                    )
    return pd.DataFrame(rows)


def write(tmp_path, key: str, sheet: dict, table: pd.DataFrame) -> tuple[dict, dict]:
    (tmp_path / "pre" / key).mkdir(parents=True, exist_ok=True)
    (tmp_path / "pre" / key / "datasheet.json").write_text(json.dumps(sheet))
    (tmp_path / "res" / key).mkdir(parents=True, exist_ok=True)
    table.to_csv(tmp_path / "res" / key / "r_energy.csv", index=False)
    (tmp_path / "res" / key / "summary.json").write_text(json.dumps({"command": f"measure {key}"}))
    return {"out_root": str(tmp_path / "pre")}, {"out_root": str(tmp_path / "res")}


def test_released_models_in_order_with_their_tables(tmp_path):
    write(tmp_path, "b", {**SHEET, "title": "Bee 2, base"}, r_energy({"id": 3.0}))
    pre, res = write(tmp_path, "a", SHEET, r_energy({"id": 2.5, "ood_x": 4.0}))
    models = load_released({**pre, "models": {"b": {}, "a": {}}}, res)
    assert [m.key for m in models] == ["b", "a"]
    assert [m.name for m in models] == ["Bee 2", "Tiny-1M"]
    a = models[1]
    assert a.command == "measure a" and set(a.r_energy["domain"]) == {"id", "ood_x"}
    assert a.scale == "released model Tiny-1M, 1M parameters, final checkpoint only"
    assert "1.2M parameters, 2 layers, d = 8, vocabulary 512; tiny==1.0, sha256 abab" in a.header()
    # the profile: T refitted at the rank asked, depth from 0 (embed) to 1 (last block)
    prof = a.profile(4)
    assert set(prof["source"]) == {"refit"} and set(prof["k"]) == {4}
    assert sorted(set(prof["depth"])) == [0.0, 0.5, 1.0]
    assert a.rank(4) == 4 and a.rank(16) == 1  # a rank not measured: the smallest that was
    # per domain over the block layers only: r = 2 + i + 4 for blocks 1, 2 -> median 7.5
    s = a.domain_summary(4)
    assert list(s.index) == ["id", "ood_x"]
    assert s.loc["id", "median_r_energy"] == 7.5 and s.loc["id", "layers"] == 2
    assert s.loc["ood_x", "eval_loss"] == 4.0
    assert s.loc["id", "layers_with_lower_bound_above_1"] == 2  # lower bounds 5.5 and 6.5


def test_a_missing_stage_output_or_column_is_named(tmp_path):
    pre, res = write(tmp_path, "a", SHEET, r_energy({"id": 2.5}))
    with pytest.raises(FileNotFoundError, match=r"dvc repro fetch_pretrained@zz"):
        load_released({**pre, "models": {"zz": {}}}, res)
    (tmp_path / "res" / "a" / "summary.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"dvc repro gradient_energy_pretrained@a"):
        load_released({**pre, "models": {"a": {}}}, res)
    pre, res = write(tmp_path, "a", SHEET, r_energy({"id": 2.5}).drop(columns=["ceiling"]))
    with pytest.raises(ValueError, match=r"lacks the columns \['ceiling'\]"):
        load_released({**pre, "models": {"a": {}}}, res)
    assert load_released({**pre, "models": {}}, res) == []
    assert "ceiling" in COLUMNS
