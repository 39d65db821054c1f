"""Tests of geolib.models.checkpoints: our runs by step, hub models by revision (offline cache)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from geolib.measure.probes import unembedding
from geolib.models.checkpoints import (
    CheckpointError,
    CorruptCheckpointError,
    MissingCheckpointError,
    available_revisions,
    available_steps,
    check_safetensors,
    hub_revision,
    load,
    revision_step,
)
from geolib.models.families import ModelConfig, build_model, quiet_progress
from geolib.models.train import train
from geolib.models.train_config import TrainConfig, checkpoint_steps
from tests.repo import ROOT
from tests.tiny import tiny_corpus

V = 48
SPECIALS = ["<eos>", "<pad>", "[MASK]"]


def make_tokenizer(folder: Path) -> Path:
    """A tiny word-level tokenizer in Hugging Face format: specials 0–2, words w3…w47."""
    vocab = {tok: i for i, tok in enumerate(SPECIALS)} | {f"w{i}": i for i in range(3, V)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<eos>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<eos>",
        bos_token="<eos>",
        pad_token="<pad>",
        mask_token="[MASK]",
    )
    fast.save_pretrained(folder)
    return folder


def tiny_model(family: str = "pythia") -> ModelConfig:
    d_ff = 24 if family == "olmo" else 32
    return ModelConfig(family=family, d_model=16, n_layers=1, n_heads=2, d_ff=d_ff, context=16)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two short runs (a decoder and the encoder) trained with a tokenizer."""
    root = tmp_path_factory.mktemp("runs")
    tok_dir = tiny_corpus(root, train=(V, 4000))
    out = {}
    for family in ("pythia", "bert"):
        cfg = TrainConfig(
            model=tiny_model(family),
            train_tokens=str(root / "train.npy"),
            val_tokens=None,
            tokenizer=str(tok_dir),
            batch_size=4,
            seq_len=16,
            total_steps=6,
            warmup_steps=6,  # the rates of a 50-step warmup (longer than the run is refused)
            lr=TrainConfig.lr * 6 / 50,
            checkpoint_every=5,
            log_max=2,
        )
        train(cfg, root / family, progress=False)
        out[family] = root / family
    return out


# ----------------------------------------------------------------------------- our runs


def test_available_steps(runs):
    assert available_steps(runs["pythia"]) == checkpoint_steps(6, 5, log_max=2) == [0, 1, 2, 5, 6]
    assert available_steps(runs["pythia"] / "nowhere") == []


@pytest.mark.parametrize("family", ["pythia", "bert"])
def test_load_run_by_step(runs, family):
    from safetensors.torch import load_file

    model, tok = load(runs[family], 5)
    expected_class = "GPTNeoXForCausalLM" if family == "pythia" else "BertForMaskedLM"
    assert type(model).__name__ == expected_class and not model.training
    assert tok is not None and len(tok) == V and tok.mask_token_id == 2
    assert tok.decode(tok("w5 w7 w9")["input_ids"]) == "w5 w7 w9"
    saved = load_file(runs[family] / "step-5" / "model.safetensors")
    w = unembedding(model).detach()
    head_key = {"pythia": "embed_out.weight", "bert": "bert.embeddings.word_embeddings.weight"}
    assert torch.equal(w, saved[head_key[family]]) and w.shape == (V, 16)
    latest, _ = load(runs[family])  # latest step
    step6, _ = load(runs[family], "step-6")
    assert all(
        torch.equal(a, b) for a, b in zip(latest.parameters(), step6.parameters(), strict=True)
    )
    step0, _ = load(runs[family], "step0")
    assert not torch.equal(unembedding(step0), unembedding(step6))


def test_missing_step_lists_available(runs):
    with pytest.raises(MissingCheckpointError, match=r"step 3.*available steps: \[0, 1, 2, 5, 6\]"):
        load(runs["pythia"], 3)
    with pytest.raises(MissingCheckpointError, match="no run directory"):
        load(Path("runs") / "does-not-exist", 1)
    with pytest.raises(ValueError, match="not a step"):
        load(runs["pythia"], "final")


