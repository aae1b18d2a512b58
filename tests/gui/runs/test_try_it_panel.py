"""The Try it panel: opened from the runs panel, predictions off the GUI thread, the confusion."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest
from distloop.engine.examples import load_example
from distloop.engine.messages import ModelLoaded, ProtocolError
from distloop.engine.prediction import ClassChance, Prediction, PredictionError, PredictionResult
from distloop.engine.run_folder import write_status
from distloop.gui.runs import try_it_panel
from distloop.gui.runs.try_it_panel import TryItPanel
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLineEdit, QToolBar
from support.run_folders import run_folder
from support.gui_fakes import FakeProcess
from support.run_folders import CONFUSION





class FakePredictor:
    """Answers as the predict subprocess would, noting the thread it was called on."""

    def __init__(self, error: str | None = None, crash: Exception | None = None) -> None:
        self.calls: list[tuple[Path, list[Path], list[str]]] = []
        self.threads: list[threading.Thread] = []
        self.error = error
        self.crash = crash

    def __call__(
        self, run_dir: Path, inputs: Sequence[Path], rows: Sequence[str]
    ) -> PredictionResult:
        self.calls.append((run_dir, list(inputs), list(rows)))
        self.threads.append(threading.current_thread())
        if self.error:
            raise PredictionError(self.error)
        if self.crash:
            raise self.crash
        scores = (
            ClassChance(name="dog", probability=0.875),
            ClassChance(name="cat", probability=0.125),
        )
        return PredictionResult(
            model=ModelLoaded(path="model.keras", input_shape=[8, 8, 1], classifier=True),
            predictions=[Prediction(input=str(path), classes=scores) for path in inputs]
            + [Prediction(input=f"row {n}", classes=scores[::-1]) for n, _ in enumerate(rows, 1)],
            errors=["/data/broken.png: it is not a JPEG, PNG, GIF or BMP image"],
        )


def test_try_it_opens_from_the_runs_panel_only_for_a_run_with_a_model(
    make_window, tmp_path: Path
) -> None:
    window = make_window()
    with_model = run_folder(tmp_path / "runs", "a", model=True)
    without = run_folder(tmp_path / "runs", "b", model=False)
    panel = window.runs_panel
    panel.refresh()
    panel.select_paths([without])
    assert not panel.try_it_action.isEnabled()
    panel.select_paths([with_model])
    assert panel.try_it_action.isEnabled()
    panel.try_it_action.trigger()
    [opened] = window.findChildren(TryItPanel)
    assert opened.run_dir == with_model and opened.isVisible()
    assert "step 30, the lowest val_loss (0.25)" in opened.model_note.text()
    assert "20 examples, accuracy 85.0%" in opened.confusion_title.text()
    table = opened.confusion
    assert [table.item(r, c).text() for r in range(2) for c in range(2)] == ["8", "2", "1", "9"]
    assert table.horizontalHeaderItem(1).text() == "dog"
    opened.close()


def test_predictions_run_off_the_gui_thread_and_show_bad_inputs(
    qtbot, qloop, tmp_path: Path
) -> None:
    run_dir = run_folder(tmp_path, "run", model=True)
    predictor = FakePredictor()
    panel = TryItPanel(run_dir, "run #1", predictor)
    qtbot.addWidget(panel)

    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile("/data/a.png"), QUrl.fromLocalFile("/data/broken.png")])
    drop = QDropEvent(
        QPointF(5, 5),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    panel.drop_area.dropEvent(drop)
    assert panel.busy() and not panel.choose_button.isEnabled()
    qtbot.waitUntil(lambda: not panel.busy(), timeout=5000)
    assert predictor.calls == [(run_dir, [Path("/data/a.png"), Path("/data/broken.png")], [])]
    assert predictor.threads[0] is not threading.main_thread()
    assert panel.results.rowCount() == 2
    cells = [panel.results.item(0, column).text() for column in range(3)]
    assert cells == ["a.png", "dog  87.5%", "cat 12.5%"]
    assert "broken.png: it is not a JPEG" in panel.status.text()
    assert panel.choose_button.isEnabled()

    panel.row_edit.setText("0.5, 1.5, 2.5")
    panel.row_button.click()
    qtbot.waitUntil(lambda: not panel.busy(), timeout=5000)
    assert predictor.calls[-1] == (run_dir, [], ["0.5, 1.5, 2.5"])
    assert panel.results.item(0, 0).text() == "row 1"  # the newest on top
    assert panel.results.item(0, 1).text() == "cat  12.5%"

    failing = TryItPanel(run_dir, "run #1", FakePredictor(error=f"{run_dir}: no model.keras"))
    qtbot.addWidget(failing)
    failing.predict_files([Path("/data/a.png")])
    qtbot.waitUntil(lambda: not failing.busy(), timeout=5000)
    assert failing.status.text() == f"{run_dir}: no model.keras"
    assert failing.results.rowCount() == 0


def test_an_unexpected_failure_leaves_predicting_for_one_line(qtbot, qloop, tmp_path: Path) -> None:
    """Any exception, not only a PredictionError, ends "Predicting…" (it stayed on before)."""
    run_dir = run_folder(tmp_path, "run", model=True)
    crash = ProtocolError("engine speaks protocol None, this Distloop speaks 1")
    panel = TryItPanel(run_dir, "run #1", FakePredictor(crash=crash))
    qtbot.addWidget(panel)
    panel.predict_files([Path("/data/a.png")])
    qtbot.waitUntil(lambda: not panel.busy(), timeout=5000)
    assert panel.status.text() == (
        "The prediction failed: ProtocolError: engine speaks protocol None, this Distloop speaks 1"
    )
    assert panel.choose_button.isEnabled() and panel.row_button.isEnabled()




def test_try_it_is_in_the_run_menu_and_toolbar_and_ctrl_t_works_from_anywhere(
    qtbot, make_window, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no run selected Try It opens the newest run that has a model; its prediction
    process starts with the panel and ends with it."""
    monkeypatch.setattr(try_it_panel, "PredictionProcess", FakeProcess)
    FakeProcess.instances.clear()
    now = time.time()
    run_folder(tmp_path / "runs", "older", model=True, started_at=now - 300)
    newer = run_folder(tmp_path / "runs", "newer", model=True, started_at=now - 200)
    run_folder(tmp_path / "runs", "newest", model=False, started_at=now - 100)
    window = make_window()
    window.show()
    window.activateWindow()
    qtbot.waitActive(window)
    run_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Run")
    assert window.try_it_action in run_menu.actions()
    [toolbar] = window.findChildren(QToolBar, "mainToolbar")
    assert window.try_it_action in toolbar.actions()
    window.runs_panel.refresh()
    window.runs_panel.table.clearSelection()
    assert window.try_it_action.isEnabled()
    target = window.runs_panel.try_it_target()
    assert target is not None and target.path == newer
    assert window.try_it_action.statusTip().endswith(f": {target.name}")

    field = next(edit for edit in window.findChildren(QLineEdit) if edit.isVisible())
    field.setFocus()
    qtbot.waitUntil(field.hasFocus, timeout=2000)
    QTest.keyClick(window.windowHandle(), Qt.Key.Key_T, Qt.KeyboardModifier.ControlModifier)
    [opened] = window.findChildren(TryItPanel)
    assert opened.run_dir == newer
    [process] = FakeProcess.instances
    assert process.run_dir == newer and process.events == ["start"]
    opened.close()
    assert process.events == ["start", "close"]


