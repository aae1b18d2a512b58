"""The ``distloop`` command: the desktop app without arguments, engine subcommands otherwise.

Qt is imported only when the window is wanted, so ``distloop run`` on a cluster
node starts without loading it.
"""

from __future__ import annotations

import multiprocessing
import sys


def main(argv: list[str] | None = None) -> int:
    multiprocessing.freeze_support()
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] not in ("gui", "--project"):
        from engine.cli import main as cli_main

        return cli_main(args)
    from gui.app import main as gui_main

    return gui_main(args[1:] if args and args[0] == "gui" else args)


if __name__ == "__main__":
    sys.exit(main())
