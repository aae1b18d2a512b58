"""The queue's table model: its items, one row each in queue order, and the results' view
of them (the ended ones, ranked by what they learned).

The cells taken from a run's summary are formatted and sorted as the runs list does
(:mod:`gui.runs.run_table`); the queue adds its own: the item's number, its state, the
best ``val_loss`` and the other metrics of that evaluation.
"""

from __future__ import annotations

import enum

from PySide6.QtCore import QSortFilterProxyModel

from ...engine.run_folder import format_loss
from ...engine.run_history import RunSummary
from ...engine.run_queue import ENDED, QueueItem, best_val_loss
from ..runs.run_table import (
    NOT_SHOWN,
    Index,
    RunTableModel,
    SummaryCell,
    loss_text,
    number_key,
    summary_key,
    summary_text,
    summary_tip,
)
from .run_queue import RunQueue


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
NUMERIC = frozenset(
    {
        Column.NUMBER,
        Column.VAL_LOSS,
        Column.LATE_LOSS,
        Column.FINAL_LOSS,
        Column.STEPS,
        Column.DURATION,
    }
)
SUMMARY_CELLS = {
    Column.STEPS: SummaryCell.STEPS,
    Column.FINAL_LOSS: SummaryCell.FINAL_LOSS,
    Column.LATE_LOSS: SummaryCell.LATE_LOSS,
    Column.DURATION: SummaryCell.DURATION,
}


def validation_text(summary: RunSummary | None) -> str:
    """The best evaluation's other metrics, e.g. ``val_accuracy 0.94``; "—" without one."""
    validation = summary.best_validation if summary else None
    if not validation:
        return NOT_SHOWN
    return (
        ", ".join(
            f"{name} {format_loss(value)}"
            for name, value in validation.items()
            if name != "val_loss"
        )
        or NOT_SHOWN
    )


def ranking_column(items: list[QueueItem]) -> Column:
    """What ranks the queue's results: the best validation loss when its runs evaluate, else
    the mean loss of their last tenth of steps; never the lowest loss, one batch's."""
    return (
        Column.VAL_LOSS
        if any(best_val_loss(item) is not None for item in items)
        else Column.LATE_LOSS
    )


class QueueModel(RunTableModel):
    """The queue's items, one row each, in queue order."""

    headers = HEADERS
    numeric = NUMERIC
    status_column = Column.STATE

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

    def row_count(self) -> int:
        return len(self._items)

    def row_status(self, row: int) -> str:
        return self._items[row].state.value

    def cell_tip(self, row: int, column: int) -> str | None:
        item = self._items[row]
        if column in SUMMARY_CELLS:
            full = summary_tip(item.summary, SUMMARY_CELLS[Column(column)])
            if full is not None:
                return full
        if column == Column.VAL_LOSS and (val_loss := best_val_loss(item)) is not None:
            return format_loss(val_loss)
        if item.error:
            return item.error
        return str(item.run_dir) if item.run_dir else item.project.name

    def cell_text(self, row: int, column: int) -> str:
        item = self._items[row]
        if column in SUMMARY_CELLS:
            return summary_text(item.summary, SUMMARY_CELLS[Column(column)])
        texts = {
            Column.NUMBER: str(item.number),
            Column.NAME: item.project.name,
            Column.STATE: item.state.value,
            Column.FOLDER: item.run_dir.name if item.run_dir else NOT_SHOWN,
            Column.VAL_LOSS: loss_text(best_val_loss(item)),
            Column.VALIDATION: validation_text(item.summary),
        }
        return texts[Column(column)]

    def cell_key(self, row: int, column: int) -> object:
        item = self._items[row]
        if column in SUMMARY_CELLS:
            return summary_key(item.summary, SUMMARY_CELLS[Column(column)])
        keys: dict[Column, object] = {
            Column.NUMBER: item.number,
            Column.NAME: item.project.name.casefold(),
            Column.STATE: item.state.value,
            Column.VAL_LOSS: number_key(best_val_loss(item)),
            Column.VALIDATION: validation_text(item.summary) if item.summary else "",
            Column.FOLDER: item.run_dir.name if item.run_dir else "",
        }
        return keys[Column(column)]


class ResultsProxy(QSortFilterProxyModel):
    """The ended items only, sorted by a loss (best first unless the user sorts otherwise)."""

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        model = self.sourceModel()
        assert isinstance(model, QueueModel)
        return model.item(source_row).state in ENDED
