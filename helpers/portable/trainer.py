"""Train a step model with any onnxruntime: :class:`PortableTrainer`.

The trainer keeps the state (weights, statistics, optimizer buffers) in ``OrtValue``s from one
step to the next: two sets, bound once to two I/O bindings, one the inputs of a step and the
other its outputs, swapped after each step. A step binds only its batch and reads only its loss;
nothing else is copied. With ``epoch_loop=True`` one call runs a whole epoch
(:mod:`helpers.portable.epoch_loop`). The batches are those the optimizers draw from the same
seed (:mod:`helpers.portable.batch_order`), and so are the masks of a step exported with random
draws (:mod:`helpers.portable.random_draws`): drawn before each step, bound as inputs.
"""

import numpy as np
import onnxruntime

from .atomic_files import write_atomic
from .batch_data import check_array, check_batch_arrays
from .batch_order import batch_bounds, draws_generator, epoch_order, random_state
from .epoch_loop import BATCH_SIZE_INPUT, LOSSES_OUTPUT, ORDER_INPUT, epoch_model
from .random_draws import RandomDraw, shape_for_rows
from .runtime_support import device_of, make_session, resolve_providers
from .step_format import LOSS_OUTPUT, STEP_INPUT, inference_model
from .step_model import TensorSpec, load_step


class NonFiniteLossError(FloatingPointError):
    """A step's loss is NaN or infinite: the training diverged.

    Examples
    --------
    >>> issubclass(NonFiniteLossError, FloatingPointError)
    True
    """


def _scalar(value, dtype=np.int64):
    """A 0-d array and an OrtValue sharing its memory (the CPU reads it at each run)."""
    array = np.array(value, dtype=dtype)
    return array, onnxruntime.OrtValue.ortvalue_from_numpy(array)


class _State:
    """The state in two sets of OrtValues, and two I/O bindings that alternate between them."""

    def __init__(self, session, step, values, device, extra_outputs):
        self.names = list(step.record.state)
        self.sets = [
            {
                n: onnxruntime.OrtValue.ortvalue_from_numpy(np.array(values[n]), device)
                for n in self.names
            },
            {
                n: onnxruntime.OrtValue.ortvalue_from_shape_and_type(
                    list(values[n].shape), values[n].dtype, device, 0
                )
                for n in self.names
            },
        ]
        self.bindings = [session.io_binding(), session.io_binding()]
        for k, binding in enumerate(self.bindings):
            for name, next_name in zip(self.names, step.next_names):
                binding.bind_ortvalue_input(name, self.sets[k][name])
                binding.bind_ortvalue_output(next_name, self.sets[1 - k][name])
            for name, value in extra_outputs.items():
                if isinstance(value, onnxruntime.OrtValue):
                    binding.bind_ortvalue_output(name, value)
                else:
                    binding.bind_output(name, value)
        self.current = 0

    def binding(self):
        """The binding whose inputs are the current state."""
        return self.bindings[self.current]

    def advance(self):
        """The outputs of the last run become the current state."""
        self.current = 1 - self.current

    def values(self):
        """The current state as numpy arrays (copies)."""
        return {n: v.numpy().copy() for n, v in self.sets[self.current].items()}


class _EpochData:
    """The arrays of a fit as the runtime reads them, made once per fit.

    One call per step: buffers that each epoch fills with the rows in its order, and an OrtValue
    per batch and input on views of them (making an OrtValue costs more than binding one: a
    step only binds them). The epoch loop: an OrtValue per array, every row.
    """

    def __init__(self, arrays, batch_size, stepped):
        self.arrays, self.n_rows = arrays, len(arrays[0])
        self.bounds = batch_bounds(self.n_rows, batch_size)
        self._batch_size_array, self.batch_size = _scalar(batch_size)
        ortvalue = onnxruntime.OrtValue.ortvalue_from_numpy
        if stepped:
            self.buffers = [np.empty_like(a) for a in arrays]
            self.batches = [[ortvalue(b[s:e]) for b in self.buffers] for s, e in self.bounds]
        else:
            self.whole = [ortvalue(a) for a in arrays]

    def shuffle(self, order):
        """Fill the buffers with the rows in ``order``."""
        for array, buffer in zip(self.arrays, self.buffers):
            np.take(array, order, axis=0, out=buffer)


