"""Run a model of one contrib node (:func:`helpers.portable.lowering.single_node.single_node_model`)
by onnxruntime-training 1.19.2's own kernel and after :func:`helpers.portable.lowering.lower_model`,
for the op-by-op lowering tests."""

import numpy as np
import onnx
import onnxruntime
from onnx import helper

from helpers.portable.lowering import lower_model
from helpers.portable.lowering.registry import STANDARD_DOMAINS


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
