"""A text file of a run (a task's ``engine.log``) shown in a window of its own.

"Open engine.log" asked the desktop to open the file and did nothing visible where no
handler is set up (a bare X session, a remote one, a cluster's login node). The
window shows the file itself: its last :data:`MAX_SHOWN_BYTES`, scrolled to the end,
reloaded on request while a run still writes it.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from ...engine.fileio import open_bytes

MAX_SHOWN_BYTES = 4 * 1024 * 1024
"""A log's tail worth reading; a long run's TensorFlow output can run to far more."""


def read_tail(path: Path, limit: int = MAX_SHOWN_BYTES) -> str:
    """The file's last ``limit`` bytes as text, saying what was left out; or why none."""
    try:
        with open_bytes(path) as file:  # never a link's target: a run folder is untrusted
            size = file.seek(0, 2)
            file.seek(max(0, size - limit))
            data = file.read()
    except FileNotFoundError:
        return f"{path} does not exist (yet): the task writes it once its process starts."
    except OSError as exc:
        return f"{path} cannot be read: {exc.strerror or exc}"
    text = data.decode("utf-8", errors="replace")
    if size <= limit:
        return text
    text = text.split("\n", 1)[-1]  # from the first whole line
    return f"[the first {size - len(data) + 1:,} bytes are left out; the file has {size:,}]\n{text}"


class LogFileWindow(QDialog):
    """``path``'s text, monospaced and unwrapped, with Reload and the path to copy."""

    def __init__(self, path: Path, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.path = path
        self.setWindowTitle(title)
        self.setWindowFlag(Qt.WindowType.WindowMaximizeButtonHint)
        where = QLabel(str(path))
        where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        reload = buttons.addButton("Reload", QDialogButtonBox.ButtonRole.ActionRole)
        reload.setToolTip("Read the file again (a running task keeps writing it)")
        reload.clicked.connect(self.reload)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(where)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.resize(900, 600)
        self.reload()

    def reload(self) -> None:
        self.text.setPlainText(read_tail(self.path))
        bar = self.text.verticalScrollBar()
        bar.setValue(bar.maximum())
