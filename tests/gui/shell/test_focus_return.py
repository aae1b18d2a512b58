"""After a dialog closes, the keys typed next reach the field the user was in (issue 34:
without a window manager no window had the focus, and the keys were lost)."""

from __future__ import annotations

from distloop.gui.shell.main_window import MainWindow
from PySide6.QtWidgets import QApplication, QMessageBox


def test_focus_returns_to_the_field_after_a_dialog(make_window, qtbot) -> None:
    window: MainWindow = make_window()
    window.show()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    name = window.editor.general.editors["name"]
    name.setFocus()
    qtbot.waitUntil(name.hasFocus, timeout=5000)
    box = QMessageBox(
        QMessageBox.Icon.Question, "A question", "Yes?", QMessageBox.StandardButton.Ok, window
    )
    box.open()  # modal, as exec() shows it, without a nested event loop
    qtbot.waitUntil(lambda: QApplication.focusWidget() is not name, timeout=5000)
    box.done(0)
    qtbot.waitUntil(name.hasFocus, timeout=5000)
    name.selectAll()
    qtbot.keyClicks(QApplication.focusWidget(), "typed after the dialog")
    assert name.text() == "typed after the dialog"
