"""Facts about the installed onnxruntime-training, checked once per process.

onnxruntime-training 1.19.2 is the last release of the training packages. It
refuses models stamped with an IR version above 10, which is what onnx 1.18 and
later write. These functions turn that, and a few other traps, into clear
errors.
"""

import importlib.util
import re
from functools import lru_cache

import onnx
import onnxruntime
from onnx import TensorProto

from ...portable.runtime_support import runtime_accepts


class RuntimeCompatibilityError(RuntimeError):
    """The installed packages cannot work together (onnx too new, and so on).

    Examples
    --------
    >>> import onnx
    >>> model = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))
    >>> model.ir_version = 99
    >>> check_model_ir_version(model)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    helpers.core.machine.runtime.RuntimeCompatibilityError: The model has IR version 99, but ...

    With onnxruntime 1.19.2: "... accepts IR version 10 at most. Convert or save it with
    onnx==1.17.0, or set model.ir_version = 10 if its opsets allow it."
    """


class UntrainableModelError(ValueError):
    """onnxruntime cannot compute the gradient of some operator of the model.

    Examples
    --------
    >>> from onnx import helper
    >>> model = helper.make_model(
    ...     helper.make_graph([helper.make_node("Resize", ["x"], ["y"])], "g", [], [])
    ... )
    >>> error = explain_untrainable(model, RuntimeError("no implementation for ResizeGrad(1) node"))
    >>> isinstance(error, UntrainableModelError)
    True
    >>> str(error).split(". ")[0].split(" cannot train this model: ")[1]
    "no gradient for Resize on this device (node 'y')"
    >>> _REPLACEMENTS["Resize"] in str(error)
    True
    """


def untrainable_operators(model, message):
    """The operators of ``model`` that a runtime error ``message`` says have no gradient.

    onnxruntime names the missing gradient kernel (``ResizeGrad``), or the
    operator whose gradient builder is missing ("The gradient builder has
    not been registered: Round for node /Round"); the model's own operator
    types are matched against that text.

    Examples
    --------
    >>> from onnx import helper
    >>> model = helper.make_model(
    ...     helper.make_graph(
    ...         [helper.make_node("Resize", ["x"], ["y"]), helper.make_node("Round", ["y"], ["z"])],
    ...         "g",
    ...         [],
    ...         [],
    ...     )
    ... )
    >>> untrainable_operators(model, "Could not find an implementation for ResizeGrad(1) node")
    ['Resize']
    >>> untrainable_operators(
    ...     model, "The gradient builder has not been registered: Round for node /Round"
    ... )
    ['Round']
    """
    found = set(re.findall(r"\b([A-Z][A-Za-z0-9]*)Grad\b", message))
    found |= set(
        re.findall(r"gradient[^.]*?\b(?:op|operator)\s*:?\s*'?([A-Z][A-Za-z0-9]*)", message, re.I)
    )
    found |= set(re.findall(r"has not been registered:\s*([A-Z][A-Za-z0-9]*)", message))
    types = {node.op_type for node in model.graph.node}
    return sorted(found & types)


def explain_untrainable(model, error):
    """Turn a runtime failure to build or load a training graph into a clear error, if it is one.

    Returns an :class:`UntrainableModelError` naming the operators, or None
    when the message names none of the model's operators.

    Examples
    --------
    >>> from onnx import helper
    >>> model = helper.make_model(
    ...     helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [], [])
    ... )
    >>> explain_untrainable(model, RuntimeError("out of memory")) is None  # not about a gradient
    True
    """
    operators = untrainable_operators(model, str(error))
    if not operators:
        return None
    nodes = [n.name or n.output[0] for n in model.graph.node if n.op_type in operators][:3]
    hints = [_REPLACEMENTS[op] for op in operators if op in _REPLACEMENTS]
    return UntrainableModelError(
        f"onnxruntime {onnxruntime.__version__} cannot train this model: no gradient for "
        f"{', '.join(operators)} on this device (node {', '.join(repr(n) for n in nodes)}). "
        f"Replace {'it' if len(operators) == 1 else 'them'} in the "
        f"model{' (' + '; '.join(hints) + ')' if hints else ''}, or train only the weights after "
        "it (weights_to_train)."
    )


