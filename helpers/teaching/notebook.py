"""Small utilities the notebooks share: the device, the parameters, the claims they check."""

import ast
import os
import subprocess
import sys

from ..core.machine import devices


def use_device(device="auto"):
    """Resolve a notebook's ``device`` parameter once and say where training runs.

    Parameters
    ----------
    device : str
        ``'auto'``, ``'cpu'``, ``'cuda'`` or ``'cuda:N'``, as the optimizers
        accept it.

    Returns
    -------
    str
        ``'cpu'`` or ``'cuda:N'``, to pass to the optimizers: they then do not
        probe the GPU again, and ``'auto'`` prints its choice only once.

    Raises
    ------
    helpers.DeviceError
        When a GPU is asked for explicitly and cannot be used.

    Examples
    --------
    >>> device = use_device("cpu")  # doctest: +ELLIPSIS
    Training device: cpu
    ...
    >>> device
    'cpu'
    """
    chosen = devices.resolve_device(device)
    print(f"Training device: {chosen}")
    if chosen.type == "cpu":
        problem = devices.cuda_problem(0)
        if problem:
            print(f"This notebook runs on the CPU because no GPU is available: {problem}.")
        else:
            print(
                "A GPU is available, but device='cpu' was asked for: this notebook runs on the CPU."
            )
    return str(chosen)


def literal_parameter(name, value):
    """A papermill parameter as the Python value it spells.

    ``papermill -p hidden_layer_sizes "(8, 4)"`` passes the string
    ``'(8, 4)'``; ``-y "hidden_layer_sizes: [8, 4]"`` passes a list. Both
    become ``(8, 4)`` here: a string is read as a Python literal, a list as
    a tuple, so that a notebook's tuple parameters take either form.

    Parameters
    ----------
    name : str
        The parameter's name, for the error message.
    value : object
        Its value, as the parameters cell holds it.

    Returns
    -------
    object
        ``value``, with a string read as a Python literal and a list turned
        into a tuple.

    Raises
    ------
    ValueError
        When a string is not a Python literal.

    Examples
    --------
    >>> literal_parameter("hidden_layer_sizes", "(8, 4)")
    (8, 4)
    >>> literal_parameter("hidden_layer_sizes", [16, 8])
    (16, 8)
    >>> literal_parameter("hidden_layer_sizes", "8,")
    (8,)
    """
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError) as error:
            raise ValueError(
                f"Parameter {name}={value!r} is not a Python value. Pass a tuple as "
                f'-p {name} "(8, 4)" or -y "{name}: [8, 4]".'
            ) from error
    return tuple(value) if isinstance(value, list) else value


def layer_sizes_parameter(name, value):
    """Hidden layer sizes given to a notebook, as a tuple of positive integers.

    Parameters
    ----------
    name : str
        The parameter's name, for the error message.
    value : int, tuple, list or str
        ``32``, ``(32,)``, ``[16, 8]`` or ``'(16, 8)'``.

    Returns
    -------
    tuple of int

    Raises
    ------
    ValueError
        When a size is not a positive integer.

    Examples
    --------
    >>> layer_sizes_parameter("hidden_layer_sizes", "[16, 8]")
    (16, 8)
    >>> layer_sizes_parameter("hidden_layer_sizes", 32)
    (32,)
    >>> layer_sizes_parameter("hidden_layer_sizes", "(0,)")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: Parameter hidden_layer_sizes=(0,) must hold positive integers, for example (32,) or
    (16, 8).
    """
    sizes = literal_parameter(name, value)
    sizes = (sizes,) if isinstance(sizes, int) else sizes
    if (
        not isinstance(sizes, tuple)
        or not sizes
        or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes)
    ):
        raise ValueError(
            f"Parameter {name}={sizes!r} must hold positive integers, for example (32,) or (16, 8)."
        )
    return sizes


def require(condition, message):
    """Check parameters that must agree, in the cell after the parameters.

    Parameters
    ----------
    condition : bool
    message : str
        What must hold, naming the parameters and their values.

    Raises
    ------
    ValueError
        With ``message``, when ``condition`` is false.

    Examples
    --------
    >>> batch_size, n_train = 500, 300
    >>> require(
    ...     batch_size <= n_train,
    ...     f"batch_size={batch_size} is larger than the {n_train} training rows",
    ... )
    Traceback (most recent call last):
    ...
    ValueError: batch_size=500 is larger than the 300 training rows
    """
    if not condition:
        raise ValueError(message)


