"""Where the site tests (``docs/test_site_*.py``, ``make docs-test``) find the built site, and the
pages more than one of them opens.

``DOCS_SITE`` names the built site (``docs/_build/quick`` by default); screenshots land beside it,
in ``_screenshots``.
"""

import os

#: The built site the tests open.
SITE = os.environ.get("DOCS_SITE", os.path.join(os.path.dirname(__file__), "_build", "quick"))
#: The repository, whose notebooks, results and helpers the site shows.
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
#: The first notebook's page.
NOTEBOOK = "notebooks/01_linear_regression_whole_training.html"
#: The packages of the API reference, one page each.
API_PACKAGES = ["whole_training", "forward_backward", "core", "teaching", "measure", "portable"]
#: The sub-packages of ``helpers.core``, one page each below the core's.
CORE_PARTS = sorted(
    name
    for name in os.listdir(os.path.join(ROOT, "helpers", "core"))
    if os.path.isfile(os.path.join(ROOT, "helpers", "core", name, "__init__.py"))
)
#: The API reference's index, then one page per package and per core sub-package.
API_PAGES = (
    ["api.html"]
    + [f"api/{p}.html" for p in API_PACKAGES]
    + [f"api/core/{p}.html" for p in CORE_PARTS]
    + ["api/portable/gradients.html"]
)
#: The user guide's pages, one subject each (``docs/guide/*.md``).
GUIDE_PAGES = sorted(
    f"guide/{name[:-3]}.html"
    for name in os.listdir(os.path.join(ROOT, "docs", "guide"))
    if name.endswith(".md")
)
#: The pages that introduce others (a list of packages), not modules' members.
API_OVERVIEWS = ["api.html", "api/core.html"]
#: The notebooks the quick build executes (docs/conf.py): their outputs are on the site.
EXECUTED = [
    NOTEBOOK,
    "notebooks/03_training_artifacts.html",
    "notebooks/13_profiling_a_training_step.html",
]
