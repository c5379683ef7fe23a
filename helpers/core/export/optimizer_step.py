"""What an optimizer exports: its step model, from its initial or its trained state.

Both optimizers' ``export_training_step`` call :func:`export_optimizer_step` with their loss
(:class:`StepLoss`): the whole-training API's model from :func:`helpers.add_loss_output`, the
forward/backward API's model followed by its loss class, its own loss gradient and its
penalty. The rest is shared: the training model of ``generate_artifacts``
(:mod:`~helpers.core.export.gradient_model`), the state the step starts from, the record, the
file written atomically.
"""

import numbers
from collections import namedtuple

import numpy as np
import onnx
from onnx import helper

from ...portable.atomic_files import write_atomic
from ...portable.step_format import StepRecord, write_record
from ..training.parameters import check_warm_start, training_settings
from .gradient_model import gradient_model
from .step_model import build_step_model

StepLoss = namedtuple(
    "StepLoss", ["model", "prediction_gradient", "penalty"], defaults=(None, None)
)
StepLoss.__doc__ = """An optimizer's loss, as :func:`export_optimizer_step` takes it.

``model``: the model followed by its loss (its first output), whose inputs that are not
initializers are the batch's (features, label, then sample weights when the loss takes them);
``prediction_gradient`` and ``penalty``: see
:func:`helpers.core.export.step_model.build_step_model` (None for the whole-training API, whose
loss model holds its penalty).

Examples
--------
>>> StepLoss._fields
('model', 'prediction_gradient', 'penalty')
"""


def _buffers(optimizer, rule, weights, trained_buffers):
    """The update rule's buffers, weight by weight: zeros for a new optimizer."""
    shapes = [np.shape(weights[name]) for name in optimizer.weights_to_train_]
    if not rule.state_names:
        return []
    if not optimizer._is_fitted():
        return [np.zeros(shape, np.float32) for shape in shapes for _ in rule.state_names]
    runtime = getattr(optimizer, "_runtime", None)
    if runtime is None:
        saved = optimizer._saved_state.update_state
    else:
        saved = None if runtime.updater is None else runtime.updater.get_state()
    if saved is None:  # kept by onnxruntime's optimizer
        saved = trained_buffers()
    return [np.asarray(value, np.float32) for value in saved]


def _parameters(optimizer, api, batch_inputs):
    """The record's parameters: the optimizer's (by their names), and where the training is."""
    schedule, rule = optimizer.learning_rate_, optimizer.update_rule_
    random_state = optimizer.random_state
    fitted = optimizer._is_fitted()
    rule_parameters = {
        k: list(v) if isinstance(v, tuple) else v for k, v in rule.get_params().items()
    }
    return {
        "api": api,
        "batch_size": optimizer.batch_size,
        "max_iter": optimizer.max_iter,
        # a generator object cannot be recorded: the runner then draws its own batches
        "random_state": int(random_state) if isinstance(random_state, numbers.Integral) else None,
        "solver": rule.name,
        **rule_parameters,  # momentum; betas (a list, as JSON reads it), eps, weight_decay
        "learning_rate": schedule.eta0,
        "learning_rate_schedule": schedule.learning_rate,
        "power_t": schedule.power_t,
        "alpha": schedule.alpha,
        "sample_weight": batch_inputs[2] if len(batch_inputs) > 2 else None,
        "class_labels": optimizer._takes_class_labels(),
        "epochs_done": optimizer.n_iter_ if fitted else 0,
        "steps_done": optimizer.t_ if fitted else 0,
        # where the fit's generator of random draws (Dropout masks) stands, to continue it
        "draws_state": optimizer._draws.bit_generator.state
        if fitted and getattr(optimizer, "_draws", None) is not None
        else None,
    }


def _draw_records(draws, loss_model, batch_inputs):
    """Each random input of the step, with its shape as a function of the batch's rows.

    The shapes are computed for batches of 1, 2 and 3 rows (zeros): each dimension must be
    ``constant + per_row * rows``, which the runner then computes for any batch.
    """
    if not draws:
        return []
    declared = {i.name: i.type.tensor_type for i in loss_model.graph.input}

    def zeros(rows):
        feeds = {}
        for name in batch_inputs:
            dims = [
                d.dim_value if d.HasField("dim_value") else None for d in declared[name].shape.dim
            ]
            if None in dims[1:]:
                raise ValueError(
                    f"The input {name!r} has a free size besides its rows ({dims}): the shapes of "
                    "the step's random draws cannot be recorded. Export it with random_state=None "
                    "(onnxruntime then draws the masks, unseeded)."
                )
            dtype = helper.tensor_dtype_to_np_dtype(declared[name].elem_type)
            feeds[name] = np.zeros([rows, *dims[1:]], dtype)
        return feeds

    one, two, three = (draws.shapes(zeros(rows)) for rows in (1, 2, 3))
    records = []
    for draw, a, b, c in zip(draws.draws, one, two, three):
        dims = [[int(x) - (int(y) - int(x)), int(y) - int(x)] for x, y in zip(a, b)]
        if [x + 3 * k for x, k in dims] != [int(z) for z in c]:
            raise ValueError(
                f"The values the {draw.operator} node draws have shapes {a}, {b}, {c} for 1, 2 "
                "and 3 rows, not a multiple of the rows: the step cannot record them. Export it "
                "with random_state=None (onnxruntime then draws them, unseeded)."
            )
        records.append(draw.to_record(dims))
    return records


