"""One job of a TF_CONFIG cluster as an editable list of ``host:port`` rows.

The TF_CONFIG editor shows one of these per job type. The table only edits and
marks; every rule lives in :mod:`engine.tf_config`, and the editor decides which
row a problem belongs to. :class:`JobGrid` places the tables two by two, or one above
the other in a narrow dock. Helpers to mark any widget as wrong live here too, so
cells and plain widgets look the same when something is wrong with them.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

BAD_BACKGROUND = "#ffd6d6"
BAD_TEXT = "#000000"
BAD_BORDER = "#c62828"

JOB_DESCRIPTIONS: dict[str, str] = {
    "chief": "Coordinates the run, saves checkpoints and writes summaries. At most one.",
    "worker": "Runs the training steps. Without a chief, worker 0 also acts as chief.",
    "ps": "Parameter servers hold the variables. Only used by parameter_server.",
    "evaluator": "Evaluates checkpoints beside training. At most one.",
}

# chief and evaluator are single tasks; the Add button stops at one row, while an
# import with more keeps them and shows the rule instead.
_MAX_ROWS: dict[str, int] = {"chief": 1, "evaluator": 1}


def problem_tooltip(messages: list[str]) -> str:
    """One line per problem, so several problems on one widget stay readable."""
    return "\n".join(f"• {message}" for message in messages)


def mark_widget(widget: QWidget, messages: list[str], tooltip: str) -> None:
    """Red background and the messages as tooltip; no messages restores ``tooltip``.

    The style selects the widget by its object name, which it must have, so it does
    not cascade into children (a frame's tables, a spin box's line edit).
    """
    if messages:
        widget.setStyleSheet(
            f"#{widget.objectName()} {{ background-color: {BAD_BACKGROUND}; color: {BAD_TEXT}; }}"
        )
        widget.setToolTip(problem_tooltip(messages))
    else:
        widget.setStyleSheet("")
        widget.setToolTip(tooltip)


class _AddressTable(QTableWidget):
    """A table that asks for the height of :data:`PREFERRED_ROWS` rows, not Qt's 192 px.

    One above the other in a narrow dock, four tables of Qt's height were a long scroll
    to the task selector under them, even with no row in three of them.
    """

    def sizeHint(self) -> QSize:
        rows = PREFERRED_ROWS * self.verticalHeader().defaultSectionSize()
        height = self.horizontalHeader().sizeHint().height() + rows + 2 * self.frameWidth()
        return QSize(super().sizeHint().width(), height)


PREFERRED_ROWS = 4
"""Rows a job table shows without scrolling when the page has no height to spare."""


class JobTable(QWidget):
    """The addresses of one job (``chief``, ``worker``, ...), one row per task index."""

    edited = Signal()

    def __init__(
        self, job: str, suggest_address: Callable[[], str], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.job = job
        self._suggest_address = suggest_address
        self._max_rows = _MAX_ROWS.get(job)

        self.title = QLabel(f"<b>{job}</b>")
        self.title.setToolTip(JOB_DESCRIPTIONS[job])
        self.count_label = QLabel()
        self.count_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        header = QHBoxLayout()
        header.addWidget(self.title)
        header.addStretch(1)
        header.addWidget(self.count_label)

        self.table = _AddressTable(0, 1)
        self.table.setObjectName(f"{job}_table")
        self.table.setHorizontalHeaderLabels(["host:port"])
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().setDefaultAlignment(Qt.AlignmentFlag.AlignCenter)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setToolTip(JOB_DESCRIPTIONS[job])
        self.table.itemChanged.connect(self._on_item_changed)
        self.table.itemSelectionChanged.connect(self._update_buttons)

        self.add_button = QPushButton("Add")
        self.add_button.setObjectName(f"add_{job}")
        self.add_button.clicked.connect(self.add_row)
        self.remove_button = QPushButton("Remove")
        self.remove_button.setObjectName(f"remove_{job}")
        self.remove_button.setToolTip(f"Remove the selected {job} rows (the last one if none).")
        self.remove_button.clicked.connect(self.remove_rows)
        buttons = QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        self._update_buttons()

    def addresses(self) -> list[str]:
        """The rows exactly as typed, including empty or invalid ones."""
        return [self._item(row).text() for row in range(self.table.rowCount())]

    def set_addresses(self, addresses: list[str]) -> None:
        """Replaces every row; does not emit ``edited`` (the caller knows it changed)."""
        self.table.blockSignals(True)
        self.table.setRowCount(0)
        for address in addresses:
            self._append(address)
        self.table.blockSignals(False)
        self._renumber()

    def add_row(self) -> None:
        """Appends a suggested free ``localhost`` address and opens it for editing."""
        self.append_address(self._suggest_address())
        self.table.setCurrentCell(self.table.rowCount() - 1, 0)
        self.table.editItem(self._item(self.table.rowCount() - 1))

    def append_address(self, address: str) -> None:
        """Adds a row at the end, as one edit."""
        self.table.blockSignals(True)
        self._append(address)
        self.table.blockSignals(False)
        self._renumber()
        self.edited.emit()

    def remove_rows(self) -> None:
        """Removes the selected rows, or the last row when nothing is selected."""
        rows = sorted({index.row() for index in self.table.selectedIndexes()}, reverse=True)
        if not rows and self.table.rowCount():
            rows = [self.table.rowCount() - 1]
        if not rows:
            return
        for row in rows:
            self.table.removeRow(row)
        self._renumber()
        self.edited.emit()

    def mark(self, job_messages: list[str], row_messages: dict[int, list[str]]) -> None:
        """Shows problems: the job's own on its title and frame, each row's on its cell."""
        self.table.blockSignals(True)
        for row in range(self.table.rowCount()):
            item = self._item(row)
            messages = row_messages.get(row, [])
            if messages:
                item.setBackground(QBrush(QColor(BAD_BACKGROUND)))
                item.setForeground(QBrush(QColor(BAD_TEXT)))
                item.setToolTip(problem_tooltip(messages))
            else:
                item.setData(Qt.ItemDataRole.BackgroundRole, None)
                item.setData(Qt.ItemDataRole.ForegroundRole, None)
                item.setToolTip("")
        self.table.blockSignals(False)
        if job_messages:
            self.title.setText(f"<b style='color:{BAD_BORDER}'>{self.job} ⚠</b>")
            self.title.setToolTip(problem_tooltip(job_messages))
            self.table.setStyleSheet(f"QTableWidget {{ border: 2px solid {BAD_BORDER}; }}")
            self.table.setToolTip(problem_tooltip(job_messages))
        else:
            self.title.setText(f"<b>{self.job}</b>")
            self.title.setToolTip(JOB_DESCRIPTIONS[self.job])
            self.table.setStyleSheet("")
            self.table.setToolTip(JOB_DESCRIPTIONS[self.job])

    def focus_row(self, row: int | None) -> None:
        """Brings a problem's cell (or the table) into view for the user to fix."""
        if row is not None and 0 <= row < self.table.rowCount():
            self.table.setCurrentCell(row, 0)
        self.table.setFocus(Qt.FocusReason.OtherFocusReason)

    def _item(self, row: int) -> QTableWidgetItem:
        item = self.table.item(row, 0)
        if item is None:
            item = QTableWidgetItem("")
            self.table.setItem(row, 0, item)
        return item

    def _append(self, address: str) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        self.table.setItem(row, 0, QTableWidgetItem(address))

    def _renumber(self) -> None:
        """Row headers show TensorFlow's 0-based task index, not Qt's 1-based row number."""
        rows = self.table.rowCount()
        self.table.setVerticalHeaderLabels([str(row) for row in range(rows)])
        self.count_label.setText(f"{rows} task{'s' if rows != 1 else ''}")
        self._update_buttons()

    def _update_buttons(self) -> None:
        full = self._max_rows is not None and self.table.rowCount() >= self._max_rows
        self.add_button.setEnabled(not full)
        self.add_button.setToolTip(
            f"A cluster has at most one {self.job}."
            if full
            else f"Add a {self.job} task on a free-looking localhost port; edit it in place."
        )
        self.remove_button.setEnabled(self.table.rowCount() > 0)

    def _on_item_changed(self, _item: QTableWidgetItem) -> None:
        self.edited.emit()


