"""geolib.models.quantize: both methods put every weight on the same symmetric grid (read back from
the quantized model), GPTQ never reconstructs a layer worse than round-to-nearest on its
calibration inputs, 8 bits leave the loss as it was, and bad settings are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from geolib.models import quantize as qz
from geolib.models.families import ModelConfig, build_model

V = 96


def _trained_olmo(d_ff: int = 44, steps: int = 60) -> torch.nn.Module:
    """A 1-layer OLMo-style model (d = 32; d_ff not a multiple of 32, as in the sweep) trained a
    little on a repetitive sequence, so its weights are not just the initialisation."""
    cfg = ModelConfig(family="olmo", d_model=32, n_layers=2, n_heads=2, d_ff=d_ff, context=16)
    model = build_model(cfg, V, seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    seq = torch.from_numpy(rng.integers(0, V, 400))
    for _ in range(steps):
        starts = rng.integers(0, len(seq) - 17, 8)
        w = torch.stack([seq[s : s + 17] for s in starts])
        loss = F.cross_entropy(model(input_ids=w[:, :-1]).logits.transpose(1, 2), w[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@pytest.fixture(scope="module")
def model():
    return _trained_olmo()


@pytest.fixture(scope="module")
def calib():
    return torch.from_numpy(np.random.default_rng(1).integers(0, V, (48, 16)))


def _loss(model, ids):
    with torch.no_grad():
        logits = model(input_ids=ids[:, :-1]).logits
    return float(F.cross_entropy(logits.transpose(1, 2), ids[:, 1:]))


def test_targets_are_the_block_projections_and_optionally_the_head(model):
    names = [n for n, _ in qz.target_linears(model)]
    assert len(names) == 2 * 7 and all(".layers." in n for n in names)
    assert names[:4] == [f"model.layers.0.self_attn.{p}_proj" for p in "qkvo"]
    with_head = [n for n, _ in qz.target_linears(model, lm_head=True)]
    assert with_head == names + ["lm_head"]


@pytest.mark.parametrize("method", qz.METHODS)
@pytest.mark.parametrize("bits", [3, 4])
def test_weights_read_back_on_the_shared_grid(model, calib, method, bits):
    q, _ = qz.quantized(model, qz.QuantSpec(method, bits), calib)
    for name, layer in qz.target_linears(q):
        w = qz.quantized_weight(layer)
        float_w = model.get_submodule(name).weight.detach()
        assert qz.max_distinct_per_group(w) <= 2**bits
        # the grid: codes w / s are integers in [−2^(b−1), 2^(b−1) − 1], s from the float row
        codes = w.double() / qz.grid_scale(float_w, bits)
        assert torch.allclose(codes, codes.round(), atol=1e-4), name
        assert (
            codes.round().min() >= -(2 ** (bits - 1)) and codes.round().max() <= 2 ** (bits - 1) - 1
        )
        assert not torch.equal(w, float_w)
    # the head stays float unless asked for
    assert torch.equal(q.lm_head.weight, model.lm_head.weight)


def test_rtn_codes_are_nearest_rounding(model):
    """torchao's round-to-nearest is round(w / s) clamped, with s = amax / ((2^b − 1)/2)."""
    w = model.model.layers[0].mlp.gate_proj.weight.detach()
    s = qz.grid_scale(w, 4)
    mine = torch.clamp(torch.round(w.double() / s), -8, 7) * s
    theirs = qz.rtn_weight(w, qz.QuantSpec("rtn", 4)).double()
    # the same up to a tie broken the other way (a w / s at exactly k + ½ in float32)
    assert ((mine - theirs).abs() > 1e-6).float().mean() < 0.01


def test_gptq_never_reconstructs_worse_than_rtn(model, calib):
    for bits in (3, 4):
        _, reports = qz.quantized(model, qz.QuantSpec("gptq", bits, lm_head=True), calib)
        assert len(reports) == 15
        for r in reports:
            assert 0 < r.error <= r.rtn_error, (bits, r)
        # and clearly better on the layers that see the most varied inputs
        assert np.median([r.error / r.rtn_error for r in reports]) < 0.9


