"""Which kernel each notebook runs on: every notebook runs on the maintained onnxruntime too
(the kernel ``ort-maintained``, in ``make test``'s run from the root) unless its first cell says it
needs onnxruntime-training 1.19.2, in a ``Needs:`` line (:mod:`helpers.teaching.learning_path`
reads it, and lists the others for that run). The notebooks with that line are exactly those
whose code calls the training package's own API.
"""

import glob
import json
import os
import re

import pytest

from helpers.teaching import learning_path as lp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "notebooks", "[0-9]*.ipynb"))
)
#: What only the training package has: its Python API (the artifacts, Module, Optimizer,
#: CheckpointState, onnxblock) and the internals of its forward/backward API.
TRAINING_PACKAGE = re.compile(
    r"(?:from|import) onnxruntime\.training|OrtModuleGraphBuilder\(|TrainingAgent\("
    r"|capi\._pybind_state"
)


def _code(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def _first_cell(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return "".join(json.load(f)["cells"][0]["source"])


def test_every_notebook_runs_on_the_maintained_kernel_or_says_it_needs_the_training_package():
    cards = lp.read_cards(ROOT)
    maintained = set(lp.maintained_notebooks(ROOT))
    needs = {card.path for card in cards if card.needs}
    assert sorted(maintained | needs) == NOTEBOOKS and not maintained & needs
    assert len(maintained) >= len(NOTEBOOKS) - 4, (
        f"only {sorted(maintained)} run on the maintained kernel: a notebook that does not "
        "teach the training package's own API runs there too"
    )


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_a_notebook_needs_the_training_package_when_its_code_calls_it(path):
    card = lp.read_card(path, ROOT)
    called = TRAINING_PACKAGE.search(_code(path))
    if called:
        assert card.needs, (
            f"{path} calls {called.group(0)}, which only onnxruntime-training 1.19.2 has: add to "
            f"its first cell '- **Needs:** {lp.NEEDS_TRAINING} (...)', with the notebook that "
            "shows the same on the maintained onnxruntime"
        )
    else:
        assert not card.needs, (
            f"{path} says it needs the training package, and its code calls none of it: remove "
            "its 'Needs:' line, so that it runs on the maintained kernel too"
        )


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if lp.read_card(p, ROOT).needs])
def test_a_notebook_that_needs_the_training_package_names_its_kernel_and_the_way_around(path):
    text = _first_cell(path)
    maintained = {card.number for card in lp.read_cards(ROOT) if not card.needs}
    line = re.search(r"\*\*Needs:\*\*(.*?)(?:\n\n|\n- |$)", text, re.DOTALL).group(1)
    pointed = {int(n) for n in re.findall(r"notebooks? (\d+)", line)}
    assert "Python (ort-training)" in text and "3.11 or 3.12" in text
    assert pointed and pointed <= maintained, (
        f"{path}: its 'Needs:' line should name the notebooks that show the same on the "
        f"maintained onnxruntime (among {sorted(maintained)}), not {sorted(pointed)}"
    )


def test_make_test_runs_the_listed_notebooks_on_the_maintained_kernel():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        makefile = f.read()
    assert "\ntest: test-unit test-notebooks docs-test\n" in makefile
    recipe = makefile.split("\ntest-notebooks:", 1)[1].split("\n\n", 1)[0]
    assert "-m helpers.teaching.learning_path --maintained" in recipe
    # nbval on the kernel of .venv, then the run from the root: the listed notebooks on the
    # maintained kernel (in the maintained variant, the kernel of .venv, and the listed only)
    assert (
        "maintained=$(if $(MAINTAINED_IS_VENV),$(KERNEL_NAME),$(MAINTAINED_KERNEL_NAME))" in recipe
    )
    assert (
        "MAINTAINED_NOTEBOOK_KERNEL=$$maintained MPLBACKEND=Agg $(PY) -m pytest $(PYTEST_ARGS) "
        "--nbval-lax --nbval-kernel-name $(KERNEL_NAME) $$here tests/notebooks_from_root.py"
    ) in recipe


def test_the_listing_command_prints_one_notebook_a_line(capsys):
    assert lp.main(["--maintained", "--root", ROOT]) == 0
    assert capsys.readouterr().out.split() == lp.maintained_notebooks(ROOT)


def _course(root, needs):
    folder = os.path.join(root, "notebooks")
    os.makedirs(folder)
    for number, name in ((1, "first"), (2, "second")):
        cell = f"# {number}. {name}\n\n- **Requires:** none\n- **Teaches:** It.\n- **API:** both\n"
        if number == 2:
            cell += f"- **Needs:** {needs}\n  on two lines.\n\nProse.\n"
        notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": [cell]}]}
        with open(os.path.join(folder, f"{number:02d}_{name}.ipynb"), "w") as f:
            json.dump(notebook, f)


def test_a_needs_line_takes_the_notebook_off_the_maintained_list(tmp_path):
    _course(tmp_path, f"{lp.NEEDS_TRAINING} (its artifacts); notebook 1 without it,")
    assert lp.maintained_notebooks(tmp_path) == ["notebooks/01_first.ipynb"]
    table = lp.learning_path_table(lp.read_cards(tmp_path)).splitlines()
    assert table[-1].endswith(f"| It. *Needs {lp.NEEDS_TRAINING}.* |")
    assert table[-2].endswith("| It. |")


def test_a_needs_line_names_the_training_package_or_nothing(tmp_path):
    _course(tmp_path, "torch 2.13")
    with pytest.raises(ValueError, match="'Needs:' line must start with 'onnxruntime-training"):
        lp.read_cards(tmp_path)
    assert lp.main(["--maintained", "--root", str(tmp_path)]) == 2
