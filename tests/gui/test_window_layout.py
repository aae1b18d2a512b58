"""The window's layout: it fits the screen with its frame, and keeps the plot usable."""

from __future__ import annotations

from distloop.gui.main_window import fitted_geometry
from PySide6.QtCore import QMargins, QRect, QSize

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