def explain_no_gradient(error):
    """The :class:`UntrainableModelError` of the backend ``'onnx'`` for a
    :class:`~helpers.portable.gradients.registry.NoGradientError` of its gradient builder.

    Examples
    --------
    >>> from helpers.portable.gradients import NoGradientError
    >>> str(explain_no_gradient(NoGradientError("TopK", "", "/head/TopK"))).split(": ")[0]
    "backend='onnx' cannot train this model"
    """
    hint = _REPLACEMENTS.get(error.op_type)
    return UntrainableModelError(
        f"backend='onnx' cannot train this model: {error.args[0].split(' Freeze')[0]} Replace the "
        f"layer{' (' + hint + ')' if hint else ''}, or train only the weights after it "
        "(weights_to_train); where onnxruntime-training is installed, backend="
        "'onnxruntime-training' may have its gradient."
    )


#: What to use instead of operators without a gradient.
_REPLACEMENTS = {
    "Resize": (
        "nn.Upsample or F.interpolate with mode='nearest', 'linear', 'bilinear' or 'trilinear' by "
        "an integer scale_factor (or to a multiple of a known input size), which the training "
        "graph rewrites; for another factor, such an upsampling followed by a pooling or a strided "
        "Conv"
    ),
    "ConvTranspose": (
        "nn.ConvTranspose1d, 2d or 3d as torch exports it (opset 13 or later), which the training "
        "graph rewrites as a Conv; or an upsampling (nn.Upsample(scale_factor=2)) followed by a "
        "Conv"
    ),
    "Round": "no rounding while training, or a straight-through estimator written in torch",
    "InstanceNormalization": (
        "give the model's inputs a shape: the training graph writes it out where shape inference "
        "tells its input's rank; torch's InstanceNorm trains with track_running_stats=False only"
    ),
}


@lru_cache(maxsize=None)
def max_ir_version():
    """Return the highest ONNX IR version the installed runtime loads.

    It is found by loading tiny models
    (:func:`helpers.portable.runtime_support.runtime_accepts`), not read from a table, so it
    stays true for any runtime build.

    Examples
    --------
    >>> onnxruntime.__version__, max_ir_version()  # doctest: +SKIP
    ('1.19.2', 10)
    >>> max_ir_version() <= onnx.IR_VERSION
    True
    """
    version = onnx.IR_VERSION
    while version > 3 and not runtime_accepts(version, 13, refusal="IR version"):
        version -= 1
    return version


@lru_cache(maxsize=None)
def max_opset():
    """Return the highest opset of the default ONNX domain the installed runtime loads.

    Examples
    --------
    >>> 17 <= max_opset() <= onnx.defs.onnx_opset_version()
    True
    """
    opset = onnx.defs.onnx_opset_version()
    while opset > 7 and not runtime_accepts(max_ir_version(), opset, "ValidateOpsetForDomain"):
        opset -= 1
    return opset


@lru_cache(maxsize=None)
def has_training_package():
    """Whether the installed onnxruntime is a training package (``onnxruntime.training``).

    Examples
    --------
    >>> isinstance(has_training_package(), bool)
    True
    """
    return importlib.util.find_spec("onnxruntime.training") is not None


def check_onnx_compatible():
    """Raise a clear error when the installed onnx writes models the runtime refuses.

    ``generate_artifacts`` writes its optimizer model with the IR version of the
    installed onnx package, so an onnx newer than the runtime breaks training
    even when the user's model is fine.

    Raises
    ------
    RuntimeCompatibilityError
        When ``onnx.IR_VERSION`` is above what onnxruntime accepts.

    Examples
    --------
    >>> check_onnx_compatible()  # onnx 1.17 writes IR version 10, which the runtime accepts
    """
    if not has_training_package():
        return  # nothing writes models with the installed onnx's IR version then
    accepted = max_ir_version()
    if onnx.IR_VERSION > accepted:
        raise RuntimeCompatibilityError(
            f"onnx {onnx.__version__} writes models with IR version "
            f"{onnx.IR_VERSION}, but onnxruntime {onnxruntime.__version__} "
            f"accepts IR version {accepted} at most. Install the pinned onnx: "
            "pip install onnx==1.17.0 (or run `make setup`)."
        )


