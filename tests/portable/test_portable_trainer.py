"""PortableTrainer on hand-written step models, against the same training written in numpy."""

import os
import threading

import numpy as np
import onnx
import onnxruntime
import pytest
from step_models import TRAINED, linear_step, reference_fit, regression_data

from helpers.portable import atomic_files
from helpers.portable.batch_order import batch_bounds, epoch_order, random_state
from helpers.portable.epoch_loop import epoch_model, loop_names
from helpers.portable.step_format import (
    initial_state,
    read_record,
    write_initial_state,
    write_record,
)
from helpers.portable.trainer import PortableTrainer

SETTINGS = dict(max_iter=3, batch_size=5, random_state=7)  # 37 rows: 8 batches, the last of 2


@pytest.fixture(scope="module")
def data():
    return regression_data()


@pytest.mark.parametrize("epoch_loop", [False, True])
@pytest.mark.parametrize(
    "momentum, weighted", [(None, False), (0.9, False), (None, True)], ids=["sgd", "momentum", "w"]
)
def test_fit_trains_the_numpy_reference_batches(data, momentum, weighted, epoch_loop):
    X, y = data
    weights = np.linspace(0.5, 2.0, len(X)).astype(np.float32) if weighted else None
    step = linear_step(learning_rate=0.05, momentum=momentum, weighted=weighted)
    trainer = PortableTrainer(step, epoch_loop=epoch_loop, **SETTINGS).fit(X, y, weights)
    losses, state = reference_fit(
        step, X, y, 3, 5, 7, learning_rate=0.05, momentum=momentum, sample_weight=weights
    )
    assert len(trainer.losses_) == 3 * 8 == trainer.t_ and trainer.n_iter_ == 3
    # float32 sums in another order than numpy's: equal to float32 rounding
    np.testing.assert_allclose(trainer.losses_, losses, rtol=2e-5)
    found = trainer.get_state()
    for name in state:
        np.testing.assert_allclose(found[name], state[name], rtol=2e-5, atol=1e-6)
    assert losses[-1] < losses[0] / 2  # it trains


def test_a_step_with_dropout_draws_its_masks_from_the_seed(data):
    """The masks come from draws_generator(random_state), step by step: the numpy reference
    drawing the same masks trains alike, a second fit repeats the first, another seed differs."""
    X, y = data
    step = linear_step(learning_rate=0.05, dropout=0.3)
    trainer = PortableTrainer(step, **SETTINGS).fit(X, y)
    losses, state = reference_fit(step, X, y, 3, 5, 7, learning_rate=0.05, dropout=0.3)
    np.testing.assert_allclose(trainer.losses_, losses, rtol=2e-5)
    for name in state:
        np.testing.assert_allclose(trainer.get_state()[name], state[name], rtol=2e-5, atol=1e-6)
    assert PortableTrainer(step, **SETTINGS).fit(X, y).losses_ == trainer.losses_
    other = PortableTrainer(step, **{**SETTINGS, "random_state": 8}).fit(X, y)
    assert other.losses_ != trainer.losses_
    with pytest.raises(
        ValueError, match=r"epoch_loop=False.*\['Dropout'\]|\['Dropout'\].*epoch_loop=False"
    ):
        PortableTrainer(step, epoch_loop=True, **SETTINGS).fit(X, y)


def test_a_seed_gives_the_batches_of_batch_order(data):
    """The loss of one step with the initial weights names its batch: each step's loss is the
    loss of the rows batch_order puts there, and another seed gives other batches."""
    X, y = data
    step = linear_step(learning_rate=0.0)  # nothing moves: each loss depends on its rows only
    coef, intercept = (initial_state(step)[n] for n in TRAINED)
    order = epoch_order(random_state(7), len(X))
    expected = [
        float(np.mean((X[order[a:b]] @ coef + intercept - y[order[a:b], None]) ** 2))
        for a, b in batch_bounds(len(X), 5)
    ]
    trainer = PortableTrainer(step, max_iter=1, batch_size=5, random_state=7).fit(X, y)
    np.testing.assert_allclose(trainer.losses_, expected, rtol=1e-5)
    other = PortableTrainer(step, max_iter=1, batch_size=5, random_state=8).fit(X, y)
    assert not np.allclose(other.losses_, expected, rtol=1e-5)


@pytest.mark.parametrize("momentum", [None, 0.9])
def test_epoch_loop_equals_one_call_per_step_bit_for_bit(data, momentum):
    X, y = data
    step = linear_step(momentum=momentum)
    stepped = PortableTrainer(step, **SETTINGS).fit(X, y)
    looped = PortableTrainer(step, epoch_loop=True, **SETTINGS).fit(X, y)
    np.testing.assert_array_equal(looped.losses_, stepped.losses_)
    for name, value in stepped.get_state().items():
        np.testing.assert_array_equal(looped.get_state()[name], value)


