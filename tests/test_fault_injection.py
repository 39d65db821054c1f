"""The fault catalogue (tests/fault_injection.py): every fault is caught (a clear error of the
module's own kind naming the damaged thing) or recovered (the right result); none is silent or
raw. A new fault joins the catalogue, and this test holds it."""

from __future__ import annotations

from tests import fault_injection as fi


def test_every_fault_is_caught_or_recovered(tmp_path):
    base = fi._tiny_run(tmp_path / "base")
    results = {name: inject() for name, inject in fi.faults(base, tmp_path).items()}
    assert len(results) >= 30
    bad = {n: r for n, r in results.items() if r not in (fi.CAUGHT, fi.RECOVERED)}
    assert not bad, bad
    assert sum(r == fi.RECOVERED for r in results.values()) >= 7
