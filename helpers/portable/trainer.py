"""Train a step model with any onnxruntime: :class:`PortableTrainer`.

The trainer decides what is trained: the epochs, the batches (those the optimizers draw from the
same seed, :mod:`helpers.portable.batch_order`), the masks of a step exported with random draws
(:mod:`helpers.portable.random_draws`, drawn before each step), the step count. A
:class:`~helpers.portable.step_session.StepSession` runs it, the state kept in the runtime: a
new one when providers, threads or ``epoch_loop`` change, on the current state.
"""

import numbers

import numpy as np

from .atomic_files import write_atomic
from .batch_data import batch_roles, check_array, check_batch_arrays
from .batch_order import draws_generator, epoch_order, random_state
from .divergence import TrainingDivergedError
from .step_format import inference_model, step_with_state
from .step_model import TensorSpec, load_step, same_step, step_source
from .step_session import SessionSettings, StepSession


class PortableTrainer:
    """Train a step model with the installed onnxruntime, without any training package.

    Parameters
    ----------
    step : str, path-like or onnx.ModelProto
        A step model (:mod:`helpers.portable.step_format`), as ``export_training_step`` of the
        optimizers or :meth:`save_step` writes it.
    max_iter : int or None
        Epochs of :meth:`fit`; None: the exporting optimizer's (the record's parameters).
    batch_size : int or None
        Rows of a batch (the last batch of an epoch is smaller); None: the record's.
    random_state : None, int or numpy.random.RandomState
        Seed of the epochs' row orders and of the step's random draws (its ``Dropout`` masks),
        drawn as the optimizers draw them; None: the record's (numpy's global generator when
        the record has none either), and a fitted optimizer's step continues its draws.
    epoch_loop : bool
        Run the whole batches of each epoch as one call of an ONNX ``Scan`` instead of one call
        per step (same losses, same state; the last, smaller batch is a step of its own).
    providers : None, str or list
        onnxruntime execution providers (``"CUDAExecutionProvider"``...); None: the CPU.
    n_threads : int or None
        Threads of an operator (onnxruntime's ``intra_op_num_threads``); None: those of
        ``session_options``, or onnxruntime's default (one per core).
    session_options : onnxruntime.SessionOptions or None
        Options of the sessions the trainer makes, used as given but for the thread count when
        ``n_threads`` is given (the object itself is left as it is); None: onnxruntime's,
        logging errors only.
    lean : bool
        Run the step specialised to the batch size of the fit, and to its last smaller batch
        (:func:`~helpers.portable.lean_step.lean_step`: shapes and constants folded, fewer
        nodes), with the same results bit for bit; False runs the step as it is.

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
    A NaN or infinite loss raises :class:`~helpers.portable.divergence.TrainingDivergedError`;
    the trainer then keeps the state before the failing step (``epoch_loop=False``) or before the
    failing epoch (``True``).

    Parameters changed after a fit take effect (scikit-learn's ``set_params`` then ``fit``):
    ``fit`` starts over with them, the step loaded again when ``step`` is another object or path
    or its file changed; ``partial_fit`` continues the current training with other providers,
    threads or ``epoch_loop``, and refuses another ``step``. Edits made in place to a model or to
    ``session_options`` are not seen.

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

    Settings changed between calls take effect; a saved step resumes the training:

    >>> trainer.epoch_loop, trainer.n_threads = True, 1
    >>> trainer.partial_fit(X, y).t_
    64
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "step.onnx"
    >>> trainer.save_step(path)
    >>> resumed = PortableTrainer(path, max_iter=1).fit(X, y)
    >>> resumed.t_, resumed.n_iter_
    (66, 33)
    """

    def __init__(
        self,
        step,
        max_iter=None,
        batch_size=None,
        random_state=None,
        epoch_loop=False,
        providers=None,
        n_threads=None,
        session_options=None,
        lean=True,
    ):
        self.step = step
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.random_state = random_state
        self.epoch_loop = epoch_loop
        self.providers = providers
        self.n_threads = n_threads
        self.session_options = session_options
        self.lean = lean
        self._source = self._session = self._prediction = None

    # -- parameters, session and counts ---------------------------------------------------------

    def _parameter(self, name, minimum):
        return self._session.step.setting(name, getattr(self, name), minimum)

    def _settings(self):
        return SessionSettings(
            self.epoch_loop, self.providers, self.n_threads, self.session_options, self.lean
        )

    def _make_session(self, step, values, source):
        """A session of ``step`` from ``values``, made as the parameters say now."""
        self._session = StepSession(step, values, self._settings())
        self._source, self._prediction = source, None

    def _start(self, fresh=True):
        """Make what the parameters shape. ``fresh``: a new training (the step loaded again
        when it changed, the exported state and counts); else the current one, on a new session
        when providers, threads or ``epoch_loop`` changed."""
        source = step_source(self.step)
        if not fresh:
            if not same_step(source, self._source, content=False):
                raise ValueError(
                    "step changed since the last fit: partial_fit continues the training of the "
                    "step it started with. Call fit to train the new step from its own state."
                )
            if self._settings() != self._session.settings:
                self._make_session(self._session.step, self._session.values(), self._source)
            return
        if self._session is None or not same_step(source, self._source):
            step = load_step(self.step)
            self._make_session(step, step.initial, source)
        elif self._settings() != self._session.settings:
            self._make_session(self._session.step, self._session.step.initial, source)
        else:
            self._session.set_values(self._session.step.initial)
        self._restart()

    def _restart(self):
        """The exporting fit's counts, and new generators."""
        parameters = self._session.step.record.parameters
        seed = parameters.get("random_state") if self.random_state is None else self.random_state
        self._rng = random_state(seed)
        self._draws_rng = None
        if self._session.draws:  # the exporting fit's generator, where it stood, unless reseeded
            self._draws_rng = draws_generator(seed) or np.random.default_rng()
            if self.random_state is None and parameters.get("draws_state") is not None:
                self._draws_rng.bit_generator.state = parameters["draws_state"]
        # a step exported by a fitted optimizer continues its count and its row orders
        self._orders_behind = parameters.get("epochs_done") or 0
        self._prediction = None
        self.losses_, self.t_ = [], parameters.get("steps_done") or 0
        self.n_iter_ = self._orders_behind

    # -- training ----------------------------------------------------------------------------

    def fit(self, X, y, sample_weight=None):
        """Train ``max_iter`` epochs from the exported state, with the current parameters.

        Parameters
        ----------
        X : array-like or None
            Features, one row per sample; ``None`` for a step that takes none (its inference
            model has no input).
        y : array-like
            Labels.
        sample_weight : array-like or None
            One weight per sample, for a step exported with sample weights.

        Returns
        -------
        self

        Examples
        --------
        See :class:`PortableTrainer`.
        """
        self._start()
        epochs = self._parameter("max_iter", 0)
        data = self._data(X, y, sample_weight)
        for _ in range(epochs):
            self._train_epoch(data)
        return self

    def partial_fit(self, X, y, sample_weight=None):
        """Train one more epoch, from the current state.

        Providers, threads and ``epoch_loop`` changed since the last call apply from this epoch
        on; another ``step`` is refused (``fit`` trains it).

        Parameters
        ----------
        X : array-like or None
        y : array-like
        sample_weight : array-like or None
            As :meth:`fit` takes them.

        Returns
        -------
        self

        Examples
        --------
        See :class:`PortableTrainer`.
        """
        self._start(fresh=self._session is None)
        self._train_epoch(self._data(X, y, sample_weight))
        return self

    def _data(self, X, y, sample_weight):
        step = self._session.step
        class_labels = bool(step.record.parameters.get("class_labels", False))
        roles = batch_roles(step.record.batch_inputs, step.record.parameters)
        arrays = check_batch_arrays(step.batch, X, y, sample_weight, class_labels, roles)
        return self._session.epoch_data(arrays, self._parameter("batch_size", 1))

    def _train_epoch(self, data):
        for _ in range(self._orders_behind):  # the orders the exporting fit drew
            epoch_order(self._rng, data.n_rows)
        self._orders_behind = 0
        order = epoch_order(self._rng, data.n_rows)
        self._prediction = None
        losses, kept = self._session.run_epoch(data, order, self.t_ + 1, self._draws_rng)
        self.losses_.extend(losses[:kept].tolist())
        self.t_ += kept
        bad = np.flatnonzero(~np.isfinite(losses))
        if bad.size:
            raise TrainingDivergedError(
                f"The loss of step {self.t_ - kept + 1 + bad[0]} (epoch {self.n_iter_ + 1}, batch "
                f"{bad[0] + 1} of {len(data.bounds)}) is {losses[bad[0]]}: the training "
                "diverged. Lower the learning rate when exporting the step, or scale the features."
            )
        self.n_iter_ += 1

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
        if self._session is None:
            self._start()
        return self._session.values()

    def inference_model(self):
        """The inference model with the current weights and statistics.

        Returns
        -------
        onnx.ModelProto

        Examples
        --------
        See :class:`PortableTrainer`.
        """
        values = self.get_state()
        return inference_model(self._session.step.record, values)

    def predict(self, X):
        """The inference model's prediction for ``X``, with the current state.

        Parameters
        ----------
        X : array-like or None
            None for an inference model without inputs.

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        See :class:`PortableTrainer`.
        """
        if self._prediction is None:
            model = self.inference_model()
            session = self._session.settings.session(model)
            specs = [TensorSpec.of(i) for i in model.graph.input]
            self._prediction = (session, specs[0] if specs else None)
        session, spec = self._prediction
        if (spec is None) != (X is None):
            wanted = "no input: call predict(None)" if spec is None else f"{spec.name!r}: give X"
            raise ValueError(f"The inference model takes {wanted}.")
        feeds = {} if spec is None else {spec.name: check_array(spec, X, "X")}
        return session.run([self._session.step.record.prediction_output], feeds)[0]

    def save_inference_model(self, path):
        """Write the inference model with the current state to ``path``, atomically.

        Parameters
        ----------
        path : str or path-like

        Examples
        --------
        See :meth:`save_step`: this one writes the model to deploy.
        """
        write_atomic(path, self.inference_model().SerializeToString())

    def trained_step(self):
        """The step model that resumes this training: :meth:`save_step` writes it.

        Returns
        -------
        onnx.ModelProto

        Examples
        --------
        See :class:`PortableTrainer`.
        """
        values = self.get_state()
        parameters = {"steps_done": int(self.t_), "epochs_done": int(self.n_iter_)}
        for name, minimum in (("max_iter", 0), ("batch_size", 1)):
            if getattr(self, name) is not None:
                parameters[name] = self._parameter(name, minimum)
        seed = self.random_state
        if seed is not None:
            parameters["random_state"] = int(seed) if isinstance(seed, numbers.Integral) else None
        if self._draws_rng is not None:
            parameters["draws_state"] = self._draws_rng.bit_generator.state
        return step_with_state(self._session.step.model, values, parameters)

    def save_step(self, path):
        """Write a step model that resumes this training to ``path``, atomically.

        Its initial state is the current state; its record counts the steps and epochs done
        (``steps_done``, ``epochs_done``), keeps where the generator of the random draws stands
        (``draws_state``), and holds this trainer's ``max_iter``, ``batch_size`` and int
        ``random_state`` when given. ``PortableTrainer(path).fit`` then trains ``max_iter`` more
        epochs as ``partial_fit`` would have, bit for bit, on the same rows (a seed given as a
        ``RandomState`` cannot be recorded: those orders are not resumed).

        Parameters
        ----------
        path : str or path-like

        Examples
        --------
        See :class:`PortableTrainer`.
        """
        write_atomic(path, self.trained_step().SerializeToString())
