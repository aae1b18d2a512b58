"""Every problem of the current project in one list, plus notes that are not errors.

The list is as tall as its lines, up to :data:`MAX_LIST_HEIGHT` (then it scrolls): at
a fixed 150 px, one problem took about 170 px from the forms above it.
"""

from __future__ import annotations

import html
import re

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QListWidget, QListWidgetItem, QStyle, QVBoxLayout, QWidget

from ...engine.config import Project
from ...engine.problems import Problem
from ...engine.validation import Validation

_FIELD_FIRST = re.compile(
    rf"^((?:{'|'.join(Project.model_fields)})(?:\.[A-Za-z0-9_]+)*): (.+)$", re.DOTALL
)
"""A message that starts with the project field it is about."""

MAX_LIST_HEIGHT = 150  # pixels: about six one-line problems


class ProblemsPanel(QWidget):
    """Activating a problem asks the window to show its widget (``problem_activated``)."""

    problem_activated = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.list = QListWidget()
        self.list.setWordWrap(True)
        self.list.setAlternatingRowColors(True)
        self.list.setVerticalScrollMode(QListWidget.ScrollMode.ScrollPerPixel)
        self.list.itemActivated.connect(self._on_item)
        self.list.itemClicked.connect(self._on_item)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary)
        layout.addWidget(self.list)
        self._validation = Validation(None)
        self._progress = ""

    def show_validation(self, validation: Validation) -> None:
        self._validation = validation
        self.list.clear()
        style = self.style()
        error = style.standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning)
        info = style.standardIcon(QStyle.StandardPixmap.SP_MessageBoxInformation)
        for problem in validation.problems:
            item = QListWidgetItem(error, str(problem))
            item.setData(Qt.ItemDataRole.UserRole, problem)
            item.setToolTip("Click to go to the setting")
            self.list.addItem(item)
        for note in validation.notes:
            item = QListWidgetItem(info, note)
            item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsSelectable)
            self.list.addItem(item)
        self.list.setVisible(self.list.count() > 0)
        self._fit_list()
        self._show_summary()

    def show_progress(self, text: str) -> None:
        """A folder scan's progress (``scanning … 12,345 files``), shown while the project
        waits for it; "" when no scan runs."""
        self._progress = text
        if self._validation.checking:  # else the summary has nothing to wait for
            self._show_summary()

    def _show_summary(self) -> None:
        validation = self._validation
        if validation.valid:
            self.summary.setText("<span style='color:#2e7d32'>✓ No problems: ready to run</span>")
        elif validation.problems:
            self.summary.setText(
                f"<span style='color:#c62828'><b>{validation.summary()}</b></span>"
                " — click one to go to its setting:"
            )
        elif validation.checking:
            progress = html.escape(self._progress or "waiting for typing to pause")
            self.summary.setText(f"<b>{html.escape(validation.summary())}</b> ({progress})")

    def show_run_failure(self, message: str) -> None:
        """Puts a failed run's one-line reason first in the list, until the next edit or run.

        The engine names the field a failure is about first (``data.path: ... is empty``);
        such a line goes to its setting when clicked, as a validation problem does.
        """
        found = _FIELD_FIRST.match(message)
        problem = (
            Problem(
                tuple(int(part) if part.isdigit() else part for part in found[1].split(".")),
                found[2],
            )
            if found
            else None
        )
        icon = self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxCritical)
        item = QListWidgetItem(icon, message)
        if problem is not None:
            item.setData(Qt.ItemDataRole.UserRole, problem)
            item.setToolTip("Click to go to the setting")
        self.list.insertItem(0, item)
        self.list.show()
        self._fit_list()
        self.summary.setText(
            "<span style='color:#c62828'><b>The last run failed</b></span>"
            + (" — click it to go to its setting:" if problem is not None else ":")
        )

    def _fit_list(self) -> None:
        """The list's height: its rows' (wrapped at the present width), at most the cap."""
        self.list.doItemsLayout()  # the rows wrapped at the list's present width
        items = (self.list.item(row) for row in range(self.list.count()))
        rows = sum(self.list.visualItemRect(item).height() for item in items)
        self.list.setFixedHeight(min(rows + 2 * self.list.frameWidth(), MAX_LIST_HEIGHT))

    def resizeEvent(self, event: QResizeEvent) -> None:
        """A narrower panel wraps the lines into more rows: measured again once laid out."""
        super().resizeEvent(event)
        QTimer.singleShot(0, self, self._fit_list)

    def problems(self) -> list[Problem]:
        return [
            data
            for row in range(self.list.count())
            if isinstance(data := self.list.item(row).data(Qt.ItemDataRole.UserRole), Problem)
        ]

    def _on_item(self, item: QListWidgetItem) -> None:
        problem = item.data(Qt.ItemDataRole.UserRole)
        if isinstance(problem, Problem):
            self.problem_activated.emit(problem)