def test_rtn_error_of_the_report_is_torchao_rtn_on_the_same_inputs(model, calib):
    """The report's rtn_error is the error of the rtn method's own weight on that layer."""
    spec = qz.QuantSpec("gptq", 4)
    layers = qz.target_linears(model)[:1]  # the first layer's inputs do not depend on GPTQ
    q, _ = qz.quantized(model, qz.QuantSpec("rtn", 4))
    name = layers[0][0]
    xs = []
    h = model.get_submodule(name).register_forward_hook(lambda m, i, o: xs.append(i[0]))
    with torch.no_grad():
        model(input_ids=calib)
    h.remove()
    x = torch.cat(xs).reshape(-1, xs[0].shape[-1]).double()
    w = model.get_submodule(name).weight.detach()
    direct = qz.relative_output_error(w, qz.quantized_weight(q.get_submodule(name)), x.T @ x)
    import copy

    m2 = copy.deepcopy(model)
    (report,) = qz.quantize_gptq(m2, spec, calib, layers=[(name, m2.get_submodule(name))])
    assert report.rtn_error == pytest.approx(direct, rel=1e-6)


@pytest.mark.parametrize("method", qz.METHODS)
def test_eight_bits_keep_the_loss(model, calib, method):
    ids = torch.from_numpy(np.random.default_rng(2).integers(0, V, (32, 17)))
    before = _loss(model, ids)
    q, _ = qz.quantized(model, qz.QuantSpec(method, 8, lm_head=True), calib)
    after = _loss(q, ids)
    assert np.isfinite(after) and abs(after - before) < 2e-3
    q3, _ = qz.quantized(model, qz.QuantSpec(method, 3, lm_head=True), calib)
    assert abs(_loss(q3, ids) - before) > abs(after - before)  # fewer bits, more change


def test_quantized_leaves_the_source_model_alone(model, calib):
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for method in qz.METHODS:
        qz.quantized(model, qz.QuantSpec(method, 3, lm_head=True), calib)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


def test_bad_settings_are_refused(model, calib):
    with pytest.raises(ValueError, match="unknown quantization method"):
        qz.QuantSpec("awq", 4)
    for bits in (1, 9, 4.0, True):
        with pytest.raises(ValueError, match="bits"):
            qz.QuantSpec("rtn", bits)
    with pytest.raises(ValueError, match="group_size"):
        qz.QuantSpec("rtn", 4, group_size=0)
    with pytest.raises(ValueError, match="symmetric"):
        qz.QuantSpec("rtn", 4, symmetric=False)
    with pytest.raises(ValueError, match="calib"):
        qz.quantize(model, qz.QuantSpec("gptq", 4))
    with pytest.raises(ValueError, match="int64"):
        qz.quantized(model, qz.QuantSpec("gptq", 4), calib.float())
    for method in qz.METHODS:  # 44 MLP inputs: a group of 32 does not divide them
        with pytest.raises(ValueError, match="does not divide"):
            qz.quantized(model, qz.QuantSpec(method, 4, group_size=32), calib)


def test_tied_head_is_refused():
    cfg = ModelConfig(
        family="olmo", d_model=16, n_layers=1, n_heads=2, d_ff=32, context=8, tie_embeddings=True
    )
    tied = build_model(cfg, V, seed=0)
    assert qz.target_linears(tied)  # the blocks are fine
    with pytest.raises(ValueError, match="tied"):
        qz.target_linears(tied, lm_head=True)


def test_max_distinct_per_group_counts_groups():
    w = torch.tensor([[0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 1.0]])
    assert qz.max_distinct_per_group(w) == 4
    assert qz.max_distinct_per_group(w, group_size=2) == 2
    with pytest.raises(ValueError, match="does not divide"):
        qz.max_distinct_per_group(w, group_size=3)


@pytest.mark.parametrize("method", qz.METHODS)
def test_blocks_then_head_is_the_head_setting(model, calib, method):
    """The stage quantizes the blocks, measures, then the head on top: the same weights as
    quantizing with lm_head=True in one go (the head is last in forward order)."""
    spec = qz.QuantSpec(method, 3)
    whole, _ = qz.quantized(model, qz.QuantSpec(method, 3, lm_head=True), calib)
    staged, _ = qz.quantized(model, spec, calib)
    qz.quantize(staged, qz.QuantSpec(method, 3, lm_head=True), calib, layers=qz.head_layer(staged))
    for (name, a), (_, b) in zip(
        qz.target_linears(whole, lm_head=True), qz.target_linears(staged, lm_head=True), strict=True
    ):
        assert torch.equal(qz.quantized_weight(a), qz.quantized_weight(b)), name
