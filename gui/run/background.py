"""Work that waits on other machines (ssh, a pre-flight, a stack dump), off the window's thread.

A pre-flight asks every host over ssh and has each task listen on its port for a while:
seconds to a minute, during which the window must keep painting and answering. The
work runs in a daemon thread; what it says comes back as Qt signals, which Qt queues
onto the window's thread because this object lives there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

Progress = Callable[[int, int, str], None]


class Background(QObject):
    """One piece of work at a time: ``progress`` as it goes, then ``done`` or ``failed``."""

    progress = Signal(int, int, str)  # steps done, steps in all, what is being done
    done = Signal(object)  # what the work returned
    failed = Signal(str)  # one line: why the work could not be done at all

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(
        self, work: Callable[[Progress], Any], known: tuple[type[Exception], ...] = ()
    ) -> bool:
        """Runs ``work(progress)`` in a thread; False (and nothing started) while one runs.

        An exception of a ``known`` type says its own line; any other is named too."""
        if self.running:
            return False

        def run() -> None:
            try:
                result = work(self.progress.emit)
            except known as exc:
                self.failed.emit(str(exc))
            except Exception as exc:  # a bug or a broken system: one line, never a crash
                self.failed.emit(f"{type(exc).__name__}: {exc}")
            else:
                self.done.emit(result)

        self._thread = threading.Thread(target=run, name="distloop-background", daemon=True)
        self._thread.start()
        return True
