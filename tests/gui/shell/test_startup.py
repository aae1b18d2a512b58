"""The window opens fast, without TensorFlow, on the seed example or the last project."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from distloop.engine.examples import load_example
from distloop.gui.common import settings
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtCore import QByteArray, QSettings, Qt
from PySide6.QtWidgets import QScrollArea

REPO = Path(__file__).resolve().parents[3]


def test_gui_modules_do_not_import_tensorflow() -> None:
    code = (
        "import os, sys\n"
        "os.environ['QT_QPA_PLATFORM'] = 'offscreen'\n"
        "import distloop.gui.shell.app, distloop.gui.shell.main_window\n"
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "window = distloop.gui.shell.main_window.MainWindow()\n"
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
    first.show()
    first.resize(780, 600)
    first.resizeDocks([first.project_dock], [300], Qt.Orientation.Horizontal)
    first.log_panel_action.trigger()  # the log's tab closed
    qtbot.wait(10)
    width = first.project_dock.width()
    first.close()
    second = make_window()
    second.show()
    qtbot.wait(10)
    assert (second.width(), second.height()) == (780, 600)
    assert second.project_dock.width() == width
    assert not second.log_dock.isVisible() and second.runs_dock.isVisible()


def test_the_default_layout_gives_the_plot_the_height(make_window, qtbot) -> None:
    """At 1400x900 the plot had about 220 px between the forms, the status and the log.

    It shares the height with the bottom dock, which shows five runs (two, once, were
    too few to compare runs at a glance)."""
    window = make_window()
    window.resize(1400, 900)
    window.show()
    qtbot.waitExposed(window)
    plot = window.plot.plot_widget
    assert plot.height() >= 420, plot.height()
    assert plot.width() >= 800, plot.width()
    tabs = {window.log_dock, window.runs_dock}
    assert all(
        window.dockWidgetArea(dock) == Qt.DockWidgetArea.BottomDockWidgetArea for dock in tabs
    )
    assert window.tabifiedDockWidgets(window.log_dock) == [
        window.runs_dock,
        window.resources_dock,
        window.dataset_dock,
    ]
    assert window.dockWidgetArea(window.project_dock) == Qt.DockWidgetArea.LeftDockWidgetArea


def test_every_project_tab_fits_the_default_dock_width(make_window, qtbot) -> None:
    """The TF_CONFIG editor needed 712 px in a 470 px dock: its tab scrolled sideways."""
    window = make_window()
    window.resize(1400, 900)
    window.show()
    qtbot.waitExposed(window)
    for index in range(window.editor.count()):
        window.editor.setCurrentIndex(index)
        page = window.editor.widget(index)
        qtbot.waitUntil(lambda page=page: page.isVisible())
        if isinstance(page, QScrollArea):
            name = window.editor.tabText(index)
            assert not page.horizontalScrollBar().isVisible(), f"the {name} tab scrolls sideways"


def test_window_geometry_is_kept_without_a_close(make_window, qtbot) -> None:
    """A window ended by a signal or a crash never closes: its size came back as the
    default's (closed at 1024x700 by a kill, reopened at 1400x900)."""
    first = make_window()
    first.show()
    qtbot.waitExposed(first)
    first.resize(700, 560)
    size = (first.width(), first.height())
    qtbot.waitUntil(
        lambda: (
            (store := QSettings().value("window/geometry")) is not None
            and QByteArray(store) == first.saveGeometry()
        ),
        timeout=10_000,
    )
    first.hide()  # no closeEvent, as a killed process has none
    second = make_window()
    second.show()
    qtbot.wait(10)
    assert (second.width(), second.height()) == size


def test_a_geometry_larger_than_the_screen_now_is_fitted_to_it(make_window, qtbot) -> None:
    first = make_window()
    first.show()
    qtbot.waitExposed(first)
    screen = first.screen().availableGeometry()
    first.setGeometry(300, 200, screen.width() + 600, screen.height() + 200)
    first.close()
    second = make_window()
    second.show()
    qtbot.waitUntil(lambda: screen.contains(second.frameGeometry()), timeout=5000)
    assert second.width() < first.width()
