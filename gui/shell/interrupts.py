"""Ctrl-C in the terminal that started the window, answered by the Qt event loop.

Python runs a signal handler only between two bytecodes of the main thread, and
Python's own SIGINT handler raises KeyboardInterrupt there: in the middle of
whatever slot was running (the plot's redraw), where PySide prints the traceback
and the window carries on. While the event loop waits in Qt's C++ code, no bytecode
runs at all, so a signal would wait for the next timer or repaint. Here the C-level
handler writes the signal's number into a socket (``signal.set_wakeup_fd``) that the
event loop watches, so the window answers at once, between two events, where
ending is safe.
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable

from PySide6.QtCore import QObject, QSocketNotifier


class Interrupts(QObject):
    """Calls ``on_interrupt`` for each SIGINT the process receives, in the Qt thread.

    :meth:`close` puts the previous handler and wake-up descriptor back.
    """

    def __init__(self, on_interrupt: Callable[[], None]) -> None:
        super().__init__()
        self._on_interrupt = on_interrupt
        self._reader, self._writer = socket.socketpair()
        for end in (self._reader, self._writer):
            end.setblocking(False)
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        # The Python-level handler only has to exist (not raise): the wake-up byte says it all.
        self._previous = signal.signal(signal.SIGINT, _noted)
        self._notifier = QSocketNotifier(self._reader.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._read)

    def _read(self) -> None:
        try:
            data = self._reader.recv(64)
        except BlockingIOError:
            return
        for number in data:
            if number == signal.SIGINT:
                self._on_interrupt()

    def close(self) -> None:
        self._notifier.setEnabled(False)
        signal.signal(signal.SIGINT, self._previous)
        signal.set_wakeup_fd(self._previous_fd)
        self._reader.close()
        self._writer.close()


def _noted(signum: int, frame: object) -> None:
    """Python's part of the handler: nothing, the event loop answers the wake-up byte."""
