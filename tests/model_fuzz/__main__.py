"""``python -m model_fuzz``: see :mod:`model_fuzz.runner`."""

import sys

from .runner import main

if __name__ == "__main__":
    sys.exit(main())
