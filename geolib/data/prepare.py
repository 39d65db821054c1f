"""The corpus stage's command line: the registries' corpus, or the hub's (``data.source: hub``).

python -m geolib.data.prepare prepare --params params.yaml --section data
python -m geolib.data.prepare datasheet --corpus-dir data/corpus   # print its datasheet
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from geolib.data.corpus import prepare_corpus
from geolib.data.hub_corpus import prepare_hub_corpus


def _stage_params(args: argparse.Namespace) -> dict[str, Any]:
    from geolib.config import stage_params

    return stage_params(args.params, args.section)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m geolib.data.prepare", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="fetch sources and write splits + datasheet")
    prep.add_argument("--params", default="params.yaml", help="parameters file")
    prep.add_argument("--section", default="data", help="section of the parameters file")
    prep.add_argument("--raw-dir", help="override raw_dir (downloaded packages)")
    prep.add_argument("--out-dir", help="override out_dir (corpus splits)")
    show = sub.add_parser("datasheet", help="print the datasheet Markdown of a prepared corpus")
    show.add_argument("--corpus-dir", default="data/corpus")
    args = parser.parse_args(argv)

    if args.command == "datasheet":
        print((Path(args.corpus_dir) / "datasheet.md").read_text(), end="")
        return 0
    params = _stage_params(args)
    t0 = time.perf_counter()
    out_dir = args.out_dir or params.get("out_dir", "data/corpus")
    if params.get("source", "registries") == "hub":
        # the stage declares the registries' download cache as an output: the hub's cache is
        # Hugging Face's own, so it stays an empty folder here (DVC refuses a missing output)
        Path(args.raw_dir or params.get("raw_dir", "data/raw")).mkdir(parents=True, exist_ok=True)
        hub = dict(params.get("hub") or {})
        prepare_hub_corpus(out_dir=out_dir, seed=int(params.get("seed", 0)), **hub)
    else:
        prepare_corpus(
            params["sources"],
            params["domains"],
            raw_dir=args.raw_dir or params.get("raw_dir", "data/raw"),
            out_dir=out_dir,
            seed=int(params.get("seed", 0)),
            split_unit=params.get("split_unit", "document"),
            max_doc_chars=int(params.get("max_doc_chars", 32000)),
            min_doc_chars=int(params.get("min_doc_chars", 2000)),
        )
    print(f"prepare: done in {time.perf_counter() - t0:.1f} s → {out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
