"""Tests of geolib.models.families: the three families, their block structure, W and H
conventions."""

from __future__ import annotations

import pytest
import torch

from geolib.measure.probes import is_decoder, unembedding
from geolib.models.families import (
    FAMILIES,
    ModelConfig,
    SpecialTokens,
    build_model,
    count_params,
    head_matmul_params,
    matmul_params,
    train_flops_per_token,
)

V = 96


def tiny(family: str, **kw) -> ModelConfig:
    d_ff = 48 if family == "olmo" else 64
    return ModelConfig(
        family=family, d_model=32, n_layers=2, n_heads=4, d_ff=d_ff, context=16, **kw
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_build_families(family):
    model = build_model(tiny(family), V, seed=0)
    expected = {
        "pythia": "GPTNeoXForCausalLM",
        "olmo": "Olmo2ForCausalLM",
        "bert": "BertForMaskedLM",
    }
    assert type(model).__name__ == expected[family]
    assert is_decoder(model) == (family != "bert")
    assert model.config.vocab_size == V
    assert 0 < matmul_params(model) < count_params(model) + V * 32  # LM head counted once more
    out = model(input_ids=torch.randint(0, V, (2, 16))).logits
    assert out.shape == (2, 16, V)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_special_token_ids_are_recorded_in_the_configuration(family):
    """The ids given are the configuration's; without them a decoder records none and BERT
    pads with 0 (its family's default)."""
    config = build_model(tiny(family), V, special=SpecialTokens(pad=5, bos=6, eos=7)).config
    assert (config.pad_token_id, config.bos_token_id, config.eos_token_id) == (5, 6, 7)
    bare = build_model(tiny(family), V).config
    expected = (0 if family == "bert" else None, None, None)
    assert (bare.pad_token_id, bare.bos_token_id, bare.eos_token_id) == expected


def test_default_sizes_are_miniature():
    """Default miniature sizes with a 4096-token vocabulary: 0.5–5M parameters."""
    for family, d_ff in (("pythia", 512), ("olmo", 344), ("bert", 512)):
        model = build_model(ModelConfig(family=family, d_ff=d_ff), 4096)
        assert 0.5e6 < count_params(model) < 5e6


def test_seeded_init_is_deterministic():
    a = build_model(tiny("pythia"), V, seed=3).state_dict()
    b = build_model(tiny("pythia"), V, seed=3).state_dict()
    c = build_model(tiny("pythia"), V, seed=4).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_tied_embeddings_defaults():
    bert = build_model(tiny("bert"), V)
    assert unembedding(bert).data_ptr() == bert.get_input_embeddings().weight.data_ptr()
    for family in ("pythia", "olmo"):
        m = build_model(tiny(family), V)
        assert unembedding(m).data_ptr() != m.get_input_embeddings().weight.data_ptr()
    tied = build_model(tiny("pythia", tie_embeddings=True), V)
    assert unembedding(tied).data_ptr() == tied.get_input_embeddings().weight.data_ptr()
    # tied weights are counted once
    untied = build_model(tiny("pythia"), V)
    assert count_params(untied) - count_params(tied) == V * 32


def _layer0(model):
    if hasattr(model, "gpt_neox"):
        layer = model.gpt_neox.layers[0]
        return layer, layer.mlp, layer.attention.dense
    layer = model.model.layers[0]
    return layer, layer.mlp, layer.self_attn.o_proj


def _mlp_input(model, x):
    _, mlp, _ = _layer0(model)
    seen = []
    handle = mlp.register_forward_hook(lambda _m, inputs, _o: seen.append(inputs[0].clone()))
    with torch.no_grad():
        model(input_ids=x)
    handle.remove()
    return seen[0]


@pytest.mark.parametrize(
    ("cfg", "parallel"),
    [
        (tiny("pythia"), True),
        (tiny("pythia", parallel_residual=False), False),
        (tiny("olmo"), False),
    ],
    ids=["pythia", "pythia-sequential", "olmo"],
)
def test_block_structure_parallel_vs_sequential(cfg, parallel):
    """Parallel block: the MLP reads the block input, so changing the attention output
    projection leaves the MLP input unchanged. Sequential: the MLP reads x + attn(x)."""
    model = build_model(cfg, V, seed=0).eval()
    x = torch.randint(0, V, (2, 16), generator=torch.Generator().manual_seed(0))
    before = _mlp_input(model, x)
    with torch.no_grad():
        _layer0(model)[2].weight.mul_(3.0)
    after = _mlp_input(model, x)
    assert torch.equal(before, after) == parallel
    if cfg.family == "pythia":
        assert model.config.use_parallel_residual == parallel


def test_olmo_is_a_real_olmo_config():
    model = build_model(tiny("olmo"), V)
    assert model.config.model_type == "olmo2"
    layer = model.model.layers[0]
    assert hasattr(layer, "post_attention_layernorm") and hasattr(layer.self_attn, "q_norm")


def test_flops_per_token():
    model = build_model(tiny("pythia"), V)
    n = matmul_params(model)
    # 2 layers × (4·32² attention + 2·32·64 MLP) + LM head 32·V
    assert n == 2 * (4 * 32 * 32 + 2 * 32 * 64) + 32 * V
    assert train_flops_per_token(model, 16) == 6 * n + 12 * 2 * 32 * 16
    assert head_matmul_params(model) == 32 * V
    bert = build_model(tiny("bert"), V)
    head = head_matmul_params(bert)
    assert head == 32 * 32 + 32 * V  # MLM transform + decoder
    full, sparse = train_flops_per_token(bert, 16), train_flops_per_token(bert, 16, 0.15)
    assert full - sparse == pytest.approx(6 * head * 0.85)


def test_config_validation():
    with pytest.raises(ValueError, match="unknown model family"):
        ModelConfig(family="gpt5")
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="pythia family only"):
        ModelConfig(family="olmo", parallel_residual=True)
    with pytest.raises(KeyError, match="unknown model parameters"):
        ModelConfig.from_dict({"family": "bert", "width": 3})
    assert ModelConfig.from_dict(tiny("bert").to_dict()) == tiny("bert")


def test_model_classes_are_imported_only_where_a_model_is_built():
    """Importing the training loop, the grid, the probes or a table-only analysis does not
    import transformers' model code (~3 s a process); building a model does."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import geolib.models.train, geolib.models.grid, geolib.measure.probes\n"
        "import geolib.experiments.geometry_performance, geolib.models.checkpoints\n"
        "assert 'transformers.modeling_utils' not in sys.modules, 'model code imported'\n"
        "from geolib.models.families import ModelConfig, build_model\n"
        "build_model(ModelConfig(d_model=8, n_heads=2, d_ff=16, n_layers=1, context=8), 16)\n"
        "assert 'transformers.modeling_utils' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
