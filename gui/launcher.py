"""The ``distloop`` command: the desktop app without arguments, engine subcommands otherwise.

Qt is imported only when the window is wanted, so ``distloop run`` on a cluster
node starts without loading it.
"""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

from ..engine.cli import COMMANDS
from .shell.system_libraries import install_line, missing_for_xcb, missing_library

GUI_PACKAGES = ("PySide6", "pyqtgraph", "qasync")
"""The window's packages: the ``gui`` extra, which a headless install (a cluster node) lacks."""


def wants_window(args: list[str]) -> bool:
    """Whether the command line asks for the window: no arguments, ``gui``, ``--project``,
    or a project file (``distloop FILE.json``, as a file manager opens one).

    Anything else, a mistyped command included, goes to the command line, which
    says what it does not understand instead of opening a window on it.
    """
    if not args or args[0] == "gui" or args[0].split("=")[0] == "--project":
        return True
    first = args[0]
    if first in COMMANDS or first.startswith("-"):
        return False
    return first.lower().endswith(".json") or Path(first).is_file()


def main(argv: list[str] | None = None) -> int:
    multiprocessing.freeze_support()
    args = sys.argv[1:] if argv is None else argv
    if not wants_window(args):
        from ..engine.cli import main as cli_main

        return cli_main(args)
    try:
        from .shell.app import main as gui_main
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in GUI_PACKAGES:
            raise
        print(
            f"distloop: the window needs the 'gui' extra (missing: {exc.name}); install it with "
            "pip install 'distloop[gui]', or use the command line, which works without it "
            "(distloop --help)",
            file=sys.stderr,
        )
        return 1
    except ImportError as exc:  # Qt's own libraries load, a system library they link does not
        library = missing_library(exc)
        if library is None:
            raise
        print(install_line(library), file=sys.stderr)
        return 1
    library = missing_for_xcb()
    if library is not None:
        print(install_line(library), file=sys.stderr)
        return 1
    return gui_main(args[1:] if args and args[0] == "gui" else args)


if __name__ == "__main__":
    sys.exit(main())
