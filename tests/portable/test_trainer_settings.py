"""PortableTrainer's parameters changed between calls, its threads and session options, a step
saved and resumed, and steps whose names are the epoch loop's."""

import numpy as np
import onnx
import onnxruntime
import pytest
from step_models import constant_step, linear_step, regression_data, renamed_step

from helpers.portable import runtime_support
from helpers.portable.epoch_loop import epoch_model, loop_names
from helpers.portable.runtime_support import RuntimeSupportError
from helpers.portable.trainer import PortableTrainer

SETTINGS = dict(max_iter=2, batch_size=5, random_state=7)  # 37 rows: 8 batches an epoch
#: The graphs of the sessions a training makes (not those that fold constants or probe).
TRAINING = {"linear_regression_step", "epoch", "linear_regression"}


@pytest.fixture(scope="module")
def data():
    return regression_data()


def assert_same_training(trainer, reference, steps=None):
    """The same losses (the last ``steps`` of the reference's) and the same state, bit for bit."""
    expected = reference.losses_[-steps:] if steps else reference.losses_
    np.testing.assert_array_equal(trainer.losses_, expected)
    assert (trainer.t_, trainer.n_iter_) == (reference.t_, reference.n_iter_)
    state = reference.get_state()
    for name, value in trainer.get_state().items():
        np.testing.assert_array_equal(value, state[name])


@pytest.fixture
def sessions(monkeypatch):
    """The sessions made from now on: (graph name, intra-op threads, the options object)."""
    made = []

    class Recording(onnxruntime.InferenceSession):
        def __init__(self, model, options=None, **kwargs):
            name = onnx.load_from_string(model).graph.name
            made.append((name, options.intra_op_num_threads, options))
            super().__init__(model, options, **kwargs)

    monkeypatch.setattr(runtime_support.onnxruntime, "InferenceSession", Recording)
    return made


# -- parameters changed after a fit -----------------------------------------------------------


def test_epoch_loop_set_after_a_fit_takes_effect(data):
    """The second fit used to run the step's session with the epoch loop's inputs."""
    step = linear_step(momentum=0.9)
    trainer = PortableTrainer(step, **SETTINGS).fit(*data)
    trainer.epoch_loop = True
    trainer.fit(*data)
    assert_same_training(trainer, PortableTrainer(step, epoch_loop=True, **SETTINGS).fit(*data))


def test_providers_set_after_a_fit_take_effect(data):
    trainer = PortableTrainer(linear_step(), **SETTINGS).fit(*data)
    trainer.providers = ["NoSuchExecutionProvider"]
    with pytest.raises(RuntimeSupportError, match="NoSuchExecutionProvider is not available"):
        trainer.fit(*data)
    with pytest.raises(RuntimeSupportError, match="NoSuchExecutionProvider is not available"):
        trainer.partial_fit(*data)
    trainer.providers = "CPUExecutionProvider"
    trainer.partial_fit(*data)  # the state and counts of the first fit, untouched by the refusals
    whole = PortableTrainer(linear_step(), **{**SETTINGS, "max_iter": 3}).fit(*data)
    assert_same_training(trainer, whole)


def test_another_step_is_trained_by_fit_and_refused_by_partial_fit(data, tmp_path):
    first, second = linear_step(), linear_step(seed=3)
    trainer = PortableTrainer(first, **SETTINGS).fit(*data)
    trainer.step = second
    with pytest.raises(ValueError, match="step changed since the last fit.*Call fit"):
        trainer.partial_fit(*data)
    assert_same_training(trainer, PortableTrainer(first, **SETTINGS).fit(*data))
    trainer.fit(*data)
    assert_same_training(trainer, PortableTrainer(second, **SETTINGS).fit(*data))
    path = tmp_path / "step.onnx"  # a file rewritten since the last fit is loaded again
    onnx.save(first, path)
    trainer.step = path
    trainer.fit(*data)
    onnx.save(second, path)
    trainer.partial_fit(*data)  # the same path: partial_fit continues what it trained
    onnx.save(second, path)
    trainer.fit(*data)
    assert_same_training(trainer, PortableTrainer(second, **SETTINGS).fit(*data))


@pytest.mark.parametrize("first_loop", [False, True])
def test_partial_fit_carries_the_training_over_to_new_settings(data, sessions, first_loop):
    """Each epoch with other settings (one call per step or per epoch, threads): the same
    training as one fit with none changed."""
    step = linear_step(momentum=0.9)  # the rate depends on the step count
    whole = PortableTrainer(step, **{**SETTINGS, "max_iter": 4}).fit(*data)
    trainer = PortableTrainer(step, epoch_loop=first_loop, **{**SETTINGS, "max_iter": 1})
    trainer.fit(*data)
    for loop, threads in [(not first_loop, None), (first_loop, 1), (not first_loop, 2)]:
        trainer.epoch_loop, trainer.n_threads = loop, threads
        before = len(sessions)
        trainer.partial_fit(*data)
        made = {(name, count) for name, count, _ in sessions[before:] if name in TRAINING}
        # the epoch loop runs the full batches, then the last smaller one in a step's session
        expected = {("linear_regression_step", threads or 0)}
        assert made == (expected | {("epoch", threads or 0)} if loop else expected)
    assert_same_training(trainer, whole)


# -- threads and session options --------------------------------------------------------------


def test_n_threads_reaches_every_session(data, sessions):
    trainer = PortableTrainer(linear_step(), n_threads=2, **SETTINGS).fit(*data)
    trainer.predict(data[0])
    made = {(name, count) for name, count, _ in sessions if name in TRAINING}
    assert made == {("linear_regression_step", 2), ("linear_regression", 2)}


