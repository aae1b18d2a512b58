"""Esc and Ctrl+W close a window of its own (the Guide, the shortcuts, Try It), as its
Close button does: a user who opened one with a key leaves it with a key."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QDialogButtonBox, QWidget


def close_button(window: QWidget) -> QDialogButtonBox:
    """A Close button for ``window``'s bottom row, with Esc and Ctrl+W on the window."""
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
    buttons.rejected.connect(window.close)
    for keys in (QKeySequence(Qt.Key.Key_Escape), QKeySequence("Ctrl+W")):
        shortcut = QShortcut(keys, window)
        shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
        shortcut.activated.connect(window.close)
    return buttons
