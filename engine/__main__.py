"""``python -m engine PROJECT.json [--out DIR]`` behaves like ``distloop run``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
