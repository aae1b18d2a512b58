"""Find Learning Rate... from the optimizer form: a real range test in its own engine
process, its curve drawn, its rate written into the form in one click."""

from __future__ import annotations

from pathlib import Path

import pytest
from distloop.engine.lr_finder import read_curve
from distloop.engine.project_file import load_project_data
from distloop.engine.run_folder import FINDER_FILE
from distloop.gui.files import file_dialogs
from distloop.gui.run.lr_finder_dialog import LrFinderDialog
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtCore import Qt
from support.distloop_testing import example_data


@pytest.mark.slow
def test_find_learning_rate_runs_plots_and_fills_the_optimizer(
    qtbot, make_window, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window: MainWindow = make_window()
    window.editor.optimizer.find_rate.click()
    (finder,) = window.findChildren(LrFinderDialog)
    finder.steps.setValue(30)
    finder.low.set_value(1e-4)
    finder.high.set_value(10.0)
    qtbot.mouseClick(finder.start_button, Qt.MouseButton.LeftButton)
    assert finder.running and not finder.start_button.isEnabled()
    qtbot.waitUntil(lambda: not finder.running, timeout=300_000)
    assert finder.suggestion is not None, finder.status.text()
    assert finder.status.text().startswith("Suggested learning rate: ")
    # Its own folder, beside the runs folder, not in it: never listed as a run.
    assert finder.run_dir.parent == tmp_path / "finder-runs"
    assert (finder.run_dir / FINDER_FILE).is_file() and read_curve(finder.run_dir).rates
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    drawn = [item for item in finder.plot.getPlotItem().items if hasattr(item, "xData")]
    assert len(drawn) == 2  # the loss and its smoothed curve, and the marker besides
    for suffix in (".png", ".svg"):
        target = tmp_path / f"curve{suffix}"
        monkeypatch.setattr(file_dialogs, "save_file", lambda *a, t=target: (t, ""))
        finder.export_button.click()
        assert target.stat().st_size > 1000
    qtbot.mouseClick(finder.use_button, Qt.MouseButton.LeftButton)
    rate = float(f"{finder.suggestion.rate:.3g}")
    assert window.editor.optimizer.value()["learning_rate"] == pytest.approx(rate)
    qtbot.waitUntil(window.document.is_modified, timeout=10_000)


def test_a_parameter_server_project_says_in_one_line_why_no_finder_runs(
    qtbot, tmp_path: Path
) -> None:
    data = example_data("seed")
    data["strategy"] = {"kind": "parameter_server"}
    data["evaluation"] = None
    data["tf_config"] = {
        "cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], "ps": ["127.0.0.1:3"]},
        "task": {"type": "chief", "index": 0},
    }
    opened: list[Path] = []
    finder = LrFinderDialog(
        load_project_data(data), tmp_path, opener=lambda project, run_dir: opened.append(run_dir)
    )
    qtbot.addWidget(finder)
    finder.start_button.click()
    assert finder.status.text().startswith("Cannot start: a finder needs one loss per step")
    assert not opened and not finder.running and not (tmp_path / "finder-runs").exists()
