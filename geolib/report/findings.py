"""The findings page: per claim, one plain paragraph — what the paper says, what held here, at
what scale and how sure — generated from the same claim rows as the claims table.

The claims table (:mod:`geolib.verdicts.claims`) is for a reader who checks a verdict: rule,
deciding number, unit, seeds, robustness, rule history. This page is for a reader who wants the
answer first. It adds nothing the rows do not hold except the papers' statements in plain
words (:data:`PAPER_SAYS`) and the papers' scale (:data:`PAPERS_SCALE`), both from the papers'
text as the project summarises it.

Usage: ``python -m geolib.report.findings OUT.md FILE.json ...``
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from geolib.files import write_text_atomic
from geolib.verdicts.claims import AFTER_DATA, PROSPECTIVE, Claim, read_claims
from geolib.verdicts.markup import plain, sentence
from geolib.verdicts.rules import (
    CLAIMS,
    DESCRIPTION,
    EMPIRICAL,
    INCONCLUSIVE,
    MATH_CHECK,
    NOT_REPRODUCED,
    NOT_RUN,
    PARTLY,
    REPRODUCED,
    combine_statuses,
)

#: each claim as its paper states it, in plain words
PAPER_SAYS: dict[str, str] = {
    "A1": "a token seen n times has its representation estimated from n samples, so its "
    "variance shrinks like 1/n: frequent tokens become rigid early, rare ones stay free",
    "A2": "when neighbours are sampled close to a point of a curved manifold, the curvature "
    "(normal) directions are under-represented, so local geometry looks flat",
    "A3": "gradients along normal directions are suppressed by a factor that grows with the "
    "distance t (slope 1 on a log-log plot), so tangent directions are amplified",
    "A4": "the energy of real gradients in a low-rank subspace of early activations is far "
    "above its energy in random subspaces of the same rank (often over 10×, up to 100×)",
    "A5": "removing that subspace from the activations raises their isotropy far more than "
    "removing a random subspace of the same rank",
    "A6": "decoders (next-token models) align their gradients with it more than encoders "
    "(masked-token models)",
    "A7": "the alignment is strongest in the first phase of training and is then kept",
    "B1": "the effective rank of the unembedding correlates loosely with performance but does "
    "not predict it: some high-rank models do badly and some low-rank ones do well",
    "B2": "in-distribution loss predicts out-of-distribution loss far better than effective "
    "rank does",
    "B3": "larger batches keep effective rank higher, and loss is U-shaped in batch size",
    "B4": "stronger weight decay keeps effective rank higher",
    "B5": "learning rate moves performance but geometry only weakly and inconsistently",
    "B6": "saturation (late-training degradation) is not caused by low rank: parallel-block "
    "(Pythia) models degrade as their rank collapses, sequential-block (OLMo) models reach low "
    "rank without degrading",
    "B7": "geometry metrics agree with each other but none predicts performance",
    "B8": "the same holds for robustness to quantization and for forgetting after fine-tuning",
}

#: the papers' scale, stated once (the rows state ours)
PAPERS_SCALE = (
    "Paper A measures about ten released encoders and decoders of 210M–1.7B parameters "
    "(EuroBERT, Pythia, SmolLM2, OLMo) at checkpoints through their training; Paper B trains "
    "108 OLMo-style models of 4–75M parameters on 8–128B tokens, about 10³ tokens per "
    "parameter. Our models are trained from scratch on a 2-core CPU: each finding below says "
    "how many, how large and on how many tokens, and most are one to three decades smaller and "
    "far less trained than the papers'. A verdict here is about these models, not the papers'."
)

#: what a status means, as the end of the sentence "Here, the claim ..."
HELD: dict[str, str] = {
    REPRODUCED: "held",
    PARTLY: "held in part",
    NOT_REPRODUCED: "did not hold",
    INCONCLUSIVE: "could not be decided",
    NOT_RUN: "has not been tested yet",
}


def _robust_words(robust: str) -> str:
    """``Claim.robust`` as a clause: ``yes …`` survives, ``fragile: …`` names what flips it."""
    text = plain(robust)
    if robust.startswith("yes"):
        rest = text[3:].strip()
        return "survives the declared alternatives" + (f" {rest}" if rest else "")
    if robust.startswith("fragile:"):
        return f"fragile to the declared alternatives ({text[len('fragile:') :].strip()})"
    return f"declared alternatives: {text}"


def _row_words(c: Claim, with_status: bool) -> str:
    """One evidence row in words: chapter (and verdict), deciding number, scale, how sure."""
    chapter = c.chapter.replace("_", " ")
    status = f" ({c.status})" if with_status else ""
    number = f": {plain(c.key_number)}" if c.key_number.strip() else ""
    scale = f", on {plain(c.scale)}" if c.scale.strip() else ""
    sure = []
    if c.seeds_agreeing:
        sure.append(f"seeds agreeing {plain(c.seeds_agreeing)}")
    if c.robust:
        sure.append(_robust_words(c.robust))
    if c.decided == AFTER_DATA:
        sure.append("rule set after seeing these data")
    elif c.decided == PROSPECTIVE:
        sure.append("rule committed before these data were made")
    if c.exploratory:
        sure.append(f"exploratory, on the seeds the rule had seen: {plain(c.exploratory)}")
    how = f" ({'; '.join(sure)})" if sure else ""
    return f"in the {chapter} chapter{status}{number}{scale}{how}"


def finding(claim_id: str, rows: Sequence[Claim]) -> str:
    """The paragraph of one claim: the paper's statement, the claim's combined status over
    its empirical rows (:func:`~geolib.verdicts.rules.combine_statuses`), then each row in words.
    Math checks and descriptions are named after the empirical rows and never decide."""
    if claim_id not in PAPER_SAYS:
        raise ValueError(f"unknown claim {claim_id!r}; known: {', '.join(PAPER_SAYS)}")
    empirical = [c for c in rows if c.evidence == EMPIRICAL]
    others = [c for c in rows if c.evidence != EMPIRICAL]
    if empirical:
        status = combine_statuses([c.status for c in empirical])
        several = len(empirical) > 1
        words = "; ".join(_row_words(c, several) for c in empirical)
        here = f"Here it {HELD[status]} — {words}."
    elif rows:
        status = ""
        here = "No experiment here decides it."
    else:
        status = NOT_RUN
        here = f"Here it {HELD[NOT_RUN]}."
    notes = []
    for c in others:
        kind = {MATH_CHECK: "a math check of the derivation", DESCRIPTION: "a description"}[
            c.evidence
        ]
        what = f"{plain(c.key_number)}" if c.key_number.strip() else c.status
        on = f" of {plain(c.scale)}" if c.evidence == DESCRIPTION and c.scale.strip() else ""
        notes.append(
            f"{kind}{on} ({c.chapter.replace('_', ' ')}: {c.status}; {what}) does not decide it"
        )
    tail = f" {sentence('; '.join(notes))}." if notes else ""
    head = f"**{claim_id}: {status}.**" if status else f"**{claim_id}: no empirical test.**"
    return f"{head} The paper says {PAPER_SAYS[claim_id]}. {here}{tail}"


def findings_markdown(table: Mapping[str, Sequence[Claim]]) -> str:
    """The findings page's body (MyST Markdown): the papers' scale once, a count of statuses,
    then one paragraph per claim (:func:`finding`), Paper A then Paper B."""
    missing = [cid for cid in CLAIMS if cid not in table]
    if missing:
        raise ValueError(f"the claims table lacks {missing}: read it with read_claims")
    counts: dict[str, int] = {}
    for cid in CLAIMS:
        rows = [c.status for c in table[cid] if c.evidence == EMPIRICAL]
        if rows or not table[cid]:
            key = combine_statuses(rows) if rows else NOT_RUN
            counts[key] = counts.get(key, 0) + 1
    tally = ", ".join(
        f"{counts[s]} {s}"
        for s in (REPRODUCED, PARTLY, NOT_REPRODUCED, INCONCLUSIVE, NOT_RUN)
        if counts.get(s)
    )
    n_tested = sum(counts.values())
    out = [
        f"**Scale.** {PAPERS_SCALE}",
        "",
        f"**In short.** Of the {n_tested} claims with an experiment here: {tally}. "
        "*Reproduced* means the rule's interval over trained models lies on the paper's side "
        "of its bar; *inconclusive* means these data cannot decide (an interval across the bar, "
        "or the claim's premise absent here). Every number and rule is in the "
        "{ref}`claims table <claims-section>` and the chapters.",
    ]
    for paper, prefix in (("Paper A", "A"), ("Paper B", "B")):
        out += ["", f"## {paper}", ""]
        for cid in CLAIMS:
            if cid.startswith(prefix):
                out += [f"- {finding(cid, table[cid])}"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 1:
        print(__doc__, file=sys.stderr)
        return 2
    out, files = Path(argv[0]), argv[1:]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, findings_markdown(read_claims(files)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
