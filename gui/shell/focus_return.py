"""After one of the window's dialogs closes, the keyboard focus goes back to the field the
user was in.

Qt leaves that to the window manager: without one (a bare X server, a kiosk, some remote
desktops), no window had the focus once a dialog closed, and the keys typed next were
lost. Here, when the focus leaves the application as a dialog of ours hides, the main
window is activated again and its last focused field gets the focus back. Focus that
goes to another application (the user switched away) is left alone: only a dialog's
closing hands it back.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QDialog, QWidget
from shiboken6 import isValid


class FocusReturn(QObject):
    """Watches the application's focus for ``window`` (focus changes only, not every event)."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self._window = window
        self._field: QWidget | None = None  # the window's last focused widget
        app = QApplication.instance()
        assert isinstance(app, QApplication)
        app.focusChanged.connect(self._on_focus)

    def _on_focus(self, old: QWidget | None, now: QWidget | None) -> None:
        if now is not None:
            if now.window() is self._window:
                self._field = now
            return
        dialog = old.window() if old is not None and isValid(old) else None
        if isinstance(dialog, QDialog) and dialog is not self._window:
            # Once the dialog's hiding is done: a window manager may hand the focus back first.
            QTimer.singleShot(0, self, lambda: self._give_back(dialog))

    def _give_back(self, dialog: QDialog) -> None:
        """Only when the dialog closed and nothing of ours has the focus (not when the user
        switched to another application with the dialog open)."""
        if isValid(dialog) and dialog.isVisible():
            return
        if QGuiApplication.focusWindow() is not None or not self._window.isVisible():
            return
        self._window.activateWindow()
        field = self._field
        if field is not None and isValid(field) and field.isVisible():
            field.setFocus(Qt.FocusReason.ActiveWindowFocusReason)
