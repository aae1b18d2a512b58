"""The run queue: projects run one after another, and their results side by side.

The queue owns no engine. It starts each item through the window's own Run path
(``start_run``: a fresh run folder, the custom-code check, the plot, status and
log), so a queued run is exactly a run the user could have started, and it
follows that run through the window's :class:`~gui.run_controller.RunController`.

What ends a queue: Stop (the queue's or the window's, which stops the current
run and the rest with it), the user declining to run an item (custom code not
trusted, no run folder), or the last item. A run that fails does not: runs
over several learning rates expect some to diverge, so the failure is recorded in its
row and the next item starts. Results come from each run's folder
(:func:`engine.run_history.summarize`), the same numbers the Runs panel shows.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QAction, QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSplitter,
    QStyle,
    QTableView,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from ..engine.config import Project
from ..engine.messages import RunFailed, RunFinished
from ..engine.run_events import RunEvent, StatusChanged
from ..engine.run_folder import format_loss
from ..engine.run_history import RunSummary, summarize
from ..engine.run_model import RunModel
from .run_controller import RunController
from .status_panel import format_duration

Index = QModelIndex | QPersistentModelIndex
SORT_ROLE = Qt.ItemDataRole.UserRole

StartRun = Callable[[Project], Path | None]
"""Starts a project in a fresh run folder as Run does; the folder, or None if it did not start."""
ProjectSource = Callable[[], Project | None]
"""The window's current project ready to run (paths resolved, code trusted), or None."""


