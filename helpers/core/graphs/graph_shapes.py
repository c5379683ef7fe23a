"""Element types and shapes of the values of a graph, as ONNX shape inference finds them.

The graph rewrites need them: a ``Relu`` is rewritten only for float inputs,
a ``BatchNormalization`` needs the rank of its input, an ``AveragePool`` the
number of channels of its input.
"""

import numpy as np
import onnx

#: Initializers with more elements than this go to shape inference as typed inputs, without values.
_LARGEST_VALUE_KEPT = 1024


def _without_large_values(model):
    """``model`` for shape inference: large initializers become typed inputs (no values to
    serialize).

    Types and shapes are all inference needs of a weight; the values it
    propagates are shapes and indices, small integer tensors.
    """
    graph = model.graph
    large = [i for i in graph.initializer if np.prod(i.dims, dtype=np.int64) > _LARGEST_VALUE_KEPT]
    if not large:
        return model
    skeleton = onnx.ModelProto()
    skeleton.CopyFrom(model)  # the copy then loses the values, once
    del skeleton.graph.initializer[:]
    names, inputs = {i.name for i in large}, {i.name for i in graph.input}
    skeleton.graph.initializer.extend(i for i in graph.initializer if i.name not in names)
    skeleton.graph.input.extend(
        onnx.helper.make_tensor_value_info(i.name, i.data_type, list(i.dims))
        for i in large
        if i.name not in inputs
    )
    return skeleton


def _inferred_values(model):
    """The typed values of ``model``: inferred with data propagation, else without, else declared.

    Data propagation follows sizes through ``Shape``, ``Gather``, ``Concat``
    and ``Reshape`` (the pads torch computes for a reflection, ``GroupNorm``'s
    reshape back to ``x.shape``), where plain inference loses them.
    """
    skeleton = _without_large_values(model)
    for data_prop in (True, False):
        try:
            graph = onnx.shape_inference.infer_shapes(skeleton, data_prop=data_prop).graph
            break
        except Exception:  # noqa: BLE001, PERF203 - models inference rejects keep what they declare
            graph = model.graph
    return [*graph.input, *graph.value_info, *graph.output]


def value_infos(model):
    """The inferred type of every typed value of the main graph, by name (symbolic sizes kept).

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> tensor_dims(value_infos(mlp_onnx(3, hidden=(4,)))["hidden0"])
    [None, 4]
    """
    return {value.name: value for value in _inferred_values(model)}


def value_types(model):
    """Element type (``TensorProto`` enum) of every typed value of the main graph.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> value_types(mlp_onnx(3, hidden=(4,)))["hidden0"] == onnx.TensorProto.FLOAT
    True
    """
    types = {v.name: v.type.tensor_type.elem_type for v in _inferred_values(model)}
    types.update({i.name: i.data_type for i in model.graph.initializer})
    return types


def tensor_dims(value_info):
    """The dimensions of a tensor's type: an int where fixed, None where not; None when its rank is
    unknown.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> tensor_dims(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]))
    [None, 3]
    >>> tensor_dims(helper.make_tensor_value_info("x", TensorProto.FLOAT, None)) is None
    True
    """
    tensor = value_info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]


def value_shapes(model):
    """The dimensions of every value of the main graph: ints where fixed, None where not.

    A value whose rank is unknown maps to None.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> value_shapes(mlp_onnx(3, hidden=(4,)))["hidden0"]
    [None, 4]
    """
    shapes = {value.name: tensor_dims(value) for value in _inferred_values(model)}
    shapes.update({i.name: list(i.dims) for i in model.graph.initializer})
    return shapes


def _fixed_dims(value_info):
    """How many dimensions of a tensor's type are fixed numbers (-1 when its rank is unknown)."""
    dims = tensor_dims(value_info)
    return -1 if dims is None else sum(d is not None for d in dims)


def with_inferred_shapes(model):
    """Return ``model`` declaring the sizes that only shape inference with data propagation finds.

    onnxruntime's gradient builders and kernels read the shapes the graph
    declares. Where a size goes through ``Shape`` and ``Reshape`` (torch's
    ``GroupNorm`` reshapes back to ``x.shape``), plain inference loses it,
    and a kernel such as ``MaxPoolGrad`` then allocates an empty gradient
    (``Can broadcast 0 by 0 or 1``, or a crash). Inference with data
    propagation follows the size through: the values whose type it fixes
    more dimensions of than plain inference does are declared as
    ``value_info``. A model either inference rejects is returned unchanged.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> nodes = [
    ...     helper.make_node("Shape", ["x"], ["s"]),
    ...     helper.make_node("Relu", ["x"], ["r"]),
    ...     helper.make_node("Flatten", ["r"], ["f"]),
    ...     helper.make_node("Reshape", ["f", "s"], ["y"]),
    ...     helper.make_node("Tanh", ["y"], ["z"]),
    ... ]
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 2])
    >>> z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    >>> model = with_inferred_shapes(helper.make_model(helper.make_graph(nodes, "g", [x], [z])))
    >>> [(v.name, tensor_dims(v)) for v in [*model.graph.value_info, *model.graph.output]]
    [('y', [None, 3, 2]), ('z', [None, 3, 2])]
    """
    try:
        skeleton = _without_large_values(model)
        graph = onnx.shape_inference.infer_shapes(skeleton).graph
        plain = {v.name: _fixed_dims(v) for v in [*graph.value_info, *graph.output]}
        inferred = onnx.shape_inference.infer_shapes(skeleton, data_prop=True)
    except Exception:  # noqa: BLE001 - models shape inference rejects keep what they declare
        return model
    declared = {v.name for v in [*model.graph.input, *model.graph.value_info]}
    found = [
        v
        for v in [*inferred.graph.value_info, *inferred.graph.output]
        if v.name not in declared and _fixed_dims(v) > plain.get(v.name, -1)
    ]
    if not found:
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    outputs = {o.name: o for o in copy.graph.output}
    for value in found:
        if value.name in outputs:
            outputs[value.name].type.CopyFrom(value.type)
        else:
            copy.graph.value_info.append(value)
    return copy
