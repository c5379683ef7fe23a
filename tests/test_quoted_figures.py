"""Every figure the READMEs and notebooks quote equals the committed results it is computed from."""

import json
import os
import shutil

import pytest

from benchmarks.figures import quoted_figures as qf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _marks():
    """``(path, name, quoted)`` of every marked figure of the documents."""
    found = []
    for path in qf.document_paths(ROOT):
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            found += [(path, name, quoted) for _, name, quoted in qf.marked_figures(path, f.read())]
    return found


def test_every_quoted_figure_equals_its_results():
    differences = qf.refresh(ROOT, check=True)
    assert differences == [], (
        "\n".join(
            f"{p}:{line}: {name}: quoted {q!r}, computed {c!r}"
            for p, line, name, q, c in differences
        )
        + "\nrun: python -m benchmarks.figures.quoted_figures"
    )


def test_every_name_used_exists_and_every_figure_is_used():
    used = {name for _, name, _ in _marks()}
    assert used - set(qf.FIGURES) == set()
    assert set(qf.FIGURES) - used == set()
    assert {"README.md", "benchmarks/README.md"} <= {path for path, _, _ in _marks()}


def test_no_measured_number_left_unmarked():
    assert qf.unmarked_numbers(ROOT) == []


def test_unmarked_number_is_found(tmp_path):
    text = "It took 2.3x, 4 ms, 3 times `5x` <!-- fig: a -->6x<!-- /fig -->.\n```\n9x\n```\n"
    (tmp_path / "README.md").write_text(text, encoding="utf-8")
    assert [n for _, n, _ in qf.unmarked_numbers(str(tmp_path))] == ["2.3x", "4 ms", "3 times"]


def _copy(tmp_path):
    """A copy of the documents and results of the checkout, to alter."""
    for path in qf.document_paths(ROOT):
        os.makedirs(tmp_path / os.path.dirname(path), exist_ok=True)
        shutil.copy(os.path.join(ROOT, path), tmp_path / path)
    shutil.copytree(
        os.path.join(ROOT, "results"),
        tmp_path / "results",
        ignore=shutil.ignore_patterns("local", "runs", "*.png"),
        dirs_exist_ok=True,
    )
    return tmp_path


def test_altered_figure_fails_the_check_and_is_rewritten(tmp_path, capsys):
    root = _copy(tmp_path)
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    quoted = qf.compute_all(ROOT)["target.zoo.resnet_large"]
    mark = f"<!-- fig: target.zoo.resnet_large -->{quoted}<!-- /fig -->"
    assert mark in text
    readme.write_text(text.replace(mark, mark.replace(quoted, "9.9x faster")), encoding="utf-8")
    assert qf.main(["--check", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "README.md:" in out and "target.zoo.resnet_large: quoted '9.9x faster'" in out
    assert readme.read_text(encoding="utf-8") != text
    assert qf.main(["--root", str(root)]) == 0
    assert readme.read_text(encoding="utf-8") == text
    assert qf.main(["--check", "--root", str(root)]) == 0


def test_changed_results_change_the_figure(tmp_path):
    root = _copy(tmp_path)
    targets = root / "results" / "step_targets.csv"
    targets.write_text(
        targets.read_text(encoding="utf-8").replace(",5.8 ms,", ",4.1 ms,"), encoding="utf-8"
    )
    differences = qf.refresh(str(root), check=True)
    assert [(d[2], d[3], d[4]) for d in differences] == [("target.refit.whole", "5.8 ms", "4.1 ms")]


def test_notebook_figures_are_rewritten_byte_stable(tmp_path):
    notebook = tmp_path / "notebooks" / "n.ipynb"
    notebook.parent.mkdir()
    cell = {
        "cell_type": "markdown",
        "id": "a",
        "metadata": {},
        "source": ['A "step" is <!-- fig: x -->old<!-- /fig --> here.\n'],
    }
    raw = (
        json.dumps(
            {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
            indent=1,
            ensure_ascii=False,
        )
        + "\n"
    )
    notebook.write_text(raw, encoding="utf-8")
    text, differences = qf.refresh_text("n.ipynb", raw, {"x": 'new "1.8x" é'})
    assert differences == [(8, "x", "old", 'new "1.8x" é')]
    assert json.loads(text)["cells"][0]["source"] == [
        'A "step" is <!-- fig: x -->new "1.8x" é<!-- /fig --> here.\n'
    ]
    assert text == raw.replace("old", 'new \\"1.8x\\" é')


def test_unknown_name_is_reported_and_kept():
    text, differences = qf.refresh_text("a.md", "<!-- fig: nope -->1x<!-- /fig -->", {})
    assert text == "<!-- fig: nope -->1x<!-- /fig -->"
    assert differences == [(1, "nope", "1x", None)]


@pytest.mark.parametrize("path", ["README.md", "results/README.md", "benchmarks/README.md"])
def test_marks_stay_on_one_line(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    assert text.count("<!-- fig: ") == text.count("<!-- /fig -->") == len(qf.MARK.findall(text))
