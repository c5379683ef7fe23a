"""Bad step models, bad data and bad settings: clear errors, before any runtime message."""

import numpy as np
import onnx
import onnxruntime
import pytest
from step_models import linear_step, regression_data

from helpers.portable.batch_data import check_array, check_batch_arrays
from helpers.portable.divergence import TrainingDivergedError
from helpers.portable.runtime_support import RuntimeSupportError
from helpers.portable.step_format import read_record, write_record
from helpers.portable.step_model import TensorSpec
from helpers.portable.trainer import PortableTrainer

SETTINGS = dict(max_iter=2, batch_size=5, random_state=0)


@pytest.fixture(scope="module")
def data():
    return regression_data()


def fit(step, X, y, **params):
    return PortableTrainer(step, **{**SETTINGS, **params}).fit(X, y)


def test_a_model_without_a_record_is_not_a_step(data):
    plain = onnx.ModelProto()
    plain.CopyFrom(linear_step())
    del plain.metadata_props[:]
    with pytest.raises(ValueError, match="not a training step.*export_training_step"):
        fit(plain, *data)


def test_files_that_are_missing_or_not_onnx(data, tmp_path):
    with pytest.raises(FileNotFoundError, match="No step model at"):
        fit(tmp_path / "missing.onnx", *data)
    (tmp_path / "text.onnx").write_text("not a model")
    with pytest.raises(ValueError, match="is not an ONNX model"):
        fit(tmp_path / "text.onnx", *data)


def test_an_edited_graph_is_refused(data):
    step = linear_step()
    step.graph.output.pop()
    with pytest.raises(ValueError, match="outputs are .* but its record expects"):
        fit(step, *data)


@pytest.mark.parametrize(
    "field, value, match", [("ir_version", 99, "IR version 99"), ("opset", 99, "opset 99")]
)
def test_versions_the_runtime_cannot_load_name_the_fix(data, field, value, match):
    step = linear_step()
    if field == "ir_version":
        step.ir_version = value
    else:
        step.opset_import[0].version = value
    with pytest.raises(RuntimeSupportError, match=f"The step model .*{match}") as error:
        fit(step, *data)
    assert onnxruntime.__version__ in str(error.value) and "newer onnxruntime" in str(error.value)


def test_an_inference_model_the_runtime_cannot_load_is_refused_before_training(data):
    step = linear_step()
    record = read_record(step)
    inference = onnx.ModelProto()
    inference.ParseFromString(record.inference)
    inference.ir_version = 99
    record.inference = inference.SerializeToString()
    write_record(step, record)
    with pytest.raises(RuntimeSupportError, match="The inference model has IR version 99"):
        fit(step, *data)


def test_an_unavailable_provider_lists_the_available_ones(data):
    with pytest.raises(RuntimeSupportError, match="NoSuchExecutionProvider is not available") as e:
        fit(linear_step(), *data, providers=["NoSuchExecutionProvider"])
    assert "CPUExecutionProvider" in str(e.value)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda X, y: (X.astype(str), y), "X has dtype <U.*takes float32"),
        (lambda X, y: (X[:, :2], y), r"X has shape \(37, 2\).*\(N, 3\)"),
        (lambda X, y: (X[:, :, None], y), "X has 3 dimensions"),
        (lambda X, y: (X, np.c_[y, y]), r"y has shape \(37, 2\)"),
        (lambda X, y: (X, y[:-1]), "X has 37 rows but y has 36"),
        (lambda X, y: (np.where(X > 1.5, np.nan, X), y), "X holds .* NaN or infinite"),
        (lambda X, y: (X, np.where(y > 1, np.inf, y)), "y holds .* NaN or infinite"),
        (lambda X, y: (X[:0], y[:0]), "X has no rows"),
    ],
    ids=["strings", "columns", "rank", "label-columns", "rows", "nan-X", "inf-y", "empty"],
)
def test_bad_data_is_named(data, change, match):
    with pytest.raises(ValueError, match=match):
        fit(linear_step(), *change(*data))


