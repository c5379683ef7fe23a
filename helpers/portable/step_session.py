"""A step model in an onnxruntime session, its state in ``OrtValue`` objects: :class:`StepSession`.

The state lives in two sets of ``OrtValue`` objects, bound once to two I/O bindings, one the inputs
of a step and the other its outputs, swapped after each step. A step binds only its batch and reads
only its loss; nothing else is copied. With ``epoch_loop=True`` one call runs a whole epoch
(:mod:`helpers.portable.epoch_loop`). The batches' rows come from the caller (an order per epoch),
and so do the generator of the step's random draws (:mod:`helpers.portable.random_draws`) and the
count of each epoch's first step: a session holds the state and nothing that decides the training,
so that :class:`~helpers.portable.trainer.PortableTrainer` can make another one (other providers,
threads or ``epoch_loop``) on the current state and carry on.
"""

import copy
import dataclasses

import numpy as np
import onnxruntime

from .batch_order import batch_bounds
from .epoch_loop import epoch_model, loop_names
from .lean_step import lean_step
from .random_draws import RandomDraw, shape_for_rows
from .runtime_support import check_threads, device_of, make_session, resolve_providers
from .step_format import LOSS_OUTPUT, STEP_INPUT


def _scalar(value, dtype=np.int64):
    """A 0-d array and an OrtValue sharing its memory (the CPU reads it at each run)."""
    array = np.array(value, dtype=dtype)
    return array, onnxruntime.OrtValue.ortvalue_from_numpy(array)


class _StateBindings:
    """The state in two sets of OrtValues, and for each session two I/O bindings that alternate
    between them (the sessions of one training share its state)."""

    def __init__(self, step, values, device, extra_inputs, extra_outputs):
        self.step, self.names = step, list(step.record.state)
        self.extra_inputs, self.extra_outputs = extra_inputs, extra_outputs
        self.sets = [
            {
                n: onnxruntime.OrtValue.ortvalue_from_numpy(np.array(values[n]), device)
                for n in self.names
            },
            {
                n: onnxruntime.OrtValue.ortvalue_from_shape_and_type(
                    list(np.shape(values[n])), np.asarray(values[n]).dtype, device, 0
                )
                for n in self.names
            },
        ]
        self.bindings = {}
        self.current = 0

    def binding(self, session):
        """The binding of ``session`` whose inputs are the current state."""
        if id(session) not in self.bindings:
            self.bindings[id(session)] = [session.io_binding(), session.io_binding()]
            for k, binding in enumerate(self.bindings[id(session)]):
                for name, next_name in zip(self.names, self.step.next_names):
                    binding.bind_ortvalue_input(name, self.sets[k][name])
                    binding.bind_ortvalue_output(next_name, self.sets[1 - k][name])
                for name, value in self.extra_inputs.items():
                    binding.bind_ortvalue_input(name, value)
                for name, value in self.extra_outputs(session).items():
                    if isinstance(value, onnxruntime.OrtValue):
                        binding.bind_ortvalue_output(name, value)
                    else:
                        binding.bind_output(name, value)
        return self.bindings[id(session)][self.current]

    def advance(self):
        """The outputs of the last run become the current state."""
        self.current = 1 - self.current

    def values(self):
        """The current state as numpy arrays (copies)."""
        return {n: v.numpy().copy() for n, v in self.sets[self.current].items()}


