"""The window's layout: it fits the screen with its frame, and keeps the plot usable."""

from __future__ import annotations

import pytest
from distloop.engine.problems import Problem
from distloop.gui.main_window import MainWindow, fitted_geometry
from PySide6.QtCore import QMargins, QRect, QSize, Qt

DEFAULT = QSize(1400, 900)
TITLE_BAR = QMargins(1, 20, 1, 5)  # openbox's frame: borders and a 20 px title bar


def test_the_first_size_leaves_room_for_the_frame() -> None:
    # A 1400x900 window on a 1400x900 screen had its status bar below the screen's edge.
    assert fitted_geometry(QRect(0, 0, 1400, 900), TITLE_BAR, DEFAULT) == QRect(1, 20, 1398, 875)
    # A panel at the top: the window starts below it.
    assert fitted_geometry(QRect(0, 30, 1024, 670), TITLE_BAR, DEFAULT) == QRect(1, 50, 1022, 645)
    # A bigger screen keeps the default size, centred.
    big = fitted_geometry(QRect(0, 0, 1920, 1080), TITLE_BAR, DEFAULT)
    assert big.size() == DEFAULT
    assert big.adjusted(-1, -20, 1, 5).center() == QRect(0, 0, 1920, 1080).center()
    # No window manager, no frame: the screen's size at most.
    assert fitted_geometry(QRect(0, 0, 1280, 800), QMargins(), DEFAULT) == QRect(0, 0, 1280, 800)


@pytest.mark.parametrize("size", [(1400, 900), (1024, 700)])
def test_every_section_of_the_project_is_in_view(qtbot, window: MainWindow, size) -> None:
    """The eight sections fit the dock (the tab strip showed "Optimizer & l…" and hid two)."""
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    editor = window.editor
    bar = editor.section_bar
    assert editor.tabBar().isHidden()
    assert [button.text() for button in bar.buttons] == [
        editor.tabText(index) for index in range(editor.count())
    ]
    dock = window.project_dock.rect()
    for button in bar.buttons:
        assert button.isVisible()
        assert button.width() >= button.sizeHint().width(), button.text()  # never clipped
        corner = button.mapTo(window.project_dock, button.rect().bottomRight())
        assert dock.contains(corner), button.text()
    assert {button.y() for button in bar.buttons} == {bar.buttons[0].y(), bar.buttons[4].y()}


def test_a_section_button_shows_its_page_and_its_problems(qtbot, window: MainWindow) -> None:
    editor = window.editor
    bar = editor.section_bar
    data = editor.tab_of(Problem(("data",), ""))
    qtbot.mouseClick(bar.buttons[data], Qt.MouseButton.LeftButton)
    assert editor.currentIndex() == data and bar.buttons[data].isChecked()
    editor.setCurrentIndex(0)  # the editor's own changes check the button, too
    assert bar.buttons[0].isChecked() and not bar.buttons[data].isChecked()
    assert bar.buttons[data].icon().isNull()
    editor.data_form.batching.editors["global_batch_size"].set_value(1)
    editor.strategy.fields.editors["cpu_replicas"].set_value(2)
    assert not bar.buttons[data].icon().isNull()
    assert "data.global_batch_size" in bar.buttons[data].toolTip()


def test_the_problems_list_is_as_tall_as_its_problems(qtbot, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    panel = window.problems_panel
    editor = window.editor
    editor.data_form.batching.editors["global_batch_size"].set_value(1)
    editor.strategy.fields.editors["cpu_replicas"].set_value(2)
    assert panel.list.count() == 1
    qtbot.wait(10)
    line = panel.list.fontMetrics().lineSpacing()
    # One problem took the list's 150 px cap, about 170 px with the summary above it.
    assert panel.list.height() < 4 * line
    assert panel.list.verticalScrollBar().maximum() == 0  # the whole problem shows
    height = panel.list.height()

    window.resize(1024, 700)  # narrower: the line wraps, and the list grows with it
    window.resizeDocks([window.project_dock], [200], Qt.Orientation.Horizontal)
    qtbot.waitUntil(lambda: panel.list.height() > height)
    assert panel.list.verticalScrollBar().maximum() == 0
