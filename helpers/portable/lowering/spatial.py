"""Small pieces the convolution, pooling and normalization lowerings share.

Reductions in the form of the model's opset, a tensor's dimensions from an axis on (known only
when the step runs: the batch size stays free), and a node's window attributes with ONNX's
defaults filled in.
"""

import numpy as np
from onnx import helper

from ..node_attributes import node_attribute

#: From this opset on, ``ReduceSum`` takes its axes as an input; ``ReduceMean`` from 18.
AXES_AS_INPUT = {"ReduceSum": 13, "ReduceMean": 18}


def reduce(op_type, data, output, axes, ctx, keepdims=0):
    """``op_type`` (``ReduceSum`` or ``ReduceMean``) of ``data`` over ``axes``, as ``ctx.opset``
    writes it.

    Examples
    --------
    >>> from helpers.portable.lowering.registry import LoweringContext
    >>> [n.input[1] for n in reduce("ReduceSum", "x", "y", [0], LoweringContext(17))]
    ['lower_0_axes']
    >>> [len(n.input) for n in reduce("ReduceMean", "x", "y", [0], LoweringContext(17))]
    [1]
    """
    if ctx.opset >= AXES_AS_INPUT[op_type]:
        axes_name = ctx.constant(np.array(axes, np.int64), "axes")
        return [helper.make_node(op_type, [data, axes_name], [output], keepdims=keepdims)]
    return [helper.make_node(op_type, [data], [output], axes=list(axes), keepdims=keepdims)]


def dims_from(value, axis, ctx, tag):
    """Nodes computing ``Shape(value)[axis:]`` and the name of that 1-D int64 tensor.

    Examples
    --------
    >>> from helpers.portable.lowering.registry import LoweringContext
    >>> nodes, name = dims_from("x", 2, LoweringContext(17), "spatial")
    >>> [n.op_type for n in nodes], name
    (['Shape', 'Slice'], 'lower_1_spatial')
    """
    shape = ctx.name(f"{tag}_shape")
    name = ctx.name(tag)
    starts = ctx.constant(np.array([axis], np.int64), "start")
    ends = ctx.constant(np.array([np.iinfo(np.int64).max], np.int64), "end")
    return [
        helper.make_node("Shape", [value], [shape]),
        helper.make_node("Slice", [shape, starts, ends], [name]),
    ], name


def window_attributes(node, sizes=None):
    """``(kernel_shape, strides, dilations, pads)`` of a convolution or pooling node, each a list
    with ONNX's default where the attribute is missing; ``kernel_shape`` may be None.

    The number of spatial axes comes from whichever attribute is given; ``auto_pad`` ``VALID``
    means zero pads. ``SAME_UPPER`` and ``SAME_LOWER`` are resolved as ONNX defines them (the
    output ``ceil(size / stride)`` long, the odd unit of padding at the end for ``SAME_UPPER``)
    where the pads do not depend on the input's size (strides of one) or where ``sizes``, the
    input's spatial sizes, are given; refused otherwise.

    Examples
    --------
    >>> from onnx import helper
    >>> window_attributes(helper.make_node("ConvGrad", [], [], kernel_shape=[3], strides=[2]))
    ([3], [2], [1], [0, 0])
    >>> window_attributes(helper.make_node(
    ...     "ConvGrad", [], [], kernel_shape=[4, 3], auto_pad="SAME_UPPER"))
    ([4, 3], [1, 1], [1, 1], [1, 1, 2, 1])
    >>> window_attributes(helper.make_node(
    ...     "Conv", [], [], kernel_shape=[3], strides=[2], auto_pad="SAME_LOWER"), sizes=[8])
    ([3], [2], [1], [1, 0])
    """
    kernel = node_attribute(node, "kernel_shape")
    given = [node_attribute(node, n) for n in ("kernel_shape", "strides", "dilations")]
    pads = node_attribute(node, "pads")
    rank = next((len(v) for v in given if v), len(pads) // 2 if pads else None)
    if rank is None:
        raise ValueError(
            f"{node.op_type} node {node.name!r} has no kernel_shape, strides, dilations nor "
            "pads: its number of spatial axes is unknown; give it a kernel_shape attribute."
        )
    strides = node_attribute(node, "strides") or [1] * rank
    dilations = node_attribute(node, "dilations") or [1] * rank
    pads = list(pads or [0] * (2 * rank))
    auto_pad = node_attribute(node, "auto_pad", "NOTSET")
    if auto_pad == "VALID":
        pads = [0] * (2 * rank)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if kernel is None or (sizes is None and any(s != 1 for s in strides)):
            raise ValueError(
                f"{node.op_type} node {node.name!r} has auto_pad={auto_pad} with strides "
                f"{strides}: its pads depend on the input's spatial size, which is not known. "
                "Write the padding as explicit pads (the project's export does)."
            )
        reach = [d * (k - 1) + 1 for k, d in zip(kernel, dilations)]
        if sizes is None:
            totals = [r - 1 for r in reach]
        else:  # the windows of an output ceil(size / stride) long, past the input's end
            totals = [
                max(0, (-(-n // s) - 1) * s + r - n) for n, s, r in zip(sizes, strides, reach)
            ]
        small = [t // 2 for t in totals]
        large = [t - s for t, s in zip(totals, small)]
        begin, end = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
        pads = begin + end
    return kernel, list(strides), list(dilations), pads
