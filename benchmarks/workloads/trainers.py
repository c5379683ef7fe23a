"""One training step per framework, for the benchmarks.

:class:`TorchTrainer`, :class:`OrtWholeTrainer` and
:class:`OrtForwardBackwardTrainer` run one training step (forward, loss,
backward, update) of torch, of the whole-training API and of the
forward/backward API, all minimizing ``mean((prediction - y) ** 2)`` from
the same weights (:mod:`benchmarks.workloads.models`). Each trainer has
``prepare(X, y)``, ``step(*prepared)`` (the loss before the update) and
``layers()`` (the current weights as ``(W, b)`` pairs, a copy);
:func:`run_batches` and :func:`run_epoch` drive them, and the scaling
benchmark's references (:mod:`benchmarks.workloads.matmul_references`).
"""

import time

import numpy as np

from benchmarks.workloads.models import mlp_layers, torch_layers, torch_mlp


class TorchTrainer:
    """One training step of torch: forward, ``MSELoss``, backward, optimizer step.

    Parameters
    ----------
    onx : onnx.ModelProto
        The network to start from (see :func:`torch_mlp`).
    optimizer : {'sgd', 'adamw'}
        ``torch.optim.SGD`` without momentum, or ``torch.optim.AdamW``.
    lr : float
    betas, eps, weight_decay
        AdamW's settings.
    wrap : {None, 'compile', 'ort'}
        Run the network through ``torch.compile`` (which may raise when no
        compiler works on the machine), or through onnxruntime as a
        :class:`helpers.OrtTorchModule` (its forward and backward passes;
        the loss, autograd and the optimizer stay torch's).
    n_threads : int, optional
        Threads of onnxruntime's sessions, with ``wrap='ort'``.
    backend : {'auto', 'onnxruntime-training', 'onnx'}
        Who computes the gradients with ``wrap='ort'`` (:mod:`helpers.core.machine.backends`).

    Attributes
    ----------
    setup_time_s : float
        Seconds spent wrapping the model (compilation happens at the first
        steps and is measured by the caller).
    """

    def __init__(
        self,
        onx,
        optimizer="sgd",
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.0,
        wrap=None,
        n_threads=None,
        backend="auto",
    ):
        import torch  # noqa: PLC0415

        start = time.perf_counter()
        self.torch = torch
        self.model = torch_mlp(onx)
        self.forward = self.model
        if wrap == "compile":
            self.forward = torch.compile(self.model)
        elif wrap == "ort":
            from helpers import OrtTorchModule  # noqa: PLC0415

            n_features = self.model[0].in_features
            self.forward = OrtTorchModule(
                self.model, torch.zeros(2, n_features), n_threads=n_threads, backend=backend
            )
        elif wrap is not None:
            raise ValueError(f"Unknown wrap {wrap!r}.")
        if optimizer == "sgd":
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.0)
        elif optimizer == "adamw":
            self.optimizer = torch.optim.AdamW(
                self.model.parameters(),
                lr=lr,
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
            )
        else:
            raise ValueError(f"Unknown optimizer {optimizer!r}: 'sgd' or 'adamw'.")
        self.loss_fn = torch.nn.MSELoss()
        self.setup_time_s = time.perf_counter() - start

    def prepare(self, X, y):
        """The batch as the step expects it: tensors sharing the numpy memory."""
        return self.torch.from_numpy(X), self.torch.from_numpy(y.reshape(-1, 1))

    def step(self, X, y):
        """One training step on a prepared batch; returns the loss before the update."""
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.forward(X), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def layers(self):
        """The current weights as ``(W, b)`` layers."""
        return torch_layers(self.model)

    def onnxruntime_passes(self, X):
        """With ``wrap='ort'``: a call that runs onnxruntime's forward and backward passes alone on
        batch ``X``.

        No torch: the inputs and weights are wrapped once, the output
        gradient is fixed. The difference with :meth:`step` is what torch
        adds around them (the loss, autograd, the optimizer, the crossings).
        """
        from helpers.forward_backward.torch_function import to_ortvalue  # noqa: PLC0415

        fn = self.forward.function("cpu")
        device = fn.parent.device
        tensors = [X, *(p.detach() for p in self.model.parameters())]
        values = [to_ortvalue(t, device) for t in tensors]
        grad = to_ortvalue(self.torch.ones(X.shape[0], 1), device)

        def passes():
            fn.forward(values, training=True)
            fn.backward([grad])

        return passes


