"""Every file dialog starts in the folder the last one ended in (Open, Save As, exports,
Import TF_CONFIG, data files, Try It): they opened in four different places."""

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


def test_each_dialog_starts_where_the_last_one_ended(
    make_window, file_dialogs: Dialogs, tmp_path: Path
) -> None:
    projects, plots = tmp_path / "projects", tmp_path / "plots"
    for folder in (projects, plots):
        folder.mkdir()
    project = projects / "seed.json"
    project.write_text(load_example("seed").to_json(), encoding="utf-8")

    window: MainWindow = make_window()
    file_dialogs.answer = str(project)
    assert window.open_project()
    assert file_dialogs.started == [str(Path.home())]  # nothing picked yet: the home folder

    file_dialogs.answer = str(plots / "loss.png")
    window.export_plot_action.trigger()
    assert file_dialogs.started[-1] == str(projects / "loss.png")  # where Open ended
    assert (plots / "loss.png").is_file()

    file_dialogs.answer = ""  # cancelled: the folder stays
    window.save_as_action.trigger()
    assert file_dialogs.started[-1] == str(plots / "seed.json")
    window.editor.tf_config.choose_import_file()
    assert file_dialogs.started[-1] == str(plots)

    later = make_window()  # the next session starts there too
    later.document.export_script()
    assert file_dialogs.started[-1].startswith(str(plots / ""))


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
