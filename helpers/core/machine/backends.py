"""Which runtime trains: onnxruntime-training 1.19.2's, or standard ONNX on any onnxruntime.

Both optimizers and :class:`helpers.OrtTorchModule` take ``backend=``:

* ``"onnxruntime-training"``: the gradients come from onnxruntime-training 1.19.2's gradient
  builder and its training objects run them (``Module`` and ``Optimizer`` for the whole-training
  API, ``TrainingAgent`` for the forward/backward API). It needs that package, which exists for
  Python 3.11 and 3.12 only and is no longer maintained.
* ``"onnx"``: the gradients are written in standard ONNX by this project
  (:mod:`helpers.portable.gradients`) and an ``InferenceSession`` of the installed onnxruntime
  runs them; the update rules are ONNX graphs too. It runs on the maintained onnxruntime (1.31.1
  on Python 3.13), and on 1.19.2's inference session as well.
* ``"auto"`` (the default): ``"onnxruntime-training"`` where the training package is installed,
  ``"onnx"`` elsewhere; the environment variable ``HELPERS_BACKEND`` (``onnx`` or
  ``onnxruntime-training``) chooses instead, for a whole process (a notebook, a test run).
"""

import os

from .runtime import has_training_package

#: The modules of ``helpers`` that import onnxruntime-training's own API: the backend
#: ``"onnxruntime-training"``'s, which only that package can import.
TRAINING_PACKAGE_MODULES = (
    "helpers.forward_backward.training_agent",
    "helpers.whole_training.artifacts",
    "helpers.whole_training.fit_artifacts",
    "helpers.whole_training.schedulers",
    "helpers.whole_training.session",
)

#: The environment variable that sets the backend ``"auto"`` picks.
BACKEND_VARIABLE = "HELPERS_BACKEND"

#: The backends a training takes, ``"auto"`` choosing one of the others.
BACKENDS = ("auto", "onnxruntime-training", "onnx")


class BackendUnavailableError(ImportError):
    """A backend asked for that this environment cannot run.

    Examples
    --------
    >>> issubclass(BackendUnavailableError, ImportError)
    True
    """


def default_backend():
    """The backend ``"auto"`` picks here: :data:`BACKEND_VARIABLE`'s when it is set, else the
    training package's where it is installed.

    Raises
    ------
    ValueError
        When :data:`BACKEND_VARIABLE` names no backend.

    Examples
    --------
    >>> default_backend() in BACKENDS[1:]
    True
    """
    chosen = os.environ.get(BACKEND_VARIABLE)
    if chosen:
        if chosen not in BACKENDS[1:]:
            raise ValueError(
                f"The environment variable {BACKEND_VARIABLE}={chosen!r} names no backend: set "
                f"it to one of {BACKENDS[1:]}, or unset it."
            )
        return chosen
    return "onnxruntime-training" if has_training_package() else "onnx"


def resolve_backend(backend):
    """The backend that trains for the parameter ``backend``, checked.

    Parameters
    ----------
    backend : {"auto", "onnxruntime-training", "onnx"}

    Returns
    -------
    str
        ``"onnxruntime-training"`` or ``"onnx"``.

    Raises
    ------
    ValueError
        For a value not in :data:`BACKENDS`.
    BackendUnavailableError
        For ``"onnxruntime-training"`` where the training package is not installed, with the fix.

    Examples
    --------
    >>> resolve_backend("onnx")
    'onnx'
    >>> resolve_backend("auto") == default_backend()
    True
    >>> resolve_backend("torch")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: backend must be one of ('auto', 'onnxruntime-training', 'onnx'), not 'torch'...
    """
    if backend not in BACKENDS:
        raise ValueError(
            f"backend must be one of {BACKENDS}, not {backend!r}: 'onnx' trains on any "
            "onnxruntime with gradients in standard ONNX, 'onnxruntime-training' with the "
            "training package 1.19.2, 'auto' picks the latter where it is installed."
        )
    if backend == "auto":
        backend = default_backend()
    if backend == "onnxruntime-training" and not has_training_package():
        import onnxruntime  # noqa: PLC0415

        raise BackendUnavailableError(
            f"backend='onnxruntime-training' needs the package onnxruntime-training 1.19.2, and "
            f"this environment has onnxruntime {onnxruntime.__version__} without its training "
            "module. Use backend='onnx' (or 'auto'), which trains with gradients in standard ONNX "
            "on the installed onnxruntime; or build the training environment on Python 3.11 or "
            "3.12: make setup PYTHON=python3.12."
        )
    return backend
