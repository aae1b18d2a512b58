"""The runs panel in the window: listing, showing, comparing, renaming, deleting, exporting."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from distloop.engine import csv_summary, run_folder
from distloop.engine.config import Project
from distloop.engine.examples import load_example
from distloop.engine.formatting import format_compact
from distloop.engine.messages import EvalMetrics, RunFailed
from distloop.engine.project_file import load_project
from distloop.engine.resume_rules import ResumableRun, layout_of, window_refusal
from distloop.engine.run_curves import WALL_TIME, bucket_means
from distloop.engine.run_folder import (
    EvalWriter,
    MetricsWriter,
    format_loss,
    read_eval,
    read_metrics,
    read_status,
    write_status,
)
from distloop.engine.run_history import summarize
from distloop.engine.run_model import RunModel
from distloop.engine.script_export import ExportError
from distloop.gui.files.exports import copy_metrics
from distloop.gui.files.log_file_window import read_tail
from distloop.gui.run.series import Smoother
from distloop.gui.runs.drawn_run_worker import DRAWN_BUCKETS
from distloop.gui.runs.runs_model import Column
from distloop.gui.runs.runs_panel import HEADER_KEY, RunsPanel
from distloop.gui.shell.app import app_icon
from distloop.gui.shell.main_window import PROJECT_DOCK_WIDTH, MainWindow
from PySide6.QtCore import QPoint, QSettings, QSize, Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QFileDialog, QStyleOptionViewItem, QToolButton
from support.distloop_testing import crafted_status_folders
from support.gui_fakes import FakeEngine, factory, seed_run
from support.run_folders import big_metrics
from support.runs_list import fake_run

HOUR = 3600.0




@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    return tmp_path / "runs"


@pytest.fixture
def three_runs(runs_root: Path) -> dict[str, Path]:
    now = time.time()
    return {
        "old": fake_run(runs_root, "a-old", name="old", started=now - 3 * HOUR, losses=[3, 2, 2.5]),
        "failed": fake_run(
            runs_root,
            "b-failed",
            name="failed",
            started=now - 2 * HOUR,
            losses=[1.5, 1.25],
            status="failed",
            error="shapes (2,) and (3,) differ",
        ),
        "new": fake_run(
            runs_root,
            "c-new",
            name="new",
            started=now - HOUR,
            losses=[1.0, 0.5, 0.75, 0.25],
            status="stopped",
            replicas=2,
            named={"generator": [2.0, 1.5, 1.0, 0.5]},
            evaluations={2: 0.875, 4: 0.625},
        ),
    }


def _text(panel: RunsPanel, row: int, column: Column) -> str:
    return panel.proxy.index(row, column).data()


def _select(panel: RunsPanel, *run_dirs: Path) -> None:
    panel.select_paths(list(run_dirs))


def _drawn(qtbot, panel: RunsPanel, run_dir: Path, timeout_s: int = 60) -> None:
    """Waits until ``run_dir`` is drawn: a past run is read off the window's thread."""
    shown = lambda: getattr(panel.shown_run(), "path", None) == run_dir  # noqa: E731
    qtbot.waitUntil(shown, timeout=timeout_s * 1000)


def _compared(qtbot, panel: RunsPanel, timeout_s: int = 60) -> None:
    """Waits until the compared runs are drawn: they are read off the window's thread."""
    qtbot.waitUntil(lambda: not panel.comparing, timeout=timeout_s * 1000)


def test_runs_are_listed_newest_first_with_their_numbers(make_window, three_runs) -> None:
    panel = make_window().runs_panel
    assert [run.name for run in panel.runs()] == ["new", "failed", "old"]
    # how it ended and how good it is come before the long columns
    assert [_text(panel, 0, column) for column in Column] == [
        "new",
        "stopped",
        "0.625",  # the lowest val_loss
        "4",
        "0.25",
        "0.25",
        _text(panel, 0, Column.DURATION),
        _text(panel, 0, Column.STARTED),
        "MirroredStrategy",
        "2",
        "",
        "",
    ]
    assert _text(panel, 2, Column.VALIDATION) == "—"  # no evaluation
    assert (_text(panel, 2, Column.FINAL_LOSS), _text(panel, 2, Column.LATE_LOSS)) == ("2.5", "2.5")
    assert _text(panel, 2, Column.STEPS) == "3"
    assert _text(panel, 0, Column.DURATION).endswith((" s", " min"))  # engine.formatting's
    started = [_text(panel, row, Column.STARTED) for row in range(3)]
    assert started == sorted(started, reverse=True)


def test_a_failed_run_shows_its_error_in_a_tooltip(make_window, three_runs) -> None:
    panel = make_window().runs_panel
    row = [run.name for run in panel.runs()].index("failed")
    tooltip = panel.proxy.index(row, Column.STATUS).data(Qt.ItemDataRole.ToolTipRole)
    assert tooltip == "Failed: shapes (2,) and (3,) differ"
    assert panel.proxy.index(row, Column.NAME).data(Qt.ItemDataRole.ToolTipRole) == tooltip


def test_columns_sort_by_value_and_refresh_finds_new_runs(make_window, three_runs, runs_root):
    panel = make_window().runs_panel
    panel.table.sortByColumn(Column.LATE_LOSS, Qt.SortOrder.AscendingOrder)
    assert [run.name for run in panel.runs()] == ["new", "failed", "old"]
    panel.table.sortByColumn(Column.STEPS, Qt.SortOrder.DescendingOrder)
    assert [run.name for run in panel.runs()] == ["new", "old", "failed"]
    fake_run(runs_root, "d-later", name="later", started=time.time(), losses=[9.0] * 10)
    _select(panel, three_runs["old"])
    panel.refresh_action.trigger()
    assert [run.name for run in panel.runs()] == ["later", "new", "old", "failed"]
    assert [run.name for run in panel.selected_runs()] == ["old"]  # the selection stays


def test_double_click_shows_the_run_exactly_as_its_files_hold_it(
    qtbot, make_window, three_runs
) -> None:
    window: MainWindow = make_window()
    window.show()
    qtbot.waitExposed(window)
    panel = window.runs_panel
    row = [run.name for run in panel.runs()].index("new")
    rect = panel.table.visualRect(panel.proxy.index(row, Column.STEPS))
    viewport = panel.table.viewport()
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton, pos=rect.center())  # Qt's order
    qtbot.mouseDClick(viewport, Qt.MouseButton.LeftButton, pos=rect.center())
    _drawn(qtbot, panel, three_runs["new"])
    metrics = read_metrics(three_runs["new"])
    plot = window.plot
    assert np.array_equal(plot.steps(), metrics["step"])
    assert np.array_equal(plot.losses(), metrics["loss"])  # the very values of metrics.csv
    assert np.array_equal(plot.named_losses()["generator"], metrics["generator"])
    # Each replica's own mean loss: its share in metrics.csv times the 2 replicas.
    shares = [metrics["replica_0"], metrics["replica_1"]]
    assert [list(v) for v in plot.replica_losses()] == [[2 * s for s in v] for v in shares]
    evaluations = read_eval(three_runs["new"])
    assert list(plot.evaluations()[0]) == evaluations["step"]
    assert list(plot.evaluations()[1]) == evaluations["val_loss"]
    assert plot.caption() == "new"

    _select(panel, three_runs["old"])
    panel.show_action.trigger()  # another run replaces it
    _drawn(qtbot, panel, three_runs["old"])
    assert list(plot.steps()) == [1, 2, 3] and list(plot.losses()) == [3.0, 2.0, 2.5]
    assert plot.replica_losses() == [] and plot.named_losses() == {}


