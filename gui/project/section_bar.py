"""The project's sections as buttons in rows, in place of a tab strip that did not fit.

Eight tabs in a 470 px dock showed "Project … Optimizer & l…" with Training and
Evaluation behind a scroll arrow. A :class:`SectionBar` shows a QTabWidget's pages as
checkable buttons, ``per_row`` to a row, each with its tab's text, icon (a problem's
warning) and tooltip; the tab widget keeps its API and hides its own strip. Each row
shares its width by the buttons' texts, so "Optimizer & loss" gets more than "Data".
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QButtonGroup,
    QHBoxLayout,
    QSizePolicy,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

MIN_BUTTON_WIDTH = 24  # pixels

BUTTON_STYLE = """
QToolButton { padding: 3px 6px 4px 6px; border: 1px solid palette(mid); border-radius: 3px;
  background: palette(button); }
QToolButton:checked { background: palette(base); border-color: palette(highlight);
  font-weight: bold; }
"""


class SectionBar(QWidget):
    """Mirrors ``tabs``: a click shows a page, and the current page's button is checked."""

    def __init__(self, tabs: QTabWidget, per_row: int = 4) -> None:
        super().__init__()
        self._tabs = tabs
        self._group = QButtonGroup(self)
        self._group.setExclusive(True)
        self.buttons: list[QToolButton] = []
        rows = QVBoxLayout(self)
        rows.setContentsMargins(0, 0, 0, 4)
        rows.setSpacing(3)
        row = QHBoxLayout()
        for index in range(tabs.count()):
            if index % per_row == 0:
                row = QHBoxLayout()
                row.setSpacing(3)
                rows.addLayout(row)
            button = QToolButton()
            button.setCheckable(True)
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
            button.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
            # Shrinks with a narrowed dock instead of holding it wide; the tooltip names it.
            button.setMinimumWidth(MIN_BUTTON_WIDTH)
            button.setStyleSheet(BUTTON_STYLE)
            self._group.addButton(button, index)
            row.addWidget(button)
            self.buttons.append(button)
        self._group.idClicked.connect(tabs.setCurrentIndex)
        tabs.currentChanged.connect(self._check)
        tabs.tabBar().hide()
        self.sync()

    def sync(self) -> None:
        """Takes the tabs' texts, icons and tooltips again (they follow the problems)."""
        for index, button in enumerate(self.buttons):
            button.setText(self._tabs.tabText(index))
            button.setIcon(self._tabs.tabIcon(index))
            tip = self._tabs.tabToolTip(index)
            button.setToolTip(tip or button.text())
        self._check(self._tabs.currentIndex())

    def _check(self, index: int) -> None:
        if 0 <= index < len(self.buttons):
            self.buttons[index].setChecked(True)
