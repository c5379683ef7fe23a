"""Objects described by their constructor parameters, as scikit-learn's estimators are.

The pieces of the training vocabulary (learning-rate schedules, update
rules, penalties, losses) are small objects whose constructor parameters say
everything about them. :class:`Configurable` gives them, from
:meth:`~Configurable.get_params` alone, a readable ``repr``, equality,
hashing and fresh copies.
"""


class Configurable:
    """Base class of objects described by :meth:`get_params`.

    Subclasses return their constructor parameters from :meth:`get_params`;
    caches and other state built at run time are not parameters, so a copy
    (:meth:`fresh_copy`) starts without them.

    Examples
    --------
    >>> class Clip(Configurable):
    ...     def __init__(self, low=0.0, high=1.0):
    ...         self.low, self.high = low, high
    ...     def get_params(self, deep=True):
    ...         return {"low": self.low, "high": self.high}
    >>> Clip(high=2.0)
    Clip(low=0.0, high=2.0)
    >>> Clip(high=2.0) == Clip(0.0, 2.0), Clip().fresh_copy() is not Clip()
    (True, True)
    """

    def get_params(self, deep=True):
        """The constructor parameters, as scikit-learn's ``get_params``."""
        return {}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other):
        return type(self) is type(other) and self.get_params() == other.get_params()

    def __hash__(self):
        return hash((type(self).__name__, repr(self)))

    def fresh_copy(self):
        """A new object with the same parameters and none of the run-time state."""
        return type(self)(**self.get_params())
