"""Start-up cost of each pipeline entry point: its import time, with and without transformers'
model classes.

    python benchmarks/bench_imports.py [--repeats 5]

Every stage's command starts a fresh Python and imports its entry module before it does any
work. For each entry module of ``dvc.yaml`` this times, in fresh processes (best of
``--repeats``), the import of the module as it is (model classes imported only where a model is
built) and the import of the module followed by the three families' model classes (what every
stage paid when ``geolib.models.families`` imported them at the top). It also says whether the
plain import pulled in ``transformers.modeling_utils``. Writes
``benchmarks/results/bench_imports.json``. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results"
MODEL_CLASSES = "from transformers import BertForMaskedLM, GPTNeoXForCausalLM, Olmo2ForCausalLM"
PROBE = """
import sys, time
t = time.perf_counter()
import {module}
{extra}
print(time.perf_counter() - t, "transformers.modeling_utils" in sys.modules)
"""


def entry_modules(dvc_yaml: Path = ROOT / "dvc.yaml") -> list[str]:
    """The modules the stages run (``python -m X``), and ``scripts/`` entry points as modules
    of the notebook and book runners' library (``geolib.report.book``)."""
    text = dvc_yaml.read_text()
    modules = sorted(set(re.findall(r"python -m ([\w.]+)", text)))
    return [m for m in modules if m != "geolib"] + ["geolib.__main__", "geolib.report.book"]


def time_import(module: str, extra: str, repeats: int) -> tuple[float, bool]:
    best, heavy = float("inf"), False
    code = PROBE.format(module=module, extra=extra)
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        )
        seconds, loaded = out.stdout.split()
        best, heavy = min(best, float(seconds)), loaded == "True"
    return best, heavy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    rows = []
    print(f"{'module':45s} {'import s':>9s} {'+ models s':>10s} {'ratio':>6s}  model classes")
    for module in entry_modules():
        plain, heavy = time_import(module, "", args.repeats)
        eager, _ = time_import(module, MODEL_CLASSES, args.repeats)
        rows.append(
            {"module": module, "import_s": plain, "with_model_classes_s": eager, "loads": heavy}
        )
        print(
            f"{module:45s} {plain:9.2f} {eager:10.2f} {plain / eager:6.2f}  "
            f"{'imported' if heavy else 'not imported'}"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / "bench_imports.json"
    out.write_text(json.dumps({"repeats": args.repeats, "modules": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
