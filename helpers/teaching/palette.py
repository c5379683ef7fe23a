"""One colour per library in every figure, notebooks and benchmarks alike.

A curve's label starts with the library that produced it (``'scikit-learn,
SGD'``, ``'onnxruntime, Nesterov'``, ``'torch eager'``): the library gives the
colour, and what follows gives the line style, so that two update rules of
the same library are told apart by their dashes and the same rule in two
libraries by its colour.

Examples
--------
>>> line_styles(["scikit-learn, SGD", "onnxruntime, SGD", "onnxruntime, Nesterov"])["onnxruntime, Nesterov"]
{'color': 'tab:blue', 'linestyle': '--'}
>>> color("torch eager"), color("my framework")
('tab:green', 'tab:brown')
"""

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
    >>> library_of("onnxruntime, adamw"), library_of("onnxruntime matmul bound"), library_of("alpha=0")
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
        an empty dict and matplotlib's colour cycle applies.

    Examples
    --------
    >>> styles = line_styles(["scikit-learn, SGD", "scikit-learn, Nesterov", "onnxruntime, SGD"])
    >>> styles["scikit-learn, Nesterov"], styles["onnxruntime, SGD"]
    ({'color': 'tab:purple', 'linestyle': '--'}, {'color': 'tab:blue', 'linestyle': '-'})
    >>> line_styles(["alpha=0", "alpha=1"])
    {'alpha=0': {}, 'alpha=1': {}}
    """
    libraries = {label: library_of(label) for label in labels}
    if not any(libraries.values()):
        return {label: {} for label in labels}
    variants, unnamed, styles = {}, iter(UNNAMED * len(labels)), {}
    for label, library in libraries.items():
        if library is None:
            styles[label] = {"color": next(unnamed), "linestyle": "-"}
            continue
        seen = variants.setdefault(library, [])
        if label not in seen:
            seen.append(label)
        styles[label] = {"color": COLORS[library], "linestyle": LINESTYLES[seen.index(label) % len(LINESTYLES)]}
    return styles
