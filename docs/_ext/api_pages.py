"""The API reference's pages: one section per module, and the list of the public names.

A Sphinx extension of this project's docs (``extensions`` in ``docs/conf.py``).
``docs/api/<package>.md`` holds the marker line ``<!-- api-modules: helpers.<package> -->``;
it becomes one section per module of the package and of its sub-packages: the modules
of :data:`API_ORDER` first, in that order (reading order), then any other module of the
package, so that a new module is documented without editing the pages. The marker
``<!-- api-public-names -->`` becomes a list of ``helpers.__all__``.
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
        "model_graphs.torch_export",
        "model_graphs.training_graph",
        "model_graphs.inference_mode",
        "model_graphs.onnx_graph",
        "model_graphs.torch_symbolics",
        "inputs",
        "inputs.validation",
        "inputs.class_labels",
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
    ],
    "helpers.measure": ["timing", "conditions", "profiling"],
}
_API_MARKER = re.compile(r"^<!-- api-modules: ([\w.]+) -->$", re.M)


def package_modules(package):
    """The modules of ``package`` and of its sub-packages in reading order.

    API_ORDER's first, then the others by name; a sub-package's name stands before its
    modules.
    """
    path = importlib.import_module(package).__path__
    found = sorted(m.name for m in pkgutil.walk_packages(path, prefix=f"{package}."))
    found = [m.removeprefix(f"{package}.") for m in found]
    listed = [m for m in API_ORDER.get(package, []) if m in found]
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
        package = ".".join(module.split(".")[:2])
        rows.append(
            f"- {{py:obj}}`{name} <{module}.{obj.__qualname__}>` ({{doc}}`{package.split('.')[1]} "
            f"<api/{package.split('.')[1]}>`): {_first_sentence(obj)}."
        )
    return "\n".join(rows)


def _fill_api_markers(app, docname, source):
    text = source[0]
    if "<!-- api-modules:" in text:
        text = _API_MARKER.sub(_module_sections, text)
    if "<!-- api-public-names -->" in text:
        text = text.replace("<!-- api-public-names -->", _public_names_table())
    source[0] = text


def setup(app):
    app.connect("source-read", _fill_api_markers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
