"""``make`` run by a test as a user runs it from a shell of their own.

A test run by ``make test-unit VARIANT=maintained`` would otherwise hand its children that
make's command line (MAKEFLAGS) and its variables: a ``make`` started there would build or
describe the maintained variant whatever the test asked for.
"""

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: What a make hands the processes it starts, and the variables that choose an environment: the
#: makes run by :func:`run_make` start from none of them.
MAKE_CONTEXT = (
    "MAKEFLAGS",
    "MFLAGS",
    "MAKELEVEL",
    "MAKEOVERRIDES",
    "VARIANT",
    "GPU",
    "VENV",
    "PYTHON",
    "MAINTAINED_VENV",
    "MAINTAINED_PYTHON",
)


def run_make(*args, env=None, check=False):
    """Run ``make args`` in the repository's root; ``env`` (default: this process's environment
    without :data:`MAKE_CONTEXT`) replaces the environment."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k not in MAKE_CONTEXT}
    return subprocess.run(
        [shutil.which("make"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=check,
        env=env,
    )