def check_claim(condition, claim, parameters):
    """Check a claim of a notebook that holds only after enough training.

    With the default parameters, every claim holds; with a shorter run
    (fewer epochs, fewer rows), a claim may not, and the error says which
    parameters to raise rather than stopping at a bare ``assert``.

    Parameters
    ----------
    condition : bool
    claim : str
        The claim, as the notebook states it.
    parameters : str
        The parameters that give the training enough room, for example
        ``'max_iter'`` or ``'n_samples and max_iter'``.

    Raises
    ------
    AssertionError
        When ``condition`` is false, with the claim and the parameters.

    Examples
    --------
    >>> check_claim(
    ...     0.5 < 0.1, "the loss falls below 0.1", "max_iter"
    ... )  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    AssertionError: Not shown with these parameters: the loss falls below 0.1. The claim needs
    enough training: raise max_iter.
    """
    if not condition:
        raise AssertionError(
            f"Not shown with these parameters: {claim}. The claim needs enough training: raise "
            f"{parameters}."
        )


def milestone_rows(table, positions=(0, 1, 9)):
    """The rows of a per-epoch table at a few positions, and its last row.

    A table of 30 epochs is shown as its rows 1, 2, 10 and 30; a shorter one
    as the positions it has. Positions are 0-based, as in ``iloc``.

    Parameters
    ----------
    table : pandas.DataFrame
    positions : sequence of int

    Returns
    -------
    pandas.DataFrame

    Examples
    --------
    >>> import pandas as pd
    >>> milestone_rows(pd.DataFrame({"loss": range(30)})).index.tolist()
    [0, 1, 9, 29]
    >>> milestone_rows(pd.DataFrame({"loss": range(3)})).index.tolist()
    [0, 1, 2]
    """
    n = len(table)
    kept = sorted({p for p in positions if 0 <= p < n} | ({n - 1} if n else set()))
    return table.iloc[kept]


#: The repository the notebooks are part of: the folder above the ``helpers`` package.
REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def repository_path(*parts):
    """The path of a file of the repository, whatever folder the notebook runs from.

    JupyterLab runs a notebook from ``notebooks/``, papermill from wherever it is called
    (the repository's root in the README): a path relative to the working folder works in
    one of them only.

    Parameters
    ----------
    *parts : str
        The file's path below the repository's root, in parts or with ``/``.

    Returns
    -------
    str
        The absolute path.

    Raises
    ------
    FileNotFoundError
        When no such file or folder is in the repository.

    Examples
    --------
    >>> os.path.basename(repository_path("results", "reference", "summary.md"))
    'summary.md'
    >>> repository_path("results/no_such_file.csv")
    Traceback (most recent call last):
    ...
    FileNotFoundError: results/no_such_file.csv is not in the repository ...
    """
    relative = os.path.join(*parts)
    path = os.path.join(REPOSITORY, relative)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{relative} is not in the repository {REPOSITORY}: the notebooks read the "
            "repository's files, run them from a clone of it"
        )
    return path


#: Where ``make setup-maintained`` puts the maintained environment's interpreter.
MAINTAINED_PYTHON = os.path.join(REPOSITORY, ".venv-maintained", "bin", "python")


def maintained_python():
    """The Python of the maintained onnxruntime's environment, ``.venv-maintained``, or None.

    ``make setup-maintained`` builds it (onnxruntime 1.31.1, no training package).

    Examples
    --------
    >>> python = maintained_python()
    >>> python is None or python.endswith(os.path.join(".venv-maintained", "bin", "python"))
    True
    """
    return MAINTAINED_PYTHON if os.path.exists(MAINTAINED_PYTHON) else None


def run_python(python, *args):
    """Run ``python *args`` with this repository's ``helpers`` importable; return its output.

    Parameters
    ----------
    python : str or None
        The interpreter (:func:`maintained_python`); None runs this kernel's own.
    *args : str
        Its arguments: ``"-m", "helpers.portable", "fit", ...`` or ``"-c", code``.

    Returns
    -------
    str
        What it printed on stdout, stripped.

    Raises
    ------
    RuntimeError
        When it exits with an error: its command and what it printed on stderr.

    Examples
    --------
    >>> run_python(None, "-c", "import helpers; print('ok')")
    'ok'
    >>> run_python(None, "-c", "raise SystemExit('no data')")
    Traceback (most recent call last):
    ...
    RuntimeError: python -c raise SystemExit('no data') failed: no data
    """
    env = {**os.environ, "PYTHONPATH": REPOSITORY}
    done = subprocess.run(
        [python or sys.executable, *args], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        command = " ".join(["python", *args[:3]])
        raise RuntimeError(f"{command} failed: {done.stderr.strip()}")
    return done.stdout.strip()
