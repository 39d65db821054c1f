"""``geolib measure``: every output column against the library's functions computed another way,
a chosen unembedding spectrum, hub revisions offline, and bad input (no partial outputs)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from geolib.__main__ import main as geolib_main
from geolib.experiments import measure_model as mm
from geolib.measure.energy_counts import a4_released_count
from geolib.measure.metrics import (
    effective_rank,
    isoscore,
    isoscore_from_cov,
    mean_cosine_similarity,
)
from geolib.measure.probes import complement_subspaces, residual_states, states_and_gradients
from geolib.models.checkpoints import load
from geolib.models.families import ModelConfig, build_model, quiet_progress
from geolib.models.fingerprint import weights_hash
from tests.models.test_checkpoints import V, make_hub_cache, make_tokenizer

D, RANK_W = 16, 4


def _saved_model(folder, seed: int = 0, n_layers: int = 2):
    """A tiny GPT-NeoX whose unembedding has ``RANK_W`` equal singular values and no others, so
    that its effective rank (both variants) and stable rank are exactly ``RANK_W``."""
    cfg = ModelConfig(family="pythia", d_model=D, n_layers=n_layers, n_heads=2, d_ff=32, context=32)
    with quiet_progress():
        model = build_model(cfg, V, seed=seed)
        rng = np.random.default_rng(seed)
        u, _ = np.linalg.qr(rng.standard_normal((V, RANK_W)))
        v, _ = np.linalg.qr(rng.standard_normal((D, RANK_W)))
        w = torch.from_numpy(3.0 * u @ v.T).float()
        model.get_output_embeddings().weight.data.copy_(w)
        model.save_pretrained(folder)
    make_tokenizer(folder)
    return folder


def _text(path, n_words: int = 1200, seed: int = 0):
    words = np.random.default_rng(seed).integers(3, V, n_words)
    path.write_text(" ".join(f"w{i}" for i in words))
    return path


ARGS = ["--tokens", "1000", "--seq-len", "16", "--ranks", "1", "2", "--controls", "4"]
ARGS += ["--n-boot", "50", "--batch-size", "5"]


def test_every_column_against_the_library_computed_another_way(tmp_path):
    folder = _saved_model(tmp_path / "model")
    text = _text(tmp_path / "text.txt")
    out = tmp_path / "out"
    argv = ["measure", str(folder), "--text", str(text), *ARGS, "--out", str(out)]
    assert geolib_main(argv) == 0  # the command: the figure is the report's
    table = pd.read_csv(out / "measure.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert (out / "profiles.png").stat().st_size > 0 and (out / "profiles.svg").is_file()
    assert list(table["layer_index"]) == [0, 1, 2]  # embedding output + 2 blocks

    # the chosen spectrum: RANK_W equal singular values
    for col in ("w_erank", "w_erank_sq", "w_stable_rank"):
        assert np.allclose(table[col], RANK_W, rtol=1e-6), col

    # the states, the gradients and the subspaces, recomputed from whole matrices
    model, tok = load(folder)
    req = mm.Request(model=str(folder), revisions=(None,), text=str(text), tokens=1000, seq_len=16)
    tokens = np.asarray(tok(text.read_text())["input_ids"][:1000])
    src, ev = mm.windows(req, tokens)
    states = residual_states(model, torch.from_numpy(src[:, :-1]))
    sg = states_and_gradients(model, torch.from_numpy(ev[:, :-1]), torch.from_numpy(ev[:, 1:]))
    assert summary["texts"] == {str(text): 1000} and table["n_source"].iloc[0] == len(src)
    assert summary["revisions"]["final"]["weights_sha256"] == weights_hash(model)
    assert np.isclose(table["eval_loss"].iloc[0], sg.loss_sum / sg.n_targets, rtol=1e-5)
    assert np.allclose(table["w_isoscore"], isoscore(model.get_output_embeddings().weight.detach()))
    for i, row in table.iterrows():
        h = states[i].reshape(-1, D).double().numpy()
        assert np.isclose(row["erank"], effective_rank(h, center=True), rtol=1e-8)
        assert np.isclose(row["isoscore"], isoscore(h), rtol=1e-8)
        assert np.isclose(row["mean_cosine"], mean_cosine_similarity(h), rtol=1e-8, atol=1e-12)
        cov = np.cov(h.T)
        lam, vecs = np.linalg.eigh(cov)
        g = sg.grads[i].double().numpy()  # (sequences, seq, d)
        for k in (1, 2):
            # IsoScore in T's complement: the d − k smallest eigenvalues as a diagonal covariance
            after = isoscore_from_cov(np.diag(lam[: D - k]))
            assert np.isclose(row[f"isoscore_after_tangent_k{k}"], after, rtol=1e-8)
            t = vecs[:, ::-1][:, :k]
            ctrl = complement_subspaces(t, 4, np.random.default_rng([0, i, k]))
            e_t = ((g @ t) ** 2).sum()
            e_n = np.mean([((g @ c) ** 2).sum() for c in ctrl])
            assert np.isclose(row[f"r_energy_k{k}"], e_t / e_n, rtol=1e-4), (i, k)
            assert row[f"r_energy_k{k}_ci_low"] <= row[f"r_energy_k{k}"]
            assert row[f"r_energy_k{k}"] <= row[f"r_energy_k{k}_ci_high"]
            assert row[f"r_energy_k{k}"] <= row[f"ceiling_k{k}"] * (1 + 1e-9)
    assert summary["ranks"] == [1, 2] and set(summary["libraries"]) >= {"torch", "transformers"}
    assert summary["command"].startswith("geolib measure ") and "--seq-len 16" in summary["command"]
    tables = {f: (out / f).read_bytes() for f in ("measure.csv", "r_energy.csv", "summary.json")}
    assert geolib_main(argv) == 0  # measured again: the same bytes (no timing in a file)
    assert {f: (out / f).read_bytes() for f in tables} == tables

    # r_energy.csv: the same numbers, one row per layer and rank, in the chapter's columns, so
    # that the chapter's counts read it (every embedding-free layer of the decoder is a unit)
    long = pd.read_csv(out / "r_energy.csv")
    assert len(long) == 3 * 2 and set(long["source"]) == {"refit"} and set(long["step"]) == {-1}
    for _, r in long.iterrows():
        wide = table[table["layer_index"] == r["layer_index"]].iloc[0]
        for col, src in (("r_energy", ""), ("ci_low", "_ci_low"), ("ci_high", "_ci_high")):
            assert r[col] == pytest.approx(wide[f"r_energy_k{r['k']}{src}"], rel=1e-12)
        assert r["fraction_of_ceiling"] == pytest.approx(r["r_energy"] / r["ceiling"], rel=1e-12)
    count = a4_released_count(long.assign(domain="text"), k=2, threshold=0.5, no_effect=0.1)
    assert count["n_units"] + count["n_below_ceiling"] == 2  # the two block layers
    with pytest.raises(ValueError, match="no rows"):
        mm.long_table(table.iloc[:0])


def test_several_texts_are_measured_one_by_one_as_if_alone(tmp_path, capsys):
    """Two texts on one loaded model give each text the rows it gets measured alone (its own
    windows), labelled by the text; a text named twice is refused."""
    folder = _saved_model(tmp_path / "model")
    a, b = _text(tmp_path / "a.txt", seed=1), _text(tmp_path / "b.txt", seed=2)
    both, alone = tmp_path / "both", tmp_path / "alone"
    assert mm.main([str(folder), "--text", str(a), str(b), *ARGS, "--out", str(both)]) == 0
    assert mm.main([str(folder), "--text", str(a), *ARGS, "--out", str(alone)]) == 0
    table, one = pd.read_csv(both / "measure.csv"), pd.read_csv(alone / "measure.csv")
    assert list(table["text"]) == [str(a)] * 3 + [str(b)] * 3
    pd.testing.assert_frame_equal(table.iloc[:3].reset_index(drop=True), one)
    assert not np.allclose(table["r_energy_k1"].iloc[:3], table["r_energy_k1"].iloc[3:])
    summary = json.loads((both / "summary.json").read_text())
    assert set(summary["revisions"]["final"]["eval_loss"]) == {str(a), str(b)}
    assert set(pd.read_csv(both / "r_energy.csv")["text"]) == {str(a), str(b)}
    assert (
        mm.main([str(folder), "--text", str(a), str(a), *ARGS, "--out", str(tmp_path / "x")]) == 2
    )
    assert "named twice" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_hub_revisions_offline_give_one_row_per_revision_and_layer(tmp_path, monkeypatch):
    revs = {f"step{s}": _saved_model(tmp_path / "src" / f"step{s}", seed=s) for s in (1, 2)}
    make_hub_cache(tmp_path / "hub", "testorg/tiny", revs)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    text = _text(tmp_path / "text.txt")
    out = tmp_path / "out"
    argv = ["measure", "testorg/tiny", "--revision", "step1", "--revision", "step2"]
    assert (
        geolib_main([*argv, "--text", str(text), *ARGS, "--layers", "0,-1", "--out", str(out)]) == 0
    )
    table = pd.read_csv(out / "measure.csv")
    assert list(zip(table["revision"], table["layer_index"], strict=True)) == [
        ("step1", 0),
        ("step1", 2),
        ("step2", 0),
        ("step2", 2),
    ]
    hashes = json.loads((out / "summary.json").read_text())["revisions"]
    assert hashes["step1"]["weights_sha256"] != hashes["step2"]["weights_sha256"]

    # a revision that is not in the cache: an error naming the cached ones, and no output
    bad = tmp_path / "bad"
    argv = ["measure", "testorg/tiny", "--revision", "step1", "--revision", "step5"]
    assert geolib_main([*argv, "--text", str(text), *ARGS, "--out", str(bad)]) == 2
    assert not bad.exists()


def test_a_run_directory_by_step_and_the_encoder(decoder_and_encoder_runs, tmp_path):
    root = decoder_and_encoder_runs
    text = _text(tmp_path / "text.txt")
    out = tmp_path / "out"
    argv = [str(root / "bert"), "--revision", "0", "--revision", "8", "--text", str(text)]
    assert mm.main([*argv, *ARGS, "--out", str(out)]) == 0
    table = pd.read_csv(out / "measure.csv")
    assert set(table["revision"].astype(str)) == {"0", "8"}
    assert (table["r_energy_k1_ci_low"] <= table["r_energy_k1"]).all()


def test_a_gguf_file_through_the_command(tmp_path, capsys):
    """A GGUF file written here (a tiny llama, SmolLM2's layout) is loaded de-quantized, encoded
    in its own tokenizer and measured: its weights hash and unembedding in the table are the
    loaded model's; a GGUF file has no revisions."""
    from geolib.models.pretrained import load_gguf
    from tests.tiny import write_tiny_gguf

    gguf = write_tiny_gguf(tmp_path / "tiny.gguf")
    text = tmp_path / "text.txt"
    text.write_text(" ".join(["hello world, all is well"] * 200))
    out = tmp_path / "out"
    argv = ["measure", str(gguf), "--text", str(text), *ARGS, "--out", str(out)]
    assert geolib_main(argv) == 0
    model, tok = load_gguf(tmp_path, "tiny.gguf")
    table = pd.read_csv(out / "measure.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert list(table["layer_index"]) == [0, 1, 2]
    assert summary["revisions"]["final"]["weights_sha256"] == weights_hash(model)
    w = model.get_output_embeddings().weight.detach().double().numpy()
    assert np.allclose(table["w_erank"], effective_rank(w), rtol=1e-8)
    assert np.allclose(table["w_isoscore"], isoscore(w), rtol=1e-6)
    assert summary["texts"] == {str(text): 1000}
    assert (table["r_energy_k1_ci_low"] <= table["r_energy_k1"]).all()

    bad = tmp_path / "bad"
    assert geolib_main([*argv[:2], "--revision", "main", *argv[2:-1], str(bad)]) == 2
    assert "is one GGUF file; it has no revisions" in capsys.readouterr().err
    assert not bad.exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--layers", "3"], "the model has 3 layers"),
        (["--layers", "first"], "--layers must be 'all' or integers"),
        (["--tokens", "60"], "fewer than 4 windows"),
        (["--device", "tpu"], "device must be 'cpu', 'cuda' or 'cuda:N' (--device)"),
        (["--ranks", "0"], "--ranks must be positive"),
    ],
)
def test_bad_input_is_a_clear_error_and_leaves_no_output(tmp_path, capsys, extra, message):
    folder = _saved_model(tmp_path / "model")
    text = _text(tmp_path / "text.txt")
    out = tmp_path / "out"
    assert mm.main([str(folder), "--text", str(text), *ARGS, *extra, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_short_text_a_missing_head_and_cuda_without_a_gpu(tmp_path, capsys):
    folder = _saved_model(tmp_path / "model")
    short = _text(tmp_path / "short.txt", n_words=40)
    out = tmp_path / "out"
    assert mm.main([str(folder), "--text", str(short), "--seq-len", "16", "--out", str(out)]) == 2
    assert "fewer than 4 windows of 17" in capsys.readouterr().err and not out.exists()

    if not torch.cuda.is_available():
        argv = [str(folder), "--text", str(short), "--device", "cuda", "--out", str(out)]
        assert mm.main(argv) == 2
        assert "has no CUDA GPU" in capsys.readouterr().err and not out.exists()

    class Headless(torch.nn.Module):
        def get_output_embeddings(self):
            return None

    with pytest.raises(ValueError, match="has no output embeddings"):
        mm.unembedding_row(Headless())


def test_the_geolib_command_names_its_subcommands(capsys):
    assert geolib_main(["nope"]) == 2
    assert "unknown command 'nope'" in capsys.readouterr().err
    assert geolib_main(["--help"]) == 0


class _BosFirst:
    """A tokenizer that starts every text with ``bos`` by default (as Gemma's does)."""

    mask_token_id = None

    def __init__(self, tok, bos: int, adds: bool = True) -> None:
        self.tok, self.bos_token_id, self.adds = tok, bos, adds
        self.all_special_ids = [bos]

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        return {"input_ids": [self.bos_token_id] * (add_special_tokens and self.adds) + ids}


def test_a_decoder_whose_tokenizer_adds_bos_reads_each_window_after_it(tmp_path):
    """Its states and gradients are those of the windows read after BOS, the BOS position left
    out; its loss counts the same targets as without it. A tokenizer that has a BOS token but
    does not add it reads the windows as they are."""
    folder = _saved_model(tmp_path / "model")
    model, tok = load(folder)
    bos = 1
    assert mm.bos_prefix(_BosFirst(tok, bos)) == bos
    assert mm.bos_prefix(_BosFirst(tok, bos, adds=False)) is None
    req = mm.Request(model=str(folder), revisions=(None,), text="t", tokens=1000, seq_len=16,
                     ranks=(1, 2), controls=4, n_boot=50)  # fmt: skip
    tokens = np.asarray(tok(_text(tmp_path / "t.txt").read_text())["input_ids"][:1000])
    src, ev = mm.windows(req, tokens)
    w_row = mm.unembedding_row(model)
    got = mm.measure_revision(req, None, model, _BosFirst(tok, bos), src, ev, [0, 2], "t", w_row)
    plain = mm.measure_revision(
        req, None, model, _BosFirst(tok, bos, adds=False), src, ev, [0, 2], "t", w_row
    )
    prefixed = mm.with_prefix(src[:, :-1], bos)
    assert prefixed.shape == (len(src), 17) and (prefixed[:, 0] == bos).all()
    states = residual_states(model, torch.from_numpy(prefixed))
    ev_in, ev_tg = mm.with_prefix(ev[:, :-1], bos), mm.with_prefix(ev[:, 1:], -100)
    sg = states_and_gradients(model, torch.from_numpy(ev_in), torch.from_numpy(ev_tg))
    assert sg.n_targets == ev[:, 1:].size  # the prefix predicts nothing counted
    assert got.eval_loss == pytest.approx(sg.loss_sum / sg.n_targets, rel=1e-5)
    assert got.eval_loss != pytest.approx(plain.eval_loss, rel=1e-6)
    for row in got.rows:
        i = row["layer_index"]
        h = states[i][:, 1:].reshape(-1, D).double().numpy()
        assert np.isclose(row["erank"], effective_rank(h, center=True), rtol=1e-8)
        lam, vecs = np.linalg.eigh(np.cov(h.T))
        g = sg.grads[i][:, 1:].double().numpy()
        t = vecs[:, ::-1][:, :2]
        ctrl = complement_subspaces(t, 4, np.random.default_rng([0, i, 2]))
        ratio = ((g @ t) ** 2).sum() / np.mean([((g @ c) ** 2).sum() for c in ctrl])
        assert np.isclose(row["r_energy_k2"], ratio, rtol=1e-4)
