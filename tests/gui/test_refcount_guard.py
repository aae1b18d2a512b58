"""PySide6 6.12 on Python 3.11 drops a reference to None per void call; the guard absorbs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# 300,000 void calls: without the guard this aborts ("none_dealloc") on affected builds.
_MANY_VOID_CALLS = """
import os, sys
os.environ["QT_QPA_PLATFORM"] = "offscreen"
from gui.refcount_guard import protect_singletons
protect_singletons()
from PySide6.QtWidgets import QApplication, QLabel
app = QApplication([])
label = QLabel()
for _ in range(300_000):
    label.setText("x")
    label.setEnabled(True)
print("alive")
"""


def test_many_void_calls_do_not_kill_the_interpreter() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _MANY_VOID_CALLS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "alive"


def test_protecting_twice_adds_nothing() -> None:
    from gui.refcount_guard import protect_singletons

    before = sys.getrefcount(None)
    protect_singletons()
    protect_singletons()
    assert abs(sys.getrefcount(None) - before) < 1000
