"""The three model families, built from ``transformers`` configurations with random weights.

- ``pythia``: Pythia-style decoder, ``GPTNeoXConfig`` with parallel attention + MLP blocks
  (``x + attn(ln1(x)) + mlp(ln2(x))``), LayerNorm, partial rotary embeddings (25%), GELU MLP,
  untied embeddings — the architecture of ``EleutherAI/pythia-*``.
- ``olmo``: OLMo-style decoder, ``Olmo2Config`` with sequential blocks
  (``h = x + norm(attn(x)); out = h + norm(mlp(h))``), RMSNorm, QK-norm, full rotary, SwiGLU MLP,
  untied embeddings — the architecture of ``allenai/OLMo-2-*``.
- ``bert``: BERT-style masked-LM encoder, ``BertForMaskedLM`` (bidirectional attention,
  absolute positions, MLM head ``dense → GELU → LayerNorm → decoder``), decoder tied to the
  input embeddings by default.

``pythia`` with ``parallel_residual=False`` gives the sequential GPT-NeoX block, the controlled
ablation of the block structure alone (Paper B, B6).

Reading a model out (``W``, the final ``H``, states and gradients per layer) is
``geolib.measure.probes``' job.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from geolib.config import checked_flag, checked_number

if TYPE_CHECKING:  # transformers' model classes cost ~3 s to import: only where a model is built
    from transformers import PreTrainedModel

FAMILIES = ("pythia", "olmo", "bert")
DECODERS = ("pythia", "olmo")
ATTENTION = ("sdpa", "eager", "flash_attention_2", "auto")


@dataclass
class ModelConfig:
    """Size and shape of one model; ``family`` is one of :data:`FAMILIES`.

    ``d_ff`` is the MLP hidden width (for ``olmo`` the SwiGLU width, so ``3·d·d_ff`` MLP weights
    instead of ``2·d·d_ff``). ``tie_embeddings=None`` takes the family default (untied decoders,
    tied BERT). ``parallel_residual=None`` takes the family default (only ``pythia`` has the
    switch). ``rotary_pct`` is used by ``pythia`` only (``olmo`` rotates every dimension).
    """

    family: str = "pythia"
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 512
    context: int = 128
    tie_embeddings: bool | None = None
    parallel_residual: bool | None = None
    dropout: float = 0.0
    init_std: float = 0.02
    rotary_pct: float = 0.25
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    attn_implementation: str = "sdpa"

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"unknown model family {self.family!r}; known: {FAMILIES}")
        w = "ModelConfig."
        for name in ("d_model", "n_layers", "n_heads", "d_ff", "context"):
            setattr(self, name, checked_number(w + name, getattr(self, name), int, low=1))
        self.dropout = checked_number(
            w + "dropout", self.dropout, float, low=0, high=1, high_open=True
        )
        self.init_std = checked_number(w + "init_std", self.init_std, float, low=0, low_open=True)
        self.rotary_pct = checked_number(
            w + "rotary_pct", self.rotary_pct, float, low=0, high=1, low_open=True
        )
        self.rope_theta = checked_number(
            w + "rope_theta", self.rope_theta, float, low=0, low_open=True
        )
        self.norm_eps = checked_number(w + "norm_eps", self.norm_eps, float, low=0, low_open=True)
        self.tie_embeddings = checked_flag(w + "tie_embeddings", self.tie_embeddings, optional=True)
        self.parallel_residual = checked_flag(
            w + "parallel_residual", self.parallel_residual, optional=True
        )
        if self.attn_implementation not in ATTENTION:
            raise ValueError(
                f"{w}attn_implementation must be one of {ATTENTION}, "
                f"got {self.attn_implementation!r}"
            )
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.parallel_residual is not None and self.family != "pythia":
            raise ValueError("parallel_residual is a switch of the pythia family only")

    @property
    def is_decoder(self) -> bool:
        return self.family in DECODERS

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise KeyError(f"unknown model parameters {unknown}; known: {sorted(known)}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SpecialTokens:
    """The special-token ids a model's configuration records (``None``: none, or for BERT's
    padding the family's default, 0)."""

    pad: int | None = None
    bos: int | None = None
    eos: int | None = None


