"""The API reference's pages: one section per module, and the list of the public names.

A Sphinx extension of this project's docs (``extensions`` in ``docs/conf.py``).
``docs/api/<package>.md`` holds the marker line ``<!-- api-modules: helpers.<package> -->``;
it becomes one section per module of the package and of its sub-packages: the modules
of :data:`API_ORDER` first, in that order (reading order), then any other module of the
package, so that a new module is documented without editing the pages. ``helpers.core``
has one page per sub-package (``docs/api/core/<sub-package>.md``), and its own page the
marker ``<!-- api-subpackages: helpers.core -->``: one section per sub-package, what it
holds and its modules. The marker ``<!-- api-public-names -->`` becomes a list of
``helpers.__all__``, each name linked to its page.
"""

import importlib
import inspect
import pkgutil
import re

API_ORDER = {
    "helpers.whole_training": [
        "optimizer",
        "loss_output",
        "session",
        "checkpoints",
        "artifacts",
        "fit_artifacts",
        "schedulers",
    ],
    "helpers.forward_backward": [
        "optimizer",
        "function",
        "passes",
        "losses",
        "base_loss",
        "session",
        "torch_function",
        "torch_module",
    ],
    # the sub-packages in import order, each followed by its modules in reading order
    "helpers.core": [
        "machine",
        "machine.sessions",
        "machine.threads",
        "machine.runtime",
        "machine.runtime_output",
        "machine.devices",
        "machine.cuda_libraries",
        "machine.training_cache",
        "machine.process_folders",
        "machine.disk_space",
        "graphs",
        "graphs.graph_nodes",
        "graphs.graph_shapes",
        "graphs.graph_values",
        "graphs.onnx_function",
        "graphs.loss_graphs",
        "layers",
        "layers.activations",
        "layers.padding",
        "layers.pooling",
        "layers.resampling",
        "layers.normalization",
        "layers.batch_norm",
        "layers.running_statistics",
        "layers.embedding_padding",
        "rewrites",
        "rewrites.gradient_rewrites",
        "rewrites.convolution_rewrites",
        "rewrites.pooling_rewrites",
        "model_graphs",
        "model_graphs.from_torch",
        "model_graphs.training_graph",
        "model_graphs.inference_mode",
        "model_graphs.onnx_graph",
        "model_graphs.torch_symbolics",
        "model_graphs.torch_export",
        "inputs",
        "inputs.validation",
        "inputs.feature_names",
        "updates",
        "updates.learning_rates",
        "updates.update_rules",
        "updates.weight_updater",
        "updates.penalties",
        "updates.configurable",
        "training",
        "training.estimator",
        "training.parameters",
        "training.trained_model",
        "training.training_loop",
        "training.epoch_losses",
        "training.batches",
        "training.display",
        "export",
        "export.optimizer_step",
        "export.step_model",
        "export.gradient_model",
        "export.step_scalars",
        "export.graph_inlining",
    ],
    "helpers.teaching": [
        "datasets",
        "model_factories",
        "sklearn_bridge",
        "sklearn_training",
        "comparison",
        "torch_reference",
        "plotting",
        "panels",
        "tables",
        "kernel_plots",
        "palette",
        "notebook",
        "learning_path",
    ],
    "helpers.measure": ["timing", "conditions", "profiling"],
    "helpers.portable": [
        "trainer",
        "divergence",
        "__main__",
        "epoch_loop",
        "lean_step",
        "batch_order",
        "step_format",
        "step_model",
        "batch_data",
        "runtime_support",
        "atomic_files",
        "node_attributes",
        "module_names",
    ],
    "helpers.portable.gradients": ["builder", "registry", "via_lowering"],
}
#: Sub-packages with a page of their own: their parent's page leaves their modules out.
OWN_PAGES = {"helpers.portable.gradients"}
_API_MARKER = re.compile(r"^<!-- api-modules: ([\w.]+) -->$", re.M)
_SUBPACKAGES_MARKER = re.compile(r"^<!-- api-subpackages: ([\w.]+) -->$", re.M)


def _reading_order(package):
    """:data:`API_ORDER` of ``package``, or its part in its parent's (``helpers.core.machine``)."""
    if package in API_ORDER:
        return API_ORDER[package]
    parent, _, name = package.rpartition(".")
    prefix = f"{name}."
    return [m.removeprefix(prefix) for m in API_ORDER.get(parent, []) if m.startswith(prefix)]


