"""Random operators as inputs: every random value of a training step drawn from the caller's seed.

onnxruntime draws the masks of ``Dropout`` (and the values of ``RandomNormal``,
``RandomUniform``, their ``Like`` forms and ``Bernoulli``) from a generator of its own, seeded
by nobody: two fits with the same ``random_state`` drop different units, and a session reused
by a refit has moved its generator on. Nothing can seed, save or restore it from Python.

:func:`random_operators_as_inputs` rewrites the training graph so that each of these
operators takes its random values as an input of the graph:

* ``Dropout`` in training mode becomes ``Mul(x, mask)``, the mask holding ``1 / (1 - ratio)``
  where a unit is kept (probability ``1 - ratio``) and 0 elsewhere: the values onnxruntime's
  kernel computes (``x * scale`` or 0), from a mask drawn outside; its gradient is the same
  product, standard ONNX;
* ``RandomUniform``, ``RandomNormal`` and their ``Like`` forms become inputs of the same
  name, type and shape;
* ``Bernoulli(p)`` becomes ``Cast(Less(u, p))``, ``u`` a uniform input shaped like ``p``.

The caller draws these inputs (:meth:`RandomDraws.values`) from a generator it owns and can
seed, save and restore: the estimators' :class:`numpy.random.Generator`, from their
``random_state`` (:func:`helpers.portable.batch_order.draws_generator`); torch's default
generator for a torch module. A ``Dropout`` not in training mode draws nothing and stays. An
operator whose draw cannot be made outside (``Multinomial``, a random operator inside a
``Loop`` or ``If``, a ``Dropout`` whose ratio or mode the graph computes) is refused by name.
"""

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

from ...portable.node_attributes import node_attribute, subgraphs
from ...portable.random_draws import RandomDraw
from ..graphs.graph_nodes import TRAINING_PREFIX, copy_with_nodes, is_onnx_op
from ..graphs.graph_shapes import value_infos, value_types
from ..graphs.graph_values import constant_value, model_computing, shapes_with_a_run
from ..graphs.onnx_function import ortvalue_of
from ..machine.devices import Device
from ..machine.runtime import UntrainableModelError
from ..machine.sessions import make_session

#: Operators whose values are drawn, by what their output is drawn as.
DRAWN_OPERATORS = (
    "Dropout",
    "RandomUniform",
    "RandomUniformLike",
    "RandomNormal",
    "RandomNormalLike",
    "Bernoulli",
)

#: Random operators no input can replace.
REFUSED_OPERATORS = ("Multinomial",)


class RandomDraws:
    """The random inputs of a training graph and how to draw them for a batch.

    Parameters
    ----------
    draws : list of RandomDraw
    model : onnx.ModelProto
        The graph before the rewrite: it computes the values whose shapes the draws take.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.5))
    >>> _, draws = random_operators_as_inputs(export_for_training(net, torch.zeros(2, 3)))
    >>> x = np.ones((5, 3), dtype=np.float32)
    >>> [value.shape for value in draws.values(np.random.default_rng(0), {"x": x})]
    [(5, 4)]
    """

    def __init__(self, draws, model):
        self.draws = list(draws)
        self.names = [d.name for d in self.draws]
        inputs = {i.name for i in model.graph.input}
        computed = [d.like for d in self.draws if d.like is not None and d.like not in inputs]
        self._computed = list(dict.fromkeys(computed))
        self._model = (
            model_computing(model, self._computed, value_types(model)) if self._computed else None
        )
        self._session = None
        self._shapes = {}

    def __len__(self):
        return len(self.draws)

    def _computed_shapes(self, feeds, device):
        """The shapes of the values the draws are shaped like that the graph computes."""
        if self._session is None:
            self._session = make_session(self._model, device, label="random_shapes")
        needed = [i.name for i in self._model.graph.input]
        key = tuple((name, tuple(_shape(feeds[name]))) for name in needed)
        if key not in self._shapes:
            values = {name: _as_ortvalue(feeds[name]) for name in needed}
            outputs = self._session._sess.run_with_ort_values(values, self._computed, None)
            self._shapes[key] = {
                name: tuple(outputs[i].shape()) for i, name in enumerate(self._computed)
            }
        return self._shapes[key]

    def values(self, generator, feeds, device=None):
        """Draw every random input for the batch ``feeds``.

        Parameters
        ----------
        generator : numpy.random.Generator, or an object with its ``random`` and
            ``standard_normal``
            Where the values come from: each call advances it.
        feeds : dict
            The graph's batch inputs by name (numpy arrays or OrtValues).
        device : helpers.core.machine.devices.Device, optional
            Where the OrtValues of ``feeds`` are (the CPU by default).

        Returns
        -------
        list of numpy.ndarray
            One per draw, in the order of :attr:`names`.
        """
        if generator is None:
            operators = sorted({d.operator for d in self.draws})
            raise ValueError(
                f"The training graph draws the random values of {operators} from a generator, "
                "and none was given: pass the generator (a numpy.random.Generator, or "
                "random_state= to an estimator)."
            )
        return [
            draw.sample(generator, shape)
            for draw, shape in zip(self.draws, self.shapes(feeds, device))
        ]

    def shapes(self, feeds, device=None):
        """The shape of each draw for the batch ``feeds`` (see :meth:`values`)."""
        computed = self._computed_shapes(feeds, device) if self._computed else {}
        shapes = []
        for draw in self.draws:
            if draw.like is None:
                shapes.append(tuple(draw.shape))
            elif draw.like in computed:
                shapes.append(computed[draw.like])
            else:
                shapes.append(tuple(_shape(feeds[draw.like])))
        return shapes


