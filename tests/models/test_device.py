"""Tests of geolib.models.device, and that every pipeline stage that loads or trains a model
stops at once when ``common.device`` names a GPU this machine lacks."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import pytest
import torch
import yaml

from geolib.models.device import DeviceUnavailableError, resolve_device

ROOT = Path(__file__).resolve().parents[2]
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())

#: the stage modules that load or train a model (each must check the device first) …
MODEL_MODULES = {
    "geolib.models.train",
    "geolib.models.designs",
    "geolib.models.pretrained",
    "geolib.experiments.gradient_energy",
    "geolib.experiments.residual_isotropy",
    "geolib.experiments.frequency_collapse",
    "geolib.experiments.training_length",
    "geolib.experiments.sweep",
    "geolib.experiments.forgetting",
    "geolib.experiments.quant_robustness",
    "geolib.experiments.saturation",
    "geolib",  # `python -m geolib measure`: the released-model lane
}
#: … and the ones that read tables or text only
MODEL_FREE = {
    "geolib.data.prepare",
    "geolib.data.tokenizer",
    "geolib.experiments.geometry_performance",
    "geolib.experiments.gradient_energy_models",
}
#: stages of a model module that read only tables (another subcommand)
TABLE_STAGES = {"saturation_tables"}
#: stages that run the `geolib` command (its options templated from params.yaml): tested below
COMMAND_STAGES = {"gradient_energy_pretrained"}
NO_GPU = not torch.cuda.is_available()


def _first_item(stage: dict) -> dict[str, str]:
    """A foreach stage's templates filled with its first item: ``${item}`` (over a list), or
    ``${key}`` and ``${item.<field>}`` (over a mapping)."""
    section, key = re.fullmatch(r"\$\{(\w+)\.(\w+)\}", stage["foreach"]).groups()
    items = PARAMS[section][key]
    if isinstance(items, dict):
        name, fields = next(iter(items.items()))
        return {"${key}": name, **{f"${{item.{f}}}": str(v) for f, v in fields.items()}}
    return {"${item}": str(items[0])}


def _body(stage: dict) -> tuple[str, dict[str, str]]:
    """A stage's command and what fills its foreach templates (none for a plain stage)."""
    if "foreach" in stage:
        return stage["do"]["cmd"], _first_item(stage)
    return stage["cmd"], {}


def _fill(word: str, values: dict[str, str]) -> str:
    for template, value in values.items():
        word = word.replace(template, value)
    return word


def _module_stages() -> list[tuple[str, str, list[str]]]:
    """``(stage, module, argv)`` of every ``python -m geolib…`` stage in dvc.yaml; a foreach
    stage once, with its first item."""
    out = []
    for name, stage in STAGES.items():
        cmd, values = _body(stage)
        words = [_fill(w, values) for w in shlex.split(cmd)]
        if words[:2] != ["python", "-m"]:
            continue
        out.append((name, words[2], words[3:]))
    return out


MODULE_STAGES = _module_stages()


