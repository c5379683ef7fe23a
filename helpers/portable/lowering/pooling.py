"""``MaxPoolGrad``, the gradient of ``MaxPool``, written with standard operators.

onnxruntime registers ``MaxPoolGrad`` in the default domain, though it is not a standard
operator. It takes ``dY`` and the ``Indices`` output of the forward ``MaxPool``: flat indices
into the pooled input ``X`` (batch and channel included). 1.19.2's CPU kernel
(``orttraining/training_ops/cpu/nn/pool_gradient_op.cc``) zeroes ``dX`` and adds each
``dY[i]`` at ``dX.flat[Indices[i]]``, in order. The lowering is that scatter: a
``ScatterElements`` with ``reduction="add"`` (opset 16 and later) into zeros of ``X``'s shape,
``X`` being the input of the ``MaxPool`` that wrote the indices. The kernel's attributes
(kernel, strides, pads, ``ceil_mode``, ``storage_order``) play no part: the indices say it all.

The project's training graphs never hold ``AveragePoolGrad``: they compute an average pooling
as a depthwise ``Conv`` (1.19.2's kernel fails when the batch size is free), whose gradient is
``ConvGrad``; ``GlobalAveragePool``'s gradient is written with standard operators by the
gradient builder.
"""

import numpy as np
from onnx import TensorProto, helper

from .registry import register

#: The first opset whose ``ScatterElements`` adds (``reduction="add"``).
SCATTER_ADD_OPSET = 16


def _pooled_input(node, ctx):
    """The input ``X`` of the ``MaxPool`` whose indices ``node`` reads."""
    pool = ctx.producer(node.input[1])
    if pool is None or pool.op_type != "MaxPool":
        raise ValueError(
            f"MaxPoolGrad node {node.name!r} reads indices {node.input[1]!r} that no MaxPool of "
            "the graph computes: the shape of its output is unknown. Lower the whole training "
            "graph, with the MaxPool that writes the indices."
        )
    return pool.input[0]


@register("MaxPoolGrad", domain="")
def lower_max_pool_grad(node, ctx):
    """``MaxPoolGrad(dY, Indices)`` as a ``ScatterElements`` adding ``dY`` into zeros.

    Examples
    --------
    >>> from onnx import helper
    >>> from helpers.portable.lowering.registry import LoweringContext
    >>> pool = helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2])
    >>> grad = helper.make_node("MaxPoolGrad", ["dy", "idx"], ["dx"], kernel_shape=[2, 2])
    >>> ctx = LoweringContext(17, graph=helper.make_graph([pool, grad], "g", [], []))
    >>> [n.op_type for n in lower_max_pool_grad(grad, ctx)]
    ... # doctest: +NORMALIZE_WHITESPACE
    ['Shape', 'ConstantOfShape', 'Reshape', 'Reshape', 'Reshape', 'ScatterElements',
     'Reshape']
    """
    if ctx.opset < SCATTER_ADD_OPSET:
        raise ValueError(
            f"MaxPoolGrad node {node.name!r}: its lowering adds with ScatterElements, which "
            f"needs opset {SCATTER_ADD_OPSET}; the model has opset {ctx.opset}. Export the "
            f"model with opset {SCATTER_ADD_OPSET} or later."
        )
    x = _pooled_input(node, ctx)
    return scattered_gradient(node.input[0], node.input[1], x, node.output[0], ctx)


def scattered_gradient(d_y, indices, x, output, ctx, elem_type=TensorProto.FLOAT, add=True):
    """Nodes writing into ``output`` zeros shaped like ``x`` (of type ``elem_type``) plus each
    ``d_y`` at the flat index into ``x`` that ``indices`` holds (row-major, batch and channel
    included: ``MaxPool``'s ``Indices`` with ``storage_order=0``).

    With ``add``, values at the same index add up (``reduction="add"``, opset 16 and later);
    without, the indices must all differ (windows that do not overlap).

    Examples
    --------
    >>> from helpers.portable.lowering.registry import LoweringContext
    >>> nodes = scattered_gradient("dy", "idx", "x", "dx", LoweringContext(13), add=False)
    >>> nodes[-2].op_type, [a.name for a in nodes[-2].attribute]
    ('ScatterElements', ['axis'])
    """
    shape, zeros, zeros_flat, flat_idx, flat_dy, flat_dx = (
        ctx.name(t) for t in ("x_shape", "zeros", "zeros_flat", "idx_flat", "dy_flat", "dx_flat")
    )
    line = ctx.constant(np.array([-1], np.int64), "line")
    zero = helper.make_tensor("zero", elem_type, [1], [0])
    return [
        helper.make_node("Shape", [x], [shape]),
        helper.make_node("ConstantOfShape", [shape], [zeros], value=zero),
        helper.make_node("Reshape", [zeros, line], [zeros_flat]),
        helper.make_node("Reshape", [indices, line], [flat_idx]),
        helper.make_node("Reshape", [d_y, line], [flat_dy]),
        helper.make_node(
            "ScatterElements",
            [zeros_flat, flat_idx, flat_dy],
            [flat_dx],
            axis=0,
            **({"reduction": "add"} if add else {}),
        ),
        helper.make_node("Reshape", [flat_dx, shape], [output]),
    ]
