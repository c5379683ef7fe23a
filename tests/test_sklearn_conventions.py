"""scikit-learn's own estimator checks, with a model of the width most of them use.

An ONNX model has a fixed input width: the checks that generate data of
another width (1, 2, 4, 5, 10, 20, 30 features) fail with "X has N features,
but the model expects 3", which is the error a user should get. Every other
check passes, except those that give sample weights to an
``OrtGradientOptimizer`` whose loss has no weight input (it refuses them and
says how to build one).
"""

import re
import warnings

import pytest
from conftest import make_optimizer
from sklearn.utils.estimator_checks import check_estimator

from helpers.teaching.model_factories import mlp_onnx

WIDTH = re.compile(r"X has \d+ features, but the model expects 3\.")
NO_WEIGHT_INPUT = "sample_weight was given but the loss has no weight input"
MUST_PASS = {
    "check_dict_unchanged",  # predict keeps its session outside the estimator's __dict__
    "check_fit2d_predict1d",
    "check_complex_data",
    "check_estimators_nan_inf",
    "check_get_params_invariance",
    "check_set_params",
    "check_no_attributes_set_in_init",
    "check_parameters_default_constructible",
    "check_estimators_unfitted",
}


def _cause(exception):
    return str(exception.__cause__ or exception.__context__ or exception)


@pytest.mark.parametrize("api", ["whole", "forward_backward"])
def test_scikit_learn_checks(api):
    model = mlp_onnx(3, hidden=(4,))
    estimator = make_optimizer(api, model, max_iter=2, learning_rate=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None)
    by_name = {}
    for result in results:
        by_name.setdefault(result["check_name"], []).append(result)
    unexplained = []
    for result in results:
        if result["status"] != "failed":
            continue
        cause = _cause(result["exception"])
        width = WIDTH.search(cause)
        weights = api == "whole" and NO_WEIGHT_INPUT in cause
        if not (width or weights) or result["check_name"] in MUST_PASS:
            unexplained.append(f"{result['check_name']}: {cause[:200]}")
    assert not unexplained, "\n".join(unexplained)
    for name in MUST_PASS:
        assert name in by_name, f"{name} is not run by this scikit-learn"
        assert all(r["status"] == "passed" for r in by_name[name]), name