def test_every_module_stage_is_classified():
    """A new stage must say whether it uses a model (then the device test below covers it)."""
    modules = {m for _, m, _ in MODULE_STAGES}
    assert modules <= MODEL_MODULES | MODEL_FREE, modules - MODEL_MODULES - MODEL_FREE
    assert MODEL_MODULES <= modules  # no stale entry


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU: `make test-device` covers it")
@pytest.mark.parametrize(
    ("stage", "module", "argv"),
    [
        s
        for s in MODULE_STAGES
        if s[1] in MODEL_MODULES and s[0] not in TABLE_STAGES | COMMAND_STAGES
    ],
    ids=[
        s[0]
        for s in MODULE_STAGES
        if s[1] in MODEL_MODULES and s[0] not in TABLE_STAGES | COMMAND_STAGES
    ],
)
def test_a_model_stage_asked_for_cuda_without_one_stops_first(
    stage, module, argv, tmp_path, monkeypatch
):
    """In an empty folder holding only params.yaml with ``common.device: cuda``: the first
    error is the device's (had the stage read data or runs first, it would fail on their
    absence instead); nothing falls back to the CPU, nothing is written."""
    params = {**PARAMS, "common": {**PARAMS["common"], "device": "cuda"}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    main = importlib.import_module(module).main
    with pytest.raises(DeviceUnavailableError, match="'cuda'.*no CUDA GPU"):
        main(argv)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


def _rendered(stage: dict, params: dict) -> list[str]:
    """A stage's command with its ``${section.key}`` templates filled as DVC fills them
    (``parsing.list: nargs``: a mapping becomes ``--key value…``, a list its items; inside a
    word, the value), a foreach stage's with its first item."""

    def words(value) -> list[str]:
        if isinstance(value, dict):
            return [w for k, v in value.items() for w in (f"--{k}", *words(v))]
        return [str(v) for v in value] if isinstance(value, list) else [str(value)]

    cmd, values = _body(stage)
    out = []
    for word in shlex.split(cmd):
        word = _fill(word, values)
        m = re.fullmatch(r"\$\{(\w+)\.(\w+)\}", word)
        if m:
            out += words(params[m[1]][m[2]])
        else:
            out.append(re.sub(r"\$\{(\w+)\.(\w+)\}", lambda t: str(params[t[1]][t[2]]), word))
    return out


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU: `make test-device` covers it")
@pytest.mark.parametrize("stage", sorted(COMMAND_STAGES))
def test_a_command_stage_asked_for_cuda_without_one_stops_first(
    stage, tmp_path, monkeypatch, capsys
):
    """The `geolib measure` stage, its command rendered from params.yaml with
    ``common.device: cuda``, in an empty folder: exit 2 on the device's error, before it looks
    for the model or the text, and nothing written."""
    from geolib.__main__ import main as geolib_main

    params = {**PARAMS, "common": {**PARAMS["common"], "device": "cuda"}}
    argv = _rendered(STAGES[stage], params)
    assert argv[:4] == ["python", "-m", "geolib", "measure"] and "--device" in argv
    assert argv[argv.index("--device") + 1] == "cuda"
    monkeypatch.chdir(tmp_path)
    assert geolib_main(argv[3:]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_resolve_device_accepts_the_cpu_and_refuses_other_names():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    for bad in ("gpu", "CPU", "cuda:x", "mps", ""):
        with pytest.raises(ValueError, match="'cpu', 'cuda' or 'cuda:N'"):
            resolve_device(bad)


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_an_error_not_the_cpu():
    for name in ("cuda", "cuda:0", "cuda:3"):
        with pytest.raises(DeviceUnavailableError, match="no CUDA GPU.*common.device: cpu"):
            resolve_device(name)


@pytest.mark.device
def test_cuda_resolves_and_a_missing_index_is_named():
    assert resolve_device("cuda").type == "cuda"
    n = torch.cuda.device_count()
    with pytest.raises(DeviceUnavailableError, match=f"has {n} CUDA device"):
        resolve_device(f"cuda:{n}")


#: the GPU tests run their CPU twin here, so their code is exercised where there is no GPU
TARGETS = ["cpu", pytest.param("cuda", marks=pytest.mark.device)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("family", ["pythia", "olmo", "bert"])
def test_probes_and_losses_on_a_device_match_the_cpu(family, target):
    """Batches follow the model: the same probes on a copy on ``target`` give the CPU's
    numbers, and return CPU tensors (the accumulators downstream are numpy)."""
    import numpy as np

    from geolib.measure.evaluate import window_losses
    from geolib.measure.probes import residual_states, states_and_gradients
    from geolib.models.families import ModelConfig, build_model

    cfg = ModelConfig(family=family, d_model=32, n_layers=2, n_heads=2, d_ff=64, context=16)
    cpu = build_model(cfg, 97, seed=0).eval()
    other = build_model(cfg, 97, seed=0).to(resolve_device(target)).eval()
    ids = torch.from_numpy(np.random.default_rng(0).integers(3, 97, (4, 16)))
    for a, b in zip(residual_states(cpu, ids), residual_states(other, ids), strict=True):
        assert b.device.type == "cpu"
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    a, b = (states_and_gradients(m, ids[:, :-1], ids[:, 1:]) for m in (cpu, other))
    assert b.grads[0].device.type == "cpu" and b.hidden[-1].device.type == "cpu"
    assert abs(a.loss_sum - b.loss_sum) <= 1e-4 * abs(a.loss_sum)
    for ga, gb in zip(a.grads, b.grads, strict=True):
        torch.testing.assert_close(ga, gb, rtol=1e-3, atol=1e-5)
    if family != "bert":
        w = ids.numpy()
        np.testing.assert_allclose(window_losses(cpu, w), window_losses(other, w), rtol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_training_on_a_device_puts_model_and_batches_there(target, tmp_path):
    """A few steps of the one training loop with ``device: target`` finish, record the
    device, and write a run whose checkpoint loads back on the CPU."""
    import numpy as np

    from geolib.models.checkpoints import load
    from geolib.models.train import train
    from tests.models.test_train import V, tiny_cfg

    ids = np.random.default_rng(0).integers(3, V - 2, 6000).astype(np.uint16)
    np.save(tmp_path / "train.npy", ids[:5000])
    np.save(tmp_path / "validation.npy", ids[5000:])
    cfg = tiny_cfg((tmp_path / "train.npy", tmp_path / "validation.npy"), device=target)
    info = train(cfg, tmp_path / "run", progress=False)
    assert info["config"]["device"] == target
    model, _ = load(tmp_path / "run")
    assert next(model.parameters()).device.type == "cpu"
