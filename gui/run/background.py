"""Work that waits on other machines (ssh, a pre-flight, a stack dump), off the window's thread.

A pre-flight asks every host over ssh and has each task listen on its port for a while:
seconds to a minute, during which the window must keep painting and answering. The
work runs in a daemon thread; what it says comes back as Qt signals, which Qt queues
onto the window's thread because this object lives there.

The work counts as running until its ``done`` or ``failed`` is handed out on the
window's thread, not until its thread ends: a handler that starts the next piece of
work, or enables the actions that start one, must find this one over. (Judged by the
thread, a busy machine let the thread outlive the handler's call, Run on Hosts stayed
greyed out as "a check is running" after the check, and nothing enabled it again.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

Progress = Callable[[int, int, str], None]


class Background(QObject):
    """One piece of work at a time: ``progress`` as it goes, then ``done`` or ``failed``."""

    progress = Signal(int, int, str)  # steps done, steps in all, what is being done
    done = Signal(object)  # what the work returned
    failed = Signal(str)  # one line: why the work could not be done at all
    _ended = Signal(bool, object)  # from the work's thread: succeeded, result or line

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._busy = False
        self._ended.connect(self._hand_out)

    @property
    def running(self) -> bool:
        return self._busy

    def start(
        self, work: Callable[[Progress], Any], known: tuple[type[Exception], ...] = ()
    ) -> bool:
        """Runs ``work(progress)`` in a thread; False (and nothing started) while one runs.

        An exception of a ``known`` type says its own line; any other is named too."""
        if self._busy:
            return False

        def run() -> None:
            try:
                result = work(self.progress.emit)
            except known as exc:
                self._ended.emit(False, str(exc))
            except Exception as exc:  # a bug or a broken system: one line, never a crash
                self._ended.emit(False, f"{type(exc).__name__}: {exc}")
            else:
                self._ended.emit(True, result)

        self._busy = True
        threading.Thread(target=run, name="distloop-background", daemon=True).start()
        return True

    @Slot(bool, object)
    def _hand_out(self, succeeded: bool, said: object) -> None:
        self._busy = False
        if succeeded:
            self.done.emit(said)
        else:
            self.failed.emit(str(said))
