"""Synthetic packages for the corpus tests, made here (nothing is downloaded): novels,
tar.gz archives, and the sources that the ``fake_pypi`` fixture (``conftest.py``) serves."""

from __future__ import annotations

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


def make_targz(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            blob = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


SOURCES = [
    {
        "name": "novels",
        "domain": "id",
        "registry": "pypi",
        "package": "novels",
        "version": "1.0",
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
        "include": ["*.rst.txt"],
        "heading": None,
        "gutenberg": False,
    },
]