def test_epoch_model_equals_session_calls_per_step(data):
    """The epoch model alone, against plain session.run calls of the step, one per batch: the
    whole batches of 5 rows (35 of the 37)."""
    X, y = data
    step = linear_step(momentum=0.9)
    state = initial_state(step)
    initial = dict(state)
    order = epoch_order(random_state(3), len(X))[:35]
    session = onnxruntime.InferenceSession(
        step.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in step.graph.output]
    losses = []
    for k, (a, b) in enumerate(batch_bounds(len(order), 5), start=4):
        rows = order[a:b]
        feeds = {"X": X[rows], "label": y[rows, None], "step": np.array(k), **state}
        outputs = dict(zip(names, session.run(None, feeds)))
        losses.append(outputs["loss"])
        state = {name: outputs[name + ".next"] for name in state}
    epoch = epoch_model(step)
    assert (epoch.ir_version, list(epoch.opset_import)) == (
        step.ir_version,
        list(step.opset_import),
    )
    loop = onnxruntime.InferenceSession(
        epoch.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    names = loop_names(step)
    feeds = {"X": X, "label": y[:, None], "step": np.array(4)}
    feeds.update({names.order: order, names.batch_size: np.array(5)})
    outputs = dict(zip([o.name for o in epoch.graph.output], loop.run(None, {**feeds, **initial})))
    np.testing.assert_array_equal(outputs[names.losses], np.array(losses))
    for name in state:
        np.testing.assert_array_equal(outputs[name + ".next"], state[name])


@pytest.mark.parametrize("epoch_loop", [False, True])
def test_partial_fit_continues_where_fit_would(data, epoch_loop):
    X, y = data
    step = linear_step(momentum=0.9)  # the rate depends on the step count
    whole = PortableTrainer(step, epoch_loop=epoch_loop, **SETTINGS).fit(X, y)
    parts = PortableTrainer(step, epoch_loop=epoch_loop, **SETTINGS)
    for _ in range(3):
        parts.partial_fit(X, y)
    assert parts.losses_ == whole.losses_ and (parts.t_, parts.n_iter_) == (24, 3)
    again = whole.fit(X, y)  # a new fit starts over from the exported state
    assert again.losses_ == parts.losses_


def test_defaults_come_from_the_record(data):
    X, y = data
    step = linear_step(parameters={"max_iter": 3, "batch_size": 5, "random_state": 7})
    from_record = PortableTrainer(step).fit(X, y)
    assert from_record.losses_ == PortableTrainer(linear_step(), **SETTINGS).fit(X, y).losses_
    assert PortableTrainer(step, max_iter=1).fit(X, y).losses_ == from_record.losses_[:8]


def test_predict_and_the_saved_model_use_the_trained_weights(data, tmp_path):
    X, y = data
    trainer = PortableTrainer(linear_step(), **SETTINGS)
    before = trainer.predict(X)
    np.testing.assert_allclose(
        before, X @ initial_state(linear_step())["coef"] + 0.5, rtol=1e-5, atol=1e-6
    )
    trainer.fit(X, y)
    state = trainer.get_state()
    expected = X @ state["coef"] + state["intercept"]
    np.testing.assert_allclose(trainer.predict(X), expected, rtol=1e-5, atol=1e-6)
    path = tmp_path / "model.onnx"
    trainer.save_inference_model(path)
    saved = onnx.load(path)
    assert saved.ir_version == 10 and sorted(t.name for t in saved.graph.initializer) == TRAINED
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"X": X})[0], expected, rtol=1e-5, atol=1e-6)
    assert os.listdir(tmp_path) == ["model.onnx"]


def test_an_interrupted_save_leaves_the_previous_file_and_no_temporary(data, tmp_path, monkeypatch):
    X, y = data
    trainer = PortableTrainer(linear_step(), **SETTINGS)
    path = tmp_path / "model.onnx"
    trainer.save_inference_model(path)
    previous = path.read_bytes()

    def interrupted(fd):
        raise KeyboardInterrupt  # after the bytes are written, before the rename

    monkeypatch.setattr(atomic_files.os, "fsync", interrupted)
    trainer.fit(X, y)
    with pytest.raises(KeyboardInterrupt):
        trainer.save_inference_model(path)
    with pytest.raises(KeyboardInterrupt):
        trainer.save_inference_model(tmp_path / "new.onnx")
    assert path.read_bytes() == previous and os.listdir(tmp_path) == ["model.onnx"]