def hf_config(cfg: ModelConfig, vocab_size: int, special: SpecialTokens = SpecialTokens()):
    """The ``transformers`` configuration object of ``cfg`` (not yet a model)."""
    from transformers import BertConfig, GPTNeoXConfig, Olmo2Config

    # what every family names alike; each family adds its own activation, norm and rotary fields
    shared = {
        "vocab_size": vocab_size,
        "hidden_size": cfg.d_model,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "intermediate_size": cfg.d_ff,
        "max_position_embeddings": cfg.context,
        "initializer_range": cfg.init_std,
        "use_cache": False,
        "pad_token_id": special.pad,
        "bos_token_id": special.bos,
        "eos_token_id": special.eos,
    }
    if cfg.family == "pythia":
        return GPTNeoXConfig(
            hidden_act="gelu",
            layer_norm_eps=cfg.norm_eps,
            attention_dropout=cfg.dropout,
            hidden_dropout=cfg.dropout,
            use_parallel_residual=True if cfg.parallel_residual is None else cfg.parallel_residual,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": cfg.rope_theta,
                "partial_rotary_factor": cfg.rotary_pct,
            },
            tie_word_embeddings=False if cfg.tie_embeddings is None else cfg.tie_embeddings,
            **shared,
        )
    if cfg.family == "olmo":
        return Olmo2Config(
            num_key_value_heads=cfg.n_heads,
            hidden_act="silu",
            rms_norm_eps=cfg.norm_eps,
            attention_dropout=cfg.dropout,
            rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
            tie_word_embeddings=False if cfg.tie_embeddings is None else cfg.tie_embeddings,
            **shared,
        )
    # bert
    return BertConfig(
        hidden_act="gelu",
        hidden_dropout_prob=cfg.dropout,
        attention_probs_dropout_prob=cfg.dropout,
        type_vocab_size=1,
        layer_norm_eps=cfg.norm_eps,
        tie_word_embeddings=True if cfg.tie_embeddings is None else cfg.tie_embeddings,
        **{**shared, "pad_token_id": 0 if special.pad is None else special.pad},
    )


def _model_class(family: str):
    from transformers import BertForMaskedLM, GPTNeoXForCausalLM, Olmo2ForCausalLM

    return {"pythia": GPTNeoXForCausalLM, "olmo": Olmo2ForCausalLM, "bert": BertForMaskedLM}[family]


def build_model(
    cfg: ModelConfig,
    vocab_size: int,
    *,
    special: SpecialTokens = SpecialTokens(),
    seed: int | None = None,
) -> PreTrainedModel:
    """A randomly initialised model of ``cfg`` (``transformers``' own initialisation).

    With ``seed`` the weights depend only on it (the global torch RNG is seeded first).
    ``vocab_size`` is used as given (no padding), so every row of ``W`` is a real token.
    """
    config = hf_config(cfg, vocab_size, special)
    # "auto" is resolved by the training configuration (geolib.models.train.attention_for);
    # a model built without one gets SDPA
    attention = "sdpa" if cfg.attn_implementation == "auto" else cfg.attn_implementation
    config._attn_implementation = attention
    if seed is not None:
        torch.manual_seed(seed)
    model = _model_class(cfg.family)(config)
    model.train()
    return model


@contextmanager
def quiet_progress():
    """Silence ``transformers``' own progress bars ("Loading weights", "Writing model shards")
    inside the block, restoring the previous setting afterwards."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def count_params(model: nn.Module, *, trainable_only: bool = False) -> int:
    """Number of distinct parameters (tied weights counted once)."""
    # ``parameters()`` yields a tensor shared by several modules once
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def matmul_params(model: nn.Module) -> int:
    """Weights that take part in a matmul per token: every ``nn.Linear`` (the LM head too, even
    when tied to the embedding), excluding embedding lookups, norms and biases. This is the
    ``N`` of the ``6·N`` FLOPs-per-token estimate."""
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))


def head_matmul_params(model: PreTrainedModel) -> int:
    """The part of :func:`matmul_params` in the LM head (every ``nn.Linear`` outside the base
    model: the unembedding, and for BERT also the MLM transform)."""
    body = {id(m) for m in model.base_model.modules()}
    return sum(
        m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear) and id(m) not in body
    )


def train_flops_per_token(
    model: PreTrainedModel, seq_len: int, head_fraction: float = 1.0
) -> float:
    """Training FLOPs per token: ``6·N_matmul + 12·n_layers·d_model·seq_len`` (attention scores
    and weighted values, forward + backward, no causal discount; PaLM appendix B). The head
    runs on ``head_fraction`` of the positions (the masked 15% for the encoder's sparse
    prediction, see ``geolib.models.train.lm_loss_sum``)."""
    c = model.config
    n, head = matmul_params(model), head_matmul_params(model)
    attention = 12.0 * c.num_hidden_layers * c.hidden_size * seq_len
    return 6.0 * (n - head) + 6.0 * head * head_fraction + attention
