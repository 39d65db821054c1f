"""Which token ids each model of an analysis section reads: its runs grouped by tokenizer.

Our runs read the pipeline's token files. A hub model reads the corpus text encoded with its own
tokenizer: the pipeline's ids would be valid numbers naming other words. Hub models whose
tokenizers agree (the same size and the same ids for a probe text, as Pythia's checkpoints do)
form one group; a section may hold several (Pythia, OLMo and BERT at paper scale: three). Each
group reads the same text in its own ids, so it has its own windows and its own unigram entropy.

A section's ``revisions`` is one list (every hub run of the section at those revisions) or one
``[hub id, [revision, ...]]`` pair per hub run (each at its own: Pythia's ``stepN`` and OLMo's
``stage1-stepN-tokensMB`` never name the same checkpoints).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from geolib.data.tokens import load_tokens
from geolib.models.checkpoints import checkpoints_of, hub_tokenizer, is_hub_id, shared_vocab_size
from geolib.models.pretrained import encode_domain

#: the label of the group of our runs (they read the pipeline's tokenizer's ids)
PIPELINE = "pipeline"
#: a text two tokenizers must encode identically (and have the same size) to be one group:
#: digits, punctuation, accents, a dash and a tab, where tokenizers of one size still differ
PROBE = "The geometry of representations: 1,024 tokens, naïve café — and \t<tab>."


@dataclass(frozen=True)
class TokenGroup:
    """Runs that read the same token ids.

    ``tokens``: (n,) int ids the windows are cut from; ``unigram``: (m,) int ids whose
    frequencies give the unigram entropy the group's losses are read against; ``tokenizer``:
    ``"pipeline"`` or the hub id whose tokenizer encoded the text. ``unigram`` is ``None`` when
    the section asks for no unigram text.
    """

    runs: tuple[str, ...]
    tokens: np.ndarray
    unigram: np.ndarray | None
    tokenizer: str


def revisions_of(run: str, revisions: Sequence[Any] | None) -> list[str | int] | None:
    """The revisions ``run`` is measured at: the list itself, or the revisions of ``run``'s
    ``[hub id, [revisions]]`` pair (a hub run with no pair is an error naming it); ``None`` when
    none are given (our runs: every step)."""
    if revisions is None:
        return None
    if isinstance(revisions, str | Mapping) or not isinstance(revisions, Sequence):
        raise TypeError(f"revisions is a list, got {type(revisions).__name__}: {revisions!r}")
    pairs = [r for r in revisions if isinstance(r, Sequence) and not isinstance(r, str)]
    if not pairs:
        return list(revisions)
    if len(pairs) != len(revisions) or any(
        len(p) != 2 or not isinstance(p[0], str) or isinstance(p[1], str) for p in pairs
    ):
        raise ValueError(
            "revisions is one list of revisions or one [hub id, [revisions]] pair per hub run, "
            f"not a mixture: {revisions!r}"
        )
    by_run = {p[0]: list(p[1]) for p in pairs}
    if len(by_run) != len(pairs):
        raise ValueError(f"a hub id has two revision lists: {[p[0] for p in pairs]}")
    if run in by_run:
        return by_run[run]
    if is_hub_id(run):
        raise ValueError(f"{run}: no revisions given for it (pairs name {list(by_run)})")
    return None


def run_checkpoints(run: str, revisions) -> list[str | int]:
    """Steps of one of our runs (all, ascending), or the revisions ``revisions`` gives ``run``."""
    return checkpoints_of(run, revisions_of(run, revisions))


def _same_tokenizer(a, b) -> bool:
    return len(a) == len(b) and (
        a(PROBE, add_special_tokens=False)["input_ids"]
        == b(PROBE, add_special_tokens=False)["input_ids"]
    )


def token_groups(
    runs: Sequence[str],
    revisions=None,
    *,
    tokens: str,
    unigram_tokens: str | None = None,
    text: str | None = None,
    unigram_text: str | None = None,
    max_text_tokens: int = 2_000_000,
) -> list[TokenGroup]:
    """The section's runs grouped by the ids they read, in the order of their first run.

    Our runs: the token files ``tokens`` and ``unigram_tokens``, checked against the smallest
    vocabulary among them. Hub models: the corpus files ``text`` and ``unigram_text`` (.jsonl)
    encoded with each group's tokenizer (at its first run's first revision), up to
    ``max_text_tokens`` tokens each; without ``text``, an error. A unigram source left ``None``
    gives groups without unigram ids.
    """
    runs = list(runs)
    if not runs:
        raise ValueError("a section needs at least one run")
    if len(set(runs)) != len(runs):
        raise ValueError(f"a run is listed twice: {runs}")
    ours = [r for r in runs if not is_hub_id(r)]
    hub = [r for r in runs if is_hub_id(r)]
    groups: list[TokenGroup] = []
    if ours:
        vocab = shared_vocab_size(ours)
        unigram = None if unigram_tokens is None else load_tokens(unigram_tokens, vocab)
        groups.append(TokenGroup(tuple(ours), load_tokens(tokens, vocab), unigram, PIPELINE))
    if hub and not text:
        raise ValueError(
            f"hub models {hub} read text in their own tokenizer: set `text` (a corpus .jsonl "
            "file) in the section"
        )
    clusters: list[tuple[Any, list[str]]] = []
    for run in hub:
        tok = hub_tokenizer(run, run_checkpoints(run, revisions)[0])
        for first, members in clusters:
            if _same_tokenizer(first, tok):
                members.append(run)
                break
        else:
            clusters.append((tok, [run]))
    limit = int(max_text_tokens)
    for tok, members in clusters:
        ids = encode_domain(text, tok, limit)
        unigram = None if unigram_text is None else encode_domain(unigram_text, tok, limit)
        groups.append(TokenGroup(tuple(members), ids, unigram, members[0]))
    return sorted(groups, key=lambda g: runs.index(g.runs[0]))
