"""What one fresh process of ``peak_memory`` measures: memory, then the set-up of its fits.

:func:`measure_in_this_process` imports one framework (and only what it needs), prepares the
model, reads the process's peak resident memory (the imports), times the set-up of a first fit
and of a refit (:func:`setup_costs`), trains, and reads the peak again; it prints the figures as
JSON for :func:`benchmarks.studies.peak_memory.measure`, which starts one such process per
framework. Its torch process trains with a loop of its own (:func:`_torch_fit`), not
:func:`helpers.teaching.torch_reference.torch_fit`: importing :mod:`helpers` would load
onnxruntime into the very process whose memory it measures.
"""

import functools
import json
import time

from benchmarks.workloads import frameworks as fw  # the standard library only

#: Learning rate of every framework's plain SGD (memory and set-up are measured, not accuracy).
LEARNING_RATE = 1e-3


def _peak_mb():
    """Peak resident memory of this process, in MB (Linux ``VmHWM``).

    Not ``resource.getrusage(...).ru_maxrss``: Linux keeps it across ``exec``,
    so a child started from a large process (a Jupyter kernel) would report
    its parent's peak.
    """
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(
        "/proc/self/status has no VmHWM line: peak memory is measured on Linux only."
    )


def _module(model_function, n_features, hidden):
    """The torch module of ``model_function``, or the MLP ``n_features -> hidden -> 1``."""
    import importlib

    import torch

    if model_function:
        name, function = model_function.split(":")
        return getattr(importlib.import_module(name), function)()
    return torch.nn.Sequential(
        torch.nn.Linear(n_features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1)
    )


def _onnx(model_function, n_features, hidden, example):
    """The ONNX model the onnxruntime APIs train: the module exported (traced on ``example``), or
    the MLP built directly."""
    import warnings

    if not model_function:
        from helpers.teaching.model_factories import mlp_onnx

        return mlp_onnx(n_features, hidden=(hidden,))
    import torch

    from helpers import export_for_training

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export_for_training(
            _module(model_function, n_features, hidden), torch.from_numpy(example)
        )


def _torch_fit(model_function, n_features, hidden, batch_size):
    """``fit(X, y, epochs)``: a new module and SGD optimizer trained in torch; returns ``more``.

    ``more(X, y, epochs)`` trains the same module and optimizer further.
    """
    import torch

    # its first optimizer imports torch._dynamo (about 1 s): an import, not the set-up of a fit
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=LEARNING_RATE)

    def train(model, optimizer, X, y, epochs):
        Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
        for _ in range(epochs):
            for first in range(0, len(X), batch_size):
                rows = slice(first, first + batch_size)
                optimizer.zero_grad()
                ((model(Xt[rows]) - yt[rows]) ** 2).mean().backward()
                optimizer.step()

    def fit(X, y, epochs):
        model = _module(model_function, n_features, hidden)
        optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
        train(model, optimizer, X, y, epochs)
        return lambda X, y, epochs: train(model, optimizer, X, y, epochs)

    return fit


def _cache_counts():
    """Hits and builds (misses) of both training caches so far."""
    from helpers.core.machine.training_cache import ARTIFACTS, GRADIENT_GRAPHS

    caches = (ARTIFACTS, GRADIENT_GRAPHS)
    return {"hits": sum(c.hits for c in caches), "builds": sum(c.misses for c in caches)}


def _ort_fits(framework, onx, batch_size, counts, backend="auto"):
    """``first_fit`` and ``refit``, ``(X, y, epochs)``, of an onnxruntime optimizer of ``onx``.

    The optimizer is every study's (:func:`benchmarks.workloads.frameworks.ort_makers`: plain
    SGD, squared error, seeded batches), trained by ``backend``.

    A first fit empties the training caches (:mod:`helpers.core.machine.training_cache`)
    and builds what it trains with; a refit fits a clone of the same
    optimizer, which finds them there. Both return ``more(X, y, epochs)``,
    which trains their estimator further (``warm_start``: no set-up).
    ``counts`` adds up the caches' builds of the first fits
    (``first_fit_builds``), the builds and hits of the refits
    (``refit_builds``, ``refit_cache_hits``).
    """
    from sklearn.base import clone

    from helpers.core.machine.training_cache import clear_training_caches

    optimizer = fw.ort_makers(
        onx,
        "squared_error",
        learning_rate=LEARNING_RATE,
        batch_size=batch_size,
        validation_every=0,
        backend=backend,
    )[framework]()

    def fit(X, y, epochs, first):
        if first:
            clear_training_caches()
        before = _cache_counts()
        fitted = clone(optimizer).set_params(max_iter=epochs).fit(X, y)
        after = _cache_counts()
        added = {k: after[k] - before[k] for k in after}
        if first:
            counts["first_fit_builds"] += added["builds"]
        else:
            counts["refit_builds"] += added["builds"]
            counts["refit_cache_hits"] += added["hits"]
        return lambda X, y, epochs: fitted.set_params(warm_start=True, max_iter=epochs).fit(X, y)

    return functools.partial(fit, first=True), functools.partial(fit, first=False)


