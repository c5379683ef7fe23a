"""Shared fixtures: small data sets and the ONNX models converted from them, caches, sweep grids,
the check of a benchmark row's step time, and the optimizer factory of both onnxruntime APIs."""

import json
import math
import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression

from helpers import OrtGradientForwardBackwardOptimizer, OrtGradientOptimizer, add_loss_output
from helpers.core.machine.backends import BACKEND_VARIABLE
from helpers.core.machine.runtime import has_training_package

#: The two onnxruntime training APIs a test runs on (whole training, forward/backward).
APIS = ["whole", "forward_backward"]


def make_optimizer(api, onx, loss="squared_error", **params):
    """The optimizer of ``api`` (one of :data:`APIS`) training ``onx`` on ``loss``.

    ``"whole"`` adds the loss to the graph (:func:`helpers.add_loss_output`) for
    :class:`helpers.OrtGradientOptimizer`; ``"forward_backward"`` gives it to
    :class:`helpers.OrtGradientForwardBackwardOptimizer` as ``learning_loss``.
    ``params`` go to either unchanged (both default to plain SGD at a constant rate).
    """
    if api == "whole":
        return OrtGradientOptimizer(add_loss_output(onx, score_name=loss), **params)
    if api == "forward_backward":
        return OrtGradientForwardBackwardOptimizer(onx, learning_loss=loss, **params)
    raise ValueError(f"api must be one of {APIS}, not {api!r}")


def make_seeded_optimizer(
    api, onx, epochs, batch_size, learning_rate, loss="squared_error", **params
):
    """:func:`make_optimizer` as the tests compare runs: ``epochs`` epochs of ``batch_size`` rows,
    seeded batches, no validation split, plain SGD at a constant ``learning_rate`` unless
    ``params`` names another ``solver``."""
    settings = {"solver": "sgd", "random_state": 0, "validation_every": 0, **params}
    return make_optimizer(
        api,
        onx,
        loss,
        max_iter=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        **settings,
    )


#: The test modules about onnxruntime-training's own API (its artifacts, its checkpoint reader):
#: where that package is missing, they cannot be imported, and pytest says it left them out.
TRAINING_PACKAGE_TESTS = ("test_artifact_models.py", "test_checkpoint_file.py", "test_onnx_loss.py")
_LEFT_OUT = set()


def _asked_for(path, config):
    """Whether the run's arguments name ``path`` or a folder above it (pytest also looks at the
    files beside the one it was given)."""
    here = config.invocation_params.dir
    for arg in config.args:
        target = (here / arg.split("::", 1)[0]).resolve()
        if target == path or target in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    """Leave :data:`TRAINING_PACKAGE_TESTS` out where the training package is not installed (the
    summary names those the run asked for)."""
    if collection_path.name in TRAINING_PACKAGE_TESTS and not has_training_package():
        if _asked_for(collection_path.resolve(), config):
            _LEFT_OUT.add(collection_path.name)
        return True
    return None


def pytest_terminal_summary(terminalreporter):
    if _LEFT_OUT:
        terminalreporter.write_line(
            f"{len(_LEFT_OUT)} test modules of onnxruntime-training's own API were not collected "
            f"(the package is not installed here): {', '.join(sorted(_LEFT_OUT))}"
        )


def pytest_collection_modifyitems(config, items):
    """Skip the tests marked ``training_package`` where onnxruntime-training is not installed
    (Python 3.13: the backend ``'onnx'`` trains there), saying why."""
    if has_training_package():
        return
    skip = pytest.mark.skip(
        reason="tests the backend 'onnxruntime-training', whose package (onnxruntime-training "
        "1.19.2, Python 3.11 and 3.12) is not installed here"
    )
    for item in items:
        if item.get_closest_marker("training_package"):
            item.add_marker(skip)


