"""Gradients written as the contrib gradient node onnxruntime-training would use, rewritten at
once with standard operators by its lowering in :mod:`helpers.portable.lowering`.

One formulation serves both: a gradient here builds the ``com.microsoft`` node (``GatherGrad``,
``SoftmaxGrad_13``, ``ReluGrad``...) and hands it to the function that lowers it. The lowerings
compute in float32, the type of the training graphs they rewrite (the zeros a ``GatherGrad``
scatters into, the ratio of ``DropoutGrad``, the zero ``ReluGrad`` compares with): for a value
of another float type, their float32 constants, tensor attributes and casts take that type.

A gradient may also call a function of a lowering itself (``ConvGrad``'s formulations,
``MaxPoolGrad``'s scatter): it gives it a :class:`LoweringView` of its context.
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ..lowering import LOWERINGS, LoweringContext


def _retyped(tensor, dtype):
    """``tensor`` (a ``TensorProto``) as ``dtype`` if it is a float32 one."""
    if tensor.data_type == TensorProto.FLOAT and dtype != np.float32:
        value = numpy_helper.to_array(tensor).astype(dtype)
        tensor.CopyFrom(numpy_helper.from_array(value, tensor.name))


def lowered(ctx, op_type, inputs, like=None, **attributes):
    """Add the standard nodes of ``com.microsoft:op_type(inputs)`` to ``ctx``; return the name
    of its (first) output.

    The lowering's constants become constants of ``ctx`` (shared with the equal ones).

    Parameters
    ----------
    ctx : helpers.portable.gradients.registry.GradientContext
    op_type : str
        A contrib operator with a lowering (``GatherGrad``, ``SliceGrad``, ``ReluGrad``...).
    inputs : list of str
    like : str, optional
        A value of the forward graph whose element type the lowering's float values take
        (float32 when not given).
    **attributes
        The node's attributes.

    Examples
    --------
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({"y": ["N", 3]}, {"y": TensorProto.DOUBLE}, set(), 17)
    >>> lowered(ctx, "SoftmaxGrad_13", ["dy", "y"], axis=-1)
    'grad_0_SoftmaxGrad_13'
    >>> [n.op_type for n in ctx.nodes]
    ['Mul', 'ReduceSum', 'Sub', 'Mul']
    >>> output = lowered(ctx, "ReluGrad", ["dy", "y"], like="y")
    >>> [n.op_type for n in ctx.nodes[4:]], [t.data_type for t in ctx.initializers]
    (['Greater', 'Where'], [7, 11])
    """
    output = ctx.name(op_type)
    node = helper.make_node(op_type, list(inputs), [output], domain="com.microsoft", **attributes)
    ranks = {name: len(shape) for name, shape in ctx.shapes.items() if shape is not None}
    lowering_ctx = LoweringContext(
        ctx.opset, prefix=ctx.name("lower"), known=ctx.constants, ranks=ranks
    )
    nodes = LOWERINGS["com.microsoft", op_type](node, lowering_ctx)
    element_type = ctx.types.get(like, TensorProto.FLOAT) if like else TensorProto.FLOAT
    dtype = helper.tensor_dtype_to_np_dtype(element_type)
    shared = {}
    for tensor in lowering_ctx.initializers:
        _retyped(tensor, dtype)
        shared[tensor.name] = ctx.constant(numpy_helper.to_array(tensor))
    for standard in nodes:
        for attr in standard.attribute:
            if attr.type == attr.TENSOR:
                _retyped(attr.t, dtype)
            elif standard.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT:
                attr.i = element_type
        standard.input[:] = [shared.get(name, name) for name in standard.input]
    ctx.add(nodes)
    return output


class LoweringView:
    """A :class:`~helpers.portable.gradients.registry.GradientContext` as the
    :class:`~helpers.portable.lowering.registry.LoweringContext` the lowering's functions take:
    names and constants from ``ctx``; :meth:`add` puts their nodes among the gradient's.

    Examples
    --------
    >>> from helpers.portable.gradients.registry import GradientContext
    >>> ctx = GradientContext({}, {}, set(), 17)
    >>> view = LoweringView(ctx)
    >>> view.constant(np.array([0], np.int64), "starts") == view.constant(np.array([0]))
    True
    >>> view.add([helper.make_node("Neg", ["a"], ["b"])])
    >>> [n.name for n in ctx.nodes]
    ['grad_Grad/grad_1_Neg']
    """

    def __init__(self, ctx):
        self.ctx, self.opset = ctx, ctx.opset

    def name(self, tag):
        """A name no other value uses."""
        return self.ctx.name(tag)

    def constant(self, value, tag="const"):  # noqa: ARG002 (the lowering's signature)
        """The name of an initializer holding ``value``."""
        return self.ctx.constant(np.asarray(value))

    def add(self, nodes):
        """Append ``nodes`` to the gradient's, named after the node being differentiated."""
        self.ctx.add(nodes)
