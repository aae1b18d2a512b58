"""The study views in the window: a real sweep's folder opened from File ▸ Open Study…,
its trials linked to the loss plot, every view exported, the best trial's project made
the open one; a study written by another process followed as its trials end; a folder
that is no study, or a study.db damaged while shown, said in one line."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
from distloop.gui.common import dialogs
from distloop.gui.files import file_dialogs
from distloop.gui.shell.main_window import MainWindow
from distloop.gui.study.study_views import StudyPanel, export_view
from PySide6.QtCore import Qt
from support.study_folders import (
    ENDLESS_TRIALS,
    crafted_study_folder,
    optuna_study_folder,
    storage_url,
    swept_study,
)

READ_MS = 30_000  # the worker's first read imports Optuna; at a load of 15 that takes seconds


@pytest.fixture(scope="session")
def real_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real ``distloop sweep`` per test session, shared by the tests that need one."""
    return swept_study(tmp_path_factory.mktemp("sweep") / "study")


def _open(window: MainWindow, qtbot, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """File ▸ Open Study…, the folder chosen in the dialog, and its first reading shown."""
    monkeypatch.setattr(file_dialogs, "choose_folder", lambda *_args: folder)
    window.open_study_action.trigger()
    qtbot.waitUntil(lambda: window.study_panel.folder == folder.absolute(), timeout=READ_MS)


def _stored(folder: Path) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name="distloop", storage=storage_url(folder)).trials


@pytest.mark.slow
def test_a_real_study_shows_its_trials_linked_to_the_plot_and_every_view_exports(
    make_window: Callable[..., MainWindow],
    qtbot,
    real_study: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    dialog_recorder,
) -> None:
    window = make_window()
    _open(window, qtbot, real_study, monkeypatch)
    panel = window.study_panel
    assert window.study_dock.isVisibleTo(window)
    stored = _stored(real_study)
    states = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed"}
    assert [t.state for t in panel.results.trials] == [states[t.state.name] for t in stored]
    assert panel.model.rowCount() == len(stored)
    assert panel.model.headers() == [
        "Trial", "State", "loss", "optimizer.learning_rate", "optimizer.kind",
        "model.layers.0.units", "Steps", "Duration",
    ]  # fmt: skip
    complete = [t for t in stored if t.state.name == "COMPLETE"]
    best = min(complete, key=lambda t: t.value)
    row = panel.model.row_of(best.number)
    assert panel.model.index(row, 0).data() == f"★ {best.number}"
    assert panel.model.index(row, 6).data() == "30"  # steps run

    # One trial: its curves are the plot's own; two: compared, each its own colour.
    panel.select_trials_by_number([best.number])
    qtbot.waitUntil(lambda: window.runs_panel.shown_run() is not None)
    trial_dir = real_study / "trials" / f"trial-{best.number:04d}"
    assert window.runs_panel.shown_run().path == trial_dir
    assert len(window.plot.steps()) == 30
    other = next(t.number for t in complete if t.number != best.number)
    panel.select_trials_by_number([best.number, other])
    qtbot.waitUntil(lambda: len(window.runs_panel.compared_runs()) == 2)
    assert {r.path.name for r in window.runs_panel.compared_runs()} == {
        f"trial-{n:04d}" for n in (best.number, other)
    }
    assert panel.history.marks.data["x"].tolist() == sorted([best.number, other])

    assert panel.history.points.data["x"].tolist() == [t.number for t in complete]
    assert sorted(panel.parallel.drawn_trials()) == [t.number for t in complete]
    if len(complete) >= 5:
        assert set(panel.importance.values) == set(best.params)
    else:
        assert panel.importance.note.text().startswith(
            "Importances need at least 5 complete trials"
        )
        assert panel.importance.values == {}
    for index in range(panel.tabs.count()):
        panel.tabs.setCurrentIndex(index)
        for suffix in ("png", "svg"):
            target = tmp_path / f"view{index}.{suffix}"
            export_view(panel.current_view(), target)
            head = target.read_bytes()[:400]
            assert head.startswith(b"\x89PNG") if suffix == "png" else b"<svg" in head

    # Best Trial -> Project asks about the open project's changes first.
    window.editor.general.editors["name"].setText("edited and unsaved")
    dialog_recorder.unsaved_answer = dialogs.Unsaved.CANCEL
    panel.best_project_action.trigger()
    assert dialog_recorder.kinds() == ["unsaved"]
    assert window.editor.general.editors["name"].text() == "edited and unsaved"
    dialog_recorder.unsaved_answer = dialogs.Unsaved.DISCARD
    panel.best_project_action.trigger()
    opened = window.document.validation.project
    assert opened is not None and opened.name.startswith(f"view test #{best.number} ")
    assert opened.optimizer.kind == best.params["optimizer.kind"]
    assert opened.optimizer.learning_rate == pytest.approx(
        best.params["optimizer.learning_rate"], rel=1e-6
    )
    assert opened.model.layers[0].units == best.params["model.layers.0.units"]
    assert window.path is None and not window.is_modified()