class OrtWholeTrainer:
    """One training step of the whole-training API (``Module`` + ``Optimizer``).

    The same objects :class:`helpers.OrtGradientOptimizer` builds for a fit:
    the loss (``squared_error``) is added to the graph, the training
    artifacts are generated once, then each step runs the training model
    (forward and backward) and the optimizer model.

    Parameters
    ----------
    onx : onnx.ModelProto
        The network without loss.
    optimizer : {'sgd', 'adamw'}
        onnxruntime's SGD or AdamW optimizer model; the AdamW one is switched
        to torch's formula (``adam_mode=0``, see
        :func:`helpers.whole_training.artifacts.generate_training_artifacts`).
    lr : float
    betas, eps, weight_decay
        AdamW's settings.
    n_threads : int, optional
        Intra-op threads of the training session (the optimizer's ``n_threads``);
        None takes :func:`helpers.set_num_threads` or onnxruntime's default.
    backend : {'auto', 'onnxruntime-training', 'onnx'}
        The optimizer's (:mod:`helpers.core.machine.backends`): ``'onnx'`` runs the gradients
        written in standard ONNX and the update graphs in an ``InferenceSession``
        (:class:`helpers.whole_training.standard_session.StandardTrainingSession`).

    Attributes
    ----------
    setup_time_s : float
        Seconds spent generating the artifacts and building the sessions.
    backend : str
        The backend that trains: ``'onnxruntime-training'`` or ``'onnx'``.
    """

    def __init__(
        self,
        onx,
        optimizer="sgd",
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.0,
        n_threads=None,
        backend="auto",
    ):
        from helpers.core.machine.backends import resolve_backend  # noqa: PLC0415
        from helpers.core.machine.devices import resolve_device  # noqa: PLC0415
        from helpers.core.model_graphs.onnx_graph import get_train_initializer  # noqa: PLC0415
        from helpers.core.updates.update_rules import make_update_rule  # noqa: PLC0415
        from helpers.whole_training.loss_output import add_loss_output  # noqa: PLC0415

        if optimizer not in ("sgd", "adamw"):
            raise ValueError(f"Unknown optimizer {optimizer!r}: 'sgd' or 'adamw'.")
        start = time.perf_counter()
        self.backend = resolve_backend(backend)
        if self.backend == "onnx":
            from helpers.whole_training.standard_session import (  # noqa: PLC0415
                StandardTrainingSession as session,
            )
        else:
            from helpers.whole_training.session import (  # noqa: PLC0415
                WholeTrainingSession as session,
            )
        self.onx = onx
        self.lr = lr
        weights = get_train_initializer(onx)
        rule = make_update_rule(optimizer, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        self.runtime = session(
            add_loss_output(onx), weights, rule, resolve_device("cpu"), n_threads=n_threads
        )
        self.t = 0
        self.setup_time_s = time.perf_counter() - start

    def prepare(self, X, y):
        """The batch as the step expects it: a one-element tuple holding a batch of OrtValues."""
        from helpers.core.training.batches import Batch  # noqa: PLC0415

        return (
            Batch(0, len(X), [np.ascontiguousarray(X), np.ascontiguousarray(y.reshape(-1, 1))]),
        )

    def step(self, batch):
        """One training step; returns the loss before the update."""
        self.t += 1
        return float(self.runtime.train_step(batch.ortvalues(), self.lr, self.t).numpy())

    def layers(self):
        """The current weights as ``(W, b)`` layers."""
        return mlp_layers(self.onx, self.runtime.get_weights())


class OrtForwardBackwardTrainer:
    """One training step of the forward/backward API, with SGD or AdamW.

    The step of :class:`helpers.OrtGradientForwardBackwardOptimizer`, built
    from the same public pieces: the gradient graph of
    :class:`helpers.OrtGradientForwardBackward` (``TrainingAgent`` forward),
    the squared error and its gradient (:class:`helpers.SquareLearningLoss`,
    an ONNX graph), the backward pass, the update
    (:class:`helpers.core.updates.weight_updater.WeightUpdater`: torch's SGD or AdamW
    as an ONNX graph writing the weights in place).

    Parameters
    ----------
    onx : onnx.ModelProto
        The network without loss.
    lr : float
        Constant learning rate.
    n_threads : int, optional
        Intra-op threads of the model's session; None takes
        :func:`helpers.set_num_threads` or onnxruntime's default.
    optimizer : {'sgd', 'adamw'}
        The update rule, torch's formulas.
    betas, eps, weight_decay
        AdamW's settings.
    backend : {'auto', 'onnxruntime-training', 'onnx'}
        :class:`helpers.OrtGradientForwardBackward`'s: ``TrainingAgent``, or a forward and a
        backward graph in standard ONNX.

    Attributes
    ----------
    setup_time_s : float
        Seconds spent building the gradient graph and the sessions.
    backend : str
        The backend that trains: ``'onnxruntime-training'`` or ``'onnx'``.
    """

    def __init__(
        self,
        onx,
        lr=1e-3,
        n_threads=None,
        optimizer="sgd",
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.0,
        backend="auto",
    ):
        import onnxruntime  # noqa: PLC0415

        from helpers import OrtGradientForwardBackward, SquareLearningLoss  # noqa: PLC0415
        from helpers.core.model_graphs.onnx_graph import get_train_initializer  # noqa: PLC0415
        from helpers.core.updates.update_rules import make_update_rule  # noqa: PLC0415
        from helpers.core.updates.weight_updater import WeightUpdater  # noqa: PLC0415

        start = time.perf_counter()
        self.onx = onx
        self.gradient = OrtGradientForwardBackward(onx, n_threads=n_threads, backend=backend)
        self.backend = self.gradient.backend
        self.function = self.gradient.new_instance()
        self.device = self.gradient.device
        initial = get_train_initializer(onx)
        self.names = self.gradient.weights_to_train
        self.weights = [
            onnxruntime.OrtValue.ortvalue_from_numpy(initial[name].copy()) for name in self.names
        ]
        self.loss = SquareLearningLoss()
        self.lr = lr
        rule = make_update_rule(optimizer, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        self.updater = WeightUpdater(rule, [w.shape() for w in self.weights], self.device)
        self.t = 0
        self.setup_time_s = time.perf_counter() - start

    def prepare(self, X, y):
        """The batch as the step expects it: OrtValues of ``X`` and of ``y`` shaped (n, 1)."""
        import onnxruntime  # noqa: PLC0415

        arrays = [np.ascontiguousarray(X), np.ascontiguousarray(y.reshape(-1, 1))]
        return tuple(onnxruntime.OrtValue.ortvalue_from_numpy(a) for a in arrays)

    def step(self, X, y):
        """One training step; returns the loss before the update."""
        self.t += 1
        prediction = self.function.forward([X, *self.weights], training=True)[0]
        loss, gradient = self.loss.loss_gradient(self.device, y, prediction)
        gradients = self.function.backward([gradient])
        self.updater.update(self.weights, gradients, self.lr, self.t)
        return float(loss.numpy())

    def layers(self):
        """The current weights as ``(W, b)`` layers."""
        # copies: OrtValue.numpy() is a view of the buffer the next step updates
        return mlp_layers(self.onx, {n: w.numpy().copy() for n, w in zip(self.names, self.weights)})


def run_batches(trainer, prepared):
    """Run one step per prepared batch; return the losses."""
    return [trainer.step(*batch) for batch in prepared]


def run_epoch(trainer, X, y, batch_size, rng):
    """Run one epoch as a training loop does: shuffle, gather, one step per batch.

    The epoch draws a permutation from ``rng``, gathers the shuffled rows
    (numpy fancy indexing) and cuts consecutive batches: ``ceil(n /
    batch_size)`` steps, the last batch may be smaller. Every framework pays
    the same numpy work; only ``trainer.prepare`` and ``trainer.step``
    differ.

    Parameters
    ----------
    trainer : object
        With ``prepare(X, y)`` and ``step(*prepared)``.
    X, y : numpy.ndarray
        Training data, ``y`` 1D.
    batch_size : int
    rng : numpy.random.Generator
        Give each framework a generator with the same seed.

    Returns
    -------
    int
        The number of steps (updates) run.
    """
    n = X.shape[0]
    order = rng.permutation(n)
    Xs, ys = X[order], y[order]
    steps = 0
    for start in range(0, n, batch_size):
        trainer.step(
            *trainer.prepare(Xs[start : start + batch_size], ys[start : start + batch_size])
        )
        steps += 1
    return steps
