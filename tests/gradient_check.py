"""Checks of the gradients :func:`helpers.portable.gradients.build_gradients` writes, two ways:

* :func:`check_finite_differences`: the model and its gradients copied to float64 and run by
  onnx's reference evaluator; each gradient compared with central differences of the loss
  (numpy only: no runtime);
* :func:`check_against_training_package`: the same gradients run on onnxruntime beside those
  of onnxruntime-training 1.19.2's gradient builder (``generate_artifacts``), equal to float32
  rounding.

:func:`single_node_loss` wraps one operator into a model whose loss is a weighted sum of its
outputs, so that every output gradient is a different, non-trivial tensor.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from scipy.special import erf

from helpers.portable.gradients import build_gradients

FLOAT, DOUBLE = TensorProto.FLOAT, TensorProto.DOUBLE


class Erf(OpRun):
    """``Erf`` to double precision (onnx 1.23's reference evaluator rounds it to about 1e-3); the
    reference evaluator takes an operator's type from its class name."""

    op_domain = ""

    def _run(self, x):
        return (erf(x).astype(x.dtype),)


class Gelu(OpRun):
    """``Gelu`` (opset 20) to double precision, both forms, for the same reason."""

    op_domain = ""

    def _run(self, x, approximate="none"):
        if approximate == "tanh":
            inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)
            return ((0.5 * x * (1 + np.tanh(inner))).astype(x.dtype),)
        return ((0.5 * x * (1 + erf(x / np.sqrt(2)))).astype(x.dtype),)


def _evaluator(model, new_ops=()):
    """onnx's reference evaluator with the double-precision operators above."""
    given = {op.__name__ for op in new_ops}
    precise = [op for op in (Erf, Gelu) if op.__name__ not in given]
    return ReferenceEvaluator(model, new_ops=[*precise, *new_ops])