def _shape(value):
    return value.shape() if callable(getattr(value, "shape", None)) else value.shape


def _as_ortvalue(value):
    """A feed as the C OrtValue a session runs on (numpy arrays are on the CPU)."""
    if not isinstance(value, onnxruntime.OrtValue):
        value = ortvalue_of(np.asarray(value), Device("cpu"))
    return value._ortvalue


def _describe(node):
    return f"{node.op_type} node {node.name or node.output[0]!r}"


def _refuse(node, why):
    raise UntrainableModelError(
        f"The {_describe(node)} {why}, so its random values cannot be drawn from random_state. "
        "Fit with random_state=None (onnxruntime's own generator, not repeatable), or export "
        "the model without it."
    )


def _check_subgraphs(graph, top=True):
    """Refuse random operators where no input can replace them: in subgraphs, or Multinomial."""
    for node in graph.node:
        if is_onnx_op(node, *REFUSED_OPERATORS):
            _refuse(node, "draws categories (no input can hold them)")
        if not top and is_onnx_op(node, *DRAWN_OPERATORS):
            _refuse(node, "is inside a Loop, If or Scan")
        for subgraph in subgraphs(node):
            _check_subgraphs(subgraph, top=False)


def _dropout_ratio(model, node):
    """The ratio of a ``Dropout`` in training mode, None when it drops nothing."""
    if len(node.input) < 3 or not node.input[2]:
        return None  # no training_mode: inference, an identity
    training = constant_value(model, node.input[2])
    if training is None:
        _refuse(node, "has a training_mode the graph computes")
    if not bool(np.asarray(training)):
        return None
    if len(node.input) < 2 or not node.input[1]:
        return 0.5
    ratio = constant_value(model, node.input[1])
    if ratio is None:
        _refuse(node, "has a ratio the graph computes")
    return float(np.asarray(ratio))


