"""A training step from any model, built without the training package.

:func:`build_training_step` adds a loss to a model, chooses its weights, update rule and
learning rate, and returns the step model :class:`helpers.PortableTrainer` trains: the same
format as ``export_training_step`` (:mod:`helpers.portable.step_format`), its gradients written
in standard ONNX by :mod:`helpers.portable.gradients`. It runs wherever onnx and onnxruntime
do: the maintained onnxruntime on Python 3.13 builds steps.
"""

from ..portable.atomic_files import write_atomic
from .loss_output import add_loss_output
from .optimizer import OrtGradientOptimizer


def build_training_step(
    model,
    loss="squared_error",
    solver="sgd",
    learning_rate=0.01,
    *,
    weights=None,
    penalty=None,
    sample_weight=False,
    path=None,
    **params,
):
    """The training step of ``model``: its loss, gradients and update, as one ONNX model.

    Parameters
    ----------
    model : onnx.ModelProto
        A model whose (first) output is the prediction: a torch module exported with
        :func:`helpers.export_for_training`, a scikit-learn model converted by skl2onnx (a
        linear model with ``black_op={'LinearRegressor'}``, an ``MLPRegressor``, an
        ``MLPClassifier`` cut at its raw scores with :func:`helpers.select_outputs`)...
    loss : {'squared_error', 'absolute_error', 'elastic', 'log', 'cross_entropy'}
        The loss (:func:`helpers.add_loss_output`): ``squared_error`` is torch's ``mse_loss``,
        ``cross_entropy`` the softmax cross-entropy of raw scores.
    solver : {'sgd', 'momentum', 'nesterov', 'adamw'}
        The update rule, with torch's formulas.
    learning_rate : float
        The initial learning rate of ``learning_rate_schedule`` (a parameter in ``params``,
        ``'constant'`` by default).
    weights : list of str, optional
        The float initializers to train; None trains all of them (but batch normalization's
        running statistics, which the step updates). The others stay frozen.
    penalty : dict, optional
        Initializer name to ``{'l1': a, 'l2': b}``: added to the loss.
    sample_weight : bool
        Give the step an input of per-sample weights (``weight``).
    path : str, optional
        Where to write the step model (atomically).
    **params
        The other parameters of :class:`helpers.OrtGradientOptimizer`: ``batch_size``,
        ``max_iter``, ``learning_rate_schedule``, ``power_t``, ``alpha``, ``momentum``, ``betas``,
        ``eps``, ``weight_decay``, ``random_state`` (the seed of the batches and of the dropout
        masks), ``fast_gradients``; and ``loss_options``, a dict for
        :func:`helpers.add_loss_output` (``l1_weight``, ``l2_weight``, ``eps``).

    Returns
    -------
    onnx.ModelProto
        The step model; it carries its record (:func:`helpers.portable.step_format.read_record`).

    Raises
    ------
    helpers.portable.gradients.registry.NoGradientError
        For a layer whose operator has no gradient, named with its layer.

    Examples
    --------
    >>> import numpy as np, onnxruntime
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> from helpers.portable.step_format import initial_state, read_record
    >>> step = build_training_step(mlp_onnx(3, hidden=(4,)), solver="adamw", learning_rate=0.01)
    >>> record = read_record(step)
    >>> record.batch_inputs, record.state[:2]
    (['X', 'label'], ['coefficient0', 'intercept0'])
    >>> session = onnxruntime.InferenceSession(step.SerializeToString())
    >>> X, y = np.ones((8, 3), np.float32), np.zeros((8, 1), np.float32)
    >>> loss, *after = session.run(None, {"X": X, "label": y, "step": np.array(1),
    ...                                   **initial_state(step)})
    >>> bool(loss > 0)
    True
    """
    loss_options = params.pop("loss_options", {})
    loss_model = add_loss_output(
        model,
        score_name=loss,
        weight_name="weight" if sample_weight else None,
        penalty=penalty,
        **loss_options,
    )
    optimizer = OrtGradientOptimizer(
        loss_model,
        solver=solver,
        learning_rate=learning_rate,
        weights_to_train=weights,
        validation_every=0,
        **params,
    )
    step = optimizer.export_training_step(gradient_builder="onnx")
    if path is not None:
        write_atomic(path, step.SerializeToString())
    return step
