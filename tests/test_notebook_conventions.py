"""The course's conventions, checked on every teaching notebook: one idea per cell, exercises
with solutions that run, one parameters cell, the glossary linked.

The solutions run with the rest of the notebook (``make test``'s nbval pass); they are collapsed
in JupyterLab (the cell's ``jupyter.source_hidden`` metadata, which the notebook filter keeps) and
on the site (the ``hide-cell`` tag). Each opens with its answer in a sentence, a comment
``# Answer: ...``; at least one exercise asks for code, in a cell of the learner's that starts
with ``# Your code``, and its solution checks what it computes (``assert`` or ``check_claim``).
"""

import json
import pathlib
import re

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
#: The longest code cell a lesson may hold.
MAX_CODE_LINES = 30
#: How a solution opens, and how a learner's cell of a code exercise does.
ANSWER, YOUR_CODE = "# Answer: ", "# Your code"


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


def _exercise_cells(path):
    cells = _cells(path)
    heading = [
        i
        for i, c in enumerate(cells)
        if c["cell_type"] == "markdown" and re.search(r"^## Exercises", _text(c), re.MULTILINE)
    ]
    return cells[heading[-1] + 1 :] if heading else []


def _hidden(cell):
    return "hide-cell" in cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_collapsed_cells_are_collapsed_in_jupyterlab_too(path):
    open_in_the_lab = [
        i + 1
        for i, c in enumerate(_cells(path))
        if _hidden(c) and not c["metadata"].get("jupyter", {}).get("source_hidden")
    ]
    assert not open_in_the_lab, (
        f"cells {open_in_the_lab} are tagged hide-cell but open in JupyterLab: set their "
        "metadata's jupyter.source_hidden to true (View > Collapse Selected Code)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_solution_opens_with_its_answer(path):
    solutions = [c for c in _exercise_cells(path) if c["cell_type"] == "code" and _hidden(c)]
    unanswered = [
        _text(c).splitlines()[0] if _text(c) else ""
        for c in solutions
        if not _text(c).startswith(ANSWER) or len(_text(c).splitlines()[0].split()) < 6
    ]
    assert not unanswered, (
        f"solutions that do not open with '{ANSWER}<the answer, in a sentence>': {unanswered}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_an_exercise_asks_for_code_and_its_solution_checks_it(path):
    cells = _exercise_cells(path)
    yours = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and not _hidden(c)]
    yours = [i for i in yours if _text(cells[i]).startswith(YOUR_CODE)]
    assert yours, f"no exercise asks for code: give one a cell of the learner's, '{YOUR_CODE}...'"
    checked = [
        i
        for i in yours
        if any(
            _hidden(c) and re.search(r"\bassert\b|check_claim\(", _text(c))
            for c in cells[i + 1 : i + 3]
        )
    ]
    assert checked, "the solution after the learner's cell checks nothing (assert, check_claim)"
