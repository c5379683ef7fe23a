"""The thread count of the onnxruntime sessions the helpers make.

:func:`set_num_threads` sets the default of the sessions created afterwards (an
optimizer's ``n_threads`` takes precedence); :func:`resolved_threads` is what a
session made now gets (:func:`helpers.core.machine.sessions.session_options` reads it).
"""

import numbers

#: Threads of the sessions created from now on (None: onnxruntime's default,
#: one per core), set by :func:`set_num_threads`.
_THREADS = {"intra_op": None}


def check_n_threads(n_threads, name="n_threads"):
    """Raise ``ValueError`` unless ``n_threads`` is None or an integer >= 1.

    Examples
    --------
    >>> check_n_threads(2)
    >>> check_n_threads(0)
    Traceback (most recent call last):
    ...
    ValueError: n_threads must be an integer >= 1 or None, got 0.
    """
    if n_threads is not None and (
        isinstance(n_threads, bool) or not isinstance(n_threads, numbers.Integral) or n_threads < 1
    ):
        raise ValueError(f"{name} must be an integer >= 1 or None, got {n_threads!r}.")


def set_num_threads(n_threads):
    """Set the default thread count of the onnxruntime sessions created afterwards.

    Benchmarks call it to give every framework the same threads (torch:
    ``torch.set_num_threads``). The optimizers' ``n_threads`` parameter,
    when given, takes precedence.

    Parameters
    ----------
    n_threads : int or None
        Threads per session; None goes back to onnxruntime's default.

    Examples
    --------
    >>> from helpers.core.machine.sessions import session_options
    >>> set_num_threads(2)
    >>> session_options().intra_op_num_threads
    2
    >>> set_num_threads(None)
    """
    check_n_threads(n_threads)
    _THREADS["intra_op"] = None if n_threads is None else int(n_threads)


def resolved_threads(n_threads=None):
    """The thread count a session made now with ``n_threads`` gets (None: onnxruntime's choice).

    Examples
    --------
    >>> resolved_threads(3)
    3
    >>> set_num_threads(2)
    >>> resolved_threads()
    2
    >>> set_num_threads(None)
    """
    return n_threads if n_threads is not None else _THREADS["intra_op"]