def check_model_ir_version(model):
    """Raise a clear error when ``model`` has an IR version the runtime refuses.

    Parameters
    ----------
    model : onnx.ModelProto
        The model about to be trained or run.

    Examples
    --------
    >>> import onnx
    >>> check_model_ir_version(
    ...     onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []), ir_version=8)
    ... )
    """
    accepted = max_ir_version()
    if model.ir_version > accepted:
        # the onnx that writes that IR version: 1.17.0 writes 10 (onnxruntime-training 1.19.2's)
        writer = "onnx==1.17.0" if accepted == 10 else f"onnx=={onnx.__version__}"
        raise RuntimeCompatibilityError(
            f"The model has IR version {model.ir_version}, but onnxruntime "
            f"{onnxruntime.__version__} accepts IR version {accepted} at most. "
            f"Convert or save it with {writer}, or set "
            f"model.ir_version = {accepted} if its opsets allow it."
        )


def check_model_opset(model):
    """Raise a clear error when ``model`` imports an opset newer than the runtime runs.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> check_model_opset(mlp_onnx(3, opset=99))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    helpers.core.machine.runtime.RuntimeCompatibilityError: The model imports opset 99 of ...

    With onnxruntime 1.19.2: "... runs opset 21 at most. Convert it again with target_opset=21
    (skl2onnx: to_onnx(..., target_opset=21); torch: opset_version=21)."
    """
    accepted, opset = max_opset(), main_opset(model)
    if opset > accepted:
        raise RuntimeCompatibilityError(
            f"The model imports opset {opset} of the ONNX domain, but onnxruntime "
            f"{onnxruntime.__version__} runs opset {accepted} at most. Convert it again with "
            f"target_opset={accepted} (skl2onnx: to_onnx(..., target_opset={accepted}); torch: "
            f"opset_version={accepted})."
        )


def check_model_inputs(model):
    """Raise a clear error when the model's data inputs or outputs have a type the optimizers do not
    feed.

    The optimizers feed float32 arrays, or integer arrays to an integer
    input (token ids, indices), and read float32 outputs; a model converted
    from float64 data fails inside the runtime with a message about kernels
    otherwise.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [None, 2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [None, 2])])
    >>> check_model_inputs(helper.make_model(graph))  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    TypeError: The model's input 'x' is double: the optimizers train float32 models. Convert the
    model from float32 data (skl2onnx: to_onnx(model, X[:1].astype(numpy.float32))).
    """
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    for value in [*inputs, *model.graph.output]:
        elem_type = value.type.tensor_type.elem_type
        is_input = any(value is i for i in inputs)
        if elem_type == TensorProto.FLOAT or (
            is_input and elem_type in (TensorProto.INT64, TensorProto.INT32)
        ):
            continue
        name = TensorProto.DataType.Name(elem_type).lower()
        fix = (
            "Convert the model from float32 data (skl2onnx: to_onnx(model, "
            "X[:1].astype(numpy.float32)))."
            if elem_type == TensorProto.DOUBLE
            else "Give the model a float32 input, or an int64 input of ids (cast inside the "
            "graph if it needs another type)."
        )
        kind = "input" if is_input else "output"
        raise TypeError(
            f"The model's {kind} {value.name!r} is {name}: the optimizers train float32 models. "
            f"{fix}"
        )


def main_opset(model):
    """Return the version of the default ONNX domain imported by ``model``.

    Examples
    --------
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> main_opset(mlp_onnx(3, opset=17))
    17
    """
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return opset.version
    raise ValueError("The model imports no opset of the default ONNX domain.")
