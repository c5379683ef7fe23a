"""What a user is told to import is public: the notebooks and the README import from ``helpers``
and its user-facing packages, never from ``helpers.core``; the benchmarks use no private name of
``helpers``; the former internal import paths are kept for one release with a
``DeprecationWarning`` naming the public import, and the project's own code never uses them.
"""

import ast
import glob
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest

import helpers
import helpers.whole_training
from helpers.core.machine.backends import TRAINING_PACKAGE_MODULES
from helpers.core.machine.runtime import has_training_package

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The notebooks a user runs: the course and the benchmark notebooks.
NOTEBOOKS = sorted(
    os.path.relpath(path, ROOT)
    for pattern in ("notebooks/*.ipynb", "benchmarks/*.ipynb")
    for path in glob.glob(os.path.join(ROOT, pattern))
)

#: The former import paths, kept for one release with a DeprecationWarning, and the public
#: import that replaces each.
DEPRECATED = {
    ("helpers.core.model_graphs.torch_export", "export_for_training"): "helpers",
    ("helpers.core.machine.sessions", "set_num_threads"): "helpers",
    ("helpers.core.model_graphs.torch_export", "buffers_kept"): (
        "helpers.core.model_graphs.from_torch"
    ),
}

#: What the notebooks call from the core, importable from ``helpers`` (issue 39).
NOTEBOOK_NAMES = [
    "export_for_training",
    "clear_training_caches",
    "to_ortvalue",
    "Device",
    "replace_initializers",
    "select_outputs",
    "training_graph",
    "rewrite_for_training",
    "count_rewrites",
    "make_update_rule",
    "build_update_graph",
    "WeightUpdater",
    "main_opset",
    "max_ir_version",
    "native_stderr_captured",
    "set_num_threads",
]


def code_cells(path):
    """``(cell number from 1, source)`` of a notebook's code cells, IPython magics blanked."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    for number, cell in enumerate(cells, start=1):
        if cell["cell_type"] == "code":
            source = "".join(cell["source"])
            yield number, re.sub(r"(?m)^\s*[%!].*$", "", source)


def core_imports(source):
    """The import statements of ``source`` that name ``helpers.core`` (line, statement).

    Examples
    --------
    >>> core_imports("from helpers import Device\\nfrom helpers.core.machine import devices")
    [(2, 'from helpers.core.machine import devices')]
    >>> core_imports("import helpers.core.machine.sessions as s\\nfrom helpers import core")
    [(1, 'import helpers.core.machine.sessions as s'), (2, 'from helpers import core')]
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        if any(m == "helpers.core" or m.startswith("helpers.core.") for m in modules):
            found.append((node.lineno, ast.get_source_segment(source, node)))
    return sorted(found)