_WRITER = """
import sys, time, optuna
sys.path.insert(0, sys.argv[2])
from support.study_folders import objective
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name="distloop", storage=sys.argv[1])
for _ in range(3):
    time.sleep(0.5)
    study.optimize(objective, n_trials=1)
"""


def test_a_study_written_by_another_process_refreshes_as_its_trials_end(
    make_window: Callable[..., MainWindow], qtbot, tmp_path: Path, monkeypatch
) -> None:
    folder = optuna_study_folder(tmp_path / "study", trials=2, planned=10)  # none complete
    window = make_window()
    _open(window, qtbot, folder, monkeypatch)
    panel = window.study_panel
    assert panel.model.rowCount() == 2
    assert "2 of 10 trials" in panel.title.full_text()
    tests = str(Path(__file__).resolve().parents[2])
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, storage_url(folder), tests])
    try:
        # The fifth trial is listed once asked for, running, and read again when told.
        qtbot.waitUntil(
            lambda: [t.state for t in panel.results.trials[2:]] == ["complete"] * 3,
            timeout=60_000,
        )
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == 0
    assert panel.model.rowCount() == 5
    assert len(panel.history.points.data) == 3
    assert "5 of 10 trials" in panel.title.full_text()
    # The objective's column, sized when no trial had one, is as wide as the values now.
    header = panel.table.horizontalHeader()
    assert header.sectionSize(2) >= panel.table.sizeHintForColumn(2)


def test_a_folder_that_is_no_study_is_one_line_and_the_study_shown_stays(
    make_window: Callable[..., MainWindow], qtbot, tmp_path: Path, monkeypatch, dialog_recorder
) -> None:
    folder = optuna_study_folder(tmp_path / "study", trials=4)
    window = make_window()
    _open(window, qtbot, folder, monkeypatch)
    panel = window.study_panel
    (tmp_path / "other").mkdir()
    monkeypatch.setattr(file_dialogs, "choose_folder", lambda *_args: tmp_path / "other")
    window.open_study_action.trigger()
    qtbot.waitUntil(lambda: bool(dialog_recorder.shown), timeout=READ_MS)
    kind, title, text = dialog_recorder.shown[0]
    assert (kind, title) == ("error", "Cannot open the study")
    assert text.strip() == f"{tmp_path / 'other'}: no study.json: not a study folder"
    assert panel.folder == folder and panel.model.rowCount() == 4

    # Damaged while shown: the line above the views, the last reading kept.
    before = list(panel.results.trials)
    (folder / "study.db").write_bytes(b"not a database" * 50)
    panel.refresh()
    qtbot.waitUntil(lambda: panel.problem.isVisibleTo(panel), timeout=READ_MS)
    assert panel.problem.text().startswith("Not read again: ")
    assert "study.db is damaged or no Optuna storage" in panel.problem.text()
    assert list(panel.results.trials) == before and panel.model.rowCount() == 4


def test_too_few_complete_trials_for_importances_is_said_in_the_view(qtbot, tmp_path: Path) -> None:
    folder = optuna_study_folder(tmp_path / "study", trials=5)  # 3 complete
    panel = StudyPanel()
    qtbot.addWidget(panel)
    panel.open(folder)
    qtbot.waitUntil(lambda: panel.results is not None, timeout=READ_MS)
    assert panel.importance.note.text() == (
        "Importances need at least 5 complete trials; this study has 3."
    )
    assert panel.importance.values == {}
    assert not panel.compare_action.isEnabled()  # trials without run folders draw nothing
    panel.select_trials_by_number([0])
    qtbot.wait(300)
    assert panel.selected_numbers() == [0]
    assert panel.table.selectionModel().currentIndex().data(Qt.ItemDataRole.DisplayRole) in (
        "0",
        "★ 0",
    )