def random_operators_as_inputs(model):
    """Rewrite ``model``'s random operators to take their random values as inputs.

    Parameters
    ----------
    model : onnx.ModelProto
        Left unchanged.

    Returns
    -------
    model : onnx.ModelProto
        A copy whose graph has one more input per draw, after its own (``model`` itself when it
        draws nothing).
    draws : RandomDraws
        Those inputs, and how to draw them for a batch (empty when nothing is drawn).

    Raises
    ------
    UntrainableModelError
        For a random operator no input can replace, named.

    Examples
    --------
    >>> import torch
    >>> from helpers import export_for_training
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.25))
    >>> rewritten, draws = random_operators_as_inputs(export_for_training(net, torch.zeros(2, 3)))
    >>> [n.op_type for n in rewritten.graph.node], draws.names
    (['Gemm', 'Mul'], ['training__dropout_mask__0'])
    >>> draws.draws[0].kind, draws.draws[0].params
    ('dropout', (0.25,))
    """
    _check_subgraphs(model.graph)
    if not any(is_onnx_op(n, *DRAWN_OPERATORS) for n in model.graph.node):
        return model, RandomDraws([], model)
    types = value_types(model)
    used = {name for node in model.graph.node for name in node.input}
    used |= {o.name for o in model.graph.output}
    nodes, draws, removed = [], [], set()
    for node in model.graph.node:
        if not is_onnx_op(node, *DRAWN_OPERATORS):
            nodes.append(node)
            continue
        tag = f"{TRAINING_PREFIX}{node.op_type.lower()}"
        if node.op_type == "Dropout":
            ratio = _dropout_ratio(model, node)
            if ratio is None:
                nodes.append(node)
                continue
            removed.update(node.input[1:])
            name = f"{TRAINING_PREFIX}dropout_mask__{len(draws)}"
            dtype = helper.tensor_dtype_to_np_dtype(types.get(node.input[0], TensorProto.FLOAT))
            draws.append(
                RandomDraw(name, "dropout", (ratio,), dtype, like=node.input[0], operator="Dropout")
            )
            nodes.append(
                helper.make_node(
                    "Mul", [node.input[0], name], [node.output[0]], name=f"{tag}__{len(draws)}"
                )
            )
            if len(node.output) > 1 and node.output[1] in used:
                nodes.append(
                    helper.make_node("Cast", [name], [node.output[1]], to=TensorProto.BOOL)
                )
            continue
        like = node.input[0] if node.input else None
        default_type = types.get(like, TensorProto.FLOAT) if like else TensorProto.FLOAT
        dtype = helper.tensor_dtype_to_np_dtype(node_attribute(node, "dtype", default_type))
        shape = None if like else tuple(node_attribute(node, "shape", []))
        if node.op_type.startswith("RandomUniform"):
            params = (node_attribute(node, "low", 0.0), node_attribute(node, "high", 1.0))
            draws.append(
                RandomDraw(node.output[0], "uniform", params, dtype, like, shape, node.op_type)
            )
        elif node.op_type.startswith("RandomNormal"):
            params = (node_attribute(node, "mean", 0.0), node_attribute(node, "scale", 1.0))
            draws.append(
                RandomDraw(node.output[0], "normal", params, dtype, like, shape, node.op_type)
            )
        else:  # Bernoulli: 1 where a uniform draw is below the probability
            name = f"{TRAINING_PREFIX}random_input__{len(draws)}"
            probability = helper.tensor_dtype_to_np_dtype(types.get(like, TensorProto.FLOAT))
            draws.append(
                RandomDraw(name, "uniform", (0.0, 1.0), probability, like, operator="Bernoulli")
            )
            nodes.append(helper.make_node("Less", [name, like], [f"{name}__kept"]))
            nodes.append(
                helper.make_node(
                    "Cast",
                    [f"{name}__kept"],
                    [node.output[0]],
                    to=helper.np_dtype_to_tensor_dtype(dtype),
                )
            )
    rewritten = copy_with_nodes(model, nodes)
    still_used = {name for node in nodes for name in node.input}
    _drop_unused_constants(rewritten, removed - still_used)
    rewritten.graph.input.extend(_draw_inputs(model, draws))
    return rewritten, RandomDraws(draws, model)


def _draw_inputs(model, draws):
    """The graph inputs of ``draws``: the type of the value each is shaped like.

    Where inference names a size (the batch's ``N``), the input names it alike, so that the
    gradient builder sees a product of equal shapes (no broadcast to undo); sizes inference
    misses come from a run.
    """
    infos = value_infos(model)
    runs = shapes_with_a_run(model, [d.like for d in draws if d.like is not None])
    inputs = []
    for draw in draws:
        elem_type = helper.np_dtype_to_tensor_dtype(draw.dtype)
        info = infos.get(draw.like)
        declared = None if info is None else info.type.tensor_type
        if draw.like is None:
            value = helper.make_tensor_value_info(draw.name, elem_type, list(draw.shape))
        elif (
            declared is not None
            and declared.HasField("shape")
            and all(d.dim_value or d.dim_param for d in declared.shape.dim)
        ):
            value = helper.make_tensor_value_info(draw.name, elem_type, None)
            value.type.tensor_type.shape.CopyFrom(info.type.tensor_type.shape)
        elif runs.get(draw.like) is not None:
            value = helper.make_tensor_value_info(draw.name, elem_type, runs[draw.like])
        else:
            raise UntrainableModelError(
                f"The rank of {draw.like!r}, which the {draw.operator} node draws a value shaped "
                "like, is unknown, so its draw cannot be an input: fit with random_state=None."
            )
        inputs.append(value)
    return inputs


def _drop_unused_constants(model, names):
    """Remove the constant nodes and initializers of ``names`` (a Dropout's ratio and mode)."""
    kept = [n for n in model.graph.node if not (n.op_type == "Constant" and n.output[0] in names)]
    del model.graph.node[:]
    model.graph.node.extend(kept)
    initializers = [i for i in model.graph.initializer if i.name not in names]
    del model.graph.initializer[:]
    model.graph.initializer.extend(initializers)
