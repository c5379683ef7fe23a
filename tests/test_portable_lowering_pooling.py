"""MaxPoolGrad lowered to standard operators gives 1.19.2's MaxPoolGrad kernel's gradient.

Each model computes the ``MaxPool`` (its indices) and the gradient, over 1-D, 2-D and 3-D
windows, strides smaller than the kernel (cells shared by windows add several gradients),
pads, dilations, ``ceil_mode``, batch 1 and more, odd sizes. The kernel sizes its output from
the graph's declared shape (without one, 1.19.2's process dies): the models declare it.
"""

import numpy as np
import pytest
from lowering_check import assert_lowered_equal, model_of, run_outputs
from onnx import helper

from helpers.portable.lowering import lower_model

#: Each lowering is compared with the kernel it replaces, which only onnxruntime-training
#: 1.19.2 runs: skipped where that package is missing.
pytestmark = pytest.mark.training_package

#: (input shape, kernel, strides, pads, dilations, ceil_mode)
CASES = [
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 0),
    ((1, 3, 7, 9), (3, 3), (1, 2), (1, 1, 1, 1), (1, 1), 0),
    ((3, 2, 9, 7), (3, 2), (2, 1), (1, 0, 0, 1), (2, 1), 0),
    ((2, 3, 7, 7), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((3, 4, 13), (2,), (2,), (0, 0), (1,), 0),
    ((3, 4, 13), (3,), (1,), (1, 1), (2,), 0),
    ((1, 4, 12), (3,), (2,), (1, 0), (1,), 1),
    ((2, 2, 5, 6, 7), (2, 3, 2), (2, 1, 2), (0, 1, 0, 0, 1, 1), (1, 1, 1), 0),
]


def max_pool_case(shape, kernel, strides, pads, dilations, ceil_mode):
    """A model of ``MaxPool`` and ``MaxPoolGrad``, and its random inputs (with ties)."""
    attrs = dict(
        kernel_shape=list(kernel),
        strides=list(strides),
        pads=list(pads),
        dilations=list(dilations),
        ceil_mode=ceil_mode,
    )
    free = ["N", *shape[1:]]
    pool = helper.make_node("MaxPool", ["X"], ["Y"], **attrs)
    forward = model_of([pool], {"X": free}, {"Y": None})
    rng = np.random.default_rng(sum(shape))
    x = rng.integers(-3, 4, shape).astype(np.float32)  # ties: the first maximum takes it all
    d_y = rng.standard_normal(run_outputs(forward, {"X": x})[0].shape).astype(np.float32)
    nodes = [
        helper.make_node("MaxPool", ["X"], ["Y", "I"], **attrs),
        helper.make_node("MaxPoolGrad", ["dY", "I"], ["dX"], **attrs),
    ]
    return model_of(nodes, {"X": free, "dY": None}, {"dX": free}), {"X": x, "dY": d_y}


@pytest.mark.parametrize("case", CASES)
def test_max_pool_grad_equals_kernel(case):
    model, feeds = max_pool_case(*case)
    # the kernel and ScatterElements add the same values in the same order: bit for bit
    d_x = assert_lowered_equal(model, feeds, rtol=0)[0]
    assert d_x.sum() == pytest.approx(feeds["dY"].sum(), rel=1e-5)


def test_indices_without_their_max_pool_are_refused():
    model, _ = max_pool_case(*CASES[0])
    del model.graph.node[0]  # the indices now come from nowhere the lowering can see
    with pytest.raises(ValueError, match="no MaxPool of the graph computes"):
        lower_model(model)
