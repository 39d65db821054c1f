"""Keep the Paper A verdicts reached on the seeds every rule had seen, before fresh seeds
replace those models (the chapters show them beside the confirmatory rows as "exploratory").

    python scripts/record_exploratory.py --source "claims of commit 3ace919" \
        --out docs/history/paper-a-seen-seeds.json

Reads ``data/claims/<chapter>.json`` of the chapters that decide A1 and A4-A7 on our models.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from geolib.files import write_text_atomic
from geolib.verdicts.claims import exploratory_record, read_claims

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = ("A1", "A4", "A5", "A6", "A7")
CHAPTERS = ("frequency_collapse", "gradient_energy", "residual_isotropy")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True, help="where the rows come from (a commit)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--claims-dir", default=str(ROOT / "data/claims"))
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    table = read_claims(Path(args.claims_dir) / f"{c}.json" for c in CHAPTERS)
    record = exploratory_record(table, CLAIMS, CHAPTERS, seeds=args.seeds, source=args.source)
    text = json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    write_text_atomic(Path(args.out), text)
    print(f"{len(record['rows'])} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
