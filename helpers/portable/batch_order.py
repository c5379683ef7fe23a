"""The order of the rows in an epoch and the batches cut from it: one definition for every trainer.

Both optimizers and :class:`~helpers.portable.trainer.PortableTrainer` draw their batches here,
so that the same ``random_state`` gives the same batches by construction:

* one :class:`numpy.random.RandomState` per fit (:func:`random_state`), created from the seed
  when the fit starts;
* one permutation of the rows per epoch, drawn from it (:func:`epoch_order`);
* the random values of the training graph (the masks of ``Dropout``), from a second generator
  of the same seed (:func:`draws_generator`), so that they leave the batches as they are;
* the batches are consecutive slices of that permutation, ``batch_size`` rows each, the last one
  smaller when ``batch_size`` does not divide the number of rows (:func:`batch_bounds`).

numpy only: the optimizers (scikit-learn, onnxruntime-training) and the portable runner
(maintained onnxruntime) import it alike.
"""

import numbers

import numpy as np


def random_state(seed):
    """The generator of a fit's permutations, from the estimator's ``random_state``.

    Parameters
    ----------
    seed : None, int or numpy.random.RandomState
        ``None``: numpy's global generator; an int: a new generator seeded with it; a
        generator: itself (scikit-learn's ``check_random_state``).

    Returns
    -------
    numpy.random.RandomState

    Examples
    --------
    >>> random_state(0).permutation(5).tolist() == random_state(0).permutation(5).tolist()
    True
    >>> generator = np.random.RandomState(1)
    >>> random_state(generator) is generator
    True
    """
    if seed is None:
        return np.random.mtrand._rand
    if isinstance(seed, numbers.Integral):
        return np.random.RandomState(int(seed))
    if isinstance(seed, np.random.RandomState):
        return seed
    raise ValueError(
        f"random_state={seed!r} cannot seed the batch order: give None, an int or a "
        "numpy.random.RandomState."
    )


def draws_generator(seed):
    """The generator of a fit's random draws (``Dropout`` masks), from its ``random_state``.

    A :class:`numpy.random.Generator` (PCG64: twice as fast as ``RandomState`` for a mask),
    separate from the permutations' (:func:`random_state`): a model with dropout is trained on
    the batches of the same model without it.

    Parameters
    ----------
    seed : None, int or numpy.random.RandomState
        ``None``: no generator (onnxruntime draws, unseeded); an int: seeded with it; a
        ``RandomState``: seeded from its current state, which is left as it is.

    Returns
    -------
    numpy.random.Generator or None

    Examples
    --------
    >>> draws_generator(0).random(2).tolist() == draws_generator(0).random(2).tolist()
    True
    >>> state = np.random.RandomState(3)
    >>> same = draws_generator(state).random() == draws_generator(state).random()
    >>> same, draws_generator(None)
    (True, None)
    """
    if seed is None:
        return None
    if isinstance(seed, numbers.Integral):
        return np.random.Generator(np.random.PCG64(int(seed)))
    if isinstance(seed, np.random.RandomState):
        _, keys, position, *_ = seed.get_state()
        return np.random.Generator(np.random.PCG64([*keys[:8].tolist(), int(position)]))
    return random_state(seed)  # raises the message of a bad seed


def epoch_order(rng, n_rows):
    """The rows of the next epoch, in the order they are trained: one permutation of ``rng``.

    Parameters
    ----------
    rng : numpy.random.RandomState
        The fit's generator (:func:`random_state`); each call advances it.
    n_rows : int

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> rng = random_state(0)
    >>> first, second = epoch_order(rng, 4), epoch_order(rng, 4)
    >>> sorted(first.tolist()), first.dtype.name, first.tolist() != second.tolist()
    ([0, 1, 2, 3], 'int64', True)
    """
    return rng.permutation(n_rows).astype(np.int64, copy=False)


def batch_count(n_rows, batch_size):
    """The number of batches of an epoch: the last one may be smaller.

    Examples
    --------
    >>> batch_count(10, 4), batch_count(8, 4), batch_count(3, 10)
    (3, 2, 1)
    """
    return -(-n_rows // batch_size)


def batch_bounds(n_rows, batch_size, first_row=0):
    """The ``(start, end)`` positions in the epoch's order of each batch, from ``first_row`` on.

    Parameters
    ----------
    n_rows : int
    batch_size : int
    first_row : int
        Where an interrupted epoch resumes: the batches start there.

    Returns
    -------
    list of tuple of int
        Batch ``k`` holds the rows ``order[start:end]``.

    Examples
    --------
    >>> batch_bounds(10, 4)
    [(0, 4), (4, 8), (8, 10)]
    >>> batch_bounds(10, 4, first_row=6)
    [(6, 10)]
    """
    return [
        (start, min(start + batch_size, n_rows)) for start in range(first_row, n_rows, batch_size)
    ]
