"""Lowerings of the training forms of ``Concat`` and ``Split``.

The training session rewrites ``Concat`` into ``ConcatTraining`` (which also returns each
input's length along the axis, for the gradient) and writes the gradient of a ``Concat`` as a
``SplitTraining`` by those lengths.
"""

import numpy as np
from onnx import helper

from .registry import register


def _axis(node):
    return next((a.i for a in node.attribute if a.name == "axis"), 0)


@register("ConcatTraining")
def lower_concat_training(node, ctx):
    """``ConcatTraining(x...) = Concat(x..., axis)`` and, when asked, the lengths
    ``Concat(Gather(Shape(x), [axis])...)`` (int64).

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("ConcatTraining", ["a", "b"], ["y", "lengths"],
    ...                         domain="com.microsoft", axis=-1)
    >>> [n.op_type for n in lower_concat_training(node, LoweringContext(17))]
    ['Concat', 'Shape', 'Gather', 'Shape', 'Gather', 'Concat']
    """
    axis = _axis(node)
    nodes = [helper.make_node("Concat", list(node.input), [node.output[0]], axis=axis)]
    if len(node.output) < 2 or not node.output[1]:
        return nodes
    position = ctx.constant(np.array([axis], np.int64), "axis")
    lengths = []
    for x in node.input:
        shape, length = ctx.name("shape"), ctx.name("length")
        nodes += [
            helper.make_node("Shape", [x], [shape]),
            helper.make_node("Gather", [shape, position], [length]),
        ]
        lengths.append(length)
    return nodes + [helper.make_node("Concat", lengths, [node.output[1]], axis=0)]


@register("SplitTraining")
def lower_split_training(node, ctx):
    """``SplitTraining(x, split) = Split(x, split, axis)`` (opset 13: the lengths an input).

    Examples
    --------
    >>> from helpers.portable.lowering import LoweringContext
    >>> node = helper.make_node("SplitTraining", ["x", "n"], ["a", "b"], domain="com.microsoft")
    >>> [n.op_type for n in lower_split_training(node, LoweringContext(17))]
    ['Split']
    """
    return [helper.make_node("Split", list(node.input), list(node.output), axis=_axis(node))]
