"""Tests of geolib.data.text on small text made here."""

from __future__ import annotations

import pytest

from geolib.data.text import clean_text, segment_text, strip_gutenberg
from tests.synthetic_packages import novel


def test_clean_text_normalises_whitespace_and_unicode():
    raw = "\ufeffTitle  \r\nline one\t\r\n\r\n\r\n\r\n\r\nCafe\u0301 ok   \n\n"
    assert clean_text(raw) == "Title\nline one\n\nCafé ok"


def test_clean_text_keeps_indentation_and_rejects_bytes():
    code = "def f():\n    return 1\n\n\n\n    indented"
    assert clean_text(code) == "def f():\n    return 1\n\n    indented"
    with pytest.raises(TypeError, match="expected str"):
        clean_text(b"bytes")


def test_strip_gutenberg_header_footer_and_licence():
    text = (
        "The Project Gutenberg EBook of X\nlicence blah\n\n"
        "*** START OF THIS PROJECT GUTENBERG EBOOK X ***\n\n\nProduced by Someone\nand friends\n\n"
        "CHAPTER 1\n\nCall me Ishmael.\n\n"
        "End of Project Gutenberg's X, by Y\n\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\n"
        "FULL LICENSE text"
    )
    out = clean_text(text)
    assert out == "CHAPTER 1\n\nCall me Ishmael."
    assert strip_gutenberg("no markers here") == "no markers here"


def test_segment_text_cuts_at_headings_merges_short_and_splits_long():
    text = novel("A Book", chapters=6, seed=0)
    pieces = segment_text(text, max_chars=5000, min_chars=1000)
    assert all(len(p) <= 5000 for p in pieces)
    # the title page (shorter than min_chars) is merged into chapter 1
    assert pieces[0].startswith("A BOOK") and "CHAPTER 1" in pieces[0]
    assert all(p.startswith("CHAPTER") for p in pieces[1:])
    assert " ".join(pieces).split() == text.split()
    long = segment_text(text, max_chars=1000, min_chars=100, heading=None)
    assert all(len(p) <= 1000 for p in long) and len(long) > 6
    assert " ".join(long).split() == text.split()


def test_segment_text_edge_cases():
    assert segment_text("   \n  ") == []
    unbreakable = segment_text("x" * 50, max_chars=20, min_chars=0, heading=None)
    assert "".join(unbreakable) == "x" * 50 and max(map(len, unbreakable)) <= 20
    with pytest.raises(ValueError, match="min_chars"):
        segment_text("abc", max_chars=10, min_chars=20)