def test_compare_two_runs_then_clear(qtbot, make_window, three_runs) -> None:
    window: MainWindow = make_window()
    panel = window.runs_panel
    _select(panel, three_runs["old"], three_runs["new"])
    assert panel.compare_action.isEnabled() and not panel.show_action.isEnabled()
    panel.compare_action.trigger()
    _compared(qtbot, panel)
    compared = window.plot.comparisons()
    assert sorted(compared) == ["new", "old"]
    for name in ("old", "new"):
        metrics = read_metrics(three_runs[name])
        assert np.array_equal(compared[name][0], metrics["step"])
        assert np.array_equal(compared[name][1], metrics["loss"])
    assert sorted(window.plot.legend_names()) == ["new", "old"]
    colours = {sample.item.opts["pen"].color().name() for sample, _ in window.plot.legend.items}
    assert len(colours) == 2

    panel.clear_comparison_action.trigger()
    assert window.plot.comparisons() == {} and window.plot.legend_names() == []


def test_compared_runs_overlay_their_resources_dashed_and_leave_with_the_comparison(
    qtbot, make_window, three_runs
) -> None:
    """Compare overlays the runs' losses and, in the Resources view under them, what each
    run used (its system_metrics.csv, read off the window's thread)."""
    for name, cpu in (("old", 90.0), ("new", 30.0)):
        (three_runs[name] / "system_metrics.csv").write_text(
            f"time,step,cpu_percent,rss_mb\n1.0,1,{cpu},700\n2.0,2,{cpu + 1},710\n",
            encoding="utf-8",
        )
    window: MainWindow = make_window()
    panel, view = window.runs_panel, window.resources_plot
    _select(panel, three_runs["old"], three_runs["new"])
    panel.compare_action.trigger()
    _compared(qtbot, panel)
    qtbot.waitUntil(lambda: not view.reading and bool(view.series()), timeout=30_000)
    series = {name: list(values) for name, (_, values) in view.series().items()}
    assert series == {"new": [30.0, 31.0], "old": [90.0, 91.0]}
    dashed = {
        name
        for name, curve in view._curves.items()
        if curve.opts["pen"].style() == Qt.PenStyle.DashLine
    }
    assert dashed == view.compared_names() == {"new", "old"}

    panel.clear_comparison_action.trigger()
    assert view.series() == {}


def test_compared_runs_pile_up_each_once_never_the_shown_run(
    qtbot, make_window, three_runs
) -> None:
    window: MainWindow = make_window()
    panel, plot = window.runs_panel, window.plot
    _select(panel, three_runs["new"])
    panel.show_action.trigger()
    _drawn(qtbot, panel, three_runs["new"])
    _select(panel, three_runs["old"])
    panel.compare_action.trigger()
    _select(panel, three_runs["failed"], three_runs["old"], three_runs["new"])
    panel.compare_action.trigger()  # adds to the comparison: old stays, once; new is shown
    _compared(qtbot, panel)
    assert [run.name for run in panel.compared_runs()] == ["old", "failed"]
    assert plot.legend_names()[-2:] == ["old", "failed"]
    assert sorted(plot.comparisons()) == ["failed", "old"]
    assert list(plot.steps()) == [1, 2, 3, 4] and plot.caption() == "new"

    _select(panel, three_runs["old"])
    panel.show_action.trigger()  # a compared run that is shown leaves the comparison
    _drawn(qtbot, panel, three_runs["old"])
    _compared(qtbot, panel)
    assert sorted(plot.comparisons()) == ["failed"]
    assert list(plot.losses()) == [3.0, 2.0, 2.5]
    panel.clear_comparison_action.trigger()
    assert plot.comparisons() == {} and panel.compared_runs() == []


def test_compare_by_any_metric_against_step_or_wall_time(qtbot, make_window, three_runs) -> None:
    window: MainWindow = make_window()
    panel, plot = window.runs_panel, window.plot
    _select(panel, three_runs["new"])
    panel.show_action.trigger()
    _drawn(qtbot, panel, three_runs["new"])
    _select(panel, three_runs["old"])
    panel.compare_action.trigger()
    _compared(qtbot, panel)
    metrics = [panel.metric_box.itemText(i) for i in range(panel.metric_box.count())]
    assert metrics == ["loss", "generator", "val_loss"]
    assert panel.comparison_note.isHidden()

    panel.metric_box.setCurrentText("val_loss")  # the plot's own curves are the loss by step:
    _compared(qtbot, panel)
    assert panel.shown_run() is None and len(plot.steps()) == 0  # the shown run is compared
    assert list(plot.comparisons()) == ["new"]
    steps, values = plot.comparisons()["new"]
    assert (list(steps), list(values)) == ([2, 4], [0.875, 0.625])
    assert not panel.comparison_note.isHidden()
    assert panel.comparison_note.text() == "Not drawn, no val_loss recorded: old"
    assert plot.axis_labels() == ("step", "val_loss")

    panel.x_axis_box.setCurrentIndex(panel.x_axis_box.findData(WALL_TIME))
    _compared(qtbot, panel)
    assert list(plot.comparisons()["new"][0]) == [0.5, 1.0]  # the time of steps 2 and 4
    panel.metric_box.setCurrentText("loss")
    _compared(qtbot, panel)
    compared = plot.comparisons()
    assert list(compared["old"][0]) == [0.25, 0.5, 0.75] and list(compared["old"][1]) == [3, 2, 2.5]
    assert plot.axis_labels() == ("wall time (s)", "loss")
    panel.clear_comparison_action.trigger()
    assert plot.axis_labels() == ("step", "loss")
    assert [panel.metric_box.itemText(i) for i in range(panel.metric_box.count())] == ["loss"]


