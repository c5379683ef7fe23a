"""Small utilities the notebooks share."""
from ..core import devices


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
            print("A GPU is available, but device='cpu' was asked for: this notebook runs on the CPU.")
    return str(chosen)
