"""Lane-seconds of the pipeline by group of stages, and the ratio against an earlier log.

    python benchmarks/lane_seconds.py [--log logs/lanes.csv] [--before OTHER.csv] [--since ISO]

``scripts/lanes.py`` appends one row per stage run (wall and CPU seconds of its process tree)
to ``logs/lanes.csv``. This takes the latest run that computed something (``ran`` = 1) of each
stage, optionally only those started at or after ``--since``, sums wall seconds by group
(the sweep's training, other training, Paper A analyses, Paper B analyses, chapters and book,
data) and, with ``--before``, prints the same for another log and the ratio after / before per
group and per stage. Stage times from two whole-pipeline runs on one machine, each measured
alone, are comparable; one stage's time moves by ~10% between machines of this kind.
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GROUPS = {
    "sweep training": ["sweep_train@*"],  # the sweep's models, at every budget
    "training": [
        "train_*",
        "ladder_train@*",
        "saturation_train@*",
        "length_train@*",
    ],
    "Paper A analyses": [
        "gradient_energy_tables",
        "residual_isotropy_tables",
        "frequency_collapse_tables",
        "scale_*_tables",
        "gradient_energy_pretrained*",  # one stage per released model (@<key>)
    ],
    "Paper B analyses": [
        "sweep_measure",
        "geometry_performance_tables",
        "quantization_tables",
        "forgetting_tables",
        "saturation_measure",
        "saturation_tables",
        "training_length_tables",  # the study the sweep's design reads
    ],
    "data": ["prepare_corpus", "tokenize", "tokenize_small", "fetch_pretrained*"],
}


def group_of(stage: str) -> str:
    for name, patterns in GROUPS.items():
        if any(fnmatch.fnmatch(stage, p) for p in patterns):
            return name
    return "chapters and book"


def latest(log: Path, since: str | None = None) -> dict[str, float]:
    """Wall seconds of the latest computing run of each stage in ``log``."""
    out: dict[str, float] = {}
    with log.open() as f:
        for row in csv.DictReader(f):
            if row.get("ran", "1") != "1" or row["exit"] != "0":
                continue
            if since and row["started_utc"] < since:
                continue
            out[row["stage"]] = float(row["wall_s"])
    return out


def by_group(times: dict[str, float]) -> dict[str, float]:
    sums: dict[str, float] = {}
    for stage, s in times.items():
        sums[group_of(stage)] = sums.get(group_of(stage), 0.0) + s
    return sums


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, default=ROOT / "logs" / "lanes.csv")
    parser.add_argument("--since", default=None, help="ISO time: only runs started from then")
    parser.add_argument("--before", type=Path, default=None, help="an earlier lanes log")
    parser.add_argument("--before-since", default=None)
    parser.add_argument("--stages", action="store_true", help="also one line per stage")
    args = parser.parse_args(argv)
    after = latest(args.log, args.since)
    before = latest(args.before, args.before_since) if args.before else {}
    ga, gb = by_group(after), by_group(before)
    print(f"{'group':24s} {'lane-s':>9s}" + (f" {'before':>9s} {'ratio':>6s}" if before else ""))
    for name in [*GROUPS, "chapters and book"]:
        line = f"{name:24s} {ga.get(name, 0):9.0f}"
        if before:
            b = gb.get(name, 0)
            line += f" {b:9.0f} {ga.get(name, 0) / b if b else float('nan'):6.2f}"
        print(line)
    total_a, total_b = sum(after.values()), sum(before.values())
    print(
        f"{'all':24s} {total_a:9.0f}"
        + (f" {total_b:9.0f} {total_a / total_b:6.2f}" if before else "")
    )
    if args.stages:
        for stage in sorted(after, key=lambda s: -after[s]):
            b = before.get(stage)
            ratio = f" {b:9.1f} {after[stage] / b:6.2f}" if b else ""
            print(f"  {stage:40s} {after[stage]:9.1f}{ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
