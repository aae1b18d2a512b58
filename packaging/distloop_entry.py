"""Entry script of the frozen app (PyInstaller): the same ``distloop`` command as the wheel's.

``distloop.gui.launcher.main`` calls ``multiprocessing.freeze_support()`` first, so when
``spawn`` re-executes this bundle for an engine process (or for multiprocessing's
resource tracker) the child runs that and never reaches the GUI or the CLI.
"""

import os
import sys


def give_windowed_process_stdio() -> None:
    """Gives a windowed executable (Windows' distloopw.exe) real stdout and stderr.

    Such a process starts with ``sys.stdout`` and ``sys.stderr`` set to None and no
    file descriptors 1 and 2, but engine processes flush those streams and redirect
    those descriptors to catch TensorFlow's log. Pointing both at the null device
    keeps that working; the engine's log still reaches the GUI through its pipe.
    """
    if sys.stdout is not None and sys.stderr is not None:
        return
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (1, 2):
        os.dup2(null, fd)
    os.close(null)
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115


if __name__ == "__main__":
    give_windowed_process_stdio()
    from distloop.gui.launcher import main

    sys.exit(main())
