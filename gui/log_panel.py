"""The log: the engine's notes and TensorFlow's own output, one coloured line each."""

from __future__ import annotations

import time

from PySide6.QtGui import QColor, QFontDatabase, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QHBoxLayout, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from engine.messages import Log

MAX_LINES = 10_000
LEVEL_COLORS = {
    "debug": QColor("#808080"),
    "info": QColor("#202020"),
    "warning": QColor("#b26a00"),
    "error": QColor("#c62828"),
}
SOURCE_TAGS = {"engine": "engine", "tensorflow": "tf", "gui": "gui"}


class LogPanel(QWidget):
    """Keeps the last :data:`MAX_LINES` lines; follows new lines unless scrolled up."""

    def __init__(self) -> None:
        super().__init__()
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setMaximumBlockCount(MAX_LINES)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setPlaceholderText("Engine and TensorFlow messages appear here.")
        clear = QPushButton("Clear log")
        clear.clicked.connect(self.text.clear)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(clear)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.text, 1)
        layout.addLayout(buttons)

    def add_message(self, message: Log) -> None:
        source = SOURCE_TAGS.get(message.source, message.source)
        task = f" {message.task}" if message.task else ""
        self.add(message.text, message.level, f"{source}{task}")

    def add(self, text: str, level: str = "info", source: str = "gui") -> None:
        """Appends ``text`` (each of its lines) with a time, level and source prefix."""
        bar = self.text.verticalScrollBar()
        following = bar.value() >= bar.maximum() - 2
        char_format = QTextCharFormat()
        char_format.setForeground(LEVEL_COLORS.get(level, LEVEL_COLORS["info"]))
        cursor = QTextCursor(self.text.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        stamp = time.strftime("%H:%M:%S")
        for line in text.splitlines() or [""]:
            if not self.text.document().isEmpty():
                cursor.insertBlock()
            cursor.insertText(f"{stamp} {level.upper():<7} [{source}] {line}", char_format)
        if following:
            bar.setValue(bar.maximum())

    def lines(self) -> list[str]:
        return self.text.toPlainText().splitlines()