def test_tags_and_notes_are_edited_in_place_and_filtered(make_window, three_runs) -> None:
    panel = make_window().runs_panel
    rows = {run.name: row for row, run in enumerate(panel.runs())}
    assert panel.proxy.setData(panel.proxy.index(rows["old"], Column.TAGS), "baseline, adam")
    assert panel.proxy.setData(panel.proxy.index(rows["new"], Column.NOTES), "lr 0.1 diverged")
    assert read_status(three_runs["old"])["tags"] == ["baseline", "adam"]
    assert read_status(three_runs["new"])["notes"] == "lr 0.1 diverged"
    assert read_status(three_runs["new"])["status"] == "stopped"
    assert _text(panel, rows["old"], Column.TAGS) == "baseline, adam"

    panel.filter_edit.setText("ADAM")
    assert [run.name for run in panel.runs()] == ["old"]
    panel.filter_edit.setText("diverged")
    assert [run.name for run in panel.runs()] == ["new"]
    panel.filter_edit.setText("fail")
    assert [run.name for run in panel.runs()] == ["failed"]
    panel.filter_edit.setText("")
    assert len(panel.runs()) == 3

    row = [run.name for run in panel.runs()].index("new")
    assert panel.table.state() == panel.table.State.NoState
    panel.table.doubleClicked.emit(panel.proxy.index(row, Column.TAGS))  # edited, not shown
    assert panel.table.state() == panel.table.State.EditingState
    assert panel.shown_run() is None


def test_edit_notes_opens_the_notes_cell(make_window, three_runs) -> None:
    panel = make_window().runs_panel
    _select(panel, three_runs["failed"])
    panel.edit_notes_action.trigger()
    assert panel.table.state() == panel.table.State.EditingState
    assert panel.table.currentIndex().column() == Column.NOTES


def test_runs_with_the_same_name_are_told_apart(qtbot, make_window, runs_root) -> None:
    now = time.time()
    first = fake_run(runs_root, "x-1", name="same", started=now - 10, losses=[1.0])
    second = fake_run(runs_root, "x-2", name="same", started=now, losses=[2.0])
    window: MainWindow = make_window()
    _select(window.runs_panel, first, second)
    window.runs_panel.compare_action.trigger()
    _compared(qtbot, window.runs_panel)
    assert sorted(window.plot.comparisons()) == ["same (x-1)", "same (x-2)"]


def test_show_during_a_live_run_compares_instead(qtbot, make_window, three_runs) -> None:
    engine = FakeEngine(seed_run()[:2], endless=True)
    window: MainWindow = make_window(engine_factory=factory(engine))
    window.run()
    qtbot.waitUntil(lambda: len(window.plot.steps()) >= 3, timeout=5000)
    panel = window.runs_panel
    _select(panel, three_runs["old"])
    panel.show_action.trigger()
    _compared(qtbot, panel)
    assert list(window.plot.comparisons()) == ["old"]
    assert set(window.plot.losses()) == {0.5}  # the live curves are untouched
    assert not panel.metric_box.isEnabled()  # compared like the live run: loss by step
    assert window.plot.axis_labels() == ("step", "loss")
    live = window.last_run_dir
    assert read_status(live)["name"] == f"{window.validation.project.name} #1"
    assert window.plot.caption() == f"{window.validation.project.name} #1"
    assert (
        window.status_panel.values["run_dir"].full_text() == f"{window.validation.project.name} #1"
    )
    (live / "project.json").write_text(load_example("seed").to_json(), encoding="utf-8")
    panel.refresh()
    _select(panel, live)
    assert panel.selected_runs()[0].name == f"{window.validation.project.name} #1"
    panel.compare_action.trigger()  # the live run is drawn already
    _compared(qtbot, panel)
    assert list(window.plot.comparisons()) == ["old"]
    window.stop()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=5000)
    assert panel.metric_box.isEnabled()


def test_rename_inline_writes_the_name(make_window, three_runs) -> None:
    panel = make_window().runs_panel
    _select(panel, three_runs["old"])
    panel.rename_action.trigger()
    assert panel.table.state() == panel.table.State.EditingState
    row = [run.name for run in panel.runs()].index("old")
    assert panel.proxy.setData(panel.proxy.index(row, Column.NAME), "baseline, lr 0.01")
    assert read_status(three_runs["old"])["name"] == "baseline, lr 0.01"
    assert read_status(three_runs["old"])["status"] == "finished"
    assert _text(panel, row, Column.NAME) == "baseline, lr 0.01"
    panel.refresh()
    assert "baseline, lr 0.01" in [run.name for run in panel.runs()]
    assert not panel.rename(summarize(three_runs["old"]), " ")  # a run keeps a name
    assert summarize(three_runs["old"]).name == "baseline, lr 0.01"


def test_keys_act_on_the_table_but_not_on_a_name_being_edited(
    qtbot, make_window, three_runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    window: MainWindow = make_window()
    window.show()
    window.activateWindow()
    qtbot.waitActive(window)
    panel = window.runs_panel
    fired: list[str] = []
    for name in ("show_action", "compare_action", "refresh_action", "delete_action"):
        getattr(panel, name).triggered.connect(lambda *_args, n=name: fired.append(n))
    monkeypatch.setattr(panel, "confirm_delete", lambda runs: False)
    _select(panel, three_runs["old"])
    panel.table.setFocus()
    qtbot.waitUntil(panel.table.hasFocus, timeout=2000)
    keyboard = window.windowHandle()  # through Qt's shortcut map, like a real key press
    for key, modifier in [
        (Qt.Key.Key_Return, Qt.KeyboardModifier.NoModifier),
        (Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier),
        (Qt.Key.Key_F5, Qt.KeyboardModifier.NoModifier),
        (Qt.Key.Key_Delete, Qt.KeyboardModifier.NoModifier),
    ]:
        QTest.keyClick(keyboard, key, modifier)
    assert fired == ["show_action", "compare_action", "refresh_action", "delete_action"]

    fired.clear()
    QTest.keyClick(keyboard, Qt.Key.Key_F2)
    assert panel.table.state() == panel.table.State.EditingState
    for key in (Qt.Key.Key_B, Qt.Key.Key_X, Qt.Key.Key_Left, Qt.Key.Key_Delete):
        QTest.keyClick(keyboard, key)
    QTest.keyClick(keyboard, Qt.Key.Key_Return)
    assert fired == [] and panel.table.state() == panel.table.State.NoState
    assert summarize(three_runs["old"]).name == "b"


def test_delete_asks_first_and_declining_keeps_the_folder(
    make_window, three_runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    window: MainWindow = make_window()
    panel = window.runs_panel
    asked: list[list[str]] = []
    answer = {"yes": False}

    def confirm(runs) -> bool:
        asked.append([run.name for run in runs])
        return answer["yes"]

    monkeypatch.setattr(panel, "confirm_delete", confirm)
    _select(panel, three_runs["old"], three_runs["failed"])
    panel.compare_action.trigger()
    panel.delete_action.trigger()
    assert asked == [["failed", "old"]]
    assert three_runs["old"].is_dir() and len(panel.runs()) == 3
    answer["yes"] = True
    panel.delete_action.trigger()
    assert not three_runs["old"].exists() and not three_runs["failed"].exists()
    assert [run.name for run in panel.runs()] == ["new"]
    assert window.plot.comparisons() == {}  # a deleted run leaves the plot too


def test_the_running_run_cannot_be_deleted_or_resumed(
    qtbot, make_window, dialog_recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = FakeEngine(seed_run()[:2], endless=True)
    window: MainWindow = make_window(engine_factory=factory(engine))
    panel = window.runs_panel
    monkeypatch.setattr(panel, "confirm_delete", lambda runs: pytest.fail("must not ask"))
    window.run()
    qtbot.waitUntil(lambda: len(window.plot.steps()) >= 2, timeout=5000)
    assert window.last_run_dir is not None
    # What EngineProcess.start and the engine write first, which the fake leaves out.
    (window.last_run_dir / "project.json").write_text(load_example("seed").to_json())
    write_status(window.last_run_dir, "running", started_at=time.time())
    panel.refresh()
    assert panel.runs()[0].status == "running"
    _select(panel, window.last_run_dir)
    assert not window.resume_action.isEnabled()
    panel.delete_action.trigger()
    assert dialog_recorder.kinds() == ["error"] and window.last_run_dir.is_dir()
    window.stop()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=5000)


def test_export_metrics_as_csv_writes_the_metrics_with_the_evaluations(
    make_window, three_runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    panel = make_window().runs_panel
    target = tmp_path / "out" / "new-metrics"
    target.parent.mkdir()
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(target), ""))
    )
    _select(panel, three_runs["new"])
    panel.export_csv_action.trigger()
    written = target.with_suffix(".csv")
    source = (three_runs["new"] / "metrics.csv").read_text().splitlines()
    lines = written.read_text().splitlines()
    assert lines[0] == source[0] + ",val_loss"  # eval.csv's columns joined at their steps
    expected = {"2": "0.875", "4": "0.625"}
    assert lines[1:] == [f"{row},{expected.get(row.split(',')[0], '')}" for row in source[1:]]
    assert list(written.parent.iterdir()) == [written]  # no temporary file left behind


