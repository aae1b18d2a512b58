"""New, Open, Save, Save As, recent files, examples and unsaved-changes prompts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from distloop.engine.examples import example_names, load_example
from distloop.engine.project_file import load_project
from distloop.gui.common import dialogs, settings
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtWidgets import QFileDialog


@pytest.fixture
def save_to(monkeypatch: pytest.MonkeyPatch):
    """Makes the next Save As dialog answer ``path``."""

    def answer(path: Path) -> None:
        monkeypatch.setattr(
            QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(path), ""))
        )

    return answer


def test_save_as_then_open_round_trips(window: MainWindow, save_to, tmp_path: Path) -> None:
    window.editor.general.editors["name"].setText("My run")
    window.editor.training.steps_radio.setChecked(True)
    window.editor.training.steps.setValue(250)
    assert window.isWindowModified()
    save_to(tmp_path / "mine")  # no suffix: .json is added
    assert window.save_action.trigger() is None
    path = tmp_path / "mine.json"
    assert window.path == path and not window.isWindowModified()
    assert window.windowTitle() == "mine.json[*] — Distloop"
    saved = load_project(path)
    assert saved.name == "My run" and saved.training.steps == 250
    assert path.read_text(encoding="utf-8") == saved.to_json()
    assert settings.recent_files() == [str(path.resolve())]

    window.new_project()
    assert window.path is None and window.validation.project.name == "Untitled"
    assert window.open_project(path)
    assert window.validation.project == saved
    window.editor.general.editors["name"].setText("Changed")
    window.save()  # has a path: no dialog
    assert load_project(path).name == "Changed"


def test_corrupt_file_shows_problems_and_keeps_the_project(
    window: MainWindow, dialog_recorder, tmp_path: Path
) -> None:
    window.editor.general.editors["name"].setText("Work in progress")
    before = window.editor.data()
    bad = load_example("seed").model_dump(mode="json")
    bad["data"]["global_batch_size"] = 0
    bad["strategy"]["kind"] = "warp_drive"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    dialog_recorder.unsaved_answer = dialogs.Unsaved.DISCARD
    assert not window.open_project(path)
    assert [kind for kind in dialog_recorder.kinds() if kind != "unsaved"] == ["problems"]
    (problems,) = dialog_recorder.problems
    assert {p.path for p in problems} == {"strategy.kind", "data.global_batch_size"}
    assert window.editor.data() == before and window.path is None

    path.write_text("{not json", encoding="utf-8")
    window.open_project(path)
    assert "not valid JSON" in str(dialog_recorder.problems[-1][0])
    assert window.editor.data() == before


def test_missing_recent_file_is_dropped(window: MainWindow, dialog_recorder, tmp_path) -> None:
    gone = tmp_path / "gone.json"
    gone.write_text(load_example("seed").to_json(), encoding="utf-8")
    settings.add_recent_file(gone)
    gone.unlink()
    window.open_project(gone)
    assert dialog_recorder.kinds()[-1] == "problems"
    assert settings.recent_files() == []


def test_recent_files_menu_keeps_eight(window: MainWindow, tmp_path: Path) -> None:
    for index in range(10):
        path = tmp_path / f"p{index}.json"
        path.write_text(load_example("seed").to_json(), encoding="utf-8")
        assert window.open_project(path)
    files = settings.recent_files()
    assert len(files) == settings.MAX_RECENT and files[0].endswith("p9.json")
    window.document.fill_recent_menu(window.recent_menu)
    texts = [action.text() for action in window.recent_menu.actions() if action.text()]
    assert texts[0] == f"&1 {files[0]}" and texts[-1] == "Clear Recent Files"


def test_unsaved_changes_prompt(window: MainWindow, dialog_recorder, save_to, tmp_path) -> None:
    window.editor.general.editors["name"].setText("Edited")
    dialog_recorder.unsaved_answer = dialogs.Unsaved.CANCEL
    window.new_project()
    assert window.editor.data()["name"] == "Edited"  # cancelled: nothing changed
    dialog_recorder.unsaved_answer = dialogs.Unsaved.SAVE
    save_to(tmp_path / "kept.json")
    window.open_example("regression")
    assert load_project(tmp_path / "kept.json").name == "Edited"
    assert window.validation.project == load_example("regression")
    assert dialog_recorder.kinds() == ["unsaved", "unsaved"]


def test_an_invalid_project_is_not_saved(window: MainWindow, dialog_recorder, save_to, tmp_path):
    window.editor.data_form.pages["constant"].editors["features"].setText("")
    save_to(tmp_path / "invalid.json")
    assert not window.save()
    assert dialog_recorder.kinds() == ["problems"]
    assert not (tmp_path / "invalid.json").exists()


def test_examples_menu_lists_every_example(window: MainWindow) -> None:
    actions = window.examples_menu.actions()
    assert [a.text().split(":")[0] for a in actions] == example_names()
    actions[1].trigger()
    assert window.validation.project == load_example(example_names()[1])
    assert not window.isWindowModified()


def test_about_names_versions_without_tensorflow(window: MainWindow, dialog_recorder) -> None:
    window.about_action.trigger()
    ((kind, _, html),) = dialog_recorder.shown
    assert kind == "about"
    for word in ("Distloop 0.", "Qt 6", "PySide6", "pyqtgraph", "Python 3"):
        assert word in html
    assert "only engine processes load it" in html


def test_standard_shortcuts(window: MainWindow) -> None:
    shortcuts = {
        window.new_action: "Ctrl+N",
        window.open_action: "Ctrl+O",
        window.save_action: "Ctrl+S",
        window.save_as_action: "Ctrl+Shift+S",
        window.quit_action: "Ctrl+Q",
        window.run_action: "Ctrl+R",
        window.stop_action: "Ctrl+.",
    }
    for action, keys in shortcuts.items():
        assert action.shortcut().toString() == keys, action.text()
