"""Text: cleaning and segmentation of raw text, as pure functions of strings.

:func:`clean_text` normalises one work (BOM, line ends, Unicode NFC, blank-line runs, a Project
Gutenberg header and footer); :func:`segment_text` cuts it into documents at chapter/act
headings and paragraph boundaries. Standard library only; no files are read or written here.
"""

from __future__ import annotations

import math
import re
import unicodedata

#: Default heading lines at which literary works are cut into documents (one chapter/act each).
DEFAULT_HEADING = (
    r"^(?:ACT|Act|CHAPTER|Chapter|BOOK|Book|VOLUME|Volume|PART|Part)"
    r"\s+(?:[0-9]+|[IVXLC]+)\b[^\n]{0,80}$"
)

_GUTENBERG_START = re.compile(
    r"^\s*\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG[^\n]*$"
    r"|^\s*\*END\*THE SMALL PRINT![^\n]*$",
    re.IGNORECASE | re.MULTILINE,
)
_GUTENBERG_END = re.compile(
    r"^\s*(?:\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG"
    r"|End of (?:the )?Project Gutenberg(?:'s)?\b)[^\n]*$",
    re.IGNORECASE | re.MULTILINE,
)
_PRODUCED_BY = re.compile(r"\A\s*(?:Produced|Prepared|Transcribed) by[^\n]*(?:\n[^\n]+)*\n*")


def strip_gutenberg(text: str) -> str:
    """Remove a Project Gutenberg header (up to its START line), footer and licence."""
    start = _GUTENBERG_START.search(text)
    if start:
        text = text[start.end() :]
        text = _PRODUCED_BY.sub("", text, count=1)
    end = _GUTENBERG_END.search(text)
    if end:
        text = text[: end.start()]
    return text


def clean_text(text: str, *, gutenberg: bool = True) -> str:
    """Normalise one work: BOM, CR/LF, Unicode NFC, trailing spaces, runs of blank lines.

    Line structure inside paragraphs is kept (verse and code depend on it); three or more
    newlines become two; leading and trailing blank space is dropped.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if gutenberg:
        text = strip_gutenberg(text)
    text = unicodedata.normalize("NFC", text)
    text = re.sub(r"[ \t\f\v]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def _cut(text: str, limit: int) -> int:
    """Position ≤ ``limit`` at which to cut: last paragraph break, else line, sentence, space."""
    window = text[:limit]
    floor = limit // 2
    for pattern in ("\n\n", "\n", ". ", " "):
        at = window.rfind(pattern)
        if at >= floor:
            return at + len(pattern)
    return limit


def segment_text(
    text: str,
    *,
    max_chars: int = 32000,
    min_chars: int = 2000,
    heading: str | None = DEFAULT_HEADING,
) -> list[str]:
    """Cut one work into documents: at heading lines, then long sections near ``max_chars``.

    Sections shorter than ``min_chars`` (a title page, a one-line "VOLUME I") are merged into
    the following section. Concatenating the pieces with ``"\\n\\n"`` gives back the text up to
    whitespace at the cut points.
    """
    if max_chars <= 0 or min_chars < 0 or min_chars > max_chars:
        raise ValueError(
            f"need 0 <= min_chars <= max_chars, max_chars > 0; got {min_chars=}, {max_chars=}"
        )
    text = text.strip()
    if not text:
        return []
    starts = [0]
    if heading:
        starts += [m.start() for m in re.finditer(heading, text, flags=re.MULTILINE) if m.start()]
    sections = [text[a:b].strip() for a, b in zip(starts, starts[1:] + [len(text)], strict=True)]
    merged: list[str] = []
    carry = ""
    for section in sections:
        section = f"{carry}\n\n{section}" if carry else section
        if len(section) < min_chars:
            carry = section
            continue
        merged.append(section)
        carry = ""
    if carry:
        if merged and len(merged[-1]) + len(carry) <= max_chars:
            merged[-1] = f"{merged[-1]}\n\n{carry}"
        else:
            merged.append(carry)
    out = []
    for section in merged:
        pieces = math.ceil(len(section) / max_chars)
        while pieces > 1:
            at = _cut(section, min(max_chars, math.ceil(1.1 * len(section) / pieces)))
            out.append(section[:at].strip())
            section = section[at:].strip()
            pieces = math.ceil(len(section) / max_chars)
        if section:
            out.append(section)
    return [piece for piece in out if piece]