def test_export_plot_as_png_and_svg(
    qtbot, make_window, three_runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window: MainWindow = make_window()
    _select(window.runs_panel, three_runs["new"])
    window.runs_panel.show_action.trigger()
    _drawn(qtbot, window.runs_panel, three_runs["new"])
    _select(window.runs_panel, three_runs["old"])
    window.runs_panel.compare_action.trigger()
    answers = iter(
        [(str(tmp_path / "plot"), "PNG image (*.png)"), (str(tmp_path / "plot.svg"), "")]
    )
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: next(answers)))
    window.export_plot_action.trigger()
    window.export_plot_action.trigger()
    png = (tmp_path / "plot.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    root = ET.parse(tmp_path / "plot.svg").getroot()
    assert root.tag.endswith("svg") and len(list(root.iter())) > 20


def test_export_as_script_writes_a_program_that_compiles(
    make_window, dialog_recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window: MainWindow = make_window()
    target = tmp_path / "train"
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(target), ""))
    )
    window.export_script_action.trigger()
    script = target.with_suffix(".py").read_text(encoding="utf-8")
    compile(script, "train.py", "exec")
    assert "distributed_train_step" in script and dialog_recorder.shown == []


def test_export_as_script_explains_what_cannot_be_exported(
    make_window, dialog_recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window: MainWindow = make_window()

    def refuse(_project: Project) -> str:
        raise ExportError("parameter_server runs need a coordinator")

    monkeypatch.setattr("distloop.gui.files.exports.render_script", refuse)
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: pytest.fail("no dialog"))
    )
    window.export_script_action.trigger()
    assert dialog_recorder.shown == [
        ("error", "Cannot export as script", "parameter_server runs need a coordinator\n")
    ]
    assert list(tmp_path.glob("*.py")) == []


def test_copy_project_json(make_window) -> None:
    window: MainWindow = make_window()
    window.copy_json_action.trigger()
    copied = QApplication.clipboard().text()
    assert json.loads(copied) == json.loads(load_example("seed").to_json())


def test_resume_plots_the_old_steps_then_the_new_ones_without_duplicates(
    qtbot, make_window, runs_root: Path
) -> None:
    losses = [1.0, 0.875, 0.75, 0.625, 0.5, 0.4375, 0.375, 0.3125]
    run_dir = fake_run(
        runs_root, "r", name="to resume", started=time.time(), losses=losses, status="stopped"
    )
    finished = fake_run(runs_root, "f", name="done", started=time.time() - HOUR, losses=[1.0])
    checkpoint = 5  # the engine saved its last checkpoint after step 5; 6..8 are redone
    redone = list(range(checkpoint + 1, 13))
    engine = FakeEngine(
        [
            [seed_run()[1][0].model_copy(update={"first_step": checkpoint + 1, "total_steps": 12})],
            [
                seed_run()[2][0].model_copy(
                    update={
                        "steps": redone,
                        "losses": [0.01 * step for step in redone],
                        "elapsed_s": [0.1 * step for step in redone],
                    }
                )
            ],
            [seed_run(12)[-1][0]],
        ]
    )
    made: list[tuple[Path, bool]] = []

    def engines(project, folder, *, resume=False):
        made.append((folder, resume))
        assert project == load_project(run_dir / "project.json")
        return engine

    window: MainWindow = make_window(engine_factory=engines)
    panel = window.runs_panel
    _select(panel, finished)
    assert not window.resume_action.isEnabled()  # a finished run has nothing left
    _select(panel, run_dir)
    assert window.resume_action.isEnabled()
    window.resume_action.trigger()
    assert made == [(run_dir, True)] and window.last_run_dir == run_dir
    assert not window.resume_action.isEnabled()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    assert list(window.plot.steps()) == list(range(1, 13))
    assert list(window.plot.losses()) == losses[:checkpoint] + [0.01 * s for s in redone]
    assert window.plot.caption() == "to resume (resumed)"
    assert window.status_panel.values["step"].text() == "12 / 12"
    assert [run.path for run in panel.selected_runs()] == [run_dir]


def resume_refusal(project: Project, run_dir: Path) -> str | None:
    return window_refusal(ResumableRun(run_dir, project, layout_of(run_dir)))


def test_local_cluster_runs_resume_here_but_not_one_task_of_a_cluster(tmp_path: Path) -> None:
    seed = load_example("seed")
    assert resume_refusal(seed, tmp_path) is None
    cluster, servers = (
        seed.model_copy(update={"strategy": seed.strategy.model_copy(update={"kind": kind})})
        for kind in ("multi_worker_mirrored", "parameter_server")
    )
    assert "distloop run --resume" in (resume_refusal(cluster, tmp_path) or "")
    (tmp_path / "tasks").mkdir()  # a local cluster's folder: its tasks' folders are inside
    assert resume_refusal(cluster, tmp_path) is None
    assert "cannot resume" in (resume_refusal(servers, tmp_path) or "")


