"""The window's layout: it fits the screen with its frame, and keeps the plot usable."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from distloop.engine.problems import Problem
from distloop.engine.run_history import summarize
from distloop.gui.runs import try_it_panel
from distloop.gui.shell import help_windows
from distloop.gui.shell.main_window import (
    MIN_PLOT_SIZE,
    PROJECT_DOCK_WIDTH,
    MainWindow,
    fitted_geometry,
)
from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt, QUrl
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QComboBox,
    QLineEdit,
    QScrollArea,
    QStyle,
    QWidget,
)
from support.distloop_testing import REPO
from support.gui_fakes import FakeProcess
from support.run_folders import run_folder

DEFAULT = QSize(1400, 900)
NARROW_DOCK = 316
"""The forms' dock of a 1024x700 window as the issue measured it: a 294 px viewport."""
CONTROLS = (QAbstractButton, QComboBox, QAbstractSpinBox, QLineEdit)
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


def test_a_remembered_layout_never_squeezes_the_plot(make_window, qtbot) -> None:
    """A layout that left the plot 30 px high came back at every start."""
    first = make_window()
    first.resize(1200, 800)
    first.show()
    qtbot.waitExposed(first)
    graph = first.plot.plot_widget
    graph.setMinimumSize(0, 0)  # as the window allowed before the graph had a minimum
    first.resizeDocks([first.log_dock], [700], Qt.Orientation.Vertical)
    first.run_splitter.setSizes([10, 600])
    qtbot.waitUntil(lambda: graph.height() < 80)
    first.close()

    second = make_window()
    second.show()
    qtbot.waitExposed(second)
    qtbot.wait(10)
    assert second.plot.plot_widget.height() >= MIN_PLOT_SIZE[1]
    assert second.plot.plot_widget.width() >= MIN_PLOT_SIZE[0]


def test_reset_layout_puts_every_panel_back(make_window, qtbot) -> None:
    fresh = make_window()
    fresh.resize(1200, 800)
    fresh.show()
    qtbot.waitExposed(fresh)
    qtbot.wait(10)
    default_plot = fresh.plot.height()

    window = make_window()
    window.resize(1200, 800)
    window.show()
    qtbot.waitExposed(window)
    window.project_dock.setFloating(True)
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, window.runs_dock)
    window.log_dock.hide()
    window.toolbar.hide()
    window.resizeDocks([window.runs_dock], [900], Qt.Orientation.Horizontal)
    view_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    assert window.reset_layout_action in view_menu.actions()

    window.reset_layout_action.trigger()
    qtbot.wait(10)
    assert not window.project_dock.isFloating()
    assert window.dockWidgetArea(window.project_dock) == Qt.DockWidgetArea.LeftDockWidgetArea
    bottom = [window.runs_dock, window.resources_dock, window.dataset_dock]
    for dock in (window.log_dock, *bottom):
        assert window.dockWidgetArea(dock) == Qt.DockWidgetArea.BottomDockWidgetArea
    assert window.tabifiedDockWidgets(window.log_dock) == bottom
    assert window.log_dock.isVisible() and window.toolbar.isVisible()
    assert not window.cluster_panel.toggleViewAction().isChecked()  # shown when it has tasks
    assert abs(window.plot.height() - default_plot) <= 0.1 * default_plot


def test_f11_fills_the_screen_and_gives_it_back(qtbot, window: MainWindow) -> None:
    window.show()
    qtbot.waitExposed(window)
    action = window.full_screen_action
    assert action.shortcut() == QKeySequence("F11")
    action.trigger()
    qtbot.waitUntil(window.isFullScreen)
    assert action.isChecked()
    action.trigger()
    qtbot.waitUntil(lambda: not window.isFullScreen())
    assert not action.isChecked()


def test_help_lists_the_shortcuts_and_shows_the_guide(qtbot, window: MainWindow) -> None:
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    assert help_menu.actions()[:2] == [window.guide_action, window.shortcuts_action]
    shortcuts = window.show_shortcuts()
    table = shortcuts.table
    rows = [
        tuple(table.item(row, column).text() for column in range(3))
        for row in range(table.rowCount())
    ]
    assert ("Run", "Run", "Ctrl+R") in rows
    assert ("File", "Save As…", "Ctrl+Shift+S") in rows
    assert ("View", "Full Screen", "F11") in rows
    assert ("Help", "Keyboard Shortcuts", "Ctrl+/") in rows
    assert ("Run", "Try It…", "Ctrl+T") in rows
    assert ("Runs", "Rename", "F2") in rows  # the runs table's own, outside the menus
    assert len({(where, command) for where, command, _ in rows}) == len(rows)

    guide = window.show_guide()
    text = guide.browser.toPlainText()
    assert text.startswith("Distloop")
    assert "The command line" in text and "The project file" in text
    guide.browser.anchorClicked.emit(QUrl("docs/command-line.md"))  # a click on the link
    assert "Headless: distloop run" in guide.browser.toPlainText()
    guide.browser.anchorClicked.emit(QUrl("project-file.md"))  # relative to that page
    assert guide.browser.toPlainText().splitlines()[1] == "The project file"
    assert guide.back_button.isEnabled()
    guide.back_button.click()
    guide.back_button.click()
    assert guide.browser.toPlainText().startswith("Distloop")
    assert window.guide_action.shortcut() == QKeySequence(QKeySequence.StandardKey.HelpContents)