def _is_private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(source):
    """The places where ``source`` uses a private name of ``helpers`` (line, what).

    A private name is one with a leading underscore at any level: a module of the dotted
    path, the imported name, an attribute read on something imported from ``helpers``, or a
    dotted path in a string (what ``mock.patch`` takes).

    Examples
    --------
    >>> private_uses("from helpers.core.layers import batch_norm\\nf = batch_norm._decompose")
    [(2, 'batch_norm._decompose')]
    >>> private_uses("from helpers.core._x import y\\nimport helpers.core.machine.sessions as s")
    [(1, 'helpers.core._x.y')]
    >>> private_uses("from helpers import Device\\nDevice.__name__, Device.type")
    []
    """
    found, bound = [], set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "helpers":
                    bound.add(alias.asname or alias.name.split(".")[0])
                    if any(_is_private(part) for part in alias.name.split(".")):
                        found.append((node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            if (node.module or "").split(".")[0] != "helpers":
                continue
            for alias in node.names:
                bound.add(alias.asname or alias.name)
                path = f"{node.module}.{alias.name}"
                if any(_is_private(part) for part in path.split(".")):
                    found.append((node.lineno, path))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"helpers(\.\w+)*\._\w*(\.\w+)*", node.value):
                found.append((node.lineno, node.value))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            if isinstance(node.value, ast.Name) and node.value.id in bound:
                found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return sorted(found)


def deep_imports(source):
    """The import statements of ``source`` that reach below a package of ``helpers`` (line,
    statement): a notebook imports from ``helpers`` or one of its packages, whose modules may move.

    Examples
    --------
    >>> deep_imports("from helpers.teaching import format_table\\nimport helpers.measure.timing")
    [(2, 'import helpers.measure.timing')]
    >>> deep_imports("from helpers.portable.trainer import PortableTrainer")
    [(1, 'from helpers.portable.trainer import PortableTrainer')]
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        else:
            continue
        if any(m.split(".")[0] == "helpers" and m.count(".") >= 2 for m in modules):
            found.append((node.lineno, ast.get_source_segment(source, node)))
    return sorted(found)


def private_attributes(source):
    """The private attributes ``source`` reads, of any object (line, ``owner._name``): a
    notebook shows what a user may write, and a private attribute may change in any release.

    Examples
    --------
    >>> private_attributes("fb._agent.run()\\nx.__class__\\nimport onnxruntime.capi._pybind_state")
    [(1, 'fb._agent'), (3, 'onnxruntime.capi._pybind_state')]
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            found.append((node.lineno, ast.get_source_segment(source, node)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names]
            paths = names if isinstance(node, ast.Import) else [node.module or ""] + names
            found += [(node.lineno, p) for p in paths if any(map(_is_private, p.split(".")))]
    return sorted(found)


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_notebooks_import_from_packages_and_read_no_private_attribute(path):
    found = [
        f"{path} cell {number} line {line}: {what}"
        for number, source in code_cells(path)
        for line, what in deep_imports(source) + private_attributes(source)
    ]
    assert found == [], (
        "import from helpers or its packages (helpers.teaching, helpers.measure, "
        "helpers.portable...), and read no private attribute:\n" + "\n".join(found)
    )


def _public_import(name):
    """The import a user writes for ``name`` (its public package), or None."""
    if name in helpers._PUBLIC:
        return f"from helpers import {name}"
    if name in helpers.whole_training._PUBLIC:
        return f"from helpers.whole_training import {name}"
    return None


#: Names the notebooks imported from the core that they no longer need, and why.
NO_LONGER_NEEDED = {
    "quiet_runtime_logs": "quiet_runtime_logs: not needed (importing helpers' training API "
    "keeps onnxruntime's logs quiet)",
}


def _advice(statement):
    names = re.findall(r"\b\w+\b", statement.split(" import ", 1)[-1])
    fixes = [NO_LONGER_NEEDED.get(name) or _public_import(name) for name in names]
    fixes = [fix for fix in fixes if fix]
    return f" -> {'; '.join(fixes)}" if fixes else " -> export it from a user-facing package"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_notebooks_import_no_internal_module(path):
    found = [
        f"{path} cell {number} line {line}: {statement}{_advice(statement)}"
        for number, source in code_cells(path)
        for line, statement in core_imports(source)
    ]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    "path",
    ["README.md"]
    + sorted(
        os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "guide", "*.md"))
    ),
)
def test_readme_and_guide_import_public_names_only(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        readme = f.read()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    found = [f"{s}{_advice(s)}" for block in blocks for _, s in core_imports(block)]
    # a public name written by its internal path, in the text (`helpers.core.x.y.name`)
    for internal in re.findall(r"`(helpers\.core\.[\w.]+)", readme):
        name = internal.rsplit(".", 1)[-1]
        if name in helpers._PUBLIC:
            found.append(f"{internal} -> helpers.{name}")
    assert found == [], "\n".join(f"{path}: {s}" for s in found)


def test_the_readme_shows_python_code():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        assert re.findall(r"```python\n(.*?)```", f.read(), re.S), "the check would read nothing"


def _benchmark_sources():
    for path in sorted(glob.glob(os.path.join(ROOT, "benchmarks", "**", "*.py"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            yield os.path.relpath(path, ROOT), f.read()
    for path in NOTEBOOKS:
        if path.startswith("benchmarks"):
            for number, source in code_cells(path):
                yield f"{path} cell {number}", source


def test_benchmarks_use_no_private_name_of_helpers():
    sources = dict(_benchmark_sources())
    assert len(sources) > 50, "the benchmarks' files were not found"
    found = [
        f"{where} line {line}: {name}"
        for where, source in sources.items()
        for line, name in private_uses(source)
    ]
    assert found == [], "make the name public where it lives:\n" + "\n".join(found)


def _importable_here(module, package="helpers"):
    """Whether ``module`` (relative to ``package``) imports here: the training package's own
    modules need it (:data:`helpers.core.machine.backends.TRAINING_PACKAGE_MODULES`)."""
    name = importlib.util.resolve_name(module, package)
    return has_training_package() or name not in TRAINING_PACKAGE_MODULES


def test_public_names_come_from_the_modules_that_define_them():
    for package in (helpers, helpers.whole_training):
        assert sorted(package._PUBLIC) == package.__all__
        for name, module in package._PUBLIC.items():
            if not _importable_here(module, package.__name__):
                continue
            defining = importlib.import_module(module, package.__name__)
            assert getattr(package, name) is getattr(defining, name)
            assert getattr(package, name).__module__ == defining.__name__, name


def test_what_the_notebooks_call_is_public_without_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in NOTEBOOK_NAMES:
            if not _importable_here(helpers._PUBLIC[name]):
                continue
            module = importlib.import_module(helpers._PUBLIC[name], "helpers")
            assert getattr(helpers, name) is getattr(module, name)
        for name in helpers.whole_training.__all__:
            if _importable_here(helpers.whole_training._PUBLIC[name], "helpers.whole_training"):
                getattr(helpers.whole_training, name)
    ours = [str(w.message) for w in caught if str(w.message).startswith("helpers.")]
    assert ours == []


@pytest.mark.parametrize(("module", "name"), sorted(DEPRECATED))
def test_an_old_import_warns_with_the_new_one_and_gives_the_same_object(module, name):
    public = DEPRECATED[module, name]
    namespace = {}
    with pytest.warns(DeprecationWarning, match=rf"write `from {public} import {name}`") as caught:
        exec(f"from {module} import {name}", namespace)
    assert namespace[name] is getattr(importlib.import_module(public), name)
    (warning,) = [w for w in caught if "has moved" in str(w.message)]
    assert warning.filename == "<string>"  # it points at the import, not at the helpers
    with pytest.raises(ImportError, match="cannot import name 'no_such_name'"):
        exec(f"from {module} import no_such_name", {})


def test_the_project_never_uses_an_old_path():
    old = re.compile(
        r"\bhelpers\.core\.model_graphs\.torch_export\b|\btorch_export import\b"
        r"|\bsessions import[^\n]*\bset_num_threads\b|\bsessions\.set_num_threads\b"
    )
    allowed = {"helpers/core/model_graphs/torch_export.py", "tests/test_public_imports.py"}
    found = []
    for pattern in ("helpers/**/*.py", "tests/**/*.py", "benchmarks/**/*", "docs/**/*.md", "*.md"):
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            relative = os.path.relpath(path, ROOT).replace(os.sep, "/")
            if relative in allowed or not path.endswith((".py", ".md", ".ipynb")):
                continue
            with open(path, encoding="utf-8") as f:
                found += [
                    f"{relative}:{number}: {line.strip()}"
                    for number, line in enumerate(f, start=1)
                    if old.search(line)
                ]
    assert found == [], "\n".join(found)


@pytest.mark.training_package
def test_generate_artifacts_is_quiet_once_the_training_api_is_imported():
    # the runtime's default first (a control: the check can fail), then after the import
    script = textwrap.dedent(
        """
        import tempfile
        import numpy as np
        from onnxruntime.training import artifacts
        from helpers import add_loss_output, native_stderr_captured
        from helpers.teaching.model_factories import mlp_onnx

        def generate():
            model = add_loss_output(mlp_onnx(3, hidden=(4,)))
            weights = [i.name for i in model.graph.initializer]
            with tempfile.TemporaryDirectory() as folder, native_stderr_captured() as log:
                artifacts.generate_artifacts(
                    model, requires_grad=weights, loss=None,
                    optimizer=artifacts.OptimType.SGD, artifact_directory=folder,
                )
            return sum("[I:onnxruntime" in line for line in log[0].splitlines())

        before = generate()
        from helpers import OrtGradientOptimizer
        print(before, generate())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = map(int, done.stdout.split())
    assert before > 0 and after == 0, (before, after)
