"""Every course notebook runs under papermill from the repository's root, as the user guide
shows (``papermill notebooks/NN_name.ipynb out.ipynb -k ort-training``).

nbval runs each notebook from its own folder, as JupyterLab does (``make lab`` opens
``notebooks/``); a path relative to that folder breaks from the root. ``make test`` runs this
file in its notebook session, beside nbval: ``pytest ... notebooks tests/notebooks_from_root.py``
(its name keeps it out of the unit tests, which run on two Pythons). There, the notebooks that
do not need the training package run on the maintained onnxruntime's kernel
(``MAINTAINED_NOTEBOOK_KERNEL=ort-maintained``): nbval ran them on the training package's.
"""

import glob
import os

import papermill
import pytest

from helpers.teaching.learning_path import read_cards

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "notebooks", "[0-9]*.ipynb"))
)
#: The notebooks whose first cell says they need onnxruntime-training 1.19.2: marked, so that
#: they are skipped, saying why, where that package is missing (the maintained variant).
NEEDS_TRAINING = {card.path for card in read_cards(ROOT) if card.needs}
#: The kernel ``make setup`` registers, which nbval runs the notebooks on too (in the maintained
#: variant, the maintained onnxruntime's).
KERNEL = os.environ.get("NOTEBOOK_KERNEL", "ort-training")
#: The kernel of the others: ``make test`` names the maintained onnxruntime's.
MAINTAINED_KERNEL = os.environ.get("MAINTAINED_NOTEBOOK_KERNEL", KERNEL)


def test_the_course_is_found():
    assert len(NOTEBOOKS) >= 15


@pytest.mark.parametrize(
    "path, kernel",
    [
        pytest.param(p, KERNEL, marks=pytest.mark.training_package, id=f"{p}-{KERNEL}")
        if p in NEEDS_TRAINING
        else pytest.param(p, MAINTAINED_KERNEL, id=f"{p}-{MAINTAINED_KERNEL}")
        for p in NOTEBOOKS
    ],
)
def test_runs_from_the_repository_root(path, kernel, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    papermill.execute_notebook(
        path,
        str(tmp_path / os.path.basename(path)),
        kernel_name=kernel,
        cwd=ROOT,
        progress_bar=False,
    )
