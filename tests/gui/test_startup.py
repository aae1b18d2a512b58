"""The window opens fast, without TensorFlow, on the seed example or the last project."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engine.examples import load_example
from gui import settings
from gui.main_window import MainWindow

REPO = Path(__file__).resolve().parents[2]


def test_gui_modules_do_not_import_tensorflow() -> None:
    code = (
        "import os, sys\n"
        "os.environ['QT_QPA_PLATFORM'] = 'offscreen'\n"
        "import gui.app, gui.main_window\n"
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "window = gui.main_window.MainWindow()\n"
        "window.show()\n"
        "app.processEvents()\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))\n"
        "print(','.join(heavy))\n"
        "window.close()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_starts_on_the_seed_example(window: MainWindow) -> None:
    assert window.validation.project == load_example("seed")
    assert window.validation.valid
    assert window.run_action.isEnabled()
    assert not window.stop_action.isEnabled()
    assert not window.is_modified()
    assert window.windowTitle() == "seed[*] — Distloop"


def test_reopens_the_last_project(make_window, tmp_path: Path) -> None:
    path = tmp_path / "last.json"
    path.write_text(load_example("classification").to_json(), encoding="utf-8")
    settings.set_last_project(path)
    window = make_window()
    window.open_startup_project(None)
    assert window.path == path
    assert window.validation.project == load_example("classification")


def test_command_line_file_wins_over_the_last_project(make_window, tmp_path: Path) -> None:
    last, named = tmp_path / "last.json", tmp_path / "named.json"
    last.write_text(load_example("classification").to_json(), encoding="utf-8")
    named.write_text(load_example("regression").to_json(), encoding="utf-8")
    settings.set_last_project(last)
    window = make_window()
    window.open_startup_project(str(named))
    assert window.path == named


def test_window_geometry_is_remembered(make_window, qtbot) -> None:
    first = make_window()
    first.resize(640, 480)
    first.main_splitter.setSizes([250, 390])
    first.close()
    second = make_window()
    assert (second.width(), second.height()) == (640, 480)
    assert second.main_splitter.sizes()[0] == first.main_splitter.sizes()[0]
