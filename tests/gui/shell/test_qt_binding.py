"""The Qt binding in use keeps Python's reference counts right.

PySide6 6.12.0 dropped a reference to ``None`` on every void call, which aborts
Python 3.11 seconds into a fast run; pyproject.toml excludes that release there.
This test fails if an installed binding has the bug again.
"""

from __future__ import annotations

import sys

from PySide6.QtWidgets import QLabel


def test_void_calls_keep_none_alive(qtbot) -> None:
    label = QLabel()
    qtbot.addWidget(label)
    before = sys.getrefcount(None)
    for _ in range(10_000):
        label.setText("x")
    assert sys.getrefcount(None) > before - 1_000
