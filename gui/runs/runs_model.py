"""The runs table's model: one row per run folder, shown as text and sorted by value.

The cells it shares with the queue's results (steps, losses, duration) are formatted
and sorted by :mod:`gui.runs.run_table`. Editing a name, the tags or the notes writes them to
the run's ``status.json``; the folder itself is never renamed. A Slurm job's row is its
chief's folder, found by the job's run folder too (:meth:`RunsTableModel.row_of`).
"""

from __future__ import annotations

import enum
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import Qt

from ...engine.run_history import (
    INTERRUPTED,
    UNREADABLE,
    RunSummary,
    rename_run,
    set_notes,
    set_tags,
    summarize,
)
from .run_table import (
    NOT_SHOWN,
    SCANNING,
    Index,
    RunTableModel,
    SummaryCell,
    number_key,
    summary_key,
    summary_text,
    summary_tip,
)


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
LATE_LOSS_TIP = (
    "The mean loss of the last tenth of the run's steps: one batch's loss is noise. "
    "Sweeps and studies rank runs by the same number."
)
VALIDATION_SHORT = {"val_accuracy": "acc", "val_mae": "mae"}
SUMMARY_CELLS = {
    Column.STEPS: SummaryCell.STEPS,
    Column.FINAL_LOSS: SummaryCell.FINAL_LOSS,
    Column.LATE_LOSS: SummaryCell.LATE_LOSS,
    Column.DURATION: SummaryCell.DURATION,
}


def is_run_of(run: RunSummary, path: Path) -> bool:
    """Whether ``path`` is ``run``'s folder or, for a Slurm job's row, the job's run folder."""
    return run.path == path or (run.job is not None and run.job.run_dir == path)


def format_started(timestamp: float | None) -> str:
    return (
        NOT_SHOWN
        if timestamp is None
        else datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")
    )


def validation_text(run: RunSummary) -> str:
    """The lowest ``val_loss`` and the accuracy (or error) of that evaluation: ``0.0512, acc
    0.983``."""
    metrics = run.best_validation
    if not metrics or "val_loss" not in metrics:
        return SCANNING if run.pending else NOT_SHOWN
    parts = [f"{metrics['val_loss']:.4g}"]
    parts += [
        f"{short} {metrics[name]:.3g}"
        for name, short in VALIDATION_SHORT.items()
        if name in metrics
    ]
    return ", ".join(parts)


class RunsTableModel(RunTableModel):
    """The runs as :func:`engine.run_history.list_runs` summarizes them."""

    headers = HEADERS
    numeric = frozenset(NUMERIC)
    status_column = Column.STATUS

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
        """The row of the run in ``path``: its folder, or a Slurm job's run folder (what the
        window follows while the job runs)."""
        return next((row for row, run in enumerate(self._runs) if is_run_of(run, path)), None)

    def row_count(self) -> int:
        return len(self._runs)

    def row_status(self, row: int) -> str:
        run = self._runs[row]
        return "running" if run.job is not None and run.job.held else run.status

    def flags(self, index: Index) -> Qt.ItemFlag:
        flags = super().flags(index)
        return flags | Qt.ItemFlag.ItemIsEditable if index.column() in EDITABLE else flags

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

    def cell_text(self, row: int, column: int) -> str:
        run = self._runs[row]
        if column in SUMMARY_CELLS:
            return summary_text(run, SUMMARY_CELLS[Column(column)])
        texts = {
            Column.NAME: run.name,
            Column.STARTED: format_started(run.started_at),
            Column.STRATEGY: run.strategy or NOT_SHOWN,
            Column.REPLICAS: NOT_SHOWN if run.num_replicas is None else str(run.num_replicas),
            Column.VALIDATION: validation_text(run),
            Column.STATUS: run.status,
            Column.TAGS: ", ".join(run.tags),
            Column.NOTES: run.notes,
        }
        return texts[Column(column)]

    def cell_key(self, row: int, column: int) -> object:
        run = self._runs[row]
        if column in SUMMARY_CELLS:
            return summary_key(run, SUMMARY_CELLS[Column(column)])
        keys: dict[Column, object] = {
            Column.NAME: run.name.casefold(),
            Column.STARTED: run.started_at or 0.0,
            Column.STRATEGY: (run.strategy or "").casefold(),
            Column.REPLICAS: run.num_replicas or 0,
            Column.VALIDATION: number_key((run.best_validation or {}).get("val_loss")),
            Column.STATUS: run.status,
            Column.TAGS: ", ".join(run.tags).casefold(),
            Column.NOTES: run.notes.casefold(),
        }
        return keys[Column(column)]

    def cell_tip(self, row: int, column: int) -> str | None:
        run = self._runs[row]
        full = summary_tip(run, SUMMARY_CELLS[Column(column)]) if column in SUMMARY_CELLS else None
        if full is not None:
            return f"{full}\n{LATE_LOSS_TIP}" if column == Column.LATE_LOSS else full
        if run.job is not None and column == Column.STATUS:
            said = run.job.note or f"Slurm job {run.job.job_id}: not asked yet"
            return f"{said}\nFailed: {run.error}" if run.status == "failed" and run.error else said
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
