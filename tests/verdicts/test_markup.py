"""Tests of geolib.verdicts.markup: text from data reaches the reader as written, through a real
Markdown renderer (markdown-it, the parser under MyST), never as markup."""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from geolib.report.book import abstract_markdown
from geolib.verdicts.claims import Claim, claims_markdown, write_claims
from geolib.verdicts.markup import checked_name, plain
from geolib.verdicts.trends import TrendRow

HOSTILE = [
    "<img src=x onerror=alert(document.domain)>",
    "[click](javascript:alert(1))",
    "{ref}`gotcha <intro>`",
    "`code` **bold** _it_ ~~gone~~",
    "a | b\nc",
    "# heading",
    "&lt; already an entity",
    "back\\slash and ![img](x.png)",
    "slope −0.99 [−1.00, −0.98] (95% CI), R² < 0.5",
]
MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")


def _rendered_text(markdown: str) -> str:
    """The text a reader sees: the rendered HTML without its tags, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", MD.render(markdown))).strip()


@pytest.mark.parametrize("text", HOSTILE)
def test_plain_text_renders_as_itself_in_a_paragraph_and_in_a_table_cell(text):
    one_line = " ".join(text.splitlines())
    assert _rendered_text(plain(text)) == one_line
    table = f"| a | b |\n|---|---|\n| {plain(text)} | x |\n"
    rendered = MD.render(table)
    assert rendered.count("<td>") == 2  # no cell split by a |
    assert "<img" not in rendered and "<a " not in rendered and "<code>" not in rendered
    assert html.unescape(re.search(r"<td>(.*?)</td>", rendered).group(1)) == one_line


def test_names_inside_links_are_bare_or_refused():
    for ok in ("gradient_energy", "a4-rule.v2", ""):
        assert checked_name("x", ok) == ok
    for bad in ("a`b", "intro> `x", "a b", "x<y"):
        with pytest.raises(ValueError, match=r"chapter must be a bare name"):
            checked_name("chapter", bad)
    with pytest.raises(ValueError, match=r"claim A2: chapter must be a bare name"):
        Claim("A2", "reproduced", "k", chapter="chord_arc`")
    with pytest.raises(ValueError, match=r"claim A2: anchor must be a bare name"):
        Claim("A2", "reproduced", "k", chapter="chord_arc", anchor="x <y>")
    with pytest.raises(ValueError, match=r"trend of A4: anchor must be a bare name"):
        TrendRow("A4", "grows with size", "d", "fig`")


def test_a_hostile_claim_row_reaches_the_table_and_the_abstract_as_text(tmp_path):
    """The fault this guards against: an edited claims file put a live <img onerror> tag into the
    book. Every text field is shown as written; the table keeps its columns."""
    evil = HOSTILE[0]
    row = Claim(
        "A2",
        "reproduced",
        evil,
        chapter="chord_arc",
        anchor="a2-rule",
        unit=HOSTILE[1],
        seeds_agreeing="1 of 1",
        robust=HOSTILE[3],
        scale=HOSTILE[2],
    )
    table = claims_markdown({"A2": [row]})
    assert table.startswith("```{table}\n:class: claims-table\n")
    # the directive's body is parsed as Markdown in the book: render it as such here
    rendered = MD.render(table.replace("```{table}\n:class: claims-table\n", "").replace("```", ""))
    assert "<img" not in rendered and "<a " not in rendered and "<strong>bold" not in rendered
    assert evil in html.unescape(rendered)
    row_cells = [r for r in table.splitlines() if r.startswith("| **A2:")][0]
    assert len(re.findall(r"(?<!\\)\|", row_cells)) == 5  # 4 columns, none split

    abstract = abstract_markdown(write_claims(tmp_path / "c.json", [row]))
    body = "\n".join(abstract.splitlines()[2:-1])  # inside the admonition directive
    assert "<img" not in MD.render(body) and evil in html.unescape(MD.render(body))


def test_words_fold_white_space_and_sentence_capitalises_the_first_letter():
    from geolib.verdicts.markup import sentence, words

    assert words("  a folded\n  YAML\tstring ") == "a folded YAML string"
    assert words(3) == "3"
    assert sentence("every model learned; b") == "Every model learned; b"
    assert sentence("") == ""
