"""``distloop`` with a project file: the app starts, opens it, and exits cleanly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from distloop.engine.examples import load_example

REPO = Path(__file__).resolve().parents[3]

# Closes the window once it is up and reports what it showed and how long opening took.
_SCRIPT = """
import sys, time
started = time.perf_counter()
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from distloop.gui.shell.app import main

def report():
    windows = [w for w in QApplication.topLevelWidgets() if w.isVisible() and w.isWindow()]
    window = next(w for w in windows if w.windowTitle().endswith("Distloop"))
    print(window.windowTitle(), flush=True)
    print(f"opened in {OPENED:.2f} s", flush=True)
    window.close()

def opened():
    global OPENED
    OPENED = time.perf_counter() - started
    QTimer.singleShot(200, report)

QTimer.singleShot(0, opened)
sys.exit(main(sys.argv[1:]))
"""


def _launch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),  # never the user's settings
    }
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_app_opens_the_named_project_and_exits_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "regression.json"
    path.write_text(load_example("regression").to_json(), encoding="utf-8")
    result = _launch(tmp_path, str(path))
    assert result.returncode == 0, result.stderr[-3000:]
    title, opened = result.stdout.splitlines()[:2]
    assert title == "regression.json[*] — Distloop"
    print(opened)


def test_project_option_and_remembered_last_project(tmp_path: Path) -> None:
    path = tmp_path / "classification.json"
    path.write_text(load_example("classification").to_json(), encoding="utf-8")
    first = _launch(tmp_path, "--project", str(path))
    assert first.returncode == 0, first.stderr[-3000:]
    again = _launch(tmp_path)  # no argument: the last project comes back
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.splitlines()[0] == "classification.json[*] — Distloop"