def _copy_run(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_missing_file_named(runs, tmp_path):
    run = _copy_run(runs["pythia"], tmp_path / "run")
    (run / "step-2" / "config.json").unlink()
    # a step without its config is not listed as available, and asking for it names the file
    assert 2 not in available_steps(run)
    with pytest.raises(MissingCheckpointError, match=r"missing: .*step-2/config\.json"):
        load(run, 2)
    (run / "step-5" / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"available steps: \[0, 1, 6\]"):
        load(run, 5)


def test_corrupt_checkpoint_named(runs, tmp_path):
    run = _copy_run(runs["pythia"], tmp_path / "run")
    weights = run / "step-5" / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) - 100])  # truncated
    with pytest.raises(CorruptCheckpointError, match=rf"{weights}.*truncated"):
        load(run, 5)
    weights.write_bytes(b"\x01")
    with pytest.raises(CheckpointError, match=str(weights)):
        load(run, 5)
    config = run / "step-1" / "config.json"
    config.write_text("{not json")
    with pytest.raises(CorruptCheckpointError, match=str(config)):
        load(run, 1)
    check_safetensors(runs["pythia"] / "step-5" / "model.safetensors")  # the original is fine


def test_integrity_errors_list_the_available_steps(runs, tmp_path):
    run = _copy_run(runs["pythia"], tmp_path / "run")
    weights = run / "step-5" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-10])
    with pytest.raises(CorruptCheckpointError, match=r"available steps: \[0, 1, 2, 5, 6\]"):
        load(run, 5)


def test_a_config_edited_to_fewer_layers_or_another_architecture_is_refused(runs, tmp_path):
    import json

    run = _copy_run(runs["pythia"], tmp_path / "run")
    config = run / "step-6" / "config.json"
    original = json.loads(config.read_text())
    n = original["num_hidden_layers"]
    config.write_text(json.dumps({**original, "num_hidden_layers": n + 1}))  # a random block
    with pytest.raises(CorruptCheckpointError, match=rf"missing .*layers\.{n}\."):
        load(run, 6)
    if n > 1:
        config.write_text(json.dumps({**original, "num_hidden_layers": n - 1}))
        with pytest.raises(CorruptCheckpointError, match=rf"unexpected .*layers\.{n - 1}\."):
            load(run, 6)
    bert = json.loads((runs["bert"] / "step-6" / "config.json").read_text())
    config.write_text(json.dumps(bert))  # another architecture entirely
    with pytest.raises(CorruptCheckpointError, match=r"missing .*available steps"):
        load(run, 6)


def test_valid_json_of_the_wrong_shape_raises_the_modules_error(runs, tmp_path):
    run = _copy_run(runs["pythia"], tmp_path / "run")
    config = run / "step-1" / "config.json"
    config.write_text("[1, 2, 3]")
    with pytest.raises(CorruptCheckpointError, match=r"expected a JSON object, got list"):
        load(run, 1)


def test_a_corrupt_tokenizer_names_the_file(runs, tmp_path):
    run = _copy_run(runs["pythia"], tmp_path / "run")
    (run / "tokenizer" / "tokenizer.json").write_text("{broken")
    with pytest.raises(CorruptCheckpointError, match=r"tokenizer.*tokenizer.json: content changed"):
        load(run, 1)


def test_a_mistyped_local_run_is_not_sent_to_the_hub(runs, tmp_path, monkeypatch):
    import geolib.models.checkpoints as ck

    root = tmp_path / "runs"
    _copy_run(runs["pythia"], root / "pythia")

    def no_hub(*_a, **_k):
        raise AssertionError("sent to the hub")

    monkeypatch.setattr(ck, "load_hub", no_hub)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MissingCheckpointError, match=r"no run directory runs/pyhtia.*\['pythia'\]"):
        load("runs/pyhtia")


# ----------------------------------------------------------------------------- hub, offline