def test_the_guide_fits_its_screenshots_and_names_one_that_is_not_installed(
    qtbot, window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The .deb leaves the screenshots out: its guide showed Qt's broken-image icon,
    820 px wide, where each one stood."""
    installed = tmp_path / "installed"
    (installed / "resources" / "screenshots").mkdir(parents=True)
    shutil.copy(
        REPO / "resources" / "screenshots" / "running.png",
        installed / "resources" / "screenshots" / "running.png",
    )
    (installed / "README.md").write_text(
        "# Distloop\n\n![here](resources/screenshots/running.png)\n\n"
        "![gone](resources/screenshots/digits.png)\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(help_windows, "PACKAGE_ROOT", installed)
    guide = window.show_guide()
    text = guide.browser.toPlainText()
    assert text.count(help_windows.MISSING_IMAGE) == 1
    images = []
    block = guide.browser.document().begin()
    while block.isValid():
        fragments = block.begin()
        while not fragments.atEnd():
            if fragments.fragment().charFormat().isImageFormat():
                images.append(fragments.fragment().charFormat().toImageFormat())
            fragments += 1
        block = block.next()
    assert [image.name() for image in images] == ["resources/screenshots/running.png"]
    assert images[0].width() == help_windows.IMAGE_WIDTH


def test_try_it_opens_over_the_window_and_inside_the_screen(
    qtbot, make_window, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Try It's 700x780 window went past the bottom of a 1024x700 screen."""
    monkeypatch.setattr(try_it_panel, "PredictionProcess", FakeProcess)
    run = run_folder(tmp_path / "runs", "a", model=True)
    window = make_window()
    window.resize(600, 400)
    window.move(400, 300)  # towards the screen's bottom right corner
    window.show()
    qtbot.waitExposed(window)
    panel = window.try_run(summarize(run))
    qtbot.waitExposed(panel)
    screen = window.screen().availableGeometry()
    assert screen.contains(panel.frameGeometry())
    expected = fitted_geometry(
        screen,
        window.windowHandle().frameMargins(),
        QSize(700, 780),
        window.frameGeometry().center(),
    )
    assert panel.geometry() == expected
    panel.close()
    # In the corner the window centres on, as far as the screen allows.
    assert fitted_geometry(
        QRect(0, 0, 1024, 700), TITLE_BAR, QSize(700, 780), QPoint(900, 600)
    ) == QRect(323, 20, 700, 675)


def test_no_two_actions_answer_the_same_keys_at_once(window: MainWindow) -> None:
    """Qt runs neither of two shortcuts that match at the same time ("Ambiguous shortcut
    overload"): Open Study and Run on Hosts once both took Ctrl+Shift+O. Two actions may
    share keys only when each works in its own widget, neither inside the other."""
    scoped = (Qt.ShortcutContext.WidgetShortcut, Qt.ShortcutContext.WidgetWithChildrenShortcut)

    def owners(action: QAction) -> list[QWidget]:
        return [w for w in action.associatedObjects() if isinstance(w, QWidget)]

    def apart(a: QAction, b: QAction) -> bool:
        if a.shortcutContext() not in scoped or b.shortcutContext() not in scoped:
            return False
        return all(
            not (x is y or x.isAncestorOf(y) or y.isAncestorOf(x))
            for x in owners(a)
            for y in owners(b)
        )

    keyed = [
        (key.toString(), action)
        for action in window.findChildren(QAction)
        for key in action.shortcuts()
        if not key.isEmpty()
    ]
    assert len(keyed) > 20  # the menus' and panels' actions, not an empty list
    clashes = [
        (key, a.text(), b.text())
        for index, (key, a) in enumerate(keyed)
        for other, b in keyed[index + 1 :]
        if key == other and a is not b and not apart(a, b)
    ]
    assert clashes == []


def _laid_out_within(page: QScrollArea, widgets: list[QWidget], squeeze: int = 0) -> None:
    """Every widget laid out (at least its minimum width, less ``squeeze``) and whole
    inside the page's viewport from left to right, with no horizontal scrollbar."""
    viewport = page.viewport()
    for widget in widgets:
        assert widget.width() >= widget.minimumSizeHint().width() - squeeze, widget
        left = widget.mapTo(viewport, QPoint(0, 0)).x()
        right = left + widget.width()
        assert left >= 0 and right <= viewport.width(), (widget, left, right, viewport.width())
    assert not page.horizontalScrollBar().isVisible()


def _narrow_or_widen(qtbot, window: MainWindow, size: tuple[int, int], dock: int) -> None:
    """The window at ``size``, its forms' dock ``dock`` px wide."""
    # Resized once shown: offscreen's 800x800 screen refits a bigger window when it is
    # first exposed, not later.
    window.resize(*size)
    window.resizeDocks([window.project_dock], [dock], Qt.Orientation.Horizontal)
    qtbot.waitUntil(lambda: window.project_dock.width() == dock)


def test_the_tf_config_page_fits_a_narrow_dock(qtbot, window: MainWindow) -> None:
    """At 1024x700 the TF_CONFIG page needed about 400 px of a 294 px viewport: its job
    tables sat two by two and its button rows did not wrap, and a horizontal scrollbar
    covered the last row. In a narrow dock the tables go one above the other; in a wide
    one they are two by two again."""
    window.show()
    qtbot.waitExposed(window)
    editor = window.editor
    editor.setCurrentIndex(editor.tab_of(Problem(("tf_config",), "")))
    tf_config = editor.tf_config
    tf_config.use_checkbox.setChecked(True)
    tf_config.localhost_button.click()  # two workers listed: the seed project as a cluster
    page = editor.currentWidget()
    assert isinstance(page, QScrollArea)
    tables = list(tf_config.tables.values())
    controls = [
        control
        for control in page.widget().findChildren(QWidget)
        if isinstance(control, CONTROLS) and control.isVisibleTo(page.widget())
    ]
    assert tf_config.paste_button in controls and tf_config.task_index_spin in controls

    def columns() -> int:
        return len({table.mapTo(page, QPoint(0, 0)).x() for table in tables})

    def fits_in(wanted_columns: int) -> None:
        _laid_out_within(page, [*tables, *controls])
        assert columns() == wanted_columns

    _narrow_or_widen(qtbot, window, (1024, 700), NARROW_DOCK)
    qtbot.waitUntil(lambda: fits_in(1))
    assert page.viewport().width() <= 294  # the viewport (a vertical scrollbar beside)
    for size in [(1400, 900), (1920, 1080)]:
        _narrow_or_widen(qtbot, window, size, PROJECT_DOCK_WIDTH)
        qtbot.waitUntil(lambda: fits_in(2))
    _narrow_or_widen(qtbot, window, (1024, 700), NARROW_DOCK)  # and narrow once more
    qtbot.waitUntil(lambda: fits_in(1))


@pytest.mark.parametrize(
    "section",
    ["Project", "Strategy", "Model", "Data", "Optimizer && loss", "Training", "Evaluation"],
)
def test_a_form_page_fits_a_narrow_dock(qtbot, window: MainWindow, section: str) -> None:
    """A form was its widest label plus its widest field wide, and its rows of buttons
    all of theirs (Evaluation 452 px, Data 428, Model 411, Strategy 375 in a 294 px
    viewport): in a narrow dock a field goes under its label and the rows wrap."""
    window.show()
    qtbot.waitExposed(window)
    editor = window.editor
    editor.setCurrentIndex([editor.tabText(i) for i in range(editor.count())].index(section))
    page = editor.currentWidget()
    assert isinstance(page, QScrollArea)
    controls = [
        control
        for control in page.widget().findChildren(QWidget)
        if isinstance(control, CONTROLS) and control.isVisibleTo(page.widget())
    ]
    # Qt's form layout puts a field under its label once the field's minimum width no
    # longer fits beside the label, not counting the spacing between them
    # (QFormLayoutPrivate::setupVerticalLayoutData): a field can be that much narrower.
    spacing = page.style().pixelMetric(QStyle.PixelMetric.PM_LayoutHorizontalSpacing)
    assert spacing >= 0
    _narrow_or_widen(qtbot, window, (1024, 700), NARROW_DOCK)
    qtbot.waitUntil(lambda: _laid_out_within(page, controls, squeeze=spacing))
    for size in [(1400, 900), (1920, 1080)]:  # and whole, unsqueezed, in the wide dock
        _narrow_or_widen(qtbot, window, size, PROJECT_DOCK_WIDTH)
        qtbot.waitUntil(lambda: _laid_out_within(page, controls))