def test_panel_visibility_and_columns_are_remembered(qtbot, make_window) -> None:
    first: MainWindow = make_window()
    first.show()
    header = first.runs_panel.table.horizontalHeader()
    header.resizeSection(Column.NAME, 333)
    first.runs_panel_action.trigger()
    assert not first.runs_dock.isVisible()
    first.close()
    assert QSettings().value(HEADER_KEY) is not None
    second: MainWindow = make_window()
    second.show()
    assert second.runs_panel.table.horizontalHeader().sectionSize(Column.NAME) == 333
    assert not second.runs_dock.isVisible()
    second.runs_panel_action.trigger()
    assert second.runs_dock.isVisible()


def test_new_actions_have_distinct_shortcuts(make_window) -> None:
    window: MainWindow = make_window()
    expected: dict[str, Callable[[MainWindow], object]] = {
        "Ctrl+Shift+R": lambda w: w.resume_action,
        "Ctrl+Shift+E": lambda w: w.export_script_action,
        "Ctrl+Shift+P": lambda w: w.export_plot_action,
        "Ctrl+Shift+J": lambda w: w.copy_json_action,
        "Ctrl+Shift+H": lambda w: w.runs_panel_action,
        "F5": lambda w: w.runs_panel.refresh_action,
        "F2": lambda w: w.runs_panel.rename_action,
    }
    for keys, action in expected.items():
        assert action(window).shortcut().toString() == keys
    menus = [action for menu in window.menuBar().actions() for action in menu.menu().actions()]
    shortcuts = [a.shortcut().toString() for a in menus if not a.shortcut().isEmpty()]
    assert len(shortcuts) == len(set(shortcuts)), shortcuts


def test_the_app_icon_comes_from_the_resources_package() -> None:
    from importlib import resources

    folder = resources.files("resources") / "icons"
    shipped = folder.is_dir() and any(item.name.endswith(".png") for item in folder.iterdir())
    assert app_icon().isNull() is not shipped


def test_a_run_whose_owner_was_killed_shows_interrupted_and_can_resume(
    make_window, runs_root: Path
) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run_dir = fake_run(
        runs_root, "r", name="orphan", started=time.time(), losses=[1.0, 0.5], status="running"
    )
    write_status(run_dir, "running", pid=dead.pid, owner_pid=dead.pid, host=socket.gethostname())
    window: MainWindow = make_window()
    panel = window.runs_panel
    assert _text(panel, 0, Column.STATUS) == "interrupted"
    _select(panel, run_dir)
    assert window.resume_action.isEnabled()


def test_crafted_run_folders_are_listed_as_unreadable_and_the_window_starts(
    make_window, three_runs, runs_root: Path
) -> None:
    """A status.json nested 100,000 deep or linked to /dev/zero stopped the window starting."""
    crafted = crafted_status_folders(runs_root)
    panel = make_window().runs_panel
    rows = {run.path: row for row, run in enumerate(panel.runs())}
    assert set(rows) == set(crafted) | set(three_runs.values())
    for path, why in crafted.items():
        assert _text(panel, rows[path], Column.STATUS) == "unreadable"
        tooltip = panel.proxy.index(rows[path], Column.STATUS).data(Qt.ItemDataRole.ToolTipRole)
        assert tooltip == f"Unreadable: {why}"
    assert _text(panel, rows[three_runs["new"]], Column.FINAL_LOSS) == "0.25"


