"""The layers of ``benchmarks/profiles``: the root, the survey, the studies; no import back up.

The root's ``ab_timing`` and ``report`` import neither sub-package; the survey
never imports the studies; the studies may import both (and do).
"""

import ast
import pathlib

import pytest

PROFILES = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "profiles"
SURVEY, STUDIES = "benchmarks.profiles.survey", "benchmarks.profiles.studies"


def imports(path):
    """The modules ``path`` imports from (its imports are absolute)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield node.module or ""
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


@pytest.mark.parametrize(
    "folder, above",
    [(".", (SURVEY, STUDIES)), ("survey", (STUDIES,))],
)
def test_no_profiles_module_imports_a_layer_above_it(folder, above):
    paths = sorted((PROFILES / folder).glob("*.py"))
    assert len(paths) >= 3
    found = [f"{p.name}: {name}" for p in paths for name in imports(p) if name.startswith(above)]
    assert not found


def test_the_studies_build_on_the_survey_and_the_root():
    names = {name for p in (PROFILES / "studies").glob("*.py") for name in imports(p)}
    assert any(name.startswith(SURVEY) for name in names)
    assert "benchmarks.profiles.ab_timing" in names and "benchmarks.profiles.report" in names