class PortableTrainer:
    """Train a step model with the installed onnxruntime, without any training package.

    Parameters
    ----------
    step : str, path-like or onnx.ModelProto
        A step model (:mod:`helpers.portable.step_format`), as ``export_training_step`` of the
        optimizers writes it.
    max_iter : int or None
        Epochs of :meth:`fit`; None: the exporting optimizer's (the record's parameters).
    batch_size : int or None
        Rows of a batch (the last batch of an epoch is smaller); None: the record's.
    random_state : None, int or numpy.random.RandomState
        Seed of the epochs' row orders and of the step's random draws (its ``Dropout`` masks),
        drawn as the optimizers draw them; None: the record's (numpy's global generator when
        the record has none either), and a fitted optimizer's step continues its draws.
    epoch_loop : bool
        Run each epoch as one call of an ONNX ``Loop`` over its batches instead of one call per
        step (same losses, same state).
    providers : None, str or list
        onnxruntime execution providers (``"CUDAExecutionProvider"``...); None: the CPU.

    Attributes
    ----------
    losses_ : list of float
        The loss of each step trained, in order.
    t_ : int
        Steps trained (the next step's count is ``t_ + 1``), from the exporting optimizer's
        count (the record's ``steps_done``: a fitted optimizer's step continues its training).
    n_iter_ : int
        Epochs trained, from the record's ``epochs_done``; the first epoch's order of the rows
        is the one the optimizer would draw next from the same seed, on the same rows.

    Notes
    -----
    A NaN or infinite loss raises :class:`NonFiniteLossError`; the trainer then keeps the state
    before the failing step (``epoch_loop=False``) or before the failing epoch (``True``).

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> from helpers.portable.step_format import StepRecord, write_initial_state, write_record
    >>> def value(name, shape, elem=TensorProto.FLOAT):
    ...     return helper.make_tensor_value_info(name, elem, shape)
    >>> nodes = [  # fit a constant c to y: loss = mean((c - y)^2), c -= 0.1 * dloss/dc
    ...     helper.make_node("Sub", ["c", "label"], ["d"]),
    ...     helper.make_node("Mul", ["d", "d"], ["d2"]),
    ...     helper.make_node("ReduceMean", ["d2"], ["loss"], keepdims=0),
    ...     helper.make_node("ReduceMean", ["d"], ["grad"], keepdims=0),
    ...     helper.make_node("Mul", ["grad", "rate"], ["delta"]),
    ...     helper.make_node("Sub", ["c", "delta"], ["c.next"])]
    >>> graph = helper.make_graph(nodes, "step", [value("X", [None, 1]), value("label", [None]),
    ...     value("step", [], TensorProto.INT64), value("c", [])],
    ...     [value("loss", []), value("c.next", [])],
    ...     initializer=[numpy_helper.from_array(np.array(0.2, np.float32), "rate")])
    >>> step = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> step.ir_version = 10
    >>> predict = helper.make_model(helper.make_graph(
    ...     [helper.make_node("Identity", ["c"], ["variable"])], "p",
    ...     [value("X", [None, 1])], [value("variable", [])]),
    ...     opset_imports=[helper.make_opsetid("", 17)])
    >>> predict.ir_version = 10
    >>> write_initial_state(step, {"c": np.array(0, np.float32)})
    >>> write_record(step, StepRecord(["X", "label"], ["c"], ["c"], predict.SerializeToString(),
    ...                               parameters={"batch_size": 4, "max_iter": 30}))
    >>> X, y = np.zeros((8, 1), np.float32), np.full(8, 3.0, np.float32)
    >>> trainer = PortableTrainer(step, random_state=0).fit(X, y)
    >>> len(trainer.losses_), round(float(trainer.get_state()["c"]), 3)
    (60, 3.0)
    >>> trainer.partial_fit(X, y).n_iter_, trainer.t_
    (31, 62)
    >>> round(float(trainer.predict(X)), 3)
    3.0
    """

    def __init__(
        self,
        step,
        max_iter=None,
        batch_size=None,
        random_state=None,
        epoch_loop=False,
        providers=None,
    ):
        self.step = step
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.random_state = random_state
        self.epoch_loop = epoch_loop
        self.providers = providers
        self._runtime = None

    # -- parameters and runtime ---------------------------------------------------------------

    def _parameter(self, name, minimum):
        value = getattr(self, name)
        if value is None:
            value = self._runtime["step"].record.parameters.get(name)
        if value is None:
            raise ValueError(
                f"{name} is not given and the step model's record has none: pass "
                f"PortableTrainer(..., {name}=...)."
            )
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
        return int(value)

    def _seed(self):
        seed = self.random_state
        return self._runtime["step"].record.parameters.get("random_state") if seed is None else seed

    def _start(self):
        """Load the step model, create the session and the initial state (once)."""
        if self._runtime is not None:
            return
        step = load_step(self.step)
        if self.epoch_loop and step.record.draws:
            raise ValueError(
                "This step model draws random values every step (the masks of "
                f"{sorted({d['operator'] for d in step.record.draws})}), which one call per epoch "
                "cannot take: train it with epoch_loop=False, or export the step of an optimizer "
                "with random_state=None (onnxruntime then draws them, unseeded)."
            )
        providers = resolve_providers(self.providers)
        model = epoch_model(step.model) if self.epoch_loop else step.model
        session = make_session(model, providers)
        self._runtime = {
            "step": step,
            "session": session,
            "providers": providers,
            "device": device_of(providers),
        }
        self._reset()

    def _reset(self):
        """The state at export, a new generator, the counts of the exporting fit."""
        step, runtime = self._runtime["step"], self._runtime
        runtime["step_count"], runtime["step_value"] = _scalar(1)
        if self.epoch_loop:
            outputs = {LOSSES_OUTPUT: "cpu"}
        else:
            runtime["loss"], loss_value = _scalar(0.0, np.float32)
            outputs = {LOSS_OUTPUT: loss_value}
        runtime["state"] = _State(
            runtime["session"], step, step.initial, runtime["device"], outputs
        )
        for binding in runtime["state"].bindings:
            binding.bind_ortvalue_input(STEP_INPUT, runtime["step_value"])
        runtime["rng"] = random_state(self._seed())
        runtime["draws"] = [RandomDraw.from_record(fields) for fields in step.record.draws]
        runtime["draws_rng"] = self._draws_generator(step.record.parameters)
        done = step.record.parameters
        # a step exported by a fitted optimizer continues its count and its row orders
        runtime["orders_behind"] = done.get("epochs_done") or 0
        runtime["prediction"] = None
        self.losses_, self.t_ = [], done.get("steps_done") or 0
        self.n_iter_ = runtime["orders_behind"]

    def _draws_generator(self, parameters):
        """The generator of the step's random draws: the exporting fit's, where it stood, unless
        another seed is given; a new unseeded one without any seed."""
        if not self._runtime["draws"]:
            return None
        generator = draws_generator(self._seed()) or np.random.default_rng()
        if self.random_state is None and parameters.get("draws_state") is not None:
            generator.bit_generator.state = parameters["draws_state"]
        return generator

    # -- training ----------------------------------------------------------------------------

    def fit(self, X, y, sample_weight=None):
        """Train ``max_iter`` epochs from the exported state.

        Parameters
        ----------
        X : array-like
            Features, one row per sample (``None`` when the step takes none).
        y : array-like
            Labels.
        sample_weight : array-like or None
            One weight per sample, for a step exported with sample weights.

        Returns
        -------
        self
        """
        self._start()
        self._reset()
        epochs = self._parameter("max_iter", 0)
        data = self._data(X, y, sample_weight)
        for _ in range(epochs):
            self._train_epoch(data)
        return self

    def partial_fit(self, X, y, sample_weight=None):
        """Train one more epoch, from the current state.

        Examples
        --------
        See :class:`PortableTrainer`.
        """
        self._start()
        self._train_epoch(self._data(X, y, sample_weight))
        return self

    def _data(self, X, y, sample_weight):
        step = self._runtime["step"]
        class_labels = bool(step.record.parameters.get("class_labels", False))
        arrays = check_batch_arrays(step.batch, X, y, sample_weight, class_labels)
        return _EpochData(arrays, self._parameter("batch_size", 1), not self.epoch_loop)

    def _train_epoch(self, data):
        runtime = self._runtime
        for _ in range(runtime["orders_behind"]):  # the orders the exporting fit drew
            epoch_order(runtime["rng"], data.n_rows)
        runtime["orders_behind"] = 0
        order = epoch_order(runtime["rng"], data.n_rows)
        runtime["step_count"][()] = self.t_ + 1
        runtime["prediction"] = None
        train = self._loop_epoch if self.epoch_loop else self._stepped_epoch
        losses, kept = train(data, order)
        self.losses_.extend(losses[:kept].tolist())
        self.t_ += kept
        bad = np.flatnonzero(~np.isfinite(losses))
        if bad.size:
            raise NonFiniteLossError(
                f"The loss of step {self.t_ - kept + 1 + bad[0]} (epoch {self.n_iter_ + 1}, batch "
                f"{bad[0] + 1} of {len(data.bounds)}) is {losses[bad[0]]}: the training "
                "diverged. Lower the learning rate when exporting the step, or scale the features."
            )
        self.n_iter_ += 1

    def _stepped_epoch(self, data, order):
        """One call per step: the losses, and how many steps are kept (all, or those before the
        first non-finite loss)."""
        runtime, state = self._runtime, self._runtime["state"]
        names = runtime["step"].record.batch_inputs
        session, loss, losses = runtime["session"], runtime["loss"], []
        data.shuffle(order)
        for values, (start, end) in zip(data.batches, data.bounds):
            binding = state.binding()
            for name, value in zip(names, values):
                binding.bind_ortvalue_input(name, value)
            drawn = [  # kept until the run: the runtime reads the arrays themselves
                onnxruntime.OrtValue.ortvalue_from_numpy(
                    draw.sample(runtime["draws_rng"], shape_for_rows(dims, end - start))
                )
                for draw, dims in runtime["draws"]
            ]
            for (draw, _), value in zip(runtime["draws"], drawn):
                binding.bind_ortvalue_input(draw.name, value)
            session.run_with_iobinding(binding)
            losses.append(float(loss))
            if not np.isfinite(losses[-1]):
                return np.array(losses), len(losses) - 1
            state.advance()
            runtime["step_count"][()] += 1
        return np.array(losses), len(losses)

    def _loop_epoch(self, data, order):
        """One call for the epoch: the losses, and how many steps are kept (all or none)."""
        runtime, state = self._runtime, self._runtime["state"]
        binding = state.binding()
        for name, value in zip(runtime["step"].record.batch_inputs, data.whole):
            binding.bind_ortvalue_input(name, value)
        binding.bind_ortvalue_input(ORDER_INPUT, onnxruntime.OrtValue.ortvalue_from_numpy(order))
        binding.bind_ortvalue_input(BATCH_SIZE_INPUT, data.batch_size)
        runtime["session"].run_with_iobinding(binding)
        losses = binding.get_outputs()[-1].numpy().astype(np.float64)
        if not np.isfinite(losses).all():
            return losses, 0
        state.advance()
        return losses, len(losses)

    # -- results -----------------------------------------------------------------------------

    def get_state(self):
        """The current state (weights, statistics, optimizer buffers) as numpy arrays.

        Returns
        -------
        dict
            State name to a copy of its value.

        Examples
        --------
        See :class:`PortableTrainer`.
        """
        self._start()
        return self._runtime["state"].values()

    def inference_model(self):
        """The inference model with the current weights and statistics.

        Returns
        -------
        onnx.ModelProto
        """
        self._start()
        return inference_model(self._runtime["step"].record, self.get_state())

    def predict(self, X):
        """The inference model's prediction for ``X``, with the current state.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        numpy.ndarray
        """
        self._start()
        runtime = self._runtime
        if runtime["prediction"] is None:
            model = self.inference_model()
            session = make_session(model, runtime["providers"])
            runtime["prediction"] = (session, TensorSpec.of(model.graph.input[0]))
        session, spec = runtime["prediction"]
        output = runtime["step"].record.prediction_output
        return session.run([output], {spec.name: check_array(spec, X, "X")})[0]

    def save_inference_model(self, path):
        """Write the inference model with the current state to ``path``, atomically.

        Parameters
        ----------
        path : str or path-like
        """
        write_atomic(path, self.inference_model().SerializeToString())
