"""pytest's hooks for the docstring examples of ``helpers`` (``pytest --doctest-modules helpers``).

The modules of the backend 'onnxruntime-training'
(:data:`helpers.core.machine.backends.TRAINING_PACKAGE_MODULES`) import that package: where it is
missing (the maintained variant, Python 3.13) they are not collected, and pytest says so.
``tests/test_docstrings.py`` imports every other module there: a module that needs the training
package and is not listed fails it.
"""

import os

from helpers.core.machine.backends import TRAINING_PACKAGE_MODULES
from helpers.core.machine.runtime import has_training_package

_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LEFT_OUT = set()


def pytest_ignore_collect(collection_path, config):
    """Leave the training package's modules out where it is not installed (then say which)."""
    relative = os.path.relpath(str(collection_path), _PARENT).replace(os.sep, "/")
    if relative.removesuffix(".py").replace("/", ".") in TRAINING_PACKAGE_MODULES:
        if not has_training_package():
            _LEFT_OUT.add(relative)
            return True
    return None


def pytest_terminal_summary(terminalreporter):
    if _LEFT_OUT:
        terminalreporter.write_line(
            f"{len(_LEFT_OUT)} modules of the backend 'onnxruntime-training' were not collected "
            f"(they import onnxruntime-training 1.19.2, not installed here): "
            f"{', '.join(sorted(_LEFT_OUT))}"
        )