def single_node_loss(node, inputs, weights, output_shapes, seed=0, opset=17, extra_nodes=()):
    """A model computing ``node`` then ``loss = sum_k sum(output_k * R_k)``.

    Parameters
    ----------
    node : onnx.NodeProto
    inputs : dict
        Graph input name to numpy array (its value is returned as a feed).
    weights : dict
        Initializer name to numpy array.
    output_shapes : dict
        Output name of ``node`` to its shape (the random ``R_k`` have it).
    extra_nodes : sequence of onnx.NodeProto
        Nodes run before ``node`` (constants...).

    Returns
    -------
    tuple
        ``(model, feeds)``.
    """
    rng = np.random.default_rng(seed)
    nodes = [*extra_nodes, node]
    initializers = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    terms = []
    for k, (name, shape) in enumerate(output_shapes.items()):
        r = f"loss_r{k}"
        initializers.append(
            numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), r)
        )
        nodes.append(helper.make_node("Mul", [name, r], [f"loss_p{k}"]))
        nodes.append(helper.make_node("ReduceSum", [f"loss_p{k}"], [f"loss_s{k}"], keepdims=0))
        terms.append(f"loss_s{k}")
    nodes.append(helper.make_node("Sum", terms, ["loss"]))
    graph = helper.make_graph(
        nodes,
        "single_node",
        [
            helper.make_tensor_value_info(
                k, helper.np_dtype_to_tensor_dtype(v.dtype), [None] * v.ndim
            )
            for k, v in inputs.items()
        ],
        [helper.make_tensor_value_info("loss", FLOAT, [])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model, dict(inputs)


def to_float64(model):
    """A copy of ``model`` computing in float64: float32 initializers, inputs, outputs, casts
    and constants become float64."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)

    def graph64(graph):
        for tensor in graph.initializer:
            if tensor.data_type == FLOAT:
                tensor.CopyFrom(
                    numpy_helper.from_array(
                        numpy_helper.to_array(tensor).astype(np.float64), tensor.name
                    )
                )
        for value in [*graph.input, *graph.output, *graph.value_info]:
            if value.type.tensor_type.elem_type == FLOAT:
                value.type.tensor_type.elem_type = DOUBLE
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == FLOAT:
                    attr.t.CopyFrom(
                        numpy_helper.from_array(
                            numpy_helper.to_array(attr.t).astype(np.float64), attr.t.name
                        )
                    )
                if node.op_type == "Cast" and attr.name == "to" and attr.i == FLOAT:
                    attr.i = DOUBLE
                if attr.type == onnx.AttributeProto.GRAPH:
                    graph64(attr.g)

    graph64(copy.graph)
    del copy.graph.value_info[:]
    return copy


def _feeds64(feeds):
    return {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in feeds.items()}


def _with_inputs(model, values):
    """``model`` whose initializers named in ``values`` hold those values."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for tensor in copy.graph.initializer:
        if tensor.name in values:
            tensor.CopyFrom(numpy_helper.from_array(values[tensor.name], tensor.name))
    return copy


def gradients_float64(model, wrt, feeds, new_ops=()):
    """The gradients :func:`build_gradients` writes for ``model``, copied to float64 and run by
    onnx's reference evaluator (``new_ops``: operators it lacks), by name of ``wrt``."""
    built = build_gradients(model, list(wrt))
    evaluator = _evaluator(to_float64(built.model), new_ops)
    names = [built.gradients[n] for n in wrt]
    return dict(zip(wrt, evaluator.run(names, _feeds64(feeds))))


def torch_gradients(model, wrt, feeds, forward):
    """torch's float64 gradients of the loss of :func:`single_node_loss`,
    ``sum_k sum(output_k * loss_r{k})``, ``forward(values)`` computing the node's output (or a
    list of its outputs) from the model's initializers and ``feeds`` by name, as tensors."""
    import torch

    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer} | feeds
    tensors = {}
    for name, value in values.items():
        value = np.asarray(value)
        tensors[name] = torch.tensor(value.astype(np.float64) if value.dtype.kind == "f" else value)
        tensors[name].requires_grad_(name in wrt)
    outputs = forward(tensors)
    outputs = [outputs] if isinstance(outputs, torch.Tensor) else outputs
    loss = sum((o * tensors[f"loss_r{k}"]).sum() for k, o in enumerate(outputs))
    grads = torch.autograd.grad(loss, [tensors[n] for n in wrt])
    return {n: g.numpy() for n, g in zip(wrt, grads)}


def check_finite_differences(model, wrt, feeds, eps=1e-6, rtol=1e-6, atol=1e-9, samples=6, seed=0):
    """Assert the gradients of ``model``'s loss (first output) match central differences.

    The gradients are built on ``model`` (float32), the built model is copied to float64 and
    run by the reference evaluator; ``samples`` elements of each value in ``wrt``, drawn from
    ``seed``, are perturbed by ``eps`` in float64. Returns the float64 gradients.
    """
    grads = gradients_float64(model, wrt, feeds)
    feeds64 = _feeds64(feeds)
    loss_name = model.graph.output[0].name
    forward = to_float64(model)
    initial = {t.name: numpy_helper.to_array(t) for t in forward.graph.initializer}
    rng = np.random.default_rng(seed)

    def loss_at(name, value):
        if name in initial:
            run = _evaluator(_with_inputs(forward, {name: value}))
            return float(run.run([loss_name], feeds64)[0])
        run = _evaluator(forward)
        return float(run.run([loss_name], {**feeds64, name: value})[0])

    for name in wrt:
        base = initial[name] if name in initial else feeds64[name]
        grad = np.asarray(grads[name])
        assert grad.shape == base.shape, (name, grad.shape, base.shape)
        flat = rng.choice(base.size, size=min(samples, base.size), replace=False)
        for index in flat:
            where = np.unravel_index(index, base.shape)
            up, down = base.copy(), base.copy()
            up[where] += eps
            down[where] -= eps
            numeric = (loss_at(name, up) - loss_at(name, down)) / (2 * eps)
            scale = max(1.0, abs(numeric))
            assert abs(grad[where] - numeric) <= rtol * scale + atol * scale + 1e-7 * scale, (
                name,
                where,
                grad[where],
                numeric,
            )
    return grads


def run_on_runtime(model, feeds, outputs):
    """The values ``outputs`` of ``model`` on onnxruntime's CPU provider."""
    import onnxruntime

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.output[:]
    copy.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in outputs)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        copy.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return dict(zip(outputs, session.run(outputs, feeds)))