def test_a_written_file_is_synced_and_has_the_mode_of_a_new_file(tmp_path, monkeypatch):
    """Not the private mode of a temporary file, nor the mode of the file it replaces."""
    synced, fsync = [], os.fsync
    monkeypatch.setattr(atomic_files.os, "fsync", lambda fd: synced.append(fd) or fsync(fd))
    path = tmp_path / "model.onnx"
    path.write_bytes(b"old")
    path.chmod(0o600)
    previous = os.umask(0o027)
    try:
        atomic_files.write_atomic(path, b"new")
    finally:
        os.umask(previous)
    assert path.read_bytes() == b"new" and len(synced) == 1
    assert path.stat().st_mode & 0o777 == 0o666 & ~0o027
    atomic_files.write_atomic(path, "text")
    assert path.stat().st_mode & 0o777 == 0o666 & ~previous and path.read_text() == "text"
    assert os.listdir(tmp_path) == ["model.onnx"]


#: Failures while the bytes are written (at ``os.fsync``, after ``write``), by name.
WRITE_FAILURES = {
    "disk full": OSError(28, "No space left on device"),
    "interrupted": KeyboardInterrupt(),
}


@pytest.mark.parametrize("failure", ["serializer", *WRITE_FAILURES])
def test_a_failed_write_leaves_the_previous_file_and_no_temporary(failure, tmp_path, monkeypatch):
    path = tmp_path / "losses.json"
    atomic_files.write_atomic(path, "[1.0]")
    data = "[2.0]"
    if failure == "serializer":
        data = "[\ud800]"  # a lone surrogate: its UTF-8 encoding fails
    else:

        def failing(fd):
            raise WRITE_FAILURES[failure]

        monkeypatch.setattr(atomic_files.os, "fsync", failing)
    with pytest.raises((UnicodeEncodeError, OSError, KeyboardInterrupt)):
        atomic_files.write_atomic(path, data)
    assert path.read_text() == "[1.0]" and os.listdir(tmp_path) == ["losses.json"]


def test_a_failed_rename_leaves_no_temporary(tmp_path):
    (tmp_path / "model.onnx").mkdir()  # a folder in the way: the rename fails
    with pytest.raises(OSError):
        atomic_files.write_atomic(tmp_path / "model.onnx", b"model")
    assert os.listdir(tmp_path) == ["model.onnx"] and not os.listdir(tmp_path / "model.onnx")


def test_two_trainers_in_two_threads_train_as_alone(data):
    X, y = data
    steps = [linear_step(momentum=0.9), linear_step(seed=3)]
    alone = [
        PortableTrainer(s, epoch_loop=k == 1, **SETTINGS).fit(X, y) for k, s in enumerate(steps)
    ]
    results, errors = [None, None], []

    def train(k):
        try:
            trainer = PortableTrainer(steps[k], epoch_loop=k == 1, **SETTINGS)
            for _ in range(20):
                trainer.fit(X, y)
            results[k] = trainer.losses_
        except Exception as error:  # reported below, the thread cannot raise into the test
            errors.append(error)

    threads = [threading.Thread(target=train, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert results == [alone[0].losses_, alone[1].losses_]


def continued_step(step, values, parameters):
    """``step`` as a fitted optimizer exports it: its state's defaults are ``values``, its record
    counts the steps and epochs done."""
    fitted = onnx.ModelProto()
    fitted.CopyFrom(step)
    write_initial_state(fitted, values)
    record = read_record(fitted)
    record.parameters.update(parameters)
    write_record(fitted, record)
    return fitted


@pytest.mark.parametrize("epoch_loop", [False, True])
def test_a_fitted_step_continues_its_count_and_its_row_orders(data, epoch_loop):
    """The record's steps_done and epochs_done: the step count and the seed's row orders go on
    from there, as the exporting optimizer's next epochs would."""
    X, y = data
    step = linear_step(momentum=0.9)  # the rate depends on the step count
    first = PortableTrainer(step, **{**SETTINGS, "max_iter": 1}).fit(X, y)
    both = PortableTrainer(step, **{**SETTINGS, "max_iter": 2}).fit(X, y)
    done = {"steps_done": 8, "epochs_done": 1}
    rest = PortableTrainer(
        continued_step(step, first.get_state(), done), epoch_loop=epoch_loop, **SETTINGS
    )
    rest.max_iter = 1
    rest.fit(X, y)
    assert (rest.t_, rest.n_iter_) == (16, 2)
    np.testing.assert_array_equal(rest.losses_, both.losses_[8:])