def setup_costs(
    first_fit, refit, X, y, batch_size, epochs, repeats=3, rows=2, clock=time.perf_counter
):
    """Set-up of a first fit and of a refit: what each spends beside its steps, in seconds.

    ``first_fit`` and ``refit`` are ``fit(X, y, epochs)`` returning
    ``more(X, y, epochs)``, which trains the fitted model further without
    any set-up. On the first ``rows`` samples of ``X`` (one small step, so
    that the step subtracted stays small beside the set-up): a first fit,
    ``repeats`` refits, then one more step of each refit's model; a set-up
    is such a fit minus the fastest such step (refits: the fastest one; 0
    when it is lost in the noise of a step). No model trains more than
    these two steps from the initial weights: a model kept training on the
    same two rows may diverge (batch normalization over two samples), which
    would say nothing of its memory. Then a new refit trains ``epochs``
    epochs of ``X`` in batches of ``batch_size`` (what the peak memory
    measures), which gives a step's time: that fit's time less the refit's
    set-up, over its steps.

    Returns
    -------
    dict
        ``first_fit_setup_s``, ``refit_setup_s``, ``step_s``.

    Examples
    --------
    >>> import numpy as np
    >>> def fit(X, y, epochs):
    ...     return lambda X, y, epochs: None
    >>> # first fit, 2 refits, a small step more of each, then 15 steps of 8 rows
    >>> ticks = iter([0, 0.5, 1, 1.04, 2, 2.03, 3, 3.01, 4, 4.02, 5, 5.17])
    >>> costs = setup_costs(fit, fit, np.zeros(40), np.zeros(40), 8, 3, repeats=2,
    ...                     clock=lambda: next(ticks))
    >>> {k: round(v, 2) for k, v in costs.items()}
    {'first_fit_setup_s': 0.49, 'refit_setup_s': 0.02, 'step_s': 0.01}
    """

    def timed(call, *args):
        start = clock()
        more = call(*args)
        return clock() - start, more

    small = (X[:rows], y[:rows], 1)
    first_s, _ = timed(first_fit, *small)
    refits = [timed(refit, *small) for _ in range(repeats)]
    step = min(timed(more, *small)[0] for _, more in refits)  # one step more of each
    refit_setup = max(min(seconds for seconds, _ in refits) - step, 0.0)
    trained, _ = timed(refit, X, y, epochs)
    steps = epochs * -(-len(X) // batch_size)
    return {
        "first_fit_setup_s": max(first_s - step, 0.0),
        "refit_setup_s": refit_setup,
        "step_s": (trained - refit_setup) / steps,
    }


def measure_in_this_process(
    framework,
    n_features,
    hidden,
    n_samples,
    batch_size,
    epochs,
    model_function=None,
    n_outputs=1,
    input_shape=None,
    input_dtype="float32",
    vocabulary=None,
    repeats=3,
    backend="auto",
):
    """Import, measure, fit, measure: what one process prints (JSON).

    With ``model_function`` (``"package.module:function"`` returning a torch
    module whose samples have shape ``input_shape`` and dtype ``input_dtype``,
    token ids below ``vocabulary`` for int64, and ``n_outputs`` outputs) the
    module is trained instead of the MLP ``n_features -> hidden -> 1``, by
    torch and by both onnxruntime APIs (squared error: memory, not accuracy,
    is measured). Torch and onnxruntime also time their set-up
    (:func:`setup_costs`): torch builds a module and its optimizer at each
    fit; onnxruntime's first fit adds the export of the module (done before
    the imports' peak is read, as preparing the model is not training).
    ``backend`` is the onnxruntime optimizers' (:mod:`helpers.core.machine.backends`).

    Examples
    --------
    >>> measure_in_this_process("scikit-learn", 4, 8, 32, 16, 1)  # doctest: +ELLIPSIS
    {"framework": "scikit-learn", "import_mb": ..., "peak_mb": ...}
    """
    import numpy as np

    from benchmarks.workloads.model_inputs import InputSpec, random_inputs  # numpy only

    X = random_inputs(n_samples, InputSpec(input_shape or (n_features,), input_dtype, vocabulary))
    y = np.random.default_rng(1).standard_normal((n_samples, n_outputs), dtype=np.float32)
    result = {"framework": framework}
    if framework == fw.SKLEARN:
        from sklearn.neural_network import MLPRegressor

        imported = _peak_mb()
        MLPRegressor(
            hidden_layer_sizes=(hidden,),
            solver="sgd",
            batch_size=batch_size,
            max_iter=epochs,
            learning_rate_init=LEARNING_RATE,
            momentum=0,
            tol=0,
            n_iter_no_change=10**6,
        ).fit(X, y.ravel())
    else:
        if framework == fw.TORCH:
            first_fit = refit = _torch_fit(model_function, n_features, hidden, batch_size)
            prepared_s, counts = 0.0, {}
        else:
            import helpers  # noqa: F401  (imported before the clock starts: imports are no set-up)

            counts = dict.fromkeys(("first_fit_builds", "refit_builds", "refit_cache_hits"), 0)
            start = time.perf_counter()
            onx = _onnx(model_function, n_features, hidden, X[:2])
            first_fit, refit = _ort_fits(framework, onx, batch_size, counts, backend)
            prepared_s = time.perf_counter() - start
        imported = _peak_mb()
        result.update(setup_costs(first_fit, refit, X, y, batch_size, epochs, repeats), **counts)
        result["first_fit_setup_s"] += prepared_s
    print(json.dumps({**result, "import_mb": imported, "peak_mb": _peak_mb()}))