def check_against_training_package(model, wrt, feeds, rtol=2e-5):
    """Assert the gradients this project builds equal those of 1.19.2's gradient builder on the
    same inputs (both run on onnxruntime 1.19.2), relative to each gradient's magnitude.

    ``wrt`` lists initializers of ``model`` (its weights); the rest of its inputs are ``feeds``.
    Returns ``(ours, theirs)``. Where the training package is missing (Python 3.13), the test
    ends here as skipped, saying so: the checks before it (finite differences, torch) held.
    """
    from helpers.core.export.gradient_model import gradient_model
    from helpers.core.machine.runtime import has_training_package

    if not has_training_package():
        pytest.skip(
            "the checks against float64 finite differences and torch held; the comparison with "
            "onnxruntime-training 1.19.2's gradient builder needs that package"
        )

    built = build_gradients(model, list(wrt))
    ours = run_on_runtime(built.model, feeds, [built.gradients[n] for n in wrt])
    theirs_model = gradient_model(
        model, list(wrt), fast_gradients=False, builder="onnxruntime-training"
    )
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    inputs = {i.name for i in theirs_model.model.graph.input}
    their_feeds = {**{k: v for k, v in weights.items() if k in inputs}, **feeds}
    names = [theirs_model.gradients[n] for n in wrt]
    theirs = run_on_runtime(theirs_model.model, their_feeds, names)
    for name in wrt:
        a, b = ours[built.gradients[name]], theirs[theirs_model.gradients[name]]
        assert a.shape == b.shape, (name, a.shape, b.shape)
        scale = max(float(np.abs(b).max()), 1e-12)
        assert float(np.abs(a - b).max()) <= rtol * scale, (name, np.abs(a - b).max(), scale)
    return ours, theirs


def loss_without_sum(model):
    """A copy of ``model`` whose loss, the ``Sum`` :func:`single_node_loss` ends with, is a chain
    of ``Add`` (an ``Identity`` for one term): 1.19.2's gradient builder has no gradient for
    ``Sum``, so :func:`check_against_training_package` needs this form."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    loss = copy.graph.output[0].name
    index, node = next((k, n) for k, n in enumerate(copy.graph.node) if loss in n.output)
    if node.op_type != "Sum":
        return copy
    terms, added = list(node.input), []
    for k, term in enumerate(terms[1:], 1):
        total = loss if k == len(terms) - 1 else f"{loss}_add{k}"
        added.append(
            helper.make_node("Add", [terms[0] if k == 1 else added[-1].output[0], term], [total])
        )
    if not added:
        added = [helper.make_node("Identity", terms, [loss])]
    del copy.graph.node[index]
    for offset, new in enumerate(added):
        copy.graph.node.insert(index + offset, new)
    return copy


def single_node_case(node, weights, inputs=None, opset=17, extra_nodes=(), seed=0, outputs=None):
    """:func:`single_node_loss` of ``node`` with the shapes of its outputs found by running it
    (onnx's reference evaluator on the values given). ``outputs`` names the outputs the loss
    sums (every float output by default). Returns ``(model, feeds)``."""
    inputs = dict(inputs or {})
    values = {**weights, **inputs}
    graph = helper.make_graph(
        [*extra_nodes, node],
        "shapes",
        [
            helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for k, v in values.items()
        ],
        [helper.make_empty_tensor_value_info(o) for o in node.output if o],
    )
    probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    probe.ir_version = 9
    results = ReferenceEvaluator(probe).run(None, values)
    shapes = {
        name: np.shape(value)
        for name, value in zip([o for o in node.output if o], results)
        if np.asarray(value).dtype.kind == "f" and (outputs is None or name in outputs)
    }
    return single_node_loss(node, inputs, weights, shapes, seed, opset, extra_nodes)


def check_node(
    node, weights, inputs=None, opset=17, training=True, outputs=None, extra_nodes=(), wrt=None
):
    """Check the gradients of ``node`` with respect to ``wrt`` (by default every float value
    given, ``weights``: initializers, ``inputs``: graph inputs) against finite differences, and,
    when ``training``, those of the weights against 1.19.2's builder. Returns the float64
    gradients."""
    model, feeds = single_node_case(node, weights, inputs, opset, extra_nodes, outputs=outputs)
    if wrt is None:
        values = {**weights, **(inputs or {})}
        wrt = [k for k, v in values.items() if v.dtype.kind == "f"]
    grads = check_finite_differences(model, wrt, feeds)
    if training:
        trained = [k for k in wrt if k in weights]
        check_against_training_package(loss_without_sum(model), trained, feeds)
    return grads
