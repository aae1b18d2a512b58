"""The runs table's model: one row per run folder, shown as text and sorted by value.

Display text and sort keys differ (``1:02:05`` sorts as seconds, a missing loss
sorts last), so every cell also answers :data:`SORT_ROLE` with a number or a
string the proxy compares. Editing a name, the tags or the notes writes them to
the run's ``status.json``; the folder itself is never renamed.
"""

from __future__ import annotations

import enum
import math
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor

from ..engine.formatting import format_duration
from ..engine.run_folder import format_loss
from ..engine.run_history import (
    INTERRUPTED,
    UNREADABLE,
    RunSummary,
    rename_run,
    set_notes,
    set_tags,
    summarize,
)

SORT_ROLE = Qt.ItemDataRole.UserRole
Index = QModelIndex | QPersistentModelIndex
STATUS_COLORS = {
    "failed": QColor(198, 40, 40),
    "running": QColor(21, 101, 192),
    "stopped": QColor(230, 81, 0),
    "pruned": QColor(130, 90, 40),
    INTERRUPTED: QColor(230, 81, 0),
    UNREADABLE: QColor(198, 40, 40),
}


class Column(enum.IntEnum):
    """In the order a glance needs them: which run, how it ended and how good it is first;
    the long columns (when, how it ran, tags, notes) after."""

    NAME = 0
    STATUS = 1
    VALIDATION = 2
    STEPS = 3
    FINAL_LOSS = 4
    LATE_LOSS = 5
    DURATION = 6
    STARTED = 7
    STRATEGY = 8
    REPLICAS = 9
    TAGS = 10
    NOTES = 11


HEADERS = {
    Column.NAME: "Name",
    Column.STATUS: "Status",
    Column.VALIDATION: "Best validation",
    Column.STEPS: "Steps",
    Column.FINAL_LOSS: "Final loss",
    Column.LATE_LOSS: "Loss, last 10%",
    Column.DURATION: "Duration",
    Column.STARTED: "Started",
    Column.STRATEGY: "Strategy",
    Column.REPLICAS: "Replicas",
    Column.TAGS: "Tags",
    Column.NOTES: "Notes",
}
WRITERS = {Column.NAME: rename_run, Column.TAGS: set_tags, Column.NOTES: set_notes}
EDITABLE = set(WRITERS)
NUMERIC = {
    Column.VALIDATION,
    Column.REPLICAS,
    Column.STEPS,
    Column.FINAL_LOSS,
    Column.LATE_LOSS,
    Column.DURATION,
}
SCANNING = "…"
"""A value still being read from a long run's files (off the window's thread)."""
LATE_LOSS_TIP = (
    "The mean loss of the last tenth of the run's steps: one batch's loss is noise. "
    "Sweeps and studies rank runs by the same number."
)
VALIDATION_SHORT = {"val_accuracy": "acc", "val_mae": "mae"}


def format_started(timestamp: float | None) -> str:
    return (
        "—" if timestamp is None else datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")
    )


def _loss_text(value: float | None, pending: bool = False) -> str:
    if value is None:
        return SCANNING if pending else "—"
    return format_loss(value)


def validation_text(run: RunSummary) -> str:
    """The lowest ``val_loss`` and the accuracy (or error) of that evaluation: ``0.0512, acc
    0.983``."""
    metrics = run.best_validation
    if not metrics or "val_loss" not in metrics:
        return SCANNING if run.pending else "—"
    parts = [f"{metrics['val_loss']:.4g}"]
    parts += [
        f"{short} {metrics[name]:.3g}"
        for name, short in VALIDATION_SHORT.items()
        if name in metrics
    ]
    return ", ".join(parts)


def _number_key(value: float | None) -> float:
    """Missing and NaN values sort after every number, ascending."""
    return math.inf if value is None or math.isnan(value) else float(value)