@pytest.mark.slow
def test_try_it_predicts_with_one_real_process_that_ends_with_the_panel(
    qtbot, qloop, tmp_path: Path
) -> None:
    """The panel's own prediction process, for real: started when the panel opens, the
    same process for every prediction (the model loaded once), gone when it closes."""
    from support.distloop_testing import example_data, model_run_folder

    run_dir = model_run_folder(tmp_path / "run", example_data("classification"))
    panel = TryItPanel(run_dir, "run #1")
    qtbot.addWidget(panel)
    process = panel.process
    assert process is not None and process.pid is not None  # loading while the user looks

    panel.row_edit.setText(",".join(["0.5"] * 8))
    panel.row_button.click()
    qtbot.waitUntil(lambda: not panel.busy(), timeout=120_000)
    assert panel.status.text() == "1 example(s) predicted."
    pid = process.pid
    panel.row_edit.setText("1,2")
    panel.row_button.click()
    qtbot.waitUntil(lambda: not panel.busy(), timeout=10_000)
    assert panel.status.text() == "row 1: has 2 value(s); the model takes 8 feature(s)"
    assert process.pid == pid and panel.results.rowCount() == 1

    panel.close()
    assert process.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_try_it_refuses_a_run_folder_holding_a_link(qtbot, qloop, tmp_path: Path) -> None:
    """Try It read the model and classes.json of a shared folder through its links."""
    run_dir = run_folder(tmp_path, "shared", model=True)
    (tmp_path / "elsewhere.json").write_text('["cat", "dog"]')
    (run_dir / "classes.json").symlink_to(tmp_path / "elsewhere.json")
    panel = TryItPanel(run_dir, "shared #1")
    qtbot.addWidget(panel)
    assert panel.process is not None and panel.process.pid is None  # no process started
    panel.row_edit.setText("0.5")
    panel.row_button.click()
    qtbot.waitUntil(lambda: not panel.busy(), timeout=30_000)
    assert panel.status.text() == (
        f"{run_dir / 'classes.json'} is a symbolic link: Distloop reads and writes only a run "
        "folder's own files; replace the link with a copy of what it points to"
    )
    panel.close()


@pytest.mark.parametrize("keys", ["Esc", "Ctrl+W", "Close button"])
def test_try_it_closes_on_esc_ctrl_w_and_its_close_button(
    make_window, qtbot, tmp_path: Path, keys: str
) -> None:
    """As the Guide and the shortcuts windows do (issue 34: it had none of the three)."""
    from distloop.engine.run_history import summarize
    from PySide6.QtWidgets import QDialogButtonBox

    window = make_window()
    panel = window.try_run(summarize(run_folder(tmp_path / "runs", "a", model=True)))
    panel.activateWindow()
    qtbot.waitUntil(panel.isActiveWindow, timeout=5000)
    panel.row_edit.setFocus()
    if keys == "Esc":
        QTest.keyClick(panel.row_edit, Qt.Key.Key_Escape)
    elif keys == "Ctrl+W":
        QTest.keyClick(panel.row_edit, Qt.Key.Key_W, Qt.KeyboardModifier.ControlModifier)
    else:
        button = panel.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Close)
        QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.findChildren(TryItPanel), timeout=5000)
