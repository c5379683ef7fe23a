"""Command line of the sweep runner: ``python -m benchmarks --help``."""
import sys

from .runner import main

sys.exit(main())