class ItemState(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"


ENDED = (ItemState.FINISHED, ItemState.FAILED, ItemState.STOPPED)
STATE_COLORS = {
    ItemState.RUNNING: QColor(21, 101, 192),
    ItemState.FAILED: QColor(198, 40, 40),
    ItemState.STOPPED: QColor(230, 81, 0),
}


@dataclass
class QueueItem:
    """One project waiting, running or done; ``summary`` is read from its folder at the end."""

    number: int
    project: Project
    state: ItemState = ItemState.QUEUED
    run_dir: Path | None = None
    summary: RunSummary | None = None
    error: str | None = None


class RunQueue(QObject):
    """The queued items and the logic that runs them in order (no widgets: testable alone)."""

    changed = Signal()  # an item was added, removed, started or ended
    running_changed = Signal(bool)

    def __init__(
        self, controller: RunController, start_run: StartRun, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self._controller = controller
        self._start_run = start_run
        self._items: list[QueueItem] = []
        self._numbers = 0
        self._running = False
        self._current: QueueItem | None = None
        self._outcome: RunFinished | RunFailed | None = None
        controller.changed.connect(self._on_event)
        controller.idle.connect(self._on_idle)

    @property
    def controller(self) -> RunController:
        return self._controller

    @property
    def items(self) -> list[QueueItem]:
        return list(self._items)

    @property
    def running(self) -> bool:
        """True from Start until the queue is stopped or empty."""
        return self._running

    @property
    def current(self) -> QueueItem | None:
        """The item whose run is going on now; None between runs and for the window's own."""
        return self._current

    def queued(self) -> list[QueueItem]:
        return [item for item in self._items if item.state is ItemState.QUEUED]

    def add(self, projects: list[Project]) -> None:
        for project in projects:
            self._numbers += 1
            self._items.append(QueueItem(self._numbers, project))
        self.changed.emit()

    def remove(self, items: list[QueueItem]) -> None:
        """Removes the given items unless running: a run is stopped, not removed."""
        self._items = [item for item in self._items if item not in items or item is self._current]
        self.changed.emit()

    def clear_ended(self) -> None:
        self._items = [item for item in self._items if item.state not in ENDED]
        self.changed.emit()

    def start(self) -> None:
        """Runs the queued items in order; not while another run is going on."""
        if self._running or not self.queued() or self._controller.active:
            return
        self._set_running(True)
        self._start_next()

    def stop(self) -> None:
        """Stops the current run and the queue; the items not yet run stay queued."""
        self._set_running(False)
        if self._current is not None:
            self._controller.stop()

    def _start_next(self) -> None:
        if not self._running or self._controller.active or self._current is not None:
            return
        waiting = self.queued()
        if not waiting:
            self._set_running(False)
            return
        item = waiting[0]
        item.state = ItemState.RUNNING
        self._current = item
        self._outcome = None
        self.changed.emit()
        run_dir = self._start_run(item.project)
        if run_dir is None:  # the user declined, or no folder: the window said why
            self._current = None
            item.state = ItemState.QUEUED
            self._set_running(False)
            self.changed.emit()
            return
        item.run_dir = run_dir

    def _on_event(self, _model: RunModel, event: RunEvent) -> None:
        if isinstance(event, StatusChanged) and event.outcome and self._current is not None:
            self._outcome = event.outcome

    def _on_idle(self) -> None:
        if self._current is None:  # the window's own run, not the queue's
            return
        # After the current emission: an engine that cannot start goes idle inside start_run,
        # before the queue has learnt the run's folder.
        QTimer.singleShot(0, self._end_current)

    def _end_current(self) -> None:
        item, outcome = self._current, self._outcome
        if item is None:
            return
        self._current = None
        stopped_by_user = self._controller.stop_requested
        if isinstance(outcome, RunFinished) and outcome.status == "finished":
            item.state = ItemState.FINISHED
        elif stopped_by_user or (isinstance(outcome, RunFinished) and outcome.status == "stopped"):
            item.state = ItemState.STOPPED
        else:
            item.state = ItemState.FAILED
            item.error = (
                f"{outcome.error_type}: {outcome.message}"
                if isinstance(outcome, RunFailed)
                else "the run ended without reporting how"
            )
        if item.run_dir is not None and item.run_dir.is_dir():
            item.summary = summarize(item.run_dir)
        if stopped_by_user:
            self._set_running(False)
        self.changed.emit()
        self._start_next()

    def _set_running(self, running: bool) -> None:
        if running is not self._running:
            self._running = running
            self.running_changed.emit(running)


class Column(enum.IntEnum):
    NUMBER = 0
    NAME = 1
    STATE = 2
    VAL_LOSS = 3
    LATE_LOSS = 4
    FINAL_LOSS = 5
    VALIDATION = 6
    STEPS = 7
    DURATION = 8
    FOLDER = 9


HEADERS = {
    Column.NUMBER: "#",
    Column.NAME: "Name",
    Column.STATE: "State",
    Column.VAL_LOSS: "Best val_loss",
    Column.LATE_LOSS: "Loss, last 10%",
    Column.FINAL_LOSS: "Final loss",
    Column.VALIDATION: "Validation",
    Column.STEPS: "Steps",
    Column.DURATION: "Duration",
    Column.FOLDER: "Run folder",
}
COLUMN_WIDTHS = {
    Column.NUMBER: 36,
    Column.NAME: 220,
    Column.STATE: 70,
    Column.VAL_LOSS: 95,
    Column.LATE_LOSS: 95,
    Column.FINAL_LOSS: 95,
    Column.VALIDATION: 200,
    Column.STEPS: 60,
    Column.DURATION: 70,
}
NUMERIC = {
    Column.NUMBER,
    Column.VAL_LOSS,
    Column.LATE_LOSS,
    Column.FINAL_LOSS,
    Column.STEPS,
    Column.DURATION,
}
QUEUE_COLUMNS = (Column.NUMBER, Column.NAME, Column.STATE)
RESULT_COLUMNS = (
    Column.NAME,
    Column.STATE,
    Column.VAL_LOSS,
    Column.LATE_LOSS,
    Column.FINAL_LOSS,
    Column.VALIDATION,
    Column.STEPS,
    Column.DURATION,
    Column.FOLDER,
)


def _val_loss(item: QueueItem) -> float | None:
    validation = item.summary.best_validation if item.summary else None
    return validation.get("val_loss") if validation else None


def _validation_text(summary: RunSummary | None) -> str:
    """The best evaluation's other metrics, e.g. ``val_accuracy 0.94``; "—" without one."""
    validation = summary.best_validation if summary else None
    if not validation:
        return "—"
    return (
        ", ".join(
            f"{name} {format_loss(value)}"
            for name, value in validation.items()
            if name != "val_loss"
        )
        or "—"
    )


def ranking_column(items: list[QueueItem]) -> Column:
    """What ranks the queue's results: the best validation loss when its runs evaluate, else
    the mean loss of their last tenth of steps; never the lowest loss, one batch's."""
    return (
        Column.VAL_LOSS
        if any(_val_loss(item) is not None for item in items)
        else (Column.LATE_LOSS)
    )


def _number_key(value: float | None) -> float:
    """Missing and NaN losses sort after every number, so ascending lists the best first."""
    return math.inf if value is None or math.isnan(value) else float(value)


class QueueModel(QAbstractTableModel):
    """The queue's items, one row each, in queue order."""

    def __init__(self, queue: RunQueue) -> None:
        super().__init__()
        self._queue = queue
        self._items = queue.items
        queue.changed.connect(self._reload)

    def item(self, row: int) -> QueueItem:
        return self._items[row]

    def _reload(self) -> None:
        self.beginResetModel()
        self._items = self._queue.items
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self._items)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(Column)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> object:
        if orientation is Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return HEADERS[Column(section)]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        item = self._items[index.row()]
        column = Column(index.column())
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(item, column)
        if role == SORT_ROLE:
            return self._sort_key(item, column)
        if role == Qt.ItemDataRole.ToolTipRole:
            if item.error:
                return item.error
            return str(item.run_dir) if item.run_dir else item.project.name
        if role == Qt.ItemDataRole.TextAlignmentRole and column in NUMERIC:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and column == Column.STATE:
            color = STATE_COLORS.get(item.state)
            return QBrush(color) if color is not None else None
        return None

    @staticmethod
    def _text(item: QueueItem, column: Column) -> str:
        summary = item.summary
        if column == Column.NUMBER:
            return str(item.number)
        if column == Column.NAME:
            return item.project.name
        if column == Column.STATE:
            return item.state.value
        if column == Column.FOLDER:
            return item.run_dir.name if item.run_dir else "—"
        if summary is None:
            return "—"
        if column == Column.FINAL_LOSS:
            return "—" if summary.final_loss is None else format_loss(summary.final_loss)
        if column == Column.LATE_LOSS:
            late = summary.smoothed_loss
            return "—" if late is None else format_loss(late)
        if column == Column.VAL_LOSS:
            value = _val_loss(item)
            return "—" if value is None else format_loss(value)
        if column == Column.VALIDATION:
            return _validation_text(summary)
        if column == Column.STEPS:
            return f"{summary.steps:,}"
        return "—" if summary.duration_s is None else format_duration(summary.duration_s)

    @staticmethod
    def _sort_key(item: QueueItem, column: Column) -> object:
        summary = item.summary
        keys: dict[Column, object] = {
            Column.NUMBER: item.number,
            Column.NAME: item.project.name.casefold(),
            Column.STATE: item.state.value,
            Column.FINAL_LOSS: _number_key(summary.final_loss if summary else None),
            Column.LATE_LOSS: _number_key(summary.smoothed_loss if summary else None),
            Column.VAL_LOSS: _number_key(_val_loss(item)),
            Column.VALIDATION: _validation_text(summary) if summary else "",
            Column.STEPS: summary.steps if summary else 0,
            Column.DURATION: _number_key(summary.duration_s if summary else None),
            Column.FOLDER: item.run_dir.name if item.run_dir else "",
        }
        return keys[column]


class ResultsProxy(QSortFilterProxyModel):
    """The ended items only, sorted by a loss (best first unless the user sorts otherwise)."""

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        model = self.sourceModel()
        assert isinstance(model, QueueModel)
        return model.item(source_row).state in ENDED


class RunQueuePanel(QWidget):
    """The queue dock: what will run, what ran, and how well."""

    def __init__(
        self,
        queue: RunQueue,
        current_project: ProjectSource,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.queue = queue
        self._current_project = current_project
        self.model = QueueModel(queue)
        self.results_proxy = ResultsProxy(self)
        self.results_proxy.setSourceModel(self.model)
        self.results_proxy.setSortRole(SORT_ROLE)

        self.queue_table = self._table(self.model, QUEUE_COLUMNS)
        self.queue_table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.results_table = self._table(self.results_proxy, RESULT_COLUMNS)
        self.results_table.setSortingEnabled(True)
        self.results_table.sortByColumn(Column.LATE_LOSS, Qt.SortOrder.AscendingOrder)
        self._ranked_by_user = False
        self.results_table.horizontalHeader().sectionClicked.connect(self._sorted_by_user)
        for table in (self.queue_table, self.results_table):
            for column, width in COLUMN_WIDTHS.items():
                table.horizontalHeader().resizeSection(column, width)

        self._build_actions()
        self.toolbar = QToolBar("Queue")
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        for action in (
            self.add_project_action,
            self.remove_action,
            self.start_action,
            self.stop_action,
            self.clear_action,
        ):
            self.toolbar.addAction(action)
        self.summary = QLabel()
        self.toolbar.addSeparator()
        self.toolbar.addWidget(self.summary)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self._titled("Queue", self.queue_table))
        splitter.addWidget(self._titled("Results", self.results_table))
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.toolbar)
        layout.addWidget(splitter, 1)

        queue.changed.connect(self._update)
        queue.running_changed.connect(lambda _running: self._update())
        queue.controller.state_changed.connect(lambda _state: self._update())
        self.queue_table.selectionModel().selectionChanged.connect(self._update)
        self._update()

    def _table(self, model: QAbstractTableModel, columns: tuple[Column, ...]) -> QTableView:
        table = QTableView()
        table.setModel(model)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setAlternatingRowColors(True)
        table.setWordWrap(False)
        table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # queued names differ at the end
        table.verticalHeader().setVisible(False)
        table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        header = table.horizontalHeader()
        header.setStretchLastSection(True)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        for column in Column:
            table.setColumnHidden(column, column not in columns)
        return table

    @staticmethod
    def _titled(title: str, table: QTableView) -> QWidget:
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(4, 2, 4, 0)
        layout.setSpacing(2)
        layout.addWidget(QLabel(f"<b>{title}</b>"))
        layout.addWidget(table, 1)
        return box

    def _build_actions(self) -> None:
        pixmap = QStyle.StandardPixmap

        def action(
            text: str,
            slot: Callable[[], object],
            tip: str,
            icon: QStyle.StandardPixmap | None = None,
        ) -> QAction:
            made = QAction(text, self)
            if icon is not None:
                made.setIcon(self.style().standardIcon(icon))
            made.setToolTip(tip)
            made.setStatusTip(tip)
            made.triggered.connect(lambda _checked=False: slot())
            return made

        self.add_project_action = action(
            "Add to &Queue",
            self.add_current_project,
            "Queue the project as the forms show it",
            pixmap.SP_FileDialogNewFolder,
        )
        self.remove_action = action(
            "&Remove", self.remove_selected, "Remove the selected queued items", pixmap.SP_TrashIcon
        )
        self.start_action = action(
            "S&tart Queue",
            self.queue.start,
            "Run the queued items one after another, each in its own run folder",
            pixmap.SP_MediaPlay,
        )
        self.stop_action = action(
            "St&op Queue",
            self.queue.stop,
            "Stop the current run and the queue; the items not yet run stay queued",
            pixmap.SP_MediaStop,
        )
        self.clear_action = action(
            "&Clear Ended", self.queue.clear_ended, "Remove the finished, failed and stopped items"
        )

    def add_current_project(self) -> None:
        project = self._current_project()
        if project is not None:
            self.queue.add([project])

    def remove_selected(self) -> None:
        rows = {index.row() for index in self.queue_table.selectionModel().selectedRows()}
        self.queue.remove([self.model.item(row) for row in sorted(rows)])

    def results(self) -> list[QueueItem]:
        """The results table's rows, top to bottom, as the user sees them sorted."""
        return [
            self.model.item(self.results_proxy.mapToSource(self.results_proxy.index(row, 0)).row())
            for row in range(self.results_proxy.rowCount())
        ]

    def _sorted_by_user(self) -> None:
        self._ranked_by_user = True

    def _update(self) -> None:
        queue = self.queue
        if not self._ranked_by_user:
            rank = ranking_column([item for item in queue.items if item.state in ENDED])
            if self.results_table.horizontalHeader().sortIndicatorSection() != rank:
                self.results_table.sortByColumn(rank, Qt.SortOrder.AscendingOrder)
        rows = self.queue_table.selectionModel().selectedRows()
        selected = [self.model.item(index.row()) for index in rows]
        waiting = len(queue.queued())
        idle = not queue.controller.active
        self.start_action.setEnabled(not queue.running and waiting > 0 and idle)
        self.stop_action.setEnabled(queue.running)
        self.remove_action.setEnabled(any(item.state is not ItemState.RUNNING for item in selected))
        self.clear_action.setEnabled(any(item.state in ENDED for item in queue.items))
        ended = sum(item.state in ENDED for item in queue.items)
        state = "running" if queue.running else "idle"
        self.summary.setText(f"  {waiting} queued, {ended} ended ({state})")
