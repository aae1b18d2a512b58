"""What differs between the compared runs' environments: a compact table under the
Runs tab's comparison.

Two curves that part ways are explained by the project (its settings) or by what ran it:
the packages, versions, variables, machine and commit each run recorded in its
``environment.json`` (``engine.run_environment``). Only the keys whose values differ are
listed, one row each (``packages.numpy``, ``variables.XLA_FLAGS``, ``git.commit``), with a
column per run; a package one run has and another has not shows as ``—`` there, so added,
removed and changed packages read alike. Each record is a small capped file, read on the
window's thread.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...engine.run_environment import environment_differences
from ...engine.run_folder import ENVIRONMENT_FILE, read_environment
from ...engine.run_history import RunSummary
from ..widgets.tables import style_list_table

ABSENT = "—"
"""A key a run's record has not: a package it had not installed, a variable it had not set."""
ROWS_SHOWN = 5
"""The table's height in rows before it scrolls: the list of runs keeps the room."""


class EnvironmentDiff(QWidget):
    """A title line and a table of the differing keys; hidden with fewer than two runs."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.table = QTableWidget()
        style_list_table(self.table, QAbstractItemView.SelectionMode.ExtendedSelection)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        layout.setSpacing(2)
        layout.addWidget(self.title)
        layout.addWidget(self.table)
        self.setVisible(False)

    def show_runs(self, runs: list[RunSummary]) -> None:
        """Compares the environments ``runs`` recorded; runs of an earlier Distloop (none
        recorded) are named, not compared."""
        records, names, missing = [], [], []
        for run in runs:
            try:
                records.append(read_environment(run.path))
                names.append(run.name)
            except (OSError, ValueError):
                missing.append(run.name)
        without = f"; no {ENVIRONMENT_FILE} in {', '.join(missing)}" if missing else ""
        differences = environment_differences(records) if len(records) > 1 else {}
        self.setVisible(len(runs) > 1)
        if len(records) < 2:
            self.title.setText(f"Environments: fewer than two recorded{without}")
        elif not differences:
            self.title.setText(f"Environments: the same in {len(records)} runs{without}")
        else:
            self.title.setText(
                f"Environments: {len(differences)} difference(s) in {len(records)} runs{without}"
            )
        self._fill(names, differences)

    def _fill(self, names: list[str], differences: dict[str, list[str | None]]) -> None:
        self.table.clear()
        self.table.setColumnCount(len(names) + 1 if differences else 0)
        self.table.setRowCount(len(differences))
        self.table.setHorizontalHeaderLabels(["What", *names] if differences else [])
        for row, (key, values) in enumerate(differences.items()):
            self.table.setItem(row, 0, QTableWidgetItem(key))
            for column, value in enumerate(values, start=1):
                item = QTableWidgetItem(ABSENT if value is None else value)
                item.setToolTip(item.text())
                self.table.setItem(row, column, item)
        self.table.resizeColumnsToContents()
        self.table.setVisible(bool(differences))
        shown = min(len(differences), ROWS_SHOWN)
        row_height = self.table.verticalHeader().defaultSectionSize()
        frame = self.table.horizontalHeader().sizeHint().height() + 4
        frame += self.table.horizontalScrollBar().sizeHint().height()  # long values scroll
        self.table.setFixedHeight(frame + shown * row_height)

    def rows(self) -> dict[str, list[str]]:
        """What the table shows, key to each run's text (for a test or a copy)."""
        return {
            self.table.item(row, 0).text(): [
                self.table.item(row, column).text() for column in range(1, self.table.columnCount())
            ]
            for row in range(self.table.rowCount())
        }