def test_a_study_listed_in_the_studies_tab_shows_its_trials_on_a_double_click(
    make_window: Callable[..., MainWindow], qtbot, tmp_path: Path
) -> None:
    folder = optuna_study_folder(tmp_path / "runs" / "listed study", trials=4)
    window = make_window()
    studies = window.studies_panel
    qtbot.waitUntil(lambda: not studies.listing, timeout=READ_MS)  # listed in its thread
    assert [entry.folder for entry in studies.entries] == [folder]
    assert not studies.show_action.isEnabled()
    window.show()
    window.studies_dock.raise_()
    qtbot.waitExposed(window)
    studies.select(folder)
    assert studies.show_action.isEnabled()
    cell = studies.table.visualItemRect(studies.table.item(0, 0)).center()
    # Qt's test double-click reaches an item view as one only after a press and release.
    qtbot.mouseClick(studies.table.viewport(), Qt.MouseButton.LeftButton, pos=cell)
    qtbot.mouseDClick(studies.table.viewport(), Qt.MouseButton.LeftButton, pos=cell)
    qtbot.waitUntil(lambda: window.study_panel.folder == folder, timeout=READ_MS)
    assert window.study_dock.isVisibleTo(window)
    assert window.study_panel.model.rowCount() == 4


def test_the_history_s_axis_ticks_whole_trial_numbers(qtbot, tmp_path: Path) -> None:
    """A few trials got ticks at 0.5, 1.5, ...: trials that do not exist."""
    panel = StudyPanel()
    qtbot.addWidget(panel)
    panel.resize(800, 500)
    panel.show()
    panel.open(optuna_study_folder(tmp_path / "study", trials=5))
    qtbot.waitUntil(lambda: panel.results is not None, timeout=READ_MS)
    axis = panel.history.plot_item.getAxis("bottom")
    for low, high in ((-0.2, 4.2), (0.8, 2.2), (10_000.5, 10_001.5)):
        levels = axis.tickValues(low, high, 600)
        labels = [
            text for spacing, values in levels for text in axis.tickStrings(values, 1, spacing)
        ]
        assert labels and all(text.isdigit() for text in labels), labels


def test_a_pruned_trial_shows_the_objective_it_was_judged_by(qtbot, tmp_path: Path) -> None:
    """A pruned trial's objective cell was empty although it reported values to the pruner."""
    panel = StudyPanel()
    qtbot.addWidget(panel)
    panel.open(optuna_study_folder(tmp_path / "study", trials=5))
    qtbot.waitUntil(lambda: panel.results is not None, timeout=READ_MS)
    model = panel.model
    row = next(r for r in range(model.rowCount()) if model.trial(r).state == "pruned")
    objective = model.index(row, model.headers().index("loss"))
    assert objective.data() == "0.8125 (step 40)"
    assert "loss 0.8125 at step 40, its last report" in objective.data(Qt.ItemDataRole.ToolTipRole)
    assert panel.history.points.data["x"].tolist() == [0, 1, 2]  # complete trials alone


def test_a_study_whose_storage_never_ends_is_listed_unreadable_beside_the_others(
    make_window: Callable[..., MainWindow], qtbot, tmp_path: Path
) -> None:
    """A study.db whose trials are an endless view: the window listed the studies on its
    own thread and its memory grew without end; it is listed unreadable, in the lister's
    thread, and the study beside it as it is."""
    crafted = crafted_study_folder(tmp_path / "runs" / "b crafted", ENDLESS_TRIALS)
    good = optuna_study_folder(tmp_path / "runs" / "a good", trials=4)
    window = make_window()
    studies = window.studies_panel
    qtbot.waitUntil(lambda: not studies.listing, timeout=READ_MS)
    states = {entry.folder: (entry.state, entry.error) for entry in studies.entries}
    assert states[good] == ("stopped", "")
    state, error = states[crafted]
    assert state == "unreadable"
    assert "study.db holds a view 'trials', which no Optuna storage has" in error
    assert window.studies_dock.isVisibleTo(window)
    row = [entry.folder for entry in studies.entries].index(crafted)
    assert studies.table.item(row, 1).text() == "unreadable"
