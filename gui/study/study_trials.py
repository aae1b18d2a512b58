"""The study's trials table: one row per trial, its state, objective, parameters, steps
and duration, shown as text and sorted by value (:data:`SORT_ROLE`).

Columns follow the study: the objective's column is named after it and a column per
parameter of the search space. A refresh replaces rows in place when the columns stay
the same, so the table keeps its selection and scroll while a study runs.
"""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont

from ...engine.formatting import format_duration
from ...engine.study.results import StudyResults, TrialRow

SORT_ROLE = Qt.ItemDataRole.UserRole
Index = QModelIndex | QPersistentModelIndex
STATE_COLORS = {
    "failed": QColor(198, 40, 40),
    "running": QColor(21, 101, 192),
    "pruned": QColor(230, 81, 0),
    "interrupted": QColor(230, 81, 0),
    "queued": QColor(120, 120, 120),
}
FIXED_BEFORE = ("Trial", "State")
FIXED_AFTER = ("Steps", "Duration")


class TrialsTableModel(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self._rows: list[TrialRow] = []
        self._params: list[str] = []
        self._objective = "objective"
        self._best: int | None = None
        self._headers = self._make_headers()

    def set_results(self, results: StudyResults) -> None:
        params = list(results.axes) or list(results.plan.space.axes)
        best = results.best()
        rows = list(results.trials)
        if params == self._params and results.objective == self._objective:
            same = len(rows) == len(self._rows)
            if not same:
                self.beginResetModel()
            self._rows, self._best = rows, best.number if best else None
            if same:
                self.dataChanged.emit(
                    self.index(0, 0), self.index(len(rows) - 1, self.columnCount() - 1)
                )
            else:
                self.endResetModel()
            return
        self.beginResetModel()
        self._rows, self._params, self._objective = rows, params, results.objective
        self._best = best.number if best else None
        self._headers = self._make_headers()
        self.endResetModel()

    def clear(self) -> None:
        self.beginResetModel()
        self._rows, self._params, self._best = [], [], None
        self._headers = self._make_headers()
        self.endResetModel()

    def trial(self, row: int) -> TrialRow:
        return self._rows[row]

    def row_of(self, number: int) -> int | None:
        return next((i for i, t in enumerate(self._rows) if t.number == number), None)

    def headers(self) -> list[str]:
        return list(self._headers)

    def _make_headers(self) -> tuple[str, ...]:
        """Asked for at every cell Qt paints or sorts: made once per set of columns."""
        return (*FIXED_BEFORE, self._objective, *self._params, *FIXED_AFTER)

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._headers)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation != Qt.Orientation.Horizontal:
            return None
        headers = self._headers
        if role == Qt.ItemDataRole.DisplayRole and 0 <= section < len(headers):
            name = headers[section]
            return name.rsplit(".", 1)[-1] if name in self._params else name
        if role == Qt.ItemDataRole.ToolTipRole and 0 <= section < len(headers):
            return headers[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        trial = self._rows[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(trial, column)
        if role == SORT_ROLE:
            return self._sort_key(trial, column)
        if role == Qt.ItemDataRole.ForegroundRole and column == 1:
            color = STATE_COLORS.get(trial.state)
            return QBrush(color) if color is not None else None
        if role == Qt.ItemDataRole.FontRole and trial.number == self._best:
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(trial)
        if role == Qt.ItemDataRole.TextAlignmentRole and column != 1:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _value(self, trial: TrialRow, column: int) -> Any:
        params = len(self._params)
        if column == 0:
            return trial.number
        if column == 1:
            return trial.state
        if column == 2:
            return trial.value
        if column < 3 + params:
            return trial.params.get(self._params[column - 3])
        return trial.steps if column == 3 + params else trial.duration_s

    def _text(self, trial: TrialRow, column: int) -> str:
        value = self._value(trial, column)
        if column == 0:
            return f"★ {value}" if trial.number == self._best else str(value)
        if column == 2 and value is None and trial.reported is not None:
            step, reported = trial.reported
            return f"{reported:.4g} (step {step})"
        if value is None:
            return ""
        if column == 3 + len(self._params) + 1:
            return format_duration(value)
        if isinstance(value, float):
            return f"{value:.4g}"
        return str(value)

    def _sort_key(self, trial: TrialRow, column: int) -> Any:
        value = self._value(trial, column)
        if column == 2 and value is None and trial.reported is not None:
            value = trial.reported[1]
        if isinstance(value, bool) or value is None:
            return math.inf if value is None else int(value)
        if isinstance(value, int | float):
            return value if math.isfinite(value) else math.inf
        return str(value)

    def _tooltip(self, trial: TrialRow) -> str:
        lines = [f"trial {trial.number}: {trial.state}"]
        if trial.value is None and trial.reported is not None:
            step, reported = trial.reported
            lines.append(f"{self._objective} {reported!r} at step {step}, its last report")
        if trial.note:
            lines.append(trial.note)
        if trial.run is not None:
            lines.append(str(trial.run.path))
        return "\n".join(lines)
