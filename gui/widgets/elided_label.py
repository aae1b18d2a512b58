"""A one-line label that shortens its text with "…" to the width it gets; the tooltip has it all.

A QLabel asks for the width of its whole text: a long run name, a failure's message
or a list of validation metrics widened the panel that holds it, or, with its width
ignored, was cut off mid-word with nothing to say so. This label never asks for
width (horizontal policy Ignored) and elides what does not fit, at the end or, for
names whose ends both matter (``seed #3``, ``… (resumed)``), in the middle.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy


class ElidedLabel(QLabel):
    """Plain text, elided to the label's width; ``full_text`` is the text as set."""

    def __init__(
        self, text: str = "", mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight
    ) -> None:
        super().__init__()
        self._full = ""
        self._mode = mode
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.set_full_text(text)

    def full_text(self) -> str:
        return self._full

    def set_full_text(self, text: str, tooltip: str | None = None) -> None:
        """Shows ``text``; the tooltip is ``tooltip``, else the whole text."""
        self._full = text
        self._tooltip = tooltip
        self._elide()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        width = self.contentsRect().width()
        shown = self.fontMetrics().elidedText(self._full, self._mode, max(width, 0))
        self.setText(shown)
        self.setToolTip(self._full if self._tooltip is None else self._tooltip)
