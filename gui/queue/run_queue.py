"""The run queue in the window: the engine's :class:`~engine.run_queue.QueueOrder` driven by
the window's run signals.

The queue owns no engine. It starts each item through the window's own Run path
(``start_run``: a fresh run folder, the custom-code check, the plot, status and
log), so a queued run is exactly a run the user could have started, and it
follows that run through the window's :class:`~gui.run.run_controller.RunController`.
Which item runs next and how an ended run is recorded are the engine's rules.

Results come from each run's folder, the same numbers the Runs panel shows, and as
it reads them: at the end of a run without reading a file whole (a long run's
``metrics.csv`` takes seconds), then from a scan in the :class:`~gui.runs.run_scanner.RunScanner`'s
thread, so the window's thread never reads a whole ``metrics.csv``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from ...engine.config import Project
from ...engine.run_events import RunEvent, RunOutcome, StatusChanged
from ...engine.run_history import RunSummary, summarize
from ...engine.run_model import RunModel
from ...engine.run_queue import QueueItem, QueueOrder
from ..run.run_controller import RunController
from ..runs.run_scanner import RunScanner

StartRun = Callable[[Project], Path | None]
"""Starts a project in a fresh run folder as Run does; the folder, or None if it did not start."""


class RunQueue(QObject):
    """The queued items and the signals that run them in order (no widgets: testable alone)."""

    changed = Signal()  # an item was added, removed, started or ended, or its results read
    running_changed = Signal(bool)

    def __init__(
        self,
        controller: RunController,
        start_run: StartRun,
        parent: QObject | None = None,
        *,
        scanner: RunScanner | None = None,
    ) -> None:
        """``scanner`` reads the ended runs' files; the window passes the runs list's, so a
        folder is scanned once for both."""
        super().__init__(parent)
        self._controller = controller
        self._start_run = start_run
        self._order = QueueOrder()
        self._announced_running = False
        self._outcome: RunOutcome | None = None
        self._scanner = scanner if scanner is not None else RunScanner(self)
        self._scanner.scanned.connect(self._on_scanned)
        controller.changed.connect(self._on_event)
        controller.idle.connect(self._on_idle)

    @property
    def controller(self) -> RunController:
        return self._controller

    @property
    def items(self) -> list[QueueItem]:
        return self._order.items

    @property
    def running(self) -> bool:
        """True from Start until the queue is stopped or empty."""
        return self._order.running

    @property
    def current(self) -> QueueItem | None:
        """The item whose run is going on now; None between runs and for the window's own."""
        return self._order.current

    def queued(self) -> list[QueueItem]:
        return self._order.queued()

    def add(self, projects: list[Project]) -> None:
        self._order.add(projects)
        self.changed.emit()

    def remove(self, items: list[QueueItem]) -> None:
        """Removes the given items unless running: a run is stopped, not removed."""
        self._order.remove(items)
        self.changed.emit()

    def clear_ended(self) -> None:
        self._order.clear_ended()
        self.changed.emit()

    def start(self) -> None:
        """Runs the queued items in order; not while another run is going on."""
        if self.running or self._controller.active:
            return
        self._order.start()
        self._announce_running()
        self._start_next()

    def stop(self) -> None:
        """Stops the current run and the queue; the items not yet run stay queued."""
        self._order.stop()
        self._announce_running()
        if self.current is not None:
            self._controller.stop()

    def _start_next(self) -> None:
        if not self.running or self._controller.active or self.current is not None:
            return
        item = self._order.begin_next()
        if item is None:
            self._announce_running()
            return
        self._outcome = None
        self.changed.emit()
        run_dir = self._start_run(item.project)
        if run_dir is None:  # the user declined, or no folder: the window said why
            self._order.decline_current()
            self._announce_running()
            self.changed.emit()
            return
        item.run_dir = run_dir

    def _on_event(self, _model: RunModel, event: RunEvent) -> None:
        if isinstance(event, StatusChanged) and event.outcome and self.current is not None:
            self._outcome = event.outcome

    def _on_idle(self) -> None:
        if self.current is None:  # the window's own run, not the queue's
            return
        # After the current emission: an engine that cannot start goes idle inside start_run,
        # before the queue has learnt the run's folder.
        QTimer.singleShot(0, self._end_current)

    def _end_current(self) -> None:
        item = self._order.end_current(self._outcome, self._controller.stop_requested)
        if item is None:
            return
        if item.run_dir is not None and item.run_dir.is_dir():
            item.summary = summarize(item.run_dir, scan=False)
            if item.summary.pending:
                self._scanner.scan([item.run_dir])
        self._announce_running()
        self.changed.emit()
        self._start_next()

    def _on_scanned(self, summary: RunSummary) -> None:
        """A run's files were scanned: its item shows the results of every step."""
        item = self._order.item_of(summary.path)
        if item is not None and item.summary is not None:
            item.summary = summary
            self.changed.emit()

    def _announce_running(self) -> None:
        if self._order.running is not self._announced_running:
            self._announced_running = self._order.running
            self.running_changed.emit(self._announced_running)
