"""The queue dock: what will run, what ran, and how well.

Two tables over one model (:mod:`gui.queue.queue_model`): the queue in its order, and the
results ranked by what each run learned, best first unless the user sorts otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QAbstractTableModel, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QSplitter,
    QStyle,
    QTableView,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from ...engine.config import Project
from ...engine.run_queue import ENDED, ItemState, QueueItem
from ..runs.run_table import SORT_ROLE
from ..widgets.tables import style_list_table
from .queue_model import Column, QueueModel, ResultsProxy, ranking_column
from .run_queue import RunQueue

ProjectSource = Callable[[], Project | None]
"""The window's current project ready to run (paths resolved, code trusted), or None."""
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

    @staticmethod
    def _table(model: QAbstractTableModel, columns: tuple[Column, ...]) -> QTableView:
        table = QTableView()
        table.setModel(model)
        style_list_table(table, QAbstractItemView.SelectionMode.ExtendedSelection)
        table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # queued names differ at the end
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
