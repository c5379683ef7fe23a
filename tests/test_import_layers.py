"""No module imports from a layer above its own: the architecture the folders show, checked.

The layers, bottom to top:

* ``helpers.portable``: the step model's runner, numpy, onnx and onnxruntime only (it runs on
  the maintained onnxruntime, without the training package): it imports nothing else of
  ``helpers``, and every layer may import it (the batch order is defined there);
* the sub-packages of ``helpers.core``, in :data:`CORE_ORDER`: each may import those
  before it (sessions and devices know nothing of graphs; the estimator uses everything);
* the two API packages, ``helpers.whole_training`` and ``helpers.forward_backward``: they
  share ``helpers.core`` and never import each other (either API is usable alone);
* ``helpers.teaching`` and ``helpers.measure``: the notebooks' utilities, on top of the
  core and both APIs, and independent of each other;
* ``helpers`` itself (its public names) and ``helpers.doctor``;
* ``benchmarks``: may import any of ``helpers``, and nothing in ``helpers`` imports it.

Every ``import`` counts, those inside functions too, and so does
``importlib.import_module`` with a literal name. One import is allowed across layers, in
:data:`CROSSING`: the command line's ``export``, which makes a step with the whole stack, where
its ``fit`` needs the runner only.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

CORE_ORDER = [
    "machine",
    "graphs",
    "layers",
    "rewrites",
    "model_graphs",
    "inputs",
    "updates",
    "training",
    "export",
]
CORE = {f"core.{sub}" for sub in CORE_ORDER}
APIS = {"whole_training", "forward_backward"}

#: The bottom layer: numpy, onnx and onnxruntime only; every other layer may import it.
PORTABLE = {"portable"}

#: What each layer may import besides itself.
ALLOWED = {
    "portable": set(),
    **{
        f"core.{sub}": PORTABLE | {f"core.{below}" for below in CORE_ORDER[:i]}
        for i, sub in enumerate(CORE_ORDER)
    },
    "core": PORTABLE | CORE,
    "whole_training": PORTABLE | CORE,
    "forward_backward": PORTABLE | CORE,
    "teaching": PORTABLE | CORE | APIS,
    "measure": PORTABLE | CORE | APIS,
    "helpers": PORTABLE | CORE | APIS,
    "doctor": PORTABLE | CORE | APIS | {"teaching", "measure", "helpers"},
    "benchmarks": PORTABLE | CORE | APIS | {"core", "teaching", "measure", "helpers", "doctor"},
}


#: ``(module, name)``: the imports allowed to reach a layer above their own, and why.
CROSSING = {
    # python -m helpers.portable export: the step builder (onnx, scikit-learn's estimator base),
    # imported once the command is known, so that `fit` imports none of it
    ("helpers.portable.__main__", "helpers.whole_training.training_step.build_training_step"),
}


def layer(name):
    """The layer of a dotted module name (or of a name inside a module); None outside.

    Examples
    --------
    >>> layer("helpers.core.machine.sessions.make_session"), layer("helpers.AbsoluteLearningLoss")
    ('core.machine', 'helpers')
    """
    parts = name.split(".")
    if parts[0] == "benchmarks":
        return "benchmarks"
    if parts[0] != "helpers":
        return None
    if parts[1:2] == ["core"]:
        sub = ".".join(parts[1:3])
        return sub if sub in CORE else "core"
    if len(parts) > 1 and parts[1] in ALLOWED:
        return parts[1]
    return "helpers"


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(source, module, is_package):
    """Every name ``source`` imports, resolved to a dotted path, lazy imports included."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            start = ".".join(base) if node.level else ""
            origin = ".".join(p for p in (start, node.module or "") if p)
            yield from (f"{origin}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value


def violations(source, module, is_package=False):
    """The imports of ``module`` that reach a layer it may not import."""
    own = layer(module)
    return [
        f"{module} imports {name} ({own} -> {layer(name)})"
        for name in imported_names(source, module, is_package)
        if layer(name) not in (None, own)
        and layer(name) not in ALLOWED[own]
        and (module, name) not in CROSSING
    ]


MODULES = sorted(p for folder in ("helpers", "benchmarks") for p in (ROOT / folder).rglob("*.py"))


def test_every_module_has_a_layer_in_the_table():
    layers = {layer(module_name(p)) for p in MODULES}
    assert layers <= set(ALLOWED), layers - set(ALLOWED)
    assert CORE <= layers, "a sub-package of CORE_ORDER is missing from helpers/core"
    found = {p.parent.name for p in (ROOT / "helpers" / "core").glob("*/__init__.py")}
    assert found == set(CORE_ORDER), "every sub-package of helpers/core takes a place in the order"


def test_no_module_imports_from_a_layer_above_it():
    found = [
        v
        for p in MODULES
        for v in violations(p.read_text(), module_name(p), p.name == "__init__.py")
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "module, source",
    [
        ("helpers.core.training.estimator", "from ...whole_training import optimizer"),
        ("helpers.core.machine.sessions", "def f():\n    import helpers.forward_backward.session"),
        ("helpers.core.graphs.graph_nodes", "from ..layers.padding import explicit_pads"),
        ("helpers.whole_training.session", "from ..forward_backward.losses import X"),
        (
            "helpers.measure.timing",
            "import importlib\nimportlib.import_module('benchmarks.sweep.runner')",
        ),
        ("helpers.teaching.plotting", "from helpers.measure.timing import t"),
        ("helpers.core.inputs.validation", "from helpers import OrtGradientOptimizer"),
        ("helpers.portable.trainer", "from ..core.training.batches import Batches"),
        ("helpers.portable.batch_order", "from helpers import PortableTrainer"),
    ],
)
def test_an_import_from_above_is_reported(module, source):
    assert len(violations(source, module)) == 1


def test_imports_from_below_are_not_reported():
    source = "from ..graphs.graph_nodes import a\nfrom .batches import b\nimport numpy"
    assert violations(source, "helpers.core.training.estimator") == []
    assert violations("from ..core.machine import sessions", "helpers.teaching.notebook") == []
    source = "from ...portable.batch_order import epoch_order"
    assert violations(source, "helpers.core.training.estimator") == []


REPORT = sorted((ROOT / "benchmarks" / "report").rglob("*.py"))


def study_imports(source, module, is_package=False):
    """The imports of ``module`` that reach :mod:`benchmarks.studies` (the studies use the
    report, never the other way)."""
    return [
        name
        for name in imported_names(source, module, is_package)
        if name.split(".")[:2] == ["benchmarks", "studies"]
    ]


def test_the_report_never_imports_a_study():
    found = [
        f"{module_name(p)} imports {name}"
        for p in REPORT
        for name in study_imports(p.read_text(), module_name(p), p.name == "__init__.py")
    ]
    assert REPORT and not found, "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "from benchmarks.studies.zoo_costs import zoo_costs_section",
        "def f():\n    from ..studies import time_to_accuracy",
        "import benchmarks.studies.peak_memory",
    ],
)
def test_a_study_imported_by_the_report_is_reported(source):
    assert len(study_imports(source, "benchmarks.report.aggregate")) == 1
    assert study_imports("from benchmarks.report import style", "benchmarks.studies.x") == []
