"""``python -m distloop`` is the ``distloop`` command."""

import sys

from .gui.launcher import main

if __name__ == "__main__":
    sys.exit(main())
