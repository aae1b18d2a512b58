"""What every table of runs shares: a row's summary cells, as text and as sort keys.

The runs list and the queue's results both show a run's steps, losses and duration; one
place formats and orders them, so the two tables never read differently. Display text
and sort keys differ (``1 min 05 s`` sorts as seconds, a missing loss sorts last), so
every cell also answers :data:`SORT_ROLE` with a number or a string the proxy compares.
Numbers are shown compact (``10.0M`` steps, a loss of ``9.96e-5``), never cut in the
middle by a narrow column; :func:`summary_tip` holds each one in full.
"""

from __future__ import annotations

import enum
import math

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor

from ...engine.formatting import format_compact, format_count, format_duration
from ...engine.run_folder import format_loss
from ...engine.run_history import INTERRUPTED, SUBMITTED, UNREADABLE, RunSummary

SORT_ROLE = Qt.ItemDataRole.UserRole
Index = QModelIndex | QPersistentModelIndex
STATUS_COLORS = {
    "failed": QColor(198, 40, 40),
    "running": QColor(21, 101, 192),
    SUBMITTED: QColor(21, 101, 192),
    "stopped": QColor(230, 81, 0),
    "pruned": QColor(130, 90, 40),
    INTERRUPTED: QColor(230, 81, 0),
    UNREADABLE: QColor(198, 40, 40),
}
"""A run's status (or a queue item's state) drawn in a color; the others in the text's."""
NOT_SHOWN = "—"
SCANNING = "…"
"""A value still being read from a long run's files (off the window's thread)."""


class SummaryCell(enum.Enum):
    """The cells both tables take from a :class:`~engine.run_history.RunSummary`."""

    STEPS = "steps"
    FINAL_LOSS = "final loss"
    LATE_LOSS = "loss, last 10%"
    DURATION = "duration"


def number_key(value: float | None) -> float:
    """Missing and NaN values sort after every number, so ascending lists the best first."""
    return math.inf if value is None or math.isnan(value) else float(value)


def loss_text(value: float | None, pending: bool = False) -> str:
    if value is None:
        return SCANNING if pending else NOT_SHOWN
    return format_compact(value)


def summary_text(run: RunSummary | None, cell: SummaryCell) -> str:
    """The cell as shown; "—" for a run not summarized yet (a queued one)."""
    if run is None:
        return NOT_SHOWN
    if cell is SummaryCell.STEPS:
        return format_count(run.steps)
    if cell is SummaryCell.FINAL_LOSS:
        return loss_text(run.final_loss)
    if cell is SummaryCell.LATE_LOSS:
        return loss_text(run.smoothed_loss, run.pending)
    return NOT_SHOWN if run.duration_s is None else format_duration(run.duration_s)


def summary_tip(run: RunSummary | None, cell: SummaryCell) -> str | None:
    """The cell's number in full (``10,000,000 steps``, a loss to its last digit); None for a
    cell without one."""
    if run is None:
        return None
    if cell is SummaryCell.STEPS:
        return f"{run.steps:,} steps"
    value = run.final_loss if cell is SummaryCell.FINAL_LOSS else run.smoothed_loss
    if cell is SummaryCell.DURATION or value is None:
        return None
    return format_loss(value)


def summary_key(run: RunSummary | None, cell: SummaryCell) -> float:
    """The cell as sorted: a run not summarized yet sorts after every number."""
    if cell is SummaryCell.STEPS:
        return run.steps if run is not None else 0
    if run is None:
        return math.inf
    if cell is SummaryCell.FINAL_LOSS:
        return number_key(run.final_loss)
    if cell is SummaryCell.LATE_LOSS:
        return number_key(run.smoothed_loss)
    return number_key(run.duration_s)


class RunTableModel(QAbstractTableModel):
    """A table with one run per row: its subclass says each cell's text, sort key, tip and
    status; this class answers Qt's roles from them the same way for every table."""

    headers: dict[int, str]
    """Each column's title, for every column in order."""
    numeric: frozenset[int]
    """The columns aligned right, as numbers are."""
    status_column: int
    """The column drawn in the row's status color."""

    def row_count(self) -> int:
        raise NotImplementedError

    def cell_text(self, row: int, column: int) -> str:
        raise NotImplementedError

    def cell_key(self, row: int, column: int) -> object:
        raise NotImplementedError

    def cell_tip(self, row: int, column: int) -> str | None:
        raise NotImplementedError

    def row_status(self, row: int) -> str:
        raise NotImplementedError

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else self.row_count()

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.headers)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> object:
        if orientation is Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.headers[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        row, column = index.row(), index.column()
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return self.cell_text(row, column)
        if role == SORT_ROLE:
            return self.cell_key(row, column)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.cell_tip(row, column)
        if role == Qt.ItemDataRole.TextAlignmentRole and column in self.numeric:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and column == self.status_column:
            color = STATUS_COLORS.get(self.row_status(row))
            return QBrush(color) if color is not None else None
        return None
