"""Python's cyclic garbage collected on the window's thread only.

CPython collects cycles in whichever thread happens to allocate past the collector's
threshold. The window runs Python threads beside its own (the background idiom's
workers, qasync's executor, the live MLflow logger), so a window, a menu or a model
that became garbage in a cycle could be destroyed on one of them: the QObject's
destructor there takes Qt's lock of the object's connections and waits for the GIL,
while the window's thread, holding the GIL, destroys another object and waits for that
lock. Both wait for ever (seen in a test run: a worker hung for over 8 minutes with
pytest-timeout's own thread unable to run, which ended a CI run at its time limit).

So the automatic collector is off in the window's process and :class:`MainThreadCollector`
does its work from a timer on the window's thread, generation by generation as the
collector's own thresholds would (the recipe pyqtgraph's ``GarbageCollector`` made
known). Reference counting still frees everything outside cycles at once, on any thread.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

CHECK_MS = 1000
"""How often the window's thread looks at the collector's counts: young cycles wait at
most this long, which costs a second of their memory and nothing else."""


class MainThreadCollector(QObject):
    """Turns automatic collection off and collects from a timer on the thread it lives on
    (the window's) until :meth:`stop`."""

    def __init__(self, parent: QObject | None = None, interval_ms: int = CHECK_MS) -> None:
        super().__init__(parent)
        self._thresholds = gc.get_threshold()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.check)
        self._timer.start(interval_ms)

    def check(self) -> None:
        """Collects the oldest generation whose count passed its threshold, as the
        automatic collector would have on its next allocation."""
        counts = gc.get_count()
        for generation in (2, 1, 0):
            if counts[generation] > self._thresholds[generation]:
                gc.collect(generation)
                return

    def stop(self) -> None:
        self._timer.stop()
        gc.enable()
