"""One-node models of a contrib operator, run by onnxruntime-training 1.19.2's own kernel and
after :func:`helpers.portable.lowering.lower_model`, for the op-by-op lowering tests."""

import numpy as np
import onnx
import onnxruntime
from onnx import helper, numpy_helper

from helpers.portable.lowering import lower_model
from helpers.portable.lowering.registry import STANDARD_DOMAINS

#: The standard opset of the test models (the training graphs' one).
OPSET = 17


def one_node_model(op_type, feeds, outputs, domain="com.microsoft", constants=None, **attributes):
    """A model of one ``domain:op_type`` node.

    ``feeds`` maps each input name (in order; ``""`` keeps an optional input absent) to a numpy
    array (its dtype; its shape is left free); ``outputs`` maps each output name (``""``:
    absent) to its numpy dtype; ``constants`` maps input names to initializers instead.
    """
    constants = constants or {}
    names = list(feeds) + [n for n in constants if n not in feeds]
    node = helper.make_node(op_type, names, list(outputs), domain=domain, **attributes)
    graph = helper.make_graph(
        [node],
        op_type,
        [
            helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), [None] * value.ndim
            )
            for name, value in feeds.items()
            if name
        ],
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(t)), None)
            for name, t in outputs.items()
            if name
        ],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in constants.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(domain, 1)]
    )
    model.ir_version = 8
    return model


def run(model, feeds, threads=1):
    """The outputs of ``model`` on 1.19.2's ``InferenceSession`` (CPU), by name. The feeds are
    copied: a kernel that works in place (``InPlaceAccumulatorV2``) writes into its input."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in session.get_outputs()]
    values = session.run(names, {k: np.array(v) for k, v in feeds.items() if k})
    return dict(zip(names, values))


def lowered_and_checked(model):
    """``lower_model(model)``, checked: only standard nodes, valid for ``onnx.checker``."""
    lowered = lower_model(model)
    domains = {n.domain for n in lowered.graph.node}
    assert domains <= set(STANDARD_DOMAINS), domains
    onnx.checker.check_model(lowered, full_check=True)
    return lowered


def with_output_ranks(model, results):
    """A copy of ``model`` whose outputs have the ranks of ``results`` (dimensions free): the
    checker wants a shape on every graph output."""
    ranked = onnx.ModelProto()
    ranked.CopyFrom(model)
    for output in ranked.graph.output:
        output.CopyFrom(
            helper.make_tensor_value_info(
                output.name,
                output.type.tensor_type.elem_type,
                [None] * results[output.name].ndim,
            )
        )
    return ranked


def compare(model, feeds, rtol=0.0, atol=0.0):
    """Run ``model`` and its lowering on ``feeds``; assert every output equal within the
    tolerance (same shape and dtype); return both results."""
    expected = run(model, feeds)
    got = run(lowered_and_checked(with_output_ranks(model, expected)), feeds)
    assert expected.keys() == got.keys()
    for name, value in expected.items():
        assert got[name].dtype == value.dtype, (name, got[name].dtype, value.dtype)
        assert got[name].shape == value.shape, (name, got[name].shape, value.shape)
        np.testing.assert_allclose(got[name], value, rtol=rtol, atol=atol, err_msg=name)
    return expected, got
