"""Synthetic packages for the corpus tests, made here (nothing is downloaded): novels,
tar.gz archives, and the sources that the ``fake_pypi`` fixture (``conftest.py``) serves."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

import numpy as np

WORDS = "the of and to a in that is was he for it with as his on be at by I".split()


def novel(title: str, chapters: int, seed: int, words_per_chapter: int = 600) -> str:
    rng = np.random.default_rng(seed)
    parts = [title.upper(), "", "By Nobody", ""]
    for c in range(1, chapters + 1):
        parts += [f"CHAPTER {c}", ""]
        for _ in range(words_per_chapter // 60):
            parts += [" ".join(rng.choice(WORDS, 60)) + ".", ""]
    return "\n".join(parts)


def targz_bytes(files: dict[str, str]) -> bytes:
    """A tar.gz of ``files`` whose bytes depend on the files only (no timestamps), so that a
    synthetic package can be pinned by sha256 like a real one."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, text in files.items():
            blob = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return gzip.compress(raw.getvalue(), mtime=0)


def make_targz(path: Path, files: dict[str, str]) -> Path:
    path.write_bytes(targz_bytes(files))
    return path


#: What the ``fake_pypi`` fixture serves, by package: member name -> text.
PACKAGES = {
    "novels": {
        f"novels-1.0/texts/{name}_gut.txt": novel(name, chapters=12, seed=i)
        for i, name in enumerate(["alpha", "beta", "gamma", "delta"])
    },
    "manuals": {
        f"manuals-1.0/doc/{name}.rst.txt": "Manual\n======\n\n" + "Run ``x`` now.\n\n" * 200
        for name in ["install", "usage", "api"]
    },
}


def package_sha256(package: str) -> str:
    return hashlib.sha256(targz_bytes(PACKAGES[package])).hexdigest()


SOURCES = [
    {
        "name": "novels",
        "domain": "id",
        "registry": "pypi",
        "package": "novels",
        "version": "1.0",
        "sha256": package_sha256("novels"),
        "include": ["*/texts/*_gut.txt"],
        "licence": "PD",
        "origin": "made in a test",
    },
    {
        "name": "manuals",
        "domain": "ood_docs",
        "registry": "pypi",
        "package": "manuals",
        "version": "1.0",
        "sha256": package_sha256("manuals"),
        "include": ["*.rst.txt"],
        "heading": None,
        "gutenberg": False,
    },
]
