"""The module map in ``geolib/__init__.py`` names every module, and only modules that exist."""

import re
from pathlib import Path

import geolib

PACKAGE = Path(geolib.__file__).parent


def test_module_map_is_complete_and_true():
    listed = re.findall(r"^    ([a-z_]+) {2,}\S", geolib.__doc__, flags=re.MULTILINE)
    assert len(listed) == len(set(listed)), "a module is listed twice"
    actual = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    actual |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert set(listed) == actual, (
        f"not on the map: {sorted(actual - set(listed))}; "
        f"on the map but missing: {sorted(set(listed) - actual)}"
    )
