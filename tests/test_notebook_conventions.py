"""The course's conventions, checked on every teaching notebook: one idea per cell, exercises
with solutions that run, one parameters cell, the glossary linked.

The solutions run with the rest of the notebook (``make test``'s nbval pass); the site collapses
them (the ``hide-cell`` tag).
"""

import json
import pathlib
import re

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
#: The longest code cell a lesson may hold.
MAX_CODE_LINES = 30


def _cells(path):
    return json.loads(path.read_text())["cells"]


def _text(cell):
    return "".join(cell["source"])


def test_the_course_has_its_notebooks():
    assert len(NOTEBOOKS) >= 15


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_code_cell_is_longer_than_a_screen(path):
    long = [
        (i + 1, len(_text(c).splitlines()))
        for i, c in enumerate(_cells(path))
        if c["cell_type"] == "code" and len(_text(c).splitlines()) > MAX_CODE_LINES
    ]
    assert not long, f"cells (number, lines) over {MAX_CODE_LINES} lines: {long}: split them"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_notebook_ends_with_exercises_and_their_solutions(path):
    cells = _cells(path)
    heading = [
        i
        for i, c in enumerate(cells)
        if c["cell_type"] == "markdown" and re.search(r"^## Exercises", _text(c), re.MULTILINE)
    ]
    assert heading, "no '## Exercises' section"
    after = cells[heading[-1] + 1 :]
    solutions = [
        c
        for c in after
        if c["cell_type"] == "code" and "hide-cell" in c.get("metadata", {}).get("tags", [])
    ]
    assert 2 <= len(solutions) <= 4, (
        f"{len(solutions)} solution cells (code tagged hide-cell, collapsed on the site) after "
        "the exercises: give each exercise its solution"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_one_parameters_cell_and_the_glossary_linked(path):
    cells = _cells(path)
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{len(tagged)} cells tagged parameters"
    markdown = "".join(_text(c) for c in cells if c["cell_type"] == "markdown")
    assert "../docs/glossary.md#" in markdown, "no term linked to the glossary"
