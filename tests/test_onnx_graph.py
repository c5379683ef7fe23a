import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression

from helpers import get_train_initializer, onnx_rename_weights
from helpers.core.model_graphs.onnx_graph import check_weights_to_train, replace_initializers


def _run(model, X):
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return sess.run(None, {sess.get_inputs()[0].name: X})[0]


def test_get_train_initializer_keeps_float_in_graph_order(linear_onnx):
    inits = get_train_initializer(linear_onnx)
    float_names = [
        i.name for i in linear_onnx.graph.initializer if i.data_type == TensorProto.FLOAT
    ]
    assert list(inits) == float_names == ["coef", "intercept"]
    assert "shape_tensor" not in inits
    np.testing.assert_array_equal(
        inits["coef"], numpy_helper.to_array(linear_onnx.graph.initializer[0])
    )


def test_get_train_initializer_empty_for_ml_operator(linear_data):
    X, y = linear_data
    onx = to_onnx(LinearRegression().fit(X, y), X[:1])
    assert get_train_initializer(onx) == {}
    with pytest.raises(ValueError, match="no trainable float initializer.*black_op"):
        check_weights_to_train(onx, None)


def _unsorted_model():
    """Initializers whose graph order is not alphabetical."""
    z = numpy_helper.from_array(np.array([[2.0]], dtype=np.float32), "zeta")
    a = numpy_helper.from_array(np.array([1.0], dtype=np.float32), "alpha")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["X", "zeta"], ["t"]),
            helper.make_node("Add", ["t", "alpha"], ["Y"]),
        ],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 1])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])],
        [z, a],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    return model


def test_onnx_rename_weights_alphabetical_equals_graph_order():
    model = _unsorted_model()
    renamed = onnx_rename_weights(model)
    names = [i.name for i in renamed.graph.initializer]
    assert names == sorted(names)
    assert [n.split("_", 1)[1] for n in names] == ["zeta", "alpha"]
    assert [i.name for i in model.graph.initializer] == ["zeta", "alpha"]  # input untouched
    X = np.array([[1.0], [3.0]], dtype=np.float32)
    np.testing.assert_allclose(_run(renamed, X), _run(model, X))
    np.testing.assert_allclose(_run(renamed, X), [[3.0], [7.0]])


def test_check_weights_to_train_errors(linear_onnx):
    assert check_weights_to_train(linear_onnx, None) == ["coef", "intercept"]
    assert check_weights_to_train(linear_onnx, ["intercept"]) == ["intercept"]
    with pytest.raises(ValueError, match="'nope' is not an initializer.*coef"):
        check_weights_to_train(linear_onnx, ["nope"])
    with pytest.raises(ValueError, match="'shape_tensor' has type INT64.*only float"):
        check_weights_to_train(linear_onnx, ["shape_tensor"])
    with pytest.raises(TypeError, match=r"list of names.*\['coef'\]"):
        check_weights_to_train(linear_onnx, "coef")
    with pytest.raises(ValueError, match="repeats"):
        check_weights_to_train(linear_onnx, ["coef", "coef"])


def test_replace_initializers_changes_predictions(linear_onnx):
    X = np.ones((2, 4), dtype=np.float32)
    new = replace_initializers(
        linear_onnx, {"coef": np.ones(4, dtype=np.float64), "intercept": np.array([1.0])}
    )
    np.testing.assert_allclose(_run(new, X).ravel(), [5.0, 5.0])
    assert new.graph.initializer[0].data_type == TensorProto.FLOAT


def test_select_outputs_keeps_raw_scores():
    from sklearn.datasets import load_iris  # noqa: PLC0415
    from sklearn.linear_model import LogisticRegression  # noqa: PLC0415

    from helpers.core.model_graphs.onnx_graph import select_outputs  # noqa: PLC0415

    X, y = load_iris(return_X_y=True)
    X = X.astype(np.float32)
    clf = LogisticRegression(max_iter=500).fit(X, y)
    onx = to_onnx(clf, X[:1], options={"zipmap": False}, black_op={"LinearClassifier"})
    raw = select_outputs(onx, ["raw_scores"])
    assert [o.name for o in raw.graph.output] == ["raw_scores"]
    assert {n.op_type for n in raw.graph.node} == {"MatMul", "Add"}
    assert sorted(get_train_initializer(raw)) == ["coef", "intercept"]
    np.testing.assert_allclose(_run(raw, X[:5]), clf.decision_function(X[:5]), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="not computed by any node"):
        select_outputs(onx, ["nope"])
