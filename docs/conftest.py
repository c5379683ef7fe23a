"""The site tests' browser: one headless Chromium (``site_browser.Browser``) on the built site,
opened once for every ``docs/test_site_*.py`` of a run."""

import os
import shutil

import pytest
from site_browser import Browser
from site_paths import SITE


@pytest.fixture(scope="session")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, (
        "chromium is not installed: `make docs-test` installs it (apt-get install chromium)"
    )
    assert os.path.exists(os.path.join(SITE, "index.html")), f"no site in {SITE}: build it first"
    opened = Browser(chromium, SITE)
    yield opened
    opened.close()
