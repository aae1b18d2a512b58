"""Each file dialog starts where the last one for the same purpose ended (projects, data,
exports): they opened in four different places, then all in one, so a Save Project dialog
offered a class folder of the training data."""

from __future__ import annotations

from pathlib import Path

import pytest
from distloop.engine.examples import load_example
from distloop.gui.project.field_editors import PathEdit
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtWidgets import QFileDialog


class Dialogs:
    """Answers QFileDialog's questions as told and records where each one started."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started: list[str] = []
        self.answer = ""
        for name in ("getOpenFileName", "getSaveFileName"):
            monkeypatch.setattr(QFileDialog, name, staticmethod(self._file))
        monkeypatch.setattr(QFileDialog, "getOpenFileNames", staticmethod(self._files))
        monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(self._folder))

    def _file(self, _parent, _title, start, _filter="") -> tuple[str, str]:
        self.started.append(start)
        return self.answer, ""

    def _files(self, _parent, _title, start, _filter="") -> tuple[list[str], str]:
        self.started.append(start)
        return ([self.answer] if self.answer else []), ""

    def _folder(self, _parent, _title, start) -> str:
        self.started.append(start)
        return self.answer


@pytest.fixture
def file_dialogs(monkeypatch: pytest.MonkeyPatch) -> Dialogs:
    return Dialogs(monkeypatch)


def test_each_purpose_remembers_its_own_folder(
    make_window, qtbot, file_dialogs: Dialogs, tmp_path: Path
) -> None:
    projects, plots, data = tmp_path / "projects", tmp_path / "plots", tmp_path / "data"
    for folder in (projects, plots, data / "cats"):
        folder.mkdir(parents=True)
    project = projects / "seed.json"
    project.write_text(load_example("seed").to_json(), encoding="utf-8")

    window: MainWindow = make_window()
    file_dialogs.answer = str(project)
    assert window.open_project()
    assert file_dialogs.started == [str(Path.home())]  # nothing picked yet: the home folder

    file_dialogs.answer = str(plots / "loss.png")
    window.export_plot_action.trigger()
    assert file_dialogs.started[-1] == str(projects / "loss.png")  # no export yet: projects'
    assert (plots / "loss.png").is_file()

    file_dialogs.answer = str(data / "cats")  # a data folder, picked in the Data form
    path_edit, csv_edit = PathEdit(folder=True), PathEdit("CSV files (*.csv)")
    qtbot.addWidget(path_edit)
    qtbot.addWidget(csv_edit)
    path_edit.button.click()
    assert path_edit.value() == str(data / "cats")

    file_dialogs.answer = ""  # cancelled: the folders stay
    window.save_as_action.trigger()
    assert file_dialogs.started[-1] == str(projects / "seed.json")  # not the data's class folder
    window.editor.tf_config.choose_import_file()
    assert file_dialogs.started[-1] == str(projects)
    window.export_plot_action.trigger()
    assert file_dialogs.started[-1] == str(plots / "loss.png")
    csv_edit.button.click()
    assert file_dialogs.started[-1] == str(data / "cats")

    later = make_window()  # the next session starts there too
    later.document.export_script()
    assert file_dialogs.started[-1].startswith(str(plots / ""))
    later.open_project()
    assert file_dialogs.started[-1] == str(projects)


def test_a_data_path_s_browse_starts_at_the_path_it_holds(
    qtbot, file_dialogs: Dialogs, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    folder = PathEdit(folder=True)
    qtbot.addWidget(folder)
    file_dialogs.answer = str(data)
    folder.button.click()
    assert file_dialogs.started == [str(Path.home())] and folder.value() == str(data)
    csv = PathEdit("CSV files (*.csv)")
    qtbot.addWidget(csv)
    file_dialogs.answer = ""
    csv.button.click()
    assert file_dialogs.started[-1] == str(data)  # the folder just chosen
    csv.set_value(str(tmp_path / "elsewhere" / "x.csv"))  # not there: the last folder
    csv.button.click()
    assert file_dialogs.started[-1] == str(data)
    csv.set_value(str(tmp_path))
    csv.button.click()
    assert file_dialogs.started[-1] == str(tmp_path)
