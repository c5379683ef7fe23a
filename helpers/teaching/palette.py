"""One colour per library in every figure, notebooks and benchmarks alike.

A curve's label starts with the library that produced it (``'scikit-learn,
SGD'``, ``'onnxruntime, Nesterov'``, ``'torch eager'``): the library gives the
colour, and what follows gives the line style, so that two update rules of
the same library are told apart by their dashes and the same rule in two
libraries by its colour. A figure whose curves all come from one library
(four update rules of onnxruntime) tells them apart by shades of the library's
colour as well, darkest first: its colour family still names the library.

Examples
--------
>>> line_styles(["scikit-learn, SGD", "onnxruntime, SGD", "onnxruntime, Nesterov"])[
...     "onnxruntime, Nesterov"
... ]
{'color': 'tab:blue', 'linestyle': '--'}
>>> color("torch eager"), color("my framework")
('tab:green', 'tab:brown')
>>> shades("onnxruntime", 3)
['#114163', '#1d6ea7', '#62a0cb']
"""

import numpy as np
from matplotlib.colors import to_hex, to_rgb

#: The colour of each library, the same in every figure. The longest name a
#: label starts with wins: ``'onnxruntime matmul bound'`` is black, not blue.
COLORS = {
    "onnxruntime": "tab:blue",
    "ort whole-training": "tab:blue",
    "ort forward-backward": "tab:orange",
    "ort torch module": "tab:red",
    "scikit-learn": "tab:purple",
    "torch": "tab:green",
    "torch eager": "tab:green",
    "torch.compile": "tab:olive",
    "onnxruntime matmul bound": "black",
    "numpy matmul": "tab:gray",
}
#: A label that names no library in :data:`COLORS`.
OTHER = "tab:brown"
#: Colours of the curves of a figure whose labels name no library.
UNNAMED = ("tab:cyan", "tab:pink", "tab:brown", "tab:olive", "tab:red")
#: Line styles of the variants of one library, in the order they come.
LINESTYLES = ("-", "--", ":", "-.")


def library_of(label):
    """The library a label starts with (the longest name of :data:`COLORS`), or None.

    Examples
    --------
    >>> (
    ...     library_of("onnxruntime, adamw"),
    ...     library_of("onnxruntime matmul bound"),
    ...     library_of("alpha=0"),
    ... )
    ('onnxruntime', 'onnxruntime matmul bound', None)
    """
    names = [name for name in COLORS if label == name or label.startswith((f"{name},", f"{name} "))]
    return max(names, key=len) if names else None


def color(label):
    """The colour of the library ``label`` starts with; :data:`OTHER` when it names none.

    Examples
    --------
    >>> color("scikit-learn, adam")
    'tab:purple'
    """
    library = library_of(label)
    return COLORS[library] if library else OTHER


def shades(label, n):
    """``n`` shades of the colour of ``label``'s library, from dark to light.

    The variants of one library (update rules, batch sizes, penalties) keep
    its colour family; an ordered parameter (batch 1, 10, 50) reads as the
    order of the shades.

    Parameters
    ----------
    label : str
        A label that starts with a library (or a library's name).
    n : int
        The number of shades.

    Returns
    -------
    list of str
        Hex colours, from a darker to a lighter shade of the library's
        colour; with ``n=1``, the library's colour itself.

    Examples
    --------
    >>> shades("scikit-learn, SGD", 1)
    ['tab:purple']
    >>> shades("ort forward-backward", 2)
    ['#8c4608', '#ffa556']
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}.")
    base = color(label)
    if n == 1:
        return [base]
    rgb = np.array(to_rgb(base))
    colours = []
    for amount in np.linspace(-0.45, 0.3, n):  # light tints fade on white: less light than dark
        mixed = (
            rgb * (1 + amount) if amount < 0 else rgb + (1 - rgb) * amount
        )  # towards black, or white
        colours.append(to_hex(np.clip(mixed, 0, 1)))
    return colours


def line_styles(labels):
    """Colour and line style of each curve of one figure.

    Parameters
    ----------
    labels : sequence of str
        The labels of the figure's curves.

    Returns
    -------
    dict
        Label to the keyword arguments of ``Axes.plot`` (``color`` and
        ``linestyle``). When no label names a library, every label maps to
        an empty dict and matplotlib's colour cycle applies. When they all
        name the same library, its variants also take its :func:`shades`.

    Examples
    --------
    >>> styles = line_styles(["scikit-learn, SGD", "scikit-learn, Nesterov", "onnxruntime, SGD"])
    >>> styles["scikit-learn, Nesterov"], styles["onnxruntime, SGD"]
    ({'color': 'tab:purple', 'linestyle': '--'}, {'color': 'tab:blue', 'linestyle': '-'})
    >>> line_styles(["alpha=0", "alpha=1"])
    {'alpha=0': {}, 'alpha=1': {}}
    >>> line_styles(["onnxruntime, sgd", "onnxruntime, adamw"])["onnxruntime, adamw"]
    {'color': '#62a0cb', 'linestyle': '--'}
    """
    libraries = {label: library_of(label) for label in labels}
    if not any(libraries.values()):
        return {label: {} for label in labels}
    named = set(filter(None, libraries.values()))
    variants, unnamed, styles = {}, iter(UNNAMED * len(labels)), {}
    for label, library in libraries.items():
        if library is None:
            styles[label] = {"color": next(unnamed), "linestyle": "-"}
            continue
        seen = variants.setdefault(library, [])
        if label not in seen:
            seen.append(label)
        styles[label] = {
            "color": COLORS[library],
            "linestyle": LINESTYLES[seen.index(label) % len(LINESTYLES)],
        }
    if len(named) == 1:  # one library: its variants in shades of its colour
        (library,) = named
        tints = shades(library, len(variants[library]))
        for label, style in styles.items():
            if libraries[label] == library:
                style["color"] = tints[variants[library].index(label)]
    return styles