def package_modules(package):
    """The modules of ``package`` and of its sub-packages in reading order.

    API_ORDER's first, then the others by name; a sub-package's name stands before its
    modules.
    """
    path = importlib.import_module(package).__path__
    found = sorted(m.name for m in pkgutil.walk_packages(path, prefix=f"{package}."))
    found = [
        m.removeprefix(f"{package}.")
        for m in found
        if not any(m == own or m.startswith(f"{own}.") for own in OWN_PAGES - {package})
    ]
    listed = [m for m in _reading_order(package) if m in found]
    return [f"{package}.{m}" for m in listed + [m for m in found if m not in listed]]


#: Modules documented by what they do, without their members: the steps of
#: ``training_graph`` and of ``export_for_training``, which users do not call one by one
#: (their functions keep their docstrings and examples in the source, run as doctests).
DOCSTRING_ONLY = {
    f"helpers.core.{m}"
    for m in (
        "layers.activations",
        "layers.padding",
        "layers.pooling",
        "layers.resampling",
        "layers.normalization",
        "layers.running_statistics",
        "layers.embedding_padding",
        "layers.batch_norm",
        "model_graphs.torch_symbolics",
        "graphs.graph_values",
        "rewrites.convolution_rewrites",
        "rewrites.pooling_rewrites",
        "rewrites.gradient_rewrites",
        "graphs.graph_nodes",
        "graphs.graph_shapes",
    )
}


def _module_sections(match):
    return "\n".join(
        f"## `{module}`\n\n```{{eval-rst}}\n.. automodule:: {module}\n"
        + ("   :no-members:\n" if module in DOCSTRING_ONLY else "")
        + "```\n"
        for module in package_modules(match.group(1))
    )


def _subpackage_sections(match):
    """One section per sub-package of a package: what it holds, its modules, a link to its page."""
    package = match.group(1)
    sections = []
    for name in _reading_order(package):
        if "." in name:
            continue
        sub_package = f"{package}.{name}"
        modules = [m.rsplit(".", 1)[1] for m in package_modules(sub_package)]
        sections.append(
            f"## `{sub_package}`\n\n{_first_sentence(importlib.import_module(sub_package))}."
            f" Its modules: {', '.join(f'`{m}`' for m in modules)}"
            f" ({{doc}}`its page <{package.split('.')[-1]}/{name}>`).\n"
        )
    return "\n".join(sections)


def page_of(module):
    """The API page documenting ``module``: its package's, or its core sub-package's.

    Examples
    --------
    >>> page_of("helpers.core.machine.sessions"), page_of("helpers.whole_training.optimizer")
    ('api/core/machine', 'api/whole_training')
    """
    parts = module.split(".")
    return "/".join(["api", *parts[1 : 3 if parts[1] == "core" else 2]])


def _first_sentence(obj):
    doc = inspect.getdoc(obj) or ""
    paragraph = doc.split("\n\n")[0].replace("\n", " ").strip()
    sentence = re.split(r"(?<=[.:])\s", paragraph)[0].rstrip(":.")
    # reST roles (the docstrings') as MyST roles (the page's)
    return re.sub(r":(class|func|meth|mod|obj|data|attr|exc):`", r"{py:\1}`", sentence)


def _public_names_table():
    """A list of ``helpers.__all__``: each name, its package's page, what it is."""
    helpers = importlib.import_module("helpers")
    rows = []
    for name in helpers.__all__:
        obj = getattr(helpers, name)
        module = obj.__module__
        page = page_of(module)
        rows.append(
            f"- {{py:obj}}`{name} <{module}.{obj.__qualname__}>` "
            f"({{doc}}`{page.removeprefix('api/')} <{page}>`): {_first_sentence(obj)}."
        )
    return "\n".join(rows)


def _fill_api_markers(app, docname, source):
    text = source[0]
    if "<!-- api-modules:" in text:
        text = _API_MARKER.sub(_module_sections, text)
    if "<!-- api-subpackages:" in text:
        text = _SUBPACKAGES_MARKER.sub(_subpackage_sections, text)
    if "<!-- api-public-names -->" in text:
        text = text.replace("<!-- api-public-names -->", _public_names_table())
    source[0] = text


def setup(app):
    app.connect("source-read", _fill_api_markers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
