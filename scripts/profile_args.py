"""Print ``-S key=value`` arguments that apply a profile (e.g. ``profiles/smoke.yaml``).

    dvc exp run $(python scripts/profile_args.py smoke)

A profile file holds only the keys it changes, nested like ``params.yaml``; every key must
already exist in ``params.yaml`` so a profile cannot silently drift from the defaults.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from geolib.config import flatten, load_params  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    defaults = flatten(load_params(ROOT / "params.yaml"))
    profile = flatten(load_params(ROOT / "profiles" / f"{argv[0]}.yaml"))
    unknown = sorted(set(profile) - set(defaults))
    if unknown:
        print(f"profile {argv[0]}: keys not in params.yaml: {unknown}", file=sys.stderr)
        return 1
    # JSON literals are valid YAML, so lists and strings survive `-S` parsing unchanged.
    print(
        " ".join(
            f"-S {key}={json.dumps(value, separators=(',', ':'))}" for key, value in profile.items()
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
