"""The README's learning path is the notebooks' own account of themselves: their titles, what
each teaches and which notebooks it requires, read from their first cells
(:mod:`helpers.teaching.learning_path`)."""

import ast
import json
import os
import re

import pytest

import helpers
import helpers.measure
import helpers.portable
import helpers.teaching
import helpers.whole_training
from helpers.teaching import learning_path as lp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_readme_learning_path_is_written_from_the_notebooks():
    assert lp.refresh(ROOT, check=True) is False, (
        "the README's learning path differs from the notebooks: "
        "run python -m helpers.teaching.learning_path"
    )


def _notebook(root, name, first_cell):
    folder = os.path.join(root, "notebooks")
    os.makedirs(folder, exist_ok=True)
    cells = [{"cell_type": "markdown", "metadata": {}, "source": first_cell.splitlines(True)}]
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
        json.dump({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, f)


def _card(number, title, requires="none", teaches="Something.", api="both"):
    return (
        f"# {number}. {title}\n\nSome prose.\n\n- **Requires:** {requires}\n"
        f"- **Teaches:** {teaches}\n- **API:** {api}\n\nMore prose.\n"
    )


@pytest.fixture
def course(tmp_path):
    _notebook(tmp_path, "01_first.ipynb", _card(1, "First steps", teaches="The basics."))
    _notebook(tmp_path, "02_second.ipynb", _card(2, "Next", "01", "More.", "whole-training"))
    with open(tmp_path / "README.md", "w", encoding="utf-8") as f:
        f.write(f"# Course\n\n{lp.START}\nstale table\n{lp.END}\n\n## After\n")
    return tmp_path


def test_refresh_rewrites_only_the_table_and_check_writes_nothing(course):
    before = (course / "README.md").read_text()
    assert lp.refresh(course, check=True) is True
    assert (course / "README.md").read_text() == before  # --check never writes
    assert lp.refresh(course) is True
    readme = (course / "README.md").read_text()
    assert readme.startswith("# Course\n\n") and readme.endswith(f"{lp.END}\n\n## After\n")
    assert "stale table" not in readme
    assert "| [2. Next](notebooks/02_second.ipynb) | 01 | More. |" in readme
    assert lp.refresh(course, check=True) is False
    assert sorted(os.listdir(course)) == ["README.md", "notebooks"]  # no temporary file left


def test_a_changed_notebook_makes_the_readme_stale(course):
    lp.refresh(course)
    _notebook(course, "02_second.ipynb", _card(2, "Next", "01", "Something else.", "both"))
    assert lp.refresh(course, check=True) is True
    assert lp.main(["--check", "--root", str(course)]) == 1


@pytest.mark.parametrize(
    ("first_cell", "message"),
    [
        ("# 2. Next\n\n- **Requires:** 01\n- **API:** both\n", r"(?s)lacks Teaches: add.*Teaches:"),
        (_card(3, "Next"), r"its title says notebook 3, its file name 02"),
        (_card(2, "Next", requires="05"), r"requires notebook 05, which does not exist"),
        ("Next\n\n- **Requires:** 01\n", r"must be markdown and start with its title"),
        (_card(2, "Next", teaches="word " * 17), r"'Teaches:' line has 17 words, more than 16"),
    ],
)
def test_a_notebook_breaking_the_convention_is_named_with_the_fix(course, first_cell, message):
    _notebook(course, "02_second.ipynb", first_cell)
    with pytest.raises(ValueError, match=message):
        lp.read_cards(course)
    assert lp.main(["--root", str(course)]) == 2


def test_a_notebook_cannot_require_a_later_one(course):
    _notebook(course, "01_first.ipynb", _card(1, "First steps", requires="02"))
    with pytest.raises(ValueError, match=r"01_first.ipynb requires notebook 02, .*comes after"):
        lp.read_cards(course)


def test_a_readme_without_the_markers_is_refused(course):
    (course / "README.md").write_text("# Course\n")
    with pytest.raises(ValueError, match="learning-path: start"):
        lp.refresh(course, check=True)


#: helpers' names a notebook may call without a notebook that teaches them: set-up and
#: housekeeping, said in a line where they are used.
UTILITIES = {
    "set_num_threads",
    "clear_training_caches",
    "check_onnx_compatible",
    "native_stderr_captured",
    "main_opset",
    "max_ir_version",
}
#: The modules of helpers.teaching whose names are lessons (the others are data sets, plots,
#: tables and a notebook's checks).
LESSON_MODULES = {"sklearn_bridge", "sklearn_training", "comparison", "torch_reference"}


def _lesson_names():
    names = set(helpers._PUBLIC) | set(helpers.whole_training._PUBLIC)
    names |= set(helpers.portable._PUBLIC)
    names |= {n for n, m in helpers.teaching._PUBLIC.items() if m[1:] in LESSON_MODULES}
    names |= {n for n, m in helpers.measure._PUBLIC.items() if m == ".profiling"}
    return names - UTILITIES


def _names_used(path, names):
    with open(path, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    used = set()
    for cell in cells:
        if cell["cell_type"] == "code":
            source = re.sub(r"(?m)^\s*[%!].*$", "", "".join(cell["source"]))
            for node in ast.walk(ast.parse(source)):
                name = getattr(node, "id", None) or getattr(node, "name", None)
                if isinstance(node, (ast.Name, ast.alias)) and name in names:
                    used.add(name)
    return used


def test_requires_cover_the_names_an_earlier_notebook_taught():
    """A name of helpers a notebook calls, first called by an earlier notebook, is taught by a
    notebook its Requires line leads to (directly or through the ones it requires)."""
    cards = {card.number: card for card in lp.read_cards(ROOT)}
    names = _lesson_names()
    used = {n: _names_used(os.path.join(ROOT, card.path), names) for n, card in cards.items()}
    first = {}
    for number in sorted(used):
        for name in used[number]:
            first.setdefault(name, number)

    def read_before(number):
        seen, todo = set(), list(cards[number].requires)
        while todo:
            required = todo.pop()
            if required not in seen:
                seen.add(required)
                todo += cards[required].requires
        return seen

    missing = [
        f"notebook {number:02d} calls {name}, first called in {first[name]:02d}: add "
        f"{first[name]:02d} to its 'Requires:' line, or teach it where it is first called"
        for number in sorted(used)
        for name in sorted(used[number])
        if first[name] < number and first[name] not in read_before(number)
    ]
    assert missing == [], "\n".join(missing)