def _inference_bytes(optimizer, state):
    model = onnx.ModelProto()
    model.CopyFrom(optimizer._prediction_model)
    kept = [i for i in model.graph.initializer if i.name not in state]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return model.SerializeToString()


def export_optimizer_step(
    optimizer, path, api, step_loss, trained_buffers=None, gradient_builder=None
):
    """Write the step model of ``optimizer``, new or fitted, to ``path``; return its record
    (or, without a path, return the model, which carries the record).

    Parameters
    ----------
    optimizer : helpers.core.training.estimator.BaseOrtOptimizer
        New: the step starts from the model's initial weights, zero buffers, the initial
        running statistics. Fitted: from its trained weights, buffers, running statistics and
        update count, so that the step model continues as ``fit`` with ``warm_start`` would.
    path : str or None
    api : str
        The API's name, kept in the record's parameters.
    step_loss : callable
        Returns the optimizer's :class:`StepLoss` (called once the parameters are checked).
    trained_buffers : callable, optional
        Returns the buffers of a fitted optimizer whose update rule runs in onnxruntime's
        optimizer model (whole-training AdamW), in :func:`~helpers.core.export.step_model.
        state_names` order.
    gradient_builder : {"onnxruntime-training", "onnx"}, optional
        Who writes the step's gradients: onnxruntime-training 1.19.2's builder, or this
        project's, in standard ONNX (:mod:`helpers.portable.gradients`). By default, the
        optimizer's backend (``backend_``): the gradients its ``fit`` runs.

    Returns
    -------
    helpers.portable.step_format.StepRecord or onnx.ModelProto

    Examples
    --------
    >>> import os, tempfile
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> opt = OrtGradientOptimizer(add_loss_output(mlp_onnx(3, hidden=(4,))), solver="nesterov")
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     record = export_optimizer_step(
    ...         opt, os.path.join(folder, "step.onnx"), "example", lambda: StepLoss(opt.model_onnx))
    >>> record.parameters["solver"], record.parameters["steps_done"], record.state[-1]
    ('nesterov', 0, 'intercept1.momentum_buffer')
    """
    optimizer._prepare()
    if gradient_builder is None:  # the gradients fit runs: the backends' names are the builders'
        gradient_builder = optimizer.backend_
    fitted = optimizer._is_fitted()
    if fitted:
        try:
            check_warm_start(optimizer._settings, training_settings(optimizer))
        except ValueError as error:
            raise ValueError(
                "The parameters changed since this optimizer was fitted, so its step would not "
                f"continue its training ({error}) Set them back, or export the step of an "
                "optimizer not fitted yet (sklearn.base.clone)."
            ) from None
        if optimizer.partial_epoch_rows_:
            raise ValueError(
                f"The last epoch was interrupted after {optimizer.partial_epoch_rows_} rows: "
                "finish it with fit (warm_start=True) before exporting the step."
            )
    loss = step_loss()
    names = optimizer.weights_to_train_
    weights = optimizer._current_weights() if fitted else optimizer._initial_weights()
    weights = {name: np.asarray(weights[name], np.float32) for name in names}
    seeded = optimizer.random_state is not None  # the step's random values drawn from the seed
    replaced = []  # the values whose gradient the step computes itself (the prediction's)
    if loss.prediction_gradient is not None:
        graph, bindings = loss.prediction_gradient
        suffix = len("_grad")
        replaced = [bindings[o.name][:-suffix] for o in graph.graph.output if o.name in bindings]
    gradient = gradient_model(
        loss.model, names, optimizer.fast_gradients, seeded, gradient_builder, replaced
    )
    statistics = optimizer._current_statistics() if fitted else gradient.statistics.get()
    rule = optimizer.update_rule_
    buffers = _buffers(optimizer, rule, weights, trained_buffers)
    buffer_names = [f"{w}.{b}" for w in names for b in rule.state_names]
    values = {**weights, **statistics, **dict(zip(buffer_names, buffers))}
    initializers = {i.name: onnx.numpy_helper.to_array(i) for i in loss.model.graph.initializer}
    batch_inputs = [i.name for i in loss.model.graph.input if i.name not in initializers]
    model, state = build_step_model(
        gradient,
        batch_inputs,
        values,
        initializers,
        optimizer.learning_rate_,
        rule,
        loss.prediction_gradient,
        loss.penalty,
    )
    record = StepRecord(
        batch_inputs=batch_inputs,
        state=state,
        trained=list(names),
        inference=_inference_bytes(optimizer, state),
        prediction_output=optimizer._prediction_name(),
        parameters=_parameters(optimizer, api, batch_inputs),
        draws=_draw_records(gradient.draws, loss.model, batch_inputs),
    )
    write_record(model, record)
    if path is None:
        return model
    write_atomic(path, model.SerializeToString())
    return record