class RunsTableModel(QAbstractTableModel):
    """The runs as :func:`engine.run_history.list_runs` summarizes them."""

    def __init__(self) -> None:
        super().__init__()
        self._runs: list[RunSummary] = []

    def set_runs(self, runs: list[RunSummary]) -> None:
        self.beginResetModel()
        self._runs = list(runs)
        self.endResetModel()

    def update_run(self, run: RunSummary) -> None:
        """A run summarized again (its files scanned): its row shows it, if it is still listed."""
        row = self.row_of(run.path)
        if row is not None:
            self._runs[row] = run
            self.dataChanged.emit(self.index(row, 0), self.index(row, len(Column) - 1))

    def run(self, row: int) -> RunSummary:
        return self._runs[row]

    def runs(self) -> list[RunSummary]:
        return list(self._runs)

    def row_of(self, path: Path) -> int | None:
        return next((row for row, run in enumerate(self._runs) if run.path == path), None)

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self._runs)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(Column)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> object:
        if orientation is Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return HEADERS[Column(section)]
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        flags = super().flags(index)
        return flags | Qt.ItemFlag.ItemIsEditable if index.column() in EDITABLE else flags

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        run = self._runs[index.row()]
        column = Column(index.column())
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return self._text(run, column)
        if role == SORT_ROLE:
            return self._sort_key(run, column)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(run, column)
        if role == Qt.ItemDataRole.TextAlignmentRole and column in NUMERIC:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and column == Column.STATUS:
            color = STATUS_COLORS.get(run.status)
            return QBrush(color) if color is not None else None
        return None

    def setData(self, index: Index, value: object, role: int = Qt.ItemDataRole.EditRole) -> bool:
        """A name, tags (separated by commas) or notes are written to the run folder at once.

        An empty name is refused (False): every run keeps a name to be told apart by.
        Raises OSError when the folder cannot be written, so the caller can say why.
        """
        column = index.column()
        if role != Qt.ItemDataRole.EditRole or column not in EDITABLE:
            return False
        run, text = self._runs[index.row()], str(value)
        if column == Column.NAME and not text.strip():
            return False
        WRITERS[Column(column)](run.path, text)
        self._runs[index.row()] = summarize(run.path, scan=False)
        self.dataChanged.emit(self.index(index.row(), 0), self.index(index.row(), len(Column) - 1))
        return True

    @staticmethod
    def _text(run: RunSummary, column: Column) -> str:
        texts = {
            Column.NAME: run.name,
            Column.STARTED: format_started(run.started_at),
            Column.STRATEGY: run.strategy or "—",
            Column.REPLICAS: "—" if run.num_replicas is None else str(run.num_replicas),
            Column.STEPS: f"{run.steps:,}",
            Column.VALIDATION: validation_text(run),
            Column.FINAL_LOSS: _loss_text(run.final_loss),
            Column.LATE_LOSS: _loss_text(run.smoothed_loss, run.pending),
            Column.DURATION: "—" if run.duration_s is None else format_duration(run.duration_s),
            Column.STATUS: run.status,
            Column.TAGS: ", ".join(run.tags),
            Column.NOTES: run.notes,
        }
        return texts[column]

    @staticmethod
    def _sort_key(run: RunSummary, column: Column) -> object:
        keys: dict[Column, object] = {
            Column.NAME: run.name.casefold(),
            Column.STARTED: run.started_at or 0.0,
            Column.STRATEGY: (run.strategy or "").casefold(),
            Column.REPLICAS: run.num_replicas or 0,
            Column.STEPS: run.steps,
            Column.FINAL_LOSS: _number_key(run.final_loss),
            Column.VALIDATION: _number_key((run.best_validation or {}).get("val_loss")),
            Column.LATE_LOSS: _number_key(run.smoothed_loss),
            Column.DURATION: _number_key(run.duration_s),
            Column.STATUS: run.status,
            Column.TAGS: ", ".join(run.tags).casefold(),
            Column.NOTES: run.notes.casefold(),
        }
        return keys[column]

    @staticmethod
    def _tooltip(run: RunSummary, column: Column) -> str | None:
        if run.status == "failed":
            return f"Failed: {run.error}" if run.error else "Failed (no error was recorded)"
        if run.status == UNREADABLE:
            return f"Unreadable: {run.error}"
        if run.status == INTERRUPTED:
            return (
                "Interrupted: the process that ran it was killed before it could record the "
                "end; resume it from its last checkpoint"
            )
        if run.pruned is not None and column == Column.STATUS:
            return run.pruned[1] or f"pruned at step {run.pruned[0]}"
        if column == Column.NAME:
            study = f"\na trial of the study {run.study}" if run.study is not None else ""
            return f"{run.name}\n{run.path}{study}"
        if column == Column.VALIDATION and run.best_validation:
            metrics = ", ".join(
                f"{name} {value:.6g}" for name, value in run.best_validation.items()
            )
            return f"{metrics}: the evaluation with the lowest val_loss"
        if column in (Column.LATE_LOSS, Column.VALIDATION) and run.pending:
            return "Reading this run's metrics (a long run takes a moment)"
        if column == Column.LATE_LOSS:
            return LATE_LOSS_TIP
        if column == Column.NOTES and run.notes:
            return run.notes
        if column in (Column.TAGS, Column.NOTES):
            return "Double-click to edit; tags are separated by commas"
        return None
