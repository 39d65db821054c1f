"""Text from data (claim rows, trend rows) shown verbatim in the book's MyST Markdown.

A key number or a reason read from a results file must reach the reader as the characters it
holds, never as markup: ``<img src=x onerror=...>`` would otherwise become a live HTML tag, and
``[x](javascript:...)``, a backtick or ``{ref}`` a link, code or a role. Names that the book
uses inside roles and links (a chapter, a MyST target) cannot be escaped there, so they are
checked instead.
"""

from __future__ import annotations

import html
import re

# CommonMark lets a backslash escape any ASCII punctuation; these start Markdown or MyST syntax
# (emphasis, code, links, roles, tables, headings, lists, strikethrough). `$` stays: math.
_MARKUP = re.compile(r"([\\`*_{}\[\]()#+\-!|~])")
_NAME = re.compile(r"[A-Za-z0-9_.-]*")


def plain(text: str) -> str:
    """``text`` as literal Markdown on one line: HTML's special characters ``& < >`` as
    entities, Markdown punctuation backslash-escaped, line breaks as spaces."""
    one_line = " ".join(text.splitlines())
    return _MARKUP.sub(r"\\\1", html.escape(one_line, quote=False))


def words(text: object) -> str:
    """``text`` on one line, its runs of white space as one space (a folded YAML string)."""
    return " ".join(str(text).split())


def sentence(text: str) -> str:
    """``text`` with its first letter capitalised (a clause that starts a sentence)."""
    return text[:1].upper() + text[1:]


def checked_name(where: str, name: str) -> str:
    """``name`` if it is a bare name (letters, digits, ``_ . -``): the only text from data that
    the book puts inside a role or a link target; anything else is refused naming ``where``."""
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"{where} must be a bare name (letters, digits, _ . -), got {name!r}: the book puts "
            "it inside a link"
        )
    return name