def make_hub_cache(cache: Path, repo_id: str, revisions: dict[str, Path]) -> dict[str, str]:
    """Lay out ``revisions`` (name → folder) as the Hugging Face cache does (the rehearsal's
    writer, ``scripts/fake_hub.py``); ``main`` points at the last revision. Returns revision →
    commit."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fake_hub", ROOT / "scripts" / "fake_hub.py")
    fake_hub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake_hub)
    return fake_hub.write_repo(cache, repo_id, revisions)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """An offline cache with ``testorg/tiny-pythia`` at step1, step2, step10 and
    ``testorg/tiny-bert`` at step1; HF_HUB_OFFLINE=1 and HF_HUB_CACHE point at it."""
    cache = tmp_path / "hub"
    sources = {}
    for name, family, steps in (("tiny-pythia", "pythia", (1, 2, 10)), ("tiny-bert", "bert", (1,))):
        revs = {}
        for step in steps:
            folder = tmp_path / "src" / name / f"step{step}"
            with quiet_progress():
                build_model(tiny_model(family), V, seed=step).save_pretrained(folder)
            make_tokenizer(folder)
            revs[f"step{step}"] = folder
        make_hub_cache(cache, f"testorg/{name}", revs)
        sources[name] = revs
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache, sources


@pytest.mark.parametrize(
    ("label", "step"),
    [
        (512, 512),
        ("512", 512),
        ("step-512", 512),
        ("step512", 512),  # Pythia
        ("step20000-tokens84B", 20000),  # OLMo: not 2000084
        ("step1000-tokens4B", 1000),
        ("stage1-step928646-tokens3896B", 928646),  # OLMo-2
        ("stage2-ingredient1-step11931-tokens50B", 11931),
        ("step20000-tokens84B-seed42", 20000),
        ("final", -1),
        ("main", -1),
    ],
)
def test_revision_step_reads_every_family(label, step):
    assert revision_step(label) == step


@pytest.mark.parametrize(
    "label", ["step20000-tokens84B-extra", "tokens84B", "v1.0", "step", "", "step-3x", "final2"]
)
def test_revision_step_refuses_unknown_forms_by_name(label):
    with pytest.raises(ValueError, match=f"unknown revision {label!r}"):
        revision_step(label)


def test_revision_step_refuses_non_labels():
    with pytest.raises(ValueError, match="negative"):
        revision_step(-3)
    with pytest.raises(TypeError):
        revision_step(2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        revision_step(True)  # type: ignore[arg-type]
    step = revision_step(np.int64(512))  # a step read from a table
    assert step == 512 and type(step) is int


def test_hub_revision_names():
    assert hub_revision(1000) == "step1000" and hub_revision(None) == "main"
    assert hub_revision("step3") == "step3"


def test_load_hub_by_revision_offline(hub):
    cache, _ = hub
    assert available_revisions("testorg/tiny-pythia") == ["main", "step1", "step2", "step10"]
    expected = {
        rev: build_model(tiny_model("pythia"), V, seed=int(rev[4:])).state_dict()
        for rev in ("step1", "step2", "step10")
    }
    for revision, rev in ((1, "step1"), ("step2", "step2"), (None, "step10")):
        model, tok = load("testorg/tiny-pythia", revision)
        assert type(model).__name__ == "GPTNeoXForCausalLM" and not model.training
        state = model.state_dict()
        assert all(torch.equal(state[k], expected[rev][k]) for k in expected[rev]), rev
        assert tok.eos_token == "<eos>" and len(tok) == V
    bert, _ = load("testorg/tiny-bert", 1, cache_dir=cache)
    assert type(bert).__name__ == "BertForMaskedLM"


def test_hub_missing_revision_lists_cached(hub):
    with pytest.raises(
        MissingCheckpointError,
        match=r"'step3'.*offline.*cached revisions: \['main', 'step1', 'step2', 'step10'\]",
    ):
        load("testorg/tiny-pythia", 3)
    with pytest.raises(MissingCheckpointError, match=r"cached revisions: \[\]"):
        load("testorg/not-there", 1)


def test_hub_corrupt_blob_named(hub):
    cache, _ = hub
    snapshot = next((cache / "models--testorg--tiny-pythia" / "snapshots").iterdir())
    refs = cache / "models--testorg--tiny-pythia" / "refs"
    rev = next(
        p.name for p in refs.iterdir() if p.read_text() == snapshot.name and p.name != "main"
    )
    blob = (snapshot / "model.safetensors").resolve()
    blob.write_bytes(blob.read_bytes()[:-64])
    with pytest.raises(CorruptCheckpointError, match="model.safetensors.*truncated"):
        load("testorg/tiny-pythia", rev)