class JobGrid(QFrame):
    """The job tables two by two where the width allows, else one above the other.

    Side by side they held the TF_CONFIG page at 346 px, wider than the forms' dock
    when the window is narrow: the page scrolled sideways and the scrollbar covered its
    last row. The grid asks only for one column's width and places the tables again
    whenever its width crosses what two columns need.
    """

    def __init__(self, tables: list[JobTable], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._tables = tables
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(4, 4, 4, 4)
        self._columns = 0
        self._arrange(2)

    def columns(self) -> int:
        """How many tables sit side by side now: 2, or 1 in a narrow dock."""
        return self._columns

    def two_column_width(self) -> int:
        """The narrowest width that shows two tables side by side, none squeezed."""
        margins = self._grid.contentsMargins()
        widest = max(table.minimumSizeHint().width() for table in self._tables)
        spacing = self._grid.horizontalSpacing()
        return 2 * widest + spacing + margins.left() + margins.right()

    def minimumSizeHint(self) -> QSize:
        """One column's width, whatever the arrangement now; the current height."""
        margins = self._grid.contentsMargins()
        widest = max(table.minimumSizeHint().width() for table in self._tables)
        height = self._grid.minimumSize().height()
        return QSize(widest + margins.left() + margins.right(), height)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._arrange(2 if event.size().width() >= self.two_column_width() else 1)

    def _arrange(self, columns: int) -> None:
        if columns == self._columns:
            return
        self._columns = columns
        for table in self._tables:
            self._grid.removeWidget(table)
        for position, table in enumerate(self._tables):
            self._grid.addWidget(table, position // columns, position % columns)
        for column in range(2):
            self._grid.setColumnStretch(column, 1 if column < columns else 0)
        self.updateGeometry()
