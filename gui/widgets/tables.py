"""How the window's lists of rows look and select, in one place: runs, studies, trials."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QItemSelectionModel, QModelIndex
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

ROW_PADDING = 8
"""Pixels above and below a row's line of text: one line each, none taller."""


def style_list_table(
    table: QTableView,
    selection: QAbstractItemView.SelectionMode,
    edits: QAbstractItemView.EditTrigger = QAbstractItemView.EditTrigger.NoEditTriggers,
) -> None:
    """Whole rows selected, alternating colours, one unwrapped line per row, no row
    numbers, columns the user sizes and the last one filling the rest: every list looks
    and answers alike."""
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(selection)
    table.setEditTriggers(edits)
    table.setAlternatingRowColors(True)
    table.setWordWrap(False)
    table.verticalHeader().setVisible(False)
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + ROW_PADDING)
    header = table.horizontalHeader()
    header.setStretchLastSection(True)
    header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)


def select_rows(table: QTableView, indexes: Iterable[QModelIndex]) -> None:
    """Selects exactly these rows (of the table's own model), the first one current and
    scrolled to."""
    selection = table.selectionModel()
    selection.clearSelection()
    flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
    for position, index in enumerate(indexes):
        if position == 0:
            selection.setCurrentIndex(index, flags)
            table.scrollTo(index)
        else:
            selection.select(index, flags)