def test_session_options_are_used_and_left_as_given(data, sessions):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 3
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    trainer = PortableTrainer(linear_step(), session_options=options, **SETTINGS).fit(*data)
    trainer.n_threads = 1  # overrides the options' count, without changing the object
    trainer.partial_fit(*data)
    step_sessions = [s for s in sessions if s[0] == "linear_regression_step"]
    # one session for the batches of 5 rows, one for the last of 2, per call
    assert [(count, made is options) for _, count, made in step_sessions] == [
        (3, True),
        (3, True),
        (1, True),
        (1, True),
    ]
    assert options.intra_op_num_threads == 3
    expected = PortableTrainer(linear_step(), **{**SETTINGS, "max_iter": 3}).fit(*data)
    assert_same_training(trainer, expected)


@pytest.mark.parametrize(
    "settings, error, match",
    [
        ({"n_threads": 0}, ValueError, "n_threads must be None or an integer >= 1"),
        ({"n_threads": 1.5}, ValueError, "n_threads must be None or an integer >= 1"),
        ({"session_options": {"threads": 2}}, TypeError, "onnxruntime.SessionOptions, got dict"),
    ],
)
def test_bad_thread_settings_are_refused(data, settings, error, match):
    with pytest.raises(error, match=match):
        PortableTrainer(linear_step(), **settings, **SETTINGS).fit(*data)


# -- save and resume ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, epoch_loop",
    [("momentum", False), ("momentum", True), ("dropout", False)],
    ids=["momentum", "momentum-loop", "dropout"],
)
def test_a_saved_step_resumes_the_training_bit_for_bit(data, tmp_path, kind, epoch_loop):
    """fit 2 epochs, save, fit the saved step (2 more, its record's) == fit 4 epochs: the step
    count, the row orders and the dropout masks continue."""
    step = linear_step(momentum=0.9) if kind == "momentum" else linear_step(dropout=0.3)
    whole = PortableTrainer(step, epoch_loop=epoch_loop, **{**SETTINGS, "max_iter": 4})
    whole.fit(*data)
    first = PortableTrainer(step, epoch_loop=epoch_loop, **SETTINGS).fit(*data)
    path = tmp_path / "step.onnx"
    first.save_step(path)
    assert [p.name for p in tmp_path.iterdir()] == ["step.onnx"]
    resumed = PortableTrainer(path, epoch_loop=epoch_loop).fit(*data)
    assert_same_training(resumed, whole, steps=16)
    parts = PortableTrainer(step, epoch_loop=epoch_loop, **SETTINGS).fit(*data)
    parts.partial_fit(*data).partial_fit(*data)
    assert_same_training(resumed, parts, steps=16)


def test_a_step_saved_before_any_epoch_keeps_the_exported_counts(data, tmp_path):
    step = linear_step(momentum=0.9)
    PortableTrainer(step, **SETTINGS).save_step(tmp_path / "step.onnx")
    resumed = PortableTrainer(tmp_path / "step.onnx").fit(*data)
    assert_same_training(resumed, PortableTrainer(step, **SETTINGS).fit(*data))


# -- a step without features ------------------------------------------------------------------


@pytest.mark.parametrize("epoch_loop", [False, True])
def test_a_step_without_features_trains_with_X_None(data, epoch_loop):
    _, y = data
    settings = dict(max_iter=30, batch_size=10, random_state=0)  # 4 batches, the last of 7
    trainer = PortableTrainer(constant_step(), epoch_loop=epoch_loop, **settings).fit(None, y)
    assert trainer.t_ == 30 * 4 and trainer.losses_[-1] < trainer.losses_[0] / 2
    # the last steps move c around the mean by less than a batch's mean differs from it
    np.testing.assert_allclose(trainer.predict(None), [y.mean()], atol=0.1)
    with pytest.raises(ValueError, match="takes no features.*pass X=None"):
        trainer.fit(data[0], y)
    with pytest.raises(ValueError, match="takes no input: call predict.None"):
        trainer.predict(data[0])


def test_X_None_for_a_step_with_features_names_the_input(data):
    with pytest.raises(ValueError, match="X is None, but the step model takes features.*'X'"):
        PortableTrainer(linear_step(), **SETTINGS).fit(None, data[1])


# -- names the epoch loop adds ----------------------------------------------------------------


@pytest.mark.parametrize(
    "names",
    [
        {"intercept": "order", "label": "batch_size", "X": "losses"},
        {"coef": "epoch_loop/k", "intercept": "k"},
    ],
    ids=["the-loops-inputs", "the-loops-prefix"],
)
def test_a_step_named_as_the_loop_trains_in_an_epoch_loop(data, names):
    step = linear_step(momentum=0.9)
    renamed = renamed_step(step, names)
    expected = PortableTrainer(step, **SETTINGS).fit(*data)
    for epoch_loop in (False, True):
        trainer = PortableTrainer(renamed, epoch_loop=epoch_loop, **SETTINGS).fit(*data)
        np.testing.assert_array_equal(trainer.losses_, expected.losses_)
    loop = loop_names(renamed)
    epoch = epoch_model(renamed)
    added = {loop.order, loop.batch_size, loop.losses}
    assert added <= {v.name for v in [*epoch.graph.input, *epoch.graph.output]}
    assert not added & {v.name for v in [*renamed.graph.input, *renamed.graph.output]}
