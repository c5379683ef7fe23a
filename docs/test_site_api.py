"""The API reference on the built site (``make docs-test``): one page per package and per core
sub-package, each with a visible contents list, no raw reprs and a size well under the single
page it replaced (121,454 px, 1.1 MB); every module of ``helpers`` documented, every public name
on the index, and the registries showing the names they accept.
"""

import glob
import json
import os
import re
import sys

from site_browser import DESKTOP, PHONE, measure
from site_paths import API_OVERVIEWS, API_PACKAGES, API_PAGES, ROOT, SITE

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "_ext"))
from api_pages import DOCSTRING_ONLY  # noqa: E402 (the docs' extension, beside this file)

# what a registry or an object looked like when autodoc printed its repr
RAW_REPR = re.compile(
    r"<(class|function|built-in function|module) '?[\w.]+'?>|<[\w.]+ object( at 0x[0-9a-f]+)?>"
)


def test_api_reference_is_one_page_per_package(browser):
    documented = set()
    for path in API_PAGES:
        name = os.path.basename(path).replace(".html", "")
        size = os.path.getsize(os.path.join(SITE, path))
        m = measure(
            browser,
            path,
            DESKTOP,
            screenshot=f"api-{name}-1280.png" if name in ("api", "core", "machine") else None,
        )
        assert size < 700_000, f"{path} is {size:,} bytes"
        assert m["pageHeight"] < 80_000, f"{path} is {m['pageHeight']:,}px tall"
        assert m["contents"] and m["contents"]["visible"], f"{path} has no visible contents list"
        assert "ERROR:" not in m["text"], f"{path} shows a theme's or an extension's error"
        assert m["contents"]["top"] < 1000, f"{path}: the contents list is not at the top"
        assert m["contents"]["links"] >= 2
        # the examples (pre) show Python sessions as they run: reprs are what they print
        described = browser.evaluate(
            "(() => { const a = document.querySelector('article').cloneNode(true);"
            " a.querySelectorAll('pre').forEach(p => p.remove()); return a.textContent; })()"
        )
        reprs = RAW_REPR.search(described)
        assert not reprs, f"{path} prints a raw repr: {reprs and reprs.group(0)}"
        assert not m["scrollingCode"], f"{path}: examples scroll sideways: {m['scrollingCode'][:3]}"
        documented.update(m["modules"])
        # a page of modules shown by their docstrings only (the layers) has no members
        package = "helpers." + path[len("api/") : -len(".html")].replace("/", ".")
        if path in API_OVERVIEWS or set(m["modules"]) <= DOCSTRING_ONLY | {package}:
            assert len(m["modules"]) >= 1 + (path not in API_OVERVIEWS), f"{path}: no module"
        else:
            assert m["objects"] > 5, f"{path} documents almost nothing"
    # every module of helpers is documented on one of the pages
    modules = set()
    for file in glob.glob(os.path.join(ROOT, "helpers", "**", "*.py"), recursive=True):
        if os.path.basename(file) == "conftest.py":
            continue  # pytest's hooks for the docstring examples, not an API
        module = os.path.relpath(file, ROOT)[:-3].replace(os.sep, ".")
        modules.add(module[: -len(".__init__")] if module.endswith(".__init__") else module)
    assert modules - documented == set(), (
        f"modules documented nowhere: {sorted(modules - documented)}"
    )
    phone = measure(browser, "api/core/machine.html", PHONE, screenshot="api-machine-390.png")
    assert phone["contents"]["visible"]


def test_api_index_lists_the_packages_once_and_the_public_names(browser):
    m = measure(browser, "api.html")
    text = " ".join(m["text"].split())
    for package in API_PACKAGES:
        assert text.count(f"helpers.{package}:") == 1, (
            f"helpers.{package} is introduced {text.count(f'helpers.{package}:')} times"
        )
    import helpers

    missing = [name for name in helpers.__all__ if name not in text]
    assert not missing, f"public names not on the index: {missing}"


def test_registries_show_the_names_they_accept(browser):
    def described(name):
        measure(browser, f"api/core/{name.split('.')[2]}.html")  # the sub-package's page
        return " ".join(
            browser.evaluate(
                f"document.getElementById({json.dumps(name)}).parentElement.innerText"
            ).split()
        )

    rules = described("helpers.core.updates.update_rules.UPDATE_RULES")
    for name in ("'sgd'", "'momentum'", "'nesterov'", "'adamw'"):
        assert name in rules  # named by its comment
    assert "<class" not in rules
    aliases = described("helpers.core.graphs.loss_graphs.LOSS_ALIASES")
    assert "Names it accepts" in aliases and "'neglog': 'log'" in aliases
    assert "= {" not in aliases
    artifacts = described("helpers.core.machine.training_cache.ARTIFACTS")
    assert artifacts.startswith("ARTIFACTS") and "object" not in artifacts
    assert "ContentCache object" not in measure(browser, "api/core/machine.html")["text"]
