"""Which backend and which Jupyter kernel a sweep's runs take (``python -m benchmarks``).

``--backend`` is every run's ``backend`` parameter (:mod:`helpers.core.machine.backends`), ``auto``
resolved here as the optimizers resolve it (:func:`sweep_backend`), so that each run says which
backend it asked for and a run of the backend ``onnx`` is another run than the training
package's (:func:`benchmarks.sweep.sweep_grid.run_id`). The kernel is the first of
:data:`KERNELS` found (:func:`default_kernel`). Nothing here imports onnxruntime: the training
package imports torch with it, seconds before a sweep starts.
"""

import importlib.util
import os

#: The Jupyter kernels of the runs, in order of preference: ``make setup``'s, then
#: ``make setup-maintained``'s (the maintained onnxruntime, no training package).
KERNELS = ("ort-training", "ort-maintained")
#: The backends of ``--backend``, ``auto`` choosing one of the others
#: (:data:`helpers.core.machine.backends.BACKENDS`).
BACKENDS = ("auto", "onnxruntime-training", "onnx")
#: The environment variable that sets what ``auto`` picks
#: (:data:`helpers.core.machine.backends.BACKEND_VARIABLE`).
BACKEND_VARIABLE = "HELPERS_BACKEND"


def default_kernel():
    """The first kernel of :data:`KERNELS` that Jupyter finds here (the first one when none is).

    Examples
    --------
    >>> default_kernel() in KERNELS
    True
    """
    try:
        from jupyter_client.kernelspec import find_kernel_specs  # noqa: PLC0415
    except ImportError:  # no Jupyter here: papermill will say so
        return KERNELS[0]
    found = find_kernel_specs()
    return next((name for name in KERNELS if name in found), KERNELS[0])


def training_module_here():
    """Whether this environment's onnxruntime has its training module, read from its files.

    Read without importing onnxruntime (see the module's text).

    Examples
    --------
    >>> isinstance(training_module_here(), bool)
    True
    """
    spec = importlib.util.find_spec("onnxruntime")
    folders = (spec.submodule_search_locations or []) if spec else []
    return any(os.path.isdir(os.path.join(folder, "training")) for folder in folders)


def sweep_backend(backend):
    """The backend of the sweep's runs: ``backend``, ``auto`` resolved as
    :func:`helpers.core.machine.backends.resolve_backend` resolves it here; or why it cannot be.

    Returns
    -------
    tuple
        ``(backend, None)`` or ``(None, message)``.

    Examples
    --------
    >>> sweep_backend("onnx")
    ('onnx', None)
    """
    if backend == "auto":
        chosen = os.environ.get(BACKEND_VARIABLE)
        if chosen and chosen not in BACKENDS[1:]:
            return None, f"{BACKEND_VARIABLE}={chosen!r} names no backend: {BACKENDS[1:]}"
        backend = chosen or ("onnxruntime-training" if training_module_here() else "onnx")
    if backend == "onnxruntime-training" and not training_module_here():
        return None, (
            "this environment has no onnxruntime-training (the maintained onnxruntime has no "
            "training module): use --backend onnx, which trains with gradients in standard ONNX "
            "on the installed onnxruntime, or the training package's environment."
        )
    return backend, None
