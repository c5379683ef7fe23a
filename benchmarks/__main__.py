"""Command line of the sweep runner: ``python -m benchmarks --help``."""

import sys

from benchmarks.sweep.runner import main

# Guarded: the worker processes of a LocalCluster (--jobs N) may import the main module again.
if __name__ == "__main__":
    sys.exit(main())