def test_a_run_still_training_elsewhere_is_not_deleted(
    make_window, three_runs, dialog_recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dialog said deleting would make it fail; it went on and re-created its folder."""
    folder = three_runs["new"]
    holder = subprocess.Popen(  # a run from the command line holds its folder's lock
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from distloop.engine.run_folder import "
            "RunFolderLock; lock = RunFolderLock.acquire(Path(sys.argv[1])); print('held', "
            "flush=True); sys.stdin.read()",
            str(folder),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        panel = make_window().runs_panel
        monkeypatch.setattr(panel, "confirm_delete", lambda runs: True)
        _select(panel, folder)
        panel.delete_action.trigger()
        assert dialog_recorder.shown == [
            (
                "error",
                "Some runs were not deleted",
                f"new: {folder} is still being written by its run (process {holder.pid}): "
                "stop the run first; nothing was deleted\n",
            )
        ]
        assert folder.is_dir() and "new" in [run.name for run in panel.runs()]
    finally:
        holder.communicate("", timeout=30)
    panel.delete_action.trigger()
    assert not folder.exists()


def test_a_run_folder_holding_a_link_is_not_resumed_nor_read_through_it(
    make_window, runs_root: Path, tmp_path: Path, dialog_recorder
) -> None:
    """The window resumed it, and its engine then appended to what engine.log linked to;
    the log viewer and Export metrics read what a link pointed to."""
    secret = tmp_path / "outside" / "authorized_keys"
    secret.parent.mkdir()
    secret.write_text("ssh-ed25519 AAAAmine me@here\n")
    run_dir = fake_run(
        runs_root, "r", name="shared", started=time.time(), losses=[1.0, 0.5], status="stopped"
    )
    (run_dir / "engine.log").symlink_to(secret)
    made: list[Path] = []
    window: MainWindow = make_window(
        engine_factory=lambda project, folder, *, resume=False: made.append(folder)
    )
    _select(window.runs_panel, run_dir)
    window.runs_panel.resume_selected()
    assert made == []
    assert dialog_recorder.shown == [
        (
            "error",
            "Cannot resume",
            f"shared: {run_dir / 'engine.log'} is a symbolic link: Distloop reads and writes "
            "only a run folder's own files; replace the link with a copy of what it points "
            "to\n",
        )
    ]
    assert read_tail(run_dir / "engine.log") == (
        f"{run_dir / 'engine.log'} cannot be read: is a symbolic link"
    )
    (run_dir / "metrics.csv").unlink()
    (run_dir / "metrics.csv").symlink_to(secret)
    with pytest.raises(OSError, match="is a symbolic link"):
        copy_metrics(run_dir, tmp_path / "copy.csv")
    assert not (tmp_path / "copy.csv").exists()
    assert secret.read_text() == "ssh-ed25519 AAAAmine me@here\n"


@pytest.mark.parametrize("size", [(1400, 900), (1024, 700)], ids=["1400x900", "1024x700"])
def test_the_runs_tab_shows_several_runs_with_their_number_status_and_validation(
    qtbot, make_window, runs_root: Path, size: tuple[int, int]
) -> None:
    now = time.time()
    for number in range(1, 7):
        fake_run(
            runs_root,
            f"run-{number}",
            name=f"Seed: the guide's custom loop, a long project name #{number}",
            started=now - number * HOUR,
            losses=[1.0, 0.5],
            evaluations={2: 0.25},
        )
    window: MainWindow = make_window()
    window.show()
    window._fit_to_screen(QSize(*size))  # as a first start on a screen of that size does
    window.resize(*size)
    window.runs_dock.raise_()
    qtbot.waitExposed(window)
    table = window.runs_panel.table
    rows = table.viewport().height() // table.rowHeight(0)
    assert rows >= (5 if size[1] >= 900 else 3)  # it was 2 at 1400x900
    # how the run ended and how good it is are in view without scrolling sideways
    header = table.horizontalHeader()
    for column in (Column.STATUS, Column.VALIDATION):
        assert header.sectionViewportPosition(column) + header.sectionSize(column) <= (
            table.viewport().width()
        )
    # a long name loses its middle, so the number that tells same-named runs apart stays
    assert table.textElideMode() == Qt.TextElideMode.ElideMiddle
    name = _text(window.runs_panel, 0, Column.NAME)
    shown = table.fontMetrics().elidedText(
        name, table.textElideMode(), header.sectionSize(Column.NAME) - 8
    )
    assert shown != name and shown.endswith("#1")


def test_the_status_panel_elides_long_texts_at_1024_px(qtbot, make_window) -> None:
    window: MainWindow = make_window()
    window.show()
    window.resize(1024, 700)
    qtbot.waitExposed(window)
    panel = window.status_panel
    model = RunModel(total_steps=10)
    model.subscribe(lambda message: panel.show_change(model, message))
    panel.follow(model, "/runs/x", "Seed: the guide's custom loop with a long name #12")
    model.apply(
        EvalMetrics(step=5, metrics={"val_loss": 0.123456, "val_accuracy": 0.987654}, examples=8)
    )
    failure = "data.path: /data/a/very/long/folder/name/of/images/cats/001.png is empty; " * 3
    model.apply(RunFailed(error_type="DataError", message=failure, known=True))
    qtbot.waitUntil(lambda: panel.state.text().endswith("…"), timeout=5_000)
    for label in (panel.state, panel.values["validation"], panel.values["run_dir"]):
        # never wider than the panel: cut with "…", the whole text in the tooltip
        assert label.geometry().right() <= panel.width()
        assert label.full_text() in label.toolTip() or label.toolTip() == failure
    assert panel.state.text().endswith("…") and panel.state.toolTip() == failure
    run = panel.values["run_dir"]
    assert run.text().endswith("#12")
    assert panel.width() <= window.width()  # the long texts did not widen the panel


def test_a_long_runs_metrics_are_never_read_whole_on_the_windows_thread(
    qtbot, make_window, runs_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of 10^7 steps (1.3 GB of metrics.csv) froze the window 43 s at every refresh:
    the list now takes its last row from the file's end and its smoothed loss from a scan
    in a worker thread, kept for the next refresh."""
    long_run = fake_run(runs_root, "long", name="long", started=time.time(), losses=[2.0])
    big_metrics(long_run / "metrics.csv", 300_000)  # 10 MB: far more than the tail
    readers: list[str] = []
    whole_reads = (csv_summary, "_scan_from"), (run_folder.csv_files, "_read_columns")
    for module, name in whole_reads:
        original = getattr(module, name)

        def recorded(*args, _original=original, _name=name, **kwargs):
            if args and _size(args[0]) > csv_summary.TAIL_BYTES:
                readers.append(threading.current_thread().name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, recorded)
    panel = make_window().runs_panel  # its first refresh
    assert _text(panel, 0, Column.STEPS) == "300k"  # from the file's end, at once
    assert _text(panel, 0, Column.LATE_LOSS) == "…"  # being scanned
    late = [float(f"{1.0 + (s % 97) / 97:.7g}") for s in range(270_001, 300_001)]
    smoothed = format_compact(math.fsum(late) / len(late))  # the last tenth's mean
    qtbot.waitUntil(lambda: _text(panel, 0, Column.LATE_LOSS) == smoothed, timeout=30_000)
    panel.refresh()
    assert _text(panel, 0, Column.LATE_LOSS) == smoothed  # the kept scan: no second one
    assert readers == ["runs-scanner"]
    assert threading.main_thread().name not in readers


def _size(source: object) -> int:
    """The size of the file a whole read reads (a path, or an open file)."""
    name = getattr(source, "name", source)
    try:
        return os.stat(name).st_size
    except (OSError, TypeError):
        return 0


def test_numbers_in_the_runs_table_are_never_cut_and_tell_their_full_value(
    qtbot, make_window, runs_root: Path
) -> None:
    """``10,…000`` steps and a loss of ``0.000…99597``: never elide a number. They are compact
    (``10.0M``, ``0.000996``) with the exact value in the tooltip; no header is clipped."""
    run_dir = fake_run(runs_root, "long", name="long", started=time.time(), losses=[1.0, 0.5])
    (run_dir / "metrics.csv").write_text(
        "step,loss,elapsed_s\n9999999,0.0012345678,9000.5\n10000000,0.00099597,9001.0\n",
        encoding="utf-8",
    )
    window: MainWindow = make_window()
    window.show()
    window.resize(1024, 700)
    window.runs_dock.raise_()
    qtbot.waitExposed(window)
    panel = window.runs_panel
    qtbot.waitUntil(lambda: _text(panel, 0, Column.LATE_LOSS) not in ("…", "—"), timeout=10_000)
    assert _text(panel, 0, Column.STEPS) == "10.0M"
    assert _text(panel, 0, Column.FINAL_LOSS) == "0.000996"
    table, header = panel.table, panel.table.horizontalHeader()
    option = QStyleOptionViewItem()
    option.initFrom(table)
    for column in (Column.STEPS, Column.FINAL_LOSS, Column.LATE_LOSS, Column.DURATION):
        index = panel.proxy.index(0, column)
        needed = table.itemDelegate().sizeHint(option, index).width()
        assert needed <= header.sectionSize(column), (column, index.data())
        assert header.sectionSizeHint(column) <= header.sectionSize(column), column
    assert panel.proxy.index(0, Column.STEPS).data(Qt.ItemDataRole.ToolTipRole) == (
        "10,000,000 steps"
    )
    tip = panel.proxy.index(0, Column.FINAL_LOSS).data(Qt.ItemDataRole.ToolTipRole)
    assert tip == format_loss(0.00099597)


@pytest.mark.parametrize("size", [(1400, 900), (1024, 700)], ids=["1400x900", "1024x700"])
def test_every_runs_tool_is_in_view_with_no_overflow_menu(
    qtbot, make_window, size: tuple[int, int]
) -> None:
    """At 1024x700 the runs toolbar hid three of its actions behind "»": the comparison's
    choices go below the tools when both do not fit on one row."""
    window: MainWindow = make_window()
    window.show()
    window.resize(*size)
    window.resizeDocks([window.project_dock], [PROJECT_DOCK_WIDTH], Qt.Orientation.Horizontal)
    window.runs_dock.raise_()
    qtbot.waitExposed(window)
    panel = window.runs_panel
    toolbar = panel.toolbar
    # the toolbar gets the width of all its actions: none is left for the "»" menu
    qtbot.waitUntil(lambda: toolbar.width() >= toolbar.sizeHint().width(), timeout=5_000)
    overflow = toolbar.findChild(QToolButton, "qt_toolbar_ext_button")
    assert overflow is None or not overflow.isVisible()
    for widget in (panel.filter_edit, panel.metric_box, panel.x_axis_box):
        assert widget.isVisible()
        assert widget.mapTo(panel, widget.rect().topRight()).x() <= panel.width()
    one_row = panel.metric_box.mapTo(panel, QPoint()).y() < panel.filter_edit.height()
    assert one_row or size != (1400, 900)  # wide enough: the table keeps the height


def test_a_comparison_kept_through_a_new_run_says_so_and_one_click_ends_it(
    qtbot, make_window, three_runs
) -> None:
    """A comparison stayed on the plot through new runs with nothing to say it was there but
    the legend: a chip names it, and its close button clears it, asking nothing."""
    window: MainWindow = make_window(engine_factory=factory(FakeEngine(seed_run()), []))
    window.show()
    panel, plot = window.runs_panel, window.plot
    chip = plot.comparison_chip
    assert not chip.isVisible()
    _select(panel, three_runs["old"], three_runs["new"])
    panel.compare_action.trigger()
    _compared(qtbot, panel)
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    _compared(qtbot, panel)
    assert sorted(plot.comparisons()) == ["new", "old"]  # kept beside the new run
    assert chip.isVisible() and chip.text.text() == "Comparing with 2 past runs"
    assert "old" in chip.toolTip() and "new" in chip.toolTip()
    qtbot.mouseClick(chip.close_button, Qt.MouseButton.LeftButton)
    assert plot.comparisons() == {} and not chip.isVisible()
    panel.metric_box.setCurrentIndex(panel.metric_box.count() - 1)  # a redraw brings none back
    assert plot.comparisons() == {}


@pytest.mark.timeout(900)  # beyond its waits: one that runs out fails with its own line
def test_a_past_run_of_ten_million_steps_is_drawn_while_the_window_keeps_answering(
    qtbot, make_window, runs_root: Path, three_runs
) -> None:
    """Drawing a run of 10^7 steps froze the window 35-41 s: it is read in another process
    while the event loop goes on (a 10 ms timer keeps ticking), the plot says how much is
    read, another run asked for meanwhile ends the reading, and the curve drawn is the
    file's, cut to each bucket's lowest and highest loss as the plot's own downsampling."""
    steps = 10_000_000
    big = fake_run(runs_root, "big", name="big", started=time.time(), losses=[1.0])
    big_metrics(big / "metrics.csv", steps)
    write_status(big, "finished", last_step=steps)
    window: MainWindow = make_window()
    window.show()
    qtbot.waitExposed(window)
    panel, plot = window.runs_panel, window.plot
    panel.refresh()
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(plot.hint.toPlainText()))
    timer.start(10)

    _select(panel, big)
    panel.show_action.trigger()
    qtbot.waitUntil(lambda: "% of" in plot.hint.toPlainText(), timeout=120_000)
    assert plot.hint.toPlainText().startswith("Reading big… ") and plot.hint.isVisible()
    _select(panel, three_runs["old"])
    panel.show_action.trigger()  # another run asked for: the big one is not drawn after all
    _drawn(qtbot, panel, three_runs["old"])
    qtbot.waitUntil(lambda: panel._drawing.reading is None)
    assert list(plot.steps()) == [1, 2, 3] and window.status_panel.values["step"].text() == "3"

    ticks.clear()
    _select(panel, big)
    panel.show_action.trigger()
    assert ticks == []  # the trigger returned before any reading: nothing waited on it
    _drawn(qtbot, panel, big, timeout_s=600)  # 300 MB of text, on a machine maybe busy
    timer.stop()
    read_while_ticking = [text for text in ticks if text.startswith("Reading big… ")]
    assert len(read_while_ticking) > 20, "the event loop stood still while the run was read"
    assert len({text for text in read_while_ticking}) > 3  # the share read went up as it went

    drawn_steps, drawn_losses = plot.steps(), plot.losses()
    assert 0 < len(drawn_steps) <= 2 * DRAWN_BUCKETS and drawn_steps[0] == 1
    per_bucket = -(-steps // DRAWN_BUCKETS)
    losses = 1.0 + (np.arange(1, per_bucket + 1) % 97) / 97  # the first bucket's losses
    assert drawn_losses[0] == pytest.approx(losses.min(), rel=1e-6)
    assert drawn_losses[1] == pytest.approx(losses.max(), rel=1e-6)
    assert drawn_steps[2] == 1 + per_bucket
    assert np.all(np.isfinite(plot.smoothed()))
    assert plot.caption() == "big" and not plot.hint.isVisible()
    status = window.status_panel
    assert status.state.full_text().startswith("Past run: finished at step 10,000,000, final loss")
    assert status.values["step"].text() == "10,000,000"
    assert status.values["run_dir"].full_text() == "big"


@pytest.mark.timeout(900)  # beyond its waits: one that runs out fails with its own line
def test_a_run_of_ten_million_steps_is_compared_while_the_window_keeps_answering(
    qtbot, make_window, runs_root: Path, three_runs
) -> None:
    """Compare read a whole metrics.csv on the window's thread: with a run of 10^7 steps
    the window froze for tens of seconds. It is read in the process that draws a past run,
    while the event loop goes on (a 10 ms timer keeps ticking); the panel says how much is
    read, clearing the comparison ends the reading, and the curve compared is the file's,
    cut to each bucket's lowest and highest loss as a drawn run is."""
    steps = 10_000_000
    big = fake_run(runs_root, "big", name="big", started=time.time(), losses=[1.0])
    big_metrics(big / "metrics.csv", steps)
    write_status(big, "finished", last_step=steps)
    window: MainWindow = make_window()
    window.show()
    qtbot.waitExposed(window)
    panel, plot = window.runs_panel, window.plot
    panel.refresh()
    ticks: list[str] = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(panel.comparison_note.text()))
    timer.start(10)

    _select(panel, big, three_runs["old"])
    panel.compare_action.trigger()
    assert ticks == []  # the trigger returned before any reading: nothing waited on it
    qtbot.waitUntil(lambda: "% of" in panel.comparison_note.text(), timeout=120_000)
    assert panel.comparison_note.text().startswith("Reading 2 runs to compare… ")
    assert plot.hint.isVisible() and plot.hint.toPlainText().startswith("Reading 2 runs")
    panel.clear_comparison_action.trigger()  # the reading ends; nothing is drawn after all
    assert not panel.comparing and panel.comparison_note.isHidden()
    qtbot.waitUntil(lambda: not panel._comparing._background.running, timeout=30_000)
    assert plot.comparisons() == {} and panel.compared_runs() == []

    ticks.clear()
    _select(panel, big, three_runs["old"])
    panel.compare_action.trigger()
    _compared(qtbot, panel, timeout_s=600)  # 300 MB of text, on a machine maybe busy
    timer.stop()
    read_while_ticking = [text for text in ticks if text.startswith("Reading 2 runs")]
    assert len(read_while_ticking) > 20, "the event loop stood still while the run was read"
    assert len(set(read_while_ticking)) > 3  # the share read went up as it went

    compared = plot.comparisons()
    assert sorted(compared) == ["big", "old"] and panel.comparison_note.isHidden()
    assert list(compared["old"][1]) == [3.0, 2.0, 2.5]  # a short run: every step, exactly
    big_steps, big_losses = compared["big"]
    assert 0 < len(big_steps) <= 2 * DRAWN_BUCKETS and big_steps[0] == 1
    per_bucket = -(-steps // DRAWN_BUCKETS)
    losses = 1.0 + (np.arange(1, per_bucket + 1) % 97) / 97  # the first bucket's losses
    assert big_losses[0] == pytest.approx(losses.min(), rel=1e-6)
    assert big_losses[1] == pytest.approx(losses.max(), rel=1e-6)
    assert big_steps[2] == 1 + per_bucket
    assert not plot.hint.isVisible()


def test_the_status_panel_describes_the_past_run_drawn_not_the_last_live_one(
    qtbot, make_window, three_runs
) -> None:
    window: MainWindow = make_window()
    panel, status = window.runs_panel, window.status_panel
    _select(panel, three_runs["failed"])
    panel.show_action.trigger()
    _drawn(qtbot, panel, three_runs["failed"])
    assert status.state.full_text().startswith("Past run: failed at step ")
    assert status.values["run_dir"].full_text() == "failed"
    _select(panel, three_runs["new"])
    panel.show_action.trigger()
    _drawn(qtbot, panel, three_runs["new"])
    assert status.state.full_text() == "Past run: stopped at step 4, final loss 0.25"
    assert status.values["step"].text() == "4" and status.values["replicas"].text() == "2"
    assert status.values["run_dir"].full_text() == "new"


def test_a_long_run_drawn_is_smoothed_over_every_step_at_each_weight(
    qtbot, make_window, runs_root: Path
) -> None:
    """A long run comes back cut to buckets; smoothing those again would smooth the buckets,
    not the steps: a new weight reads it again, smoothed over every step, and the view the
    user chose stays."""
    steps = 3 * DRAWN_BUCKETS  # longer than the plot is given
    run = fake_run(runs_root, "long", name="long", started=time.time(), losses=[1.0])
    big_metrics(run / "metrics.csv", steps)
    window: MainWindow = make_window()
    panel, plot = window.runs_panel, window.plot
    panel.refresh()
    _select(panel, run)
    panel.show_action.trigger()
    _drawn(qtbot, panel, run, timeout_s=300)
    losses = np.asarray(read_metrics(run)["loss"], dtype=np.float64)
    x = np.arange(1, steps + 1, dtype=np.float64)

    def smoothed_over_every_step(weight: float) -> np.ndarray:
        return bucket_means(x, Smoother(weight).extend(losses), DRAWN_BUCKETS)

    assert len(plot.steps()) < steps
    np.testing.assert_allclose(plot.smoothed(), smoothed_over_every_step(0.6), rtol=1e-9)
    plot.plot_item.setRange(xRange=(1000, 5000), padding=0)
    plot.set_smoothing_weight(0.99)
    assert plot.caption() == "long (smoothing every step again…)"
    expected = smoothed_over_every_step(0.99)
    qtbot.waitUntil(lambda: plot.caption() == "long", timeout=300_000)
    np.testing.assert_allclose(plot.smoothed(), expected, rtol=1e-9)
    x_range = plot.plot_item.getViewBox().viewRange()[0]
    assert x_range == pytest.approx([1000, 5000])


def test_compare_shows_what_differs_between_the_runs_environments(
    qtbot, make_window, three_runs
) -> None:
    """Two runs' environments recorded as a run records them, then one changed as another
    machine's would be: a package upgraded, one added, one removed, a variable set. The
    comparison lists exactly those keys, with "—" where a run has none; a run of an earlier
    Distloop (no environment.json) is named, not compared."""
    from distloop.engine.run_environment import collect_environment

    record = collect_environment(load_example("seed"), None)
    record["packages"]["numpy"] = "2.0.0"
    record["packages"]["removed-later"] = "0.1"
    record["variables"].pop("XLA_FLAGS", None)
    other = json.loads(json.dumps(record))
    other["packages"]["numpy"] = "2.1.3"
    other["packages"]["added-later"] = "1.0"
    del other["packages"]["removed-later"]
    other["variables"]["XLA_FLAGS"] = "--xla_cpu_enable_fast_math=false"
    other["seed"] = 7
    other["recorded_at"] += 60  # when, and the digest, differ on every run: never listed
    other["digest"] = "0" * 16
    run_folder.write_environment(three_runs["old"], record)
    run_folder.write_environment(three_runs["new"], other)

    window: MainWindow = make_window()
    panel = window.runs_panel
    assert panel.environment_diff.isHidden()
    _select(panel, three_runs["old"], three_runs["new"])
    panel.compare_action.trigger()
    _compared(qtbot, panel)
    differences = panel.environment_diff
    assert not differences.isHidden()
    assert differences.title.text() == "Environments: 5 difference(s) in 2 runs"
    assert differences.table.horizontalHeaderItem(1).text() in ("old", "new")
    order = [differences.table.horizontalHeaderItem(c).text() for c in (1, 2)]
    rows = {key: dict(zip(order, row, strict=True)) for key, row in differences.rows().items()}
    assert rows == {
        "packages.added-later": {"old": "—", "new": "1.0"},
        "packages.numpy": {"old": "2.0.0", "new": "2.1.3"},
        "packages.removed-later": {"old": "0.1", "new": "—"},
        "seed": {"old": "0", "new": "7"},
        "variables.XLA_FLAGS": {"old": "—", "new": "--xla_cpu_enable_fast_math=false"},
    }

    _select(panel, three_runs["failed"])
    panel.compare_action.trigger()
    _compared(qtbot, panel)
    assert differences.title.text() == (
        "Environments: 5 difference(s) in 2 runs; no environment.json in failed"
    )
    panel.clear_comparison_action.trigger()
    assert differences.isHidden()
