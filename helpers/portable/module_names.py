"""Names a module serves through its ``__getattr__`` (PEP 562): public names loaded on first use,
and names that moved elsewhere.

A package lists its public names and the modules that define them
(:func:`lazy_names`): importing the package imports none of those modules, and
``from helpers import OrtGradientOptimizer`` imports only what that class needs. A
module whose public names moved keeps serving them for one release
(:func:`moved_names`), with a ``DeprecationWarning`` that gives the import to write
instead; the project's own code imports from the new place, so it never warns.
"""

import importlib
import warnings


def lazy_names(package, public, namespace):
    """The ``__getattr__`` and ``__dir__`` of a package whose public names load on first use.

    Parameters
    ----------
    package : str
        The package's name (its ``__name__``).
    public : dict
        Each public name, and the module that defines it (relative to the package,
        ``'.core.machine.devices'``, or absolute).
    namespace : dict
        The package's ``globals()``: a name, once loaded, is stored there, and the next
        access is a plain attribute.

    Returns
    -------
    tuple of callable
        ``(__getattr__, __dir__)``, to assign at the package's top level.

    Examples
    --------
    >>> namespace = {}
    >>> getattr_, dir_ = lazy_names("helpers", {"Device": ".core.machine.devices"}, namespace)
    >>> getattr_("Device").__module__, "Device" in namespace, dir_()
    ('helpers.core.machine.devices', True, ['Device'])
    >>> getattr_("Devices")
    Traceback (most recent call last):
    ...
    AttributeError: module 'helpers' has no attribute 'Devices'
    """

    def __getattr__(name):
        module = public.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value  # the next access is a plain attribute
        return value

    def __dir__():
        return sorted(set(namespace) | set(public))

    return __getattr__, __dir__


def moved_names(module, moved):
    """The ``__getattr__`` of a module some names moved out of: each is still served, with a
    ``DeprecationWarning`` that names the import to use instead.

    Parameters
    ----------
    module : str
        The old module's name (its ``__name__``).
    moved : dict
        Each name that moved, and ``(public, home)``: the module to import it from now
        (named in the warning) and the module that defines it (where it is read).

    Returns
    -------
    callable
        The ``__getattr__`` to assign at the old module's top level.

    Examples
    --------
    >>> import warnings
    >>> getattr_ = moved_names(
    ...     "helpers.core.old_place",
    ...     {"Device": ("helpers", "helpers.core.machine.devices")},
    ... )
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     device = getattr_("Device")
    >>> device.__module__, caught[0].category.__name__
    ('helpers.core.machine.devices', 'DeprecationWarning')
    >>> print(caught[0].message)  # doctest: +NORMALIZE_WHITESPACE
    helpers.core.old_place.Device has moved: write `from helpers import Device`.
    The old import works until the next release.
    """

    def __getattr__(name):
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        public, home = moved[name]
        warnings.warn(
            f"{module}.{name} has moved: write `from {public} import {name}`. "
            "The old import works until the next release.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    return __getattr__