class _EpochArrays:
    """The arrays of a fit as the runtime reads them, made once per call of the trainer.

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


@dataclasses.dataclass(eq=False)
class SessionSettings:
    """How the sessions of a training are made: what a new session is needed for.

    Parameters
    ----------
    epoch_loop : bool
        One call per epoch (the epoch model) instead of one per step.
    providers : None, str or list
        Execution providers (:func:`~helpers.portable.runtime_support.resolve_providers`).
    n_threads : int or None
        Threads of an operator (``intra_op_num_threads``); None: the options' or the default.
    session_options : onnxruntime.SessionOptions or None
        Options of the sessions (see :func:`~helpers.portable.runtime_support.make_session`).
    lean : bool
        Run the step specialised to each batch size (:func:`~helpers.portable.lean_step.
        lean_step`): fewer nodes, the same results bit for bit.

    Two settings are equal when their values are, the same ``session_options`` object (changes
    made to it in place are not seen). ``providers`` is copied: a list changed afterwards is
    another setting.

    Examples
    --------
    >>> SessionSettings(providers=["CPUExecutionProvider"]) == SessionSettings(
    ...     providers=["CPUExecutionProvider"])
    True
    >>> SessionSettings(n_threads=2) == SessionSettings(), SessionSettings().resolved_providers
    (False, ['CPUExecutionProvider'])
    """

    epoch_loop: bool = False
    providers: object = None
    n_threads: int = None
    session_options: object = None
    lean: bool = True

    def __post_init__(self):
        check_threads(self.n_threads, self.session_options)
        self.epoch_loop, self.providers = bool(self.epoch_loop), copy.deepcopy(self.providers)
        self.lean = bool(self.lean)

    def __eq__(self, other):
        return (
            isinstance(other, SessionSettings)
            and (self.epoch_loop, self.providers, self.n_threads, self.lean)
            == (other.epoch_loop, other.providers, other.n_threads, other.lean)
            and self.session_options is other.session_options
        )

    @property
    def resolved_providers(self):
        """The providers a session is given, each one checked."""
        return resolve_providers(self.providers)

    def session(self, model):
        """A session of ``model`` made with these settings (``epoch_loop`` aside).

        Examples
        --------
        See :class:`StepSession`.
        """
        return make_session(
            model,
            self.resolved_providers,
            n_threads=self.n_threads,
            session_options=self.session_options,
        )


class StepSession:
    """A session of a step model (or of its epoch model) whose state stays in the runtime.

    Parameters
    ----------
    step : helpers.portable.step_model.StepModel
        The loaded step model (:func:`~helpers.portable.step_model.load_step`).
    values : dict
        The state to start from: name to numpy array (``step.initial`` for a new training).
    settings : SessionSettings
        How the session is made: one call per epoch or per step, providers, threads, options.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> from helpers.portable.step_format import StepRecord, write_initial_state, write_record
    >>> from helpers.portable.step_model import load_step
    >>> def value(name, shape, elem=TensorProto.FLOAT):
    ...     return helper.make_tensor_value_info(name, elem, shape)
    >>> nodes = [helper.make_node("ReduceSum", ["X"], ["loss"], keepdims=0),  # loss: sum of X
    ...          helper.make_node("Add", ["total", "loss"], ["total.next"])]  # state: running sum
    >>> graph = helper.make_graph(
    ...     nodes, "step", [value("X", [None]), value("step", [], TensorProto.INT64),
    ...     value("total", [])], [value("loss", []), value("total.next", [])])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    >>> model.ir_version = 10
    >>> write_initial_state(model, {"total": np.array(0, np.float32)})
    >>> write_record(model, StepRecord(["X"], ["total"], [], b""))
    >>> step = load_step(model)
    >>> session = StepSession(step, step.initial, SessionSettings())
    >>> data = session.epoch_data([np.arange(5, dtype=np.float32)], batch_size=2)
    >>> losses, kept = session.run_epoch(data, np.array([4, 3, 2, 1, 0]), first_step=1)
    >>> losses.tolist(), kept, float(session.values()["total"])
    ([7.0, 3.0, 0.0], 3, 10.0)
    >>> looped = StepSession(step, session.values(), SessionSettings(epoch_loop=True))
    >>> data = looped.epoch_data([np.arange(5, dtype=np.float32)], batch_size=2)
    >>> looped.run_epoch(data, np.arange(5), first_step=4)[0].tolist()
    [1.0, 5.0, 4.0]
    >>> float(looped.values()["total"])
    20.0
    """

    def __init__(self, step, values, settings):
        epoch_loop = settings.epoch_loop
        if epoch_loop and step.record.draws:
            raise ValueError(
                "This step model draws random values every step (the masks of "
                f"{sorted({d['operator'] for d in step.record.draws})}), which one call per epoch "
                "cannot take: train it with epoch_loop=False, or export the step of an optimizer "
                "with random_state=None (onnxruntime then draws them, unseeded)."
            )
        self.step, self.settings, self.epoch_loop = step, settings, epoch_loop
        self.loop = loop_names(step.model) if epoch_loop else None
        self.device = device_of(settings.resolved_providers)
        self._sessions = {}
        self._run_options = None  # the user's options log as they say; ours raise, not log
        if settings.session_options is None:
            self._run_options = onnxruntime.RunOptions()
            self._run_options.log_severity_level = 4
            # onnxruntime 1.31's Python run looks this entry up at every call; a missing one
            # costs a C++ exception, about 50 us a step. 0 is the value it stands for then.
            self._run_options.add_run_config_entry("gpu_graph_id", "0")
        self.draws = [RandomDraw.from_record(fields) for fields in step.record.draws]
        self._step_count, self._step_value = _scalar(1)
        self._loss, self._loss_value = _scalar(0.0, np.float32)
        self.set_values(values)

    def session(self, rows, loop=False):
        """The session that runs batches of ``rows`` rows: the step's, or its epoch model's
        (``loop``); with ``settings.lean``, of the step specialised to that many rows
        (:func:`~helpers.portable.lean_step.lean_step`), or of the step as it is where the
        runtime refuses the specialised one (its error then comes from the step's own run).
        Made on first use.

        Examples
        --------
        See :class:`StepSession`.
        """
        key = (loop, rows if self.settings.lean else None)
        if key not in self._sessions:
            session = None
            if self.settings.lean:
                try:
                    session = self._session_of(lean_step(self.step.model, rows), loop)
                except Exception:  # noqa: BLE001 -- the step as it is says what is wrong
                    session = None
            self._sessions[key] = session or self._session_of(self.step.model, loop)
        return self._sessions[key]

    def _session_of(self, model, loop):
        return self.settings.session(epoch_model(model) if loop else model)

    def _outputs(self, session):
        """The outputs a run of ``session`` writes besides the state."""
        if any(o.name == self.loop_losses for o in session.get_outputs()):
            return {self.loop_losses: "cpu"}
        return {LOSS_OUTPUT: self._loss_value}

    @property
    def loop_losses(self):
        """The output of the epoch model's losses (None without the epoch loop)."""
        return self.loop.losses if self.loop else None

    def set_values(self, values):
        """Start from the state ``values`` (name to numpy array), on the same session.

        Examples
        --------
        See :class:`StepSession`.
        """
        self._state = _StateBindings(
            self.step, values, self.device, {STEP_INPUT: self._step_value}, self._outputs
        )

    def _binding(self, rows, loop=False):
        """The session for ``rows`` and its binding whose inputs are the current state."""
        session = self.session(rows, loop)
        return session, self._state.binding(session)

    def values(self):
        """The current state: name to a copy of its value (numpy).

        Examples
        --------
        See :class:`StepSession`.
        """
        return self._state.values()

    def epoch_data(self, arrays, batch_size):
        """The checked arrays of a fit (one per batch input), as this session reads them.

        Examples
        --------
        See :class:`StepSession`.
        """
        return _EpochArrays(arrays, batch_size, stepped=not self.epoch_loop)

    def run_epoch(self, data, order, first_step, draws_rng=None):
        """Train one epoch on the rows of ``data`` in ``order``.

        Parameters
        ----------
        data : object
            What :meth:`epoch_data` returns.
        order : numpy.ndarray of int64
            The epoch's permutation of the rows.
        first_step : int
            The count of the epoch's first step (the ``step`` input).
        draws_rng : numpy.random.Generator or None
            The generator of the step's random draws, for a step that has some.

        Returns
        -------
        losses : numpy.ndarray of float64
            The loss of each step run (up to the first that is not finite).
        kept : int
            The steps whose update is kept: all, or those before the first non-finite loss (one
            call per step), or none of the epoch's full batches (the epoch loop). The state is
            the one after them.

        Examples
        --------
        See :class:`StepSession`.
        """
        self._step_count[()] = first_step
        if self.epoch_loop:
            return self._loop_epoch(data, order)
        data.shuffle(order)
        return self._stepped(zip(data.batches, data.bounds), draws_rng)

    def _stepped(self, batches, draws_rng):
        """Run one step per batch of ``batches`` (its OrtValues and its bounds)."""
        state, names = self._state, self.step.record.batch_inputs
        losses = []
        for values, (start, end) in batches:
            session, binding = self._binding(end - start)
            for name, value in zip(names, values):
                binding.bind_ortvalue_input(name, value)
            drawn = [  # kept until the run: the runtime reads the arrays themselves
                onnxruntime.OrtValue.ortvalue_from_numpy(
                    draw.sample(draws_rng, shape_for_rows(dims, end - start))
                )
                for draw, dims in self.draws
            ]
            for (draw, _), value in zip(self.draws, drawn):
                binding.bind_ortvalue_input(draw.name, value)
            session.run_with_iobinding(binding, self._run_options)
            losses.append(float(self._loss))
            if not np.isfinite(losses[-1]):
                return np.array(losses), len(losses) - 1
            state.advance()
            self._step_count[()] += 1
        return np.array(losses), len(losses)

    def _loop_epoch(self, data, order):
        """The whole batches in one call of the epoch model, then the last smaller one, a step
        of its own."""
        size = int(data.batch_size.numpy())
        full = len(order) - len(order) % size
        losses = np.empty(0)
        if full:
            session, binding = self._binding(size, loop=True)
            for name, value in zip(self.step.record.batch_inputs, data.whole):
                binding.bind_ortvalue_input(name, value)
            order_value = onnxruntime.OrtValue.ortvalue_from_numpy(order[:full])
            binding.bind_ortvalue_input(self.loop.order, order_value)
            binding.bind_ortvalue_input(self.loop.batch_size, data.batch_size)
            session.run_with_iobinding(binding, self._run_options)
            losses = binding.get_outputs()[-1].numpy().astype(np.float64)
            if not np.isfinite(losses).all():
                return losses, 0
            self._state.advance()
            self._step_count[()] += len(losses)
        if full == len(order):
            return losses, len(losses)
        rest = order[full:]
        last = [onnxruntime.OrtValue.ortvalue_from_numpy(a[rest]) for a in data.arrays]
        more, kept = self._stepped([(last, (0, len(rest)))], None)
        return np.concatenate([losses, more]), len(losses) + kept
