"""Token arrays cut into model inputs: random, evenly spaced and disjoint windows; BERT masking.

Every window is an ``int64 (n, length)`` array of consecutive token ids. Decoders read a window
of ``seq_len + 1`` tokens as inputs ``[:, :-1]`` and next-token targets ``[:, 1:]``; the encoder
reads ``seq_len`` tokens with masked-LM targets (:func:`mask_tokens`). Pure numpy: the same
windows whatever model later reads them.
"""

from __future__ import annotations

import numpy as np

#: target id ignored by the loss (torch's ``cross_entropy`` default)
IGNORE_INDEX = -100


def sample_windows(tokens: np.ndarray, rng: np.random.Generator, n: int, length: int) -> np.ndarray:
    """``n`` random contiguous windows of ``length`` tokens, as an int64 array ``(n, length)``."""
    if len(tokens) < length + 1:
        raise ValueError(f"token array of {len(tokens)} tokens is shorter than a window ({length})")
    starts = rng.integers(0, len(tokens) - length + 1, size=n)
    return np.asarray(tokens[starts[:, None] + np.arange(length)], dtype=np.int64)


def mask_tokens(
    ids: np.ndarray,
    rng: np.random.Generator,
    *,
    mask_token_id: int,
    vocab_size: int,
    mask_prob: float = 0.15,
    special_ids: tuple[int, ...] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """BERT masking: each non-special position is selected with probability ``mask_prob``; a
    selected one becomes ``[MASK]`` (80%), a uniformly random token (10%) or stays (10%).
    Returns ``(inputs, labels)``, labels ``-100`` at unselected positions."""
    selectable = ~np.isin(ids, np.asarray(special_ids, dtype=ids.dtype))
    selected = (rng.random(ids.shape) < mask_prob) & selectable
    action = rng.random(ids.shape)
    random_tokens = rng.integers(0, vocab_size, size=ids.shape)
    inputs = ids.copy()
    inputs[selected & (action < 0.8)] = mask_token_id
    swap = selected & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_tokens[swap]
    labels = np.where(selected, ids, IGNORE_INDEX)
    return inputs, labels


def fixed_windows(tokens: np.ndarray, n: int, length: int) -> np.ndarray:
    """``n`` windows of ``length`` tokens at evenly spaced starts (the same for every model),
    ``int64 (n, length)``; they overlap only when the split is shorter than ``n·length``."""
    if len(tokens) < length:
        raise ValueError(f"{len(tokens)} tokens are fewer than one window of {length}")
    starts = np.linspace(0, len(tokens) - length, n).round().astype(np.int64)
    return np.asarray(tokens[starts[:, None] + np.arange(length)], dtype=np.int64)


def split_windows(
    tokens: np.ndarray, length: int, n_source: int, n_eval: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Two disjoint sets of non-overlapping windows of ``length`` tokens, ``(n, length)`` int64:
    the token array is cut into consecutive windows, a seeded permutation picks ``n_source`` of
    them for the source set and the next ``n_eval`` for the evaluation set."""
    for name, v in (("length", length), ("n_source", n_source), ("n_eval", n_eval)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    tokens = np.asarray(tokens)
    n_windows = len(tokens) // length
    if n_windows < n_source + n_eval:
        raise ValueError(
            f"{len(tokens)} tokens hold {n_windows} windows of {length}; need {n_source} + {n_eval}"
        )
    order = np.random.default_rng(seed).permutation(n_windows)
    starts = order[: n_source + n_eval] * length
    w = np.asarray(tokens[starts[:, None] + np.arange(length)], dtype=np.int64)
    return w[:n_source], w[n_source:]


def model_batch(
    windows: np.ndarray,
    decoder: bool,
    *,
    mask_token_id: int | None,
    vocab_size: int,
    special_ids: tuple[int, ...],
    mask_prob: float,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``(inputs, targets)`` as in training: decoders predict the next token (windows of
    ``seq_len + 1`` become inputs and shifted targets); the encoder sees ``seq_len`` tokens with
    the training masking (seeded), targets ``-100`` except at masked positions."""
    if decoder:
        return windows[:, :-1], windows[:, 1:]
    if mask_token_id is None:
        raise ValueError("the encoder needs a mask token id (its tokenizer has none)")
    return mask_tokens(
        windows[:, :-1],
        np.random.default_rng(seed),
        mask_token_id=mask_token_id,
        vocab_size=vocab_size,
        mask_prob=mask_prob,
        special_ids=special_ids,
    )