#: The value of the backend variable before a ``training_package`` test set it, to put back.
_BACKEND_BEFORE = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A test marked ``training_package`` trains on that backend (``'auto'`` picks it), whatever
    the environment variable of the run says: set before its fixtures (a module's too) are made,
    inherited by its child processes, put back after its teardown."""
    if item.get_closest_marker("training_package"):
        _BACKEND_BEFORE.append(os.environ.get(BACKEND_VARIABLE))
        os.environ[BACKEND_VARIABLE] = "onnxruntime-training"


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if item.get_closest_marker("training_package") and _BACKEND_BEFORE:
        before = _BACKEND_BEFORE.pop()
        if before is None:
            os.environ.pop(BACKEND_VARIABLE, None)
        else:
            os.environ[BACKEND_VARIABLE] = before


@pytest.fixture(scope="session")
def linear_data():
    """Standardized features, targets of a known linear model plus noise."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4)).astype(np.float32)
    coef = np.array([1.5, -2.0, 0.5, 3.0], dtype=np.float32)
    y = (X @ coef + 0.7 + 0.1 * rng.standard_normal(300)).astype(np.float32)
    return X, y


@pytest.fixture(scope="session")
def linear_onnx(linear_data):
    """A LinearRegression converted to MatMul + Add with trainable initializers.

    Fitted on 5 rows only, so that training has something left to do.
    """
    X, y = linear_data
    return to_onnx(LinearRegression().fit(X[:5], y[:5]), X[:1], black_op={"LinearRegressor"})


@pytest.fixture(scope="session")
def onx_loss(linear_onnx):
    """:func:`linear_onnx` with its squared-error loss added, for the whole-training API."""
    return add_loss_output(linear_onnx)


@pytest.fixture(scope="session")
def make_logistic_onnx():
    """Factory of small binary classifiers (see ``_logistic_onnx``)."""
    return _logistic_onnx


def _logistic_onnx(n_features, seed=0):
    """``sigmoid(X @ coef + intercept)``, of shape (N, 1): a binary classifier."""
    rng = np.random.default_rng(seed)
    coef = numpy_helper.from_array(
        rng.standard_normal((n_features, 1)).astype(np.float32) * 0.1, "coef"
    )
    intercept = numpy_helper.from_array(np.zeros((1,), dtype=np.float32), "intercept")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["X", "coef"], ["xw"]),
            helper.make_node("Add", ["xw", "intercept"], ["score"]),
            helper.make_node("Sigmoid", ["score"], ["proba"]),
        ],
        "logistic",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, n_features])],
        [helper.make_tensor_value_info("proba", TensorProto.FLOAT, [None, 1])],
        [coef, intercept],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    return model


@pytest.fixture()
def fresh_caches():
    """Empty training caches (artifacts, gradient graphs) before the test and after it."""
    from helpers.core.machine import training_cache

    training_cache.clear_training_caches()
    yield
    training_cache.clear_training_caches()


@pytest.fixture(scope="session")
def sleep_grid():
    """Factory of grid files for the sweep command's tests, of the test-only notebook that sleeps
    then writes a record.

    ``sleep_grid(path, seconds, threads=None)`` writes one run per value of
    ``seconds`` (each with ``threads`` threads when given) to ``path`` and
    returns it as a string.
    """
    notebook = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sleep_notebook.ipynb")

    def write(path, seconds, threads=None):
        fixed = "" if threads is None else f"[sleep.fixed]\nthreads = {threads}\n"
        path.write_text(
            f'[sleep]\nnotebook = "{notebook}"\n{fixed}[sleep.grid]\nseconds = '
            f"{json.dumps(list(seconds))}\n"
        )
        return str(path)

    return write


@pytest.fixture(scope="session")
def check_step_time():
    """Check of a benchmark row's ``time_per_update_s``: a positive number, or NaN and the reason.

    A busy machine can lose a step in its noise (``marginal_step_cost``): the time is then NaN
    and ``timing_note`` says it was not measurable; a number has no such note.
    """

    def check(row):
        seconds, note = row["time_per_update_s"], row.get("timing_note") or ""
        lost = note.startswith("not measurable")
        assert math.isnan(seconds) if lost else seconds > 0, (row["framework"], seconds, note)

    return check
