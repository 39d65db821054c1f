"""The claims table: one row per claim of Papers A and B, filled in by the pipeline's stages.

Each notebook stage writes ``data/claims/<stage>.json`` with rows for the claims it tests; the
book stage merges those files over the full list below (claims no stage has tested yet read
``not yet run``) and renders the table on the book's introduction page.

Usage: ``python -m geolib.claims OUT.md FILE.json ...``
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

#: Claim IDs and one-line summaries (see ``shared/PAPERS.md`` for the full statements).
CLAIMS: dict[str, str] = {
    "A1": "Frequency-induced variance collapse (variance ∝ 1/n)",
    "A2": "Chord–arc curvature bias (normal share ∝ κ²·scale²)",
    "A3": "Tangent gradient dominance (normal/tangent ∝ t)",
    "A4": "Gradient energy concentrates in tangent subspaces (R_energy ≫ 1)",
    "A5": "Anisotropy is structured along tangents (IsoScore* after removal)",
    "A6": "Decoders align more than encoders",
    "A7": "Tangent alignment imprinted early in training",
    "B1": "Effective rank correlates loosely with, but does not predict, performance",
    "B2": "In-distribution loss predicts OOD behaviour better than effective rank",
    "B3": "Larger batches keep effective rank higher; loss U-shaped in batch size",
    "B4": "Stronger weight decay keeps effective rank higher",
    "B5": "Learning rate moves performance, geometry only weakly",
    "B6": "Saturation is not caused by low rank (Pythia vs OLMo blocks)",
    "B7": "Geometry metrics agree with each other but do not predict performance",
    "B8": "Same for quantization robustness and forgetting",
}

STATUSES = ("not yet run", "reproduced", "partly", "not reproduced")


@dataclass(frozen=True)
class Claim:
    """One row of the claims table.

    ``key_number`` is the measured quantity that decides the verdict, with its uncertainty
    (e.g. ``"slope −0.99 ± 0.03 (95% CI)"``); ``chapter`` is the stage (notebook) name.
    """

    claim_id: str
    status: str
    key_number: str = ""
    chapter: str = ""
    detail: str = ""

    def __post_init__(self) -> None:
        if self.claim_id not in CLAIMS:
            raise ValueError(f"unknown claim {self.claim_id!r}; known: {', '.join(CLAIMS)}")
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")


def write_claims(path: str | Path, claims: list[Claim]) -> Path:
    """Write a stage's claim rows as JSON (sorted keys, stable bytes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [asdict(c) for c in sorted(claims, key=lambda c: c.claim_id)]
    path.write_text(json.dumps(rows, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def read_claims(paths: list[str | Path]) -> dict[str, Claim]:
    """Merge stage files over the full list; a claim written by two stages is an error."""
    table = {cid: Claim(cid, "not yet run") for cid in CLAIMS}
    seen: dict[str, Path] = {}
    for path in map(Path, paths):
        for row in json.loads(path.read_text()):
            claim = Claim(**row)
            if claim.claim_id in seen:
                raise ValueError(
                    f"claim {claim.claim_id} written by both {seen[claim.claim_id]} and {path}"
                )
            seen[claim.claim_id] = path
            table[claim.claim_id] = claim
    return table


def claims_markdown(table: dict[str, Claim], chapter_dir: str = "chapters") -> str:
    """Render the claims table as a Markdown table with links to the chapters."""
    lines = [
        "| claim | statement | status | key number | chapter |",
        "|---|---|---|---|---|",
    ]
    for cid, claim in table.items():
        link = f"[{claim.chapter}]({chapter_dir}/{claim.chapter}.ipynb)" if claim.chapter else "—"
        number = claim.key_number.replace("|", "\\|") or "—"
        lines.append(f"| **{cid}** | {CLAIMS[cid]} | {claim.status} | {number} | {link} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    out, files = Path(argv[0]), argv[1:]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(claims_markdown(read_claims(files)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