def test_float64_and_integer_features_are_cast(data):
    X, y = data
    expected = fit(linear_step(), X, y).losses_
    assert fit(linear_step(), X.astype(np.float64), y.astype(np.float64)).losses_ == expected
    rounded = fit(linear_step(), np.round(X).astype(np.int32), y).losses_
    assert rounded == fit(linear_step(), np.round(X).astype(np.float32), y).losses_


def test_sample_weights_for_a_step_without_them(data):
    X, y = data
    with pytest.raises(ValueError, match="exported without sample weights"):
        PortableTrainer(linear_step(), **SETTINGS).fit(X, y, np.ones(len(X)))


@pytest.mark.parametrize("name", ["batch_size", "max_iter"])
def test_a_setting_missing_from_both_the_call_and_the_record(data, name):
    settings = {k: v for k, v in SETTINGS.items() if k != name}
    with pytest.raises(ValueError, match=f"{name} is not given and the step model's record"):
        PortableTrainer(linear_step(), **settings).fit(*data)
    with pytest.raises(ValueError, match=f"{name} must be an integer"):
        PortableTrainer(linear_step(), **{**settings, name: -1}).fit(*data)


@pytest.mark.parametrize("epoch_loop", [False, True])
def test_a_diverging_training_names_its_step_and_keeps_finite_state(data, epoch_loop):
    X, y = data
    trainer = PortableTrainer(linear_step(learning_rate=40.0), epoch_loop=epoch_loop, **SETTINGS)
    with pytest.raises(
        TrainingDivergedError,
        match=r"The loss of step \d+ \(epoch \d, batch \d of 8\).*Lower the learning rate",
    ):
        trainer.max_iter = 50
        trainer.fit(X, y)
    assert np.isfinite(trainer.losses_).all() and len(trainer.losses_) == trainer.t_
    assert all(np.isfinite(v).all() for v in trainer.get_state().values())
    if epoch_loop:  # the state of the epoch's start: whole epochs only
        assert trainer.t_ == 8 * trainer.n_iter_


@pytest.mark.parametrize(
    "wanted, values, bounds",
    [
        (np.int32, np.array([[3], [2**31], [-(2**31) - 5]]), "[-2147483648, 2147483647]"),
        (np.int64, np.array([[1], [2**63]], dtype=np.uint64), "[-9223372036854775808, "),
        (np.uint8, np.array([[255], [-1]]), "[0, 255]"),
    ],
    ids=["int64-to-int32", "uint64-to-int64", "negative-to-uint8"],
)
def test_integers_the_input_type_cannot_hold_are_refused(wanted, values, bounds):
    """A cast would wrap them around (2**31 becomes -2**31 in int32): the check names the
    input, its type's range and the first value outside it."""
    ids = TensorSpec("ids", np.dtype(wanted), (None, 1))
    label = TensorSpec("label", np.dtype(np.float32), (None, 1))
    with pytest.raises(ValueError, match=r"X holds \d values? outside") as error:
        check_batch_arrays([ids, label], values, np.zeros(len(values)))
    message = str(error.value)
    assert "'ids'" in message and bounds in message and "in row 1" in message
    inside = values[:1]  # the values the type holds are cast as before, unchanged
    np.testing.assert_array_equal(check_array(ids, inside, "X"), inside.astype(wanted))
    assert check_array(ids, inside, "X").dtype == wanted


def test_one_divergence_error_for_every_trainer():
    """The trainer's error is the optimizers' (``helpers.TrainingDivergedError``): one class."""
    import helpers
    import helpers.portable

    assert helpers.TrainingDivergedError is helpers.portable.TrainingDivergedError
    assert helpers.portable.TrainingDivergedError is TrainingDivergedError
    assert issubclass(TrainingDivergedError, FloatingPointError)
    assert not hasattr(helpers.portable, "NonFiniteLossError")
