"""geolib.measure.probes: hooks against output_hidden_states and autograd, the subspace algebra and
R_energy against closed forms on synthetic gradients, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from geolib.measure.probes import (
    GradientEnergy,
    SecondMoment,
    ceiling_ratio,
    complement_subspaces,
    final_hidden,
    layer_names,
    output_bias,
    r_energy,
    residual_modules,
    residual_states,
    states_and_gradients,
    subspace_energy,
    top_subspace,
    unembedding,
)
from geolib.models.families import FAMILIES, ModelConfig, build_model

V = 96


def tiny(family: str) -> ModelConfig:
    d_ff = 48 if family == "olmo" else 64
    return ModelConfig(family=family, d_model=32, n_layers=2, n_heads=4, d_ff=d_ff, context=16)


def batch(family: str, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, V, (3, 12), generator=g)
    if family == "bert":
        y = torch.full_like(x, -100)
        y[:, ::4] = x[:, ::4]
        x = x.clone()
        x[:, ::4] = 0  # a stand-in [MASK] id
        return x, y
    return x, torch.randint(0, V, (3, 12), generator=g)


# ------------------------------------------------------------------------------------------
# W and H
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_final_hidden_times_w_gives_logits(family):
    """Convention: logits = H @ W.T + b with H = final_hidden, W = unembedding."""
    model = build_model(tiny(family), V, seed=1).eval()
    x = torch.randint(0, V, (3, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        h, logits = final_hidden(model, x, return_logits=True)
        w, b = unembedding(model), output_bias(model)
        assert h.shape == (3, 16, 32) and w.shape == (V, 32)
        recon = h @ w.T + (0 if b is None else b)
    assert (b is None) == (family != "bert")
    torch.testing.assert_close(recon, logits, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------
# states and gradients
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_states_match_output_hidden_states(family):
    model = build_model(tiny(family), V, seed=2).eval()
    x, y = batch(family)
    sg = states_and_gradients(model, x, y)
    assert sg.layers == layer_names(model) == ["embed", "block1", "block2"]
    with torch.no_grad():
        ref = model(input_ids=x, output_hidden_states=True).hidden_states
    assert len(ref) == len(sg.hidden)
    for h, r in zip(sg.hidden[:-1], ref[:-1], strict=True):
        torch.testing.assert_close(h, r)
    last = sg.hidden[-1]
    if family == "bert":
        torch.testing.assert_close(last, ref[-1])
    else:  # output_hidden_states ends with the final-normed state; ours is the residual
        norm = model.gpt_neox.final_layer_norm if family == "pythia" else model.model.norm
        torch.testing.assert_close(norm(last), ref[-1])


@pytest.mark.parametrize("family", FAMILIES)
def test_residual_states_equal_full_forward_and_skip_the_head(family):
    """The base-model pass gives the full model's block outputs bit for bit, and the LM head
    never runs."""
    model = build_model(tiny(family), V, seed=5).eval()
    x, _ = batch(family, seed=6)
    calls: list[int] = []
    head = model.get_output_embeddings().register_forward_hook(lambda *_: calls.append(1))
    try:
        states = residual_states(model, x)
    finally:
        head.remove()
    assert calls == []
    ref: list[torch.Tensor] = []
    hooks = [
        m.register_forward_hook(lambda _m, _i, o: ref.append(o[0] if isinstance(o, tuple) else o))
        for m in residual_modules(model)
    ]
    try:
        with torch.no_grad():
            model(input_ids=x)
    finally:
        for h in hooks:
            h.remove()
    assert len(states) == len(ref) == 3
    assert all(torch.equal(s, r) for s, r in zip(states, ref, strict=True))


@pytest.mark.parametrize("family", FAMILIES)
def test_gradients_match_autograd(family):
    """G from the probe equals autograd of the summed loss through retained hidden states."""
    model = build_model(tiny(family), V, seed=3).eval()
    x, y = batch(family, seed=4)
    sg = states_and_gradients(model, x, y)
    out = model(input_ids=x, output_hidden_states=True)
    logits = out.logits
    keep = y != -100
    loss = torch.nn.functional.cross_entropy(logits[keep], y[keep], reduction="sum")
    targets = list(out.hidden_states[:-1])
    ref = torch.autograd.grad(loss, targets)
    for g, r in zip(sg.grads[:-1], ref, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-6)
    assert sg.loss_sum == pytest.approx(float(loss.detach()), rel=1e-5)
    assert sg.n_targets == int(keep.sum())
    assert all(p.requires_grad for p in model.parameters())  # restored
    assert all(p.grad is None for p in model.parameters())  # no weight gradients


def test_states_and_gradients_bad_input():
    model = build_model(tiny("pythia"), V, seed=0).eval()
    x = torch.zeros((2, 5), dtype=torch.long)
    with pytest.raises(ValueError, match="batch, seq"):
        states_and_gradients(model, x, x[:, :4])
    with pytest.raises(ValueError, match="no target"):
        states_and_gradients(model, x, torch.full_like(x, -100))


# ------------------------------------------------------------------------------------------
# subspaces
# ------------------------------------------------------------------------------------------


def test_top_subspace_recovers_planted_directions():
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.standard_normal((10, 10)))
    lam = np.array([9.0, 7, 5, 1, 1, 1, 1, 1, 1, 1])
    c = (q * lam) @ q.T
    t = top_subspace(c, 3)
    proj = t @ t.T
    np.testing.assert_allclose(proj, q[:, :3] @ q[:, :3].T, atol=1e-10)
    with pytest.raises(ValueError, match="rank k"):
        top_subspace(c, 10)
    with pytest.raises(ValueError, match="rank k"):
        top_subspace(c, 0)
    with pytest.raises(ValueError, match="square"):
        top_subspace(c[:3], 1)


def test_complement_subspaces_are_orthogonal_and_uniform():
    rng = np.random.default_rng(1)
    d, k = 6, 2
    t = np.linalg.qr(rng.standard_normal((d, k)))[0]
    n = complement_subspaces(t, 4000, seed=2)
    assert n.shape == (4000, d, k)
    np.testing.assert_allclose(np.einsum("dk,ndj->nkj", t, n), 0, atol=1e-12)
    np.testing.assert_allclose(
        np.einsum("ndk,ndj->nkj", n, n), np.broadcast_to(np.eye(k), (4000, k, k)), atol=1e-12
    )
    # Uniform on the complement's Grassmannian: the mean projector is (k/(d-k)) P_comp, and a
    # fixed unit vector of the complement keeps a squared length Beta(k/2, (d-2k)/2).
    comp = np.eye(d) - t @ t.T
    mean_proj = np.einsum("ndk,njk->dj", n, n) / n.shape[0]
    np.testing.assert_allclose(mean_proj, k / (d - k) * comp, atol=0.02)
    v = comp @ rng.standard_normal(d)
    v /= np.linalg.norm(v)
    lengths = np.sum(np.einsum("d,ndk->nk", v, n) ** 2, axis=1)
    assert stats.kstest(lengths, stats.beta(k / 2, (d - k - k) / 2).cdf).pvalue > 0.01
    with pytest.raises(ValueError, match="complement"):
        complement_subspaces(np.linalg.qr(rng.standard_normal((4, 3)))[0], 2, 0)
    with pytest.raises(ValueError, match="orthonormal"):
        complement_subspaces(np.ones((6, 2)), 2, 0)


def test_subspace_energy_is_projected_norm():
    rng = np.random.default_rng(3)
    g = rng.standard_normal((50, 8))
    u = np.linalg.qr(rng.standard_normal((8, 3)))[0]
    m = g.T @ g
    assert subspace_energy(m, u) == pytest.approx(np.sum((g @ u) ** 2))
    two = subspace_energy(m, np.stack([u, u]))
    assert two.shape == (2,)


# ------------------------------------------------------------------------------------------
# R_energy: isotropic baseline, planted gradients, ceiling, bootstrap
# ------------------------------------------------------------------------------------------


def _energy(g: np.ndarray, t: np.ndarray, n_controls: int, seed: int) -> np.ndarray:
    bases = np.concatenate([t[None], complement_subspaces(t, n_controls, seed)])
    acc = GradientEnergy(bases)
    for chunk in np.array_split(g, 4):
        acc.update(torch.from_numpy(chunk))
    return acc.energies


def test_r_energy_isotropic_is_one():
    rng = np.random.default_rng(4)
    d, k = 16, 2
    g = rng.standard_normal((200, 10, d))  # 200 sequences of 10 tokens, covariance I
    t = np.linalg.qr(rng.standard_normal((d, k)))[0]
    r = r_energy(_energy(g, t, 30, 5), n_boot=500, seed=0)
    assert r.low < 1.0 < r.high
    assert r.ratio == pytest.approx(1.0, abs=0.1)
    m = SecondMoment(d).update(torch.from_numpy(g)).matrix.numpy()
    assert ceiling_ratio(np.eye(d), k) == pytest.approx(1.0)
    assert ceiling_ratio(m, k) > 1.0  # sampling noise only: the top-k of a sample


def test_r_energy_planted_in_t_reaches_the_ceiling():
    rng = np.random.default_rng(6)
    d, k = 16, 2
    t = np.linalg.qr(rng.standard_normal((d, k)))[0]
    scale = np.ones(d)
    basis = np.linalg.qr(np.concatenate([t, rng.standard_normal((d, d - k))], axis=1))[0]
    scale[:k] = 10.0  # variance 100 in T, 1 elsewhere: R = 100 in expectation
    cov_root = basis * scale
    g = rng.standard_normal((300, 8, d)) @ cov_root.T
    m = SecondMoment(d).update(torch.from_numpy(g)).matrix.numpy()
    r = r_energy(_energy(g, t, 40, 7), n_boot=500, seed=1)
    assert r.ratio == pytest.approx(100.0, rel=0.1)
    assert r.low < 100.0 < r.high
    assert r.ratio == pytest.approx(ceiling_ratio(m, k), rel=0.02)
    assert r.p_value == pytest.approx(1 / 41)


def test_r_energy_bootstrap_coverage():
    """The sequence bootstrap covers the population ratio in roughly its nominal share of
    repeats, with tokens correlated within a sequence (a shared per-sequence scale)."""
    rng = np.random.default_rng(8)
    d, k, hits, reps = 8, 1, 0, 200
    t = np.eye(d)[:, :k]
    ctrl = complement_subspaces(t, 20, 9)
    bases = np.concatenate([t[None], ctrl])
    sd = np.ones(d)
    sd[0] = 2.0  # variance 4 along T: population R = 4
    for _ in range(reps):
        per_seq = rng.lognormal(0, 0.5, size=(60, 1, 1))  # correlation within a sequence
        g = rng.standard_normal((60, 10, d)) * sd * per_seq
        e = GradientEnergy(bases).update(torch.from_numpy(g)).energies
        r = r_energy(e, n_boot=300, seed=int(rng.integers(1 << 30)))
        hits += r.low <= 4.0 <= r.high
    assert 0.88 <= hits / reps <= 0.99


def test_r_energy_bad_input():
    with pytest.raises(ValueError, match="sequences"):
        r_energy(np.ones((5, 1)))
    with pytest.raises(ValueError, match="at least 2"):
        r_energy(np.ones((1, 3)))
    with pytest.raises(ValueError, match="non-negative"):
        r_energy(-np.ones((4, 3)))
    with pytest.raises(ValueError, match="no gradient energy"):
        r_energy(np.concatenate([np.ones((4, 1)), np.zeros((4, 2))], axis=1))
    with pytest.raises(ValueError, match="bases"):
        GradientEnergy(np.ones((1, 4, 2)))
    with pytest.raises(ValueError, match="grads"):
        GradientEnergy(np.ones((2, 4, 2))).update(torch.ones(3, 5))
    with pytest.raises(ValueError, match="no gradients"):
        _ = GradientEnergy(np.ones((2, 4, 2))).energies
    with pytest.raises(ValueError, match="rank k"):
        ceiling_ratio(np.eye(4), 4)
