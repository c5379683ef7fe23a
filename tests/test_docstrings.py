"""Every public class and function of helpers documents itself with a runnable example.

The examples run as doctests in `make test` (``pytest --doctest-modules helpers``);
this test checks that none is missing.
"""

import importlib
import inspect
import pkgutil

import pytest

import helpers
from helpers.core.machine.backends import TRAINING_PACKAGE_MODULES
from helpers.core.machine.runtime import has_training_package


def _public_objects():
    for info in pkgutil.walk_packages(helpers.__path__, prefix="helpers."):
        if info.name in TRAINING_PACKAGE_MODULES and not has_training_package():
            continue  # every other module imports without the training package
        if info.name == "helpers.conftest":
            continue  # pytest's hooks, not an API
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if name.startswith("_") or not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if getattr(obj, "__module__", None) != module.__name__:
                continue  # imported, documented where it is defined
            yield f"{module.__name__}.{name}", obj


PUBLIC = dict(_public_objects())


def test_the_walk_finds_the_public_api():
    assert "helpers.whole_training.optimizer.OrtGradientOptimizer" in PUBLIC
    assert "helpers.core.machine.sessions.make_session" in PUBLIC
    assert len(PUBLIC) > 80


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_names_have_examples(name):
    doc = inspect.getdoc(PUBLIC[name]) or ""
    assert "Examples\n--------\n>>>" in doc, (
        f"{name} has no numpydoc Examples section with a doctest"
    )
