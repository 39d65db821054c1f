"""geolib.verdicts.chapters.interface: every chapter module implements the one interface (CHAPTER,
read, verdicts), and a module that does not is named with what it lacks."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from geolib.verdicts.chapters import interface

CHAPTERS_DIR = Path(interface.__file__).parent
#: modules of the package that are not chapters: what the chapters share or read
HELPERS = {
    "__init__",
    "interface",
    "common",
    "energy_tables",
    "forgetting_section",
    "outcome_association",
    "released",
}


@pytest.mark.parametrize("name", interface.CHAPTERS)
def test_each_chapter_module_implements_the_interface(name):
    assert interface.problems(interface.chapter(name), name) == []


def test_every_module_of_the_package_is_a_chapter_or_a_named_helper():
    modules = {p.stem for p in CHAPTERS_DIR.glob("*.py")}
    assert modules - HELPERS == set(interface.CHAPTERS)


def test_each_chapter_notebook_decides_through_the_interface():
    notebooks = CHAPTERS_DIR.parents[2] / "notebooks"
    for name in interface.CHAPTERS:
        text = (notebooks / f"{name}.ipynb").read_text()
        assert "chapter.read(params_path, overrides)" in text, name
        assert "chapter.verdicts(" in text, name
        assert "chapter.load_tables(" not in text and "Section.from_params(" not in text, name


def test_a_module_short_of_the_interface_is_named_with_what_it_lacks():
    def read(params_path, overrides=None): ...

    def verdicts(section, tables): ...

    def read_required(params_path, overrides): ...

    good = SimpleNamespace(
        CHAPTER="x", read_section=read, read=read, verdicts=lambda tables, section: []
    )
    assert interface.problems(good, "x") == []
    found = interface.problems(SimpleNamespace(CHAPTER="y", read=read_required), "x")
    assert found == [
        "x: CHAPTER is 'y', not 'x'",
        "x: no function read_section()",
        "x: read()'s overrides must default to None",
        "x: no function verdicts()",
    ]
    swapped = SimpleNamespace(CHAPTER="x", read_section=read, read=read, verdicts=verdicts)
    assert interface.problems(swapped, "x") == [
        "x: verdicts('section', 'tables'), not verdicts('tables', 'section')"
    ]
    with pytest.raises(KeyError, match="no chapter module 'common'"):
        interface.chapter("common")
