"""Data folders are scanned off the window's event loop, once edits pause, and kept while
unchanged: editing never waits for a big folder to be listed (issue 21, item 1)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from distloop.engine.data_sources import folders
from distloop.engine.validation import Validation
from distloop.gui.files import folder_scans
from distloop.gui.files.folder_scan_worker import Cancelled, Shared, changed, scan
from distloop.gui.project.problem_marks import is_marked, problem_tooltip
from distloop.gui.shell.main_window import MainWindow
from pytestqt.qtbot import QtBot
from support.data_folders import write_image_folder

Scanned = Callable[[MainWindow], Validation]


class AskedScans:
    """Records what the window asks its scanning process for (the asks still go there)."""

    def __init__(self) -> None:
        self.asks: list[tuple[str, bool]] = []  # (path, a check of a kept scan)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> AskedScans:
    recorded = AskedScans()
    ask = folder_scans._Worker.ask

    def recording(worker: folder_scans._Worker, job: folder_scans._Job, stamps: object) -> None:
        recorded.asks.append((job.key[0], stamps is not None))
        ask(worker, job, stamps)

    monkeypatch.setattr(folder_scans._Worker, "ask", recording)

    def not_here(*_args: object) -> None:
        raise AssertionError("a folder was listed in the window's own process")

    monkeypatch.setattr(folders, "list_class_files", not_here)
    return recorded


class HeldWorker:
    """Stands in for the scanning process: holds each ask until the test answers it with
    the worker's own scan, so a late answer can be made to arrive after a newer path."""

    def __init__(self, answer: Callable[[int, object], None]) -> None:
        self.answer = answer
        self.asked: list[folder_scans._Job] = []
        self.cancels = 0

    def ask(self, job: folder_scans._Job, _stamps: object) -> None:
        self.asked.append(job)

    def cancel(self) -> None:
        self.cancels += 1

    def running(self) -> int:
        return self.asked[-1].number if self.asked else 0

    def progress(self, path: str) -> str:
        return f"scanning {path}… 12,345 files"

    def close(self) -> None:
        pass

    def reply(self, job: folder_scans._Job) -> None:
        path, extensions = job.key
        self.answer(job.number, scan(path, extensions, _shared(), 0))


def _shared() -> Shared:
    """The numbers the worker shares with the window, as plain objects."""
    return Shared(*(SimpleNamespace(value=0) for _ in range(4)))


def _open_image_project(window: MainWindow, tmp_path: Path, folder: Path) -> None:
    project = {
        "schema_version": 1,
        "name": "pics",
        "model": {"input_shape": [8, 8, 1], "layers": [{"kind": "dense", "units": 2}]},
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "data": {"source": "image_folder", "path": str(folder), "global_batch_size": 2},
        "training": {"steps": 2},
    }
    (tmp_path / "p.json").write_text(json.dumps(project))
    assert window.open_project(tmp_path / "p.json")


def test_a_typed_path_is_scanned_once_typing_pauses_and_in_another_process(
    qtbot: QtBot, window: MainWindow, tmp_path: Path, asked: AskedScans, scanned: Scanned
) -> None:
    first = write_image_folder(tmp_path / "first", classes=("a", "b"), per_class=2)
    typed = write_image_folder(tmp_path / "typed", classes=("x", "y", "z"), per_class=2)
    _open_image_project(window, tmp_path, first)
    assert scanned(window).valid
    line = window.editor.data_form.pages["image_folder"].editors["path"].line
    line.clear()
    qtbot.keyClicks(line, str(typed))
    assert window.validation.checking == ["data.path"]  # every keystroke was judged at once
    assert not window.run_action.isEnabled()
    validation = scanned(window)
    scans = [path for path, check in asked.asks if not check]
    assert scans == [str(first), str(typed)]  # no prefix of the typed path listed
    assert [str(p) for p in validation.problems] == [
        "model.layers: sparse_categorical_crossentropy needs a last dense layer of 3 units, "
        "one per class folder in data.path, not 2"
    ]


def test_edits_that_keep_the_folder_reuse_its_scan_until_the_folder_changes(
    window: MainWindow, tmp_path: Path, asked: AskedScans, scanned: Scanned
) -> None:
    folder = write_image_folder(tmp_path / "pics", classes=("a", "b"), per_class=2)
    _open_image_project(window, tmp_path, folder)
    assert scanned(window).valid
    window.editor.data_form.batching.editors["shuffle_buffer"].set_value(123)
    window.editor.model.cards[0].dense.editors["units"].set_value(3)
    # Judged at once from the kept scan, nothing waiting on a scan:
    assert window.validation.checking == []
    assert [p.path for p in window.validation.problems] == ["model.layers"]
    scanned(window)  # the check of the kept scan (a stat per folder) finds nothing new
    assert asked.asks[0] == (str(folder), False)
    assert set(asked.asks[1:]) == {(str(folder), True)}  # checks, no scan

    write_image_folder(folder, classes=("a", "b", "c"), per_class=2)  # a class added
    window.editor.data_form.batching.editors["shuffle_buffer"].set_value(124)
    assert scanned(window).valid  # the check found the change, scanned: 3 classes, 3 units


def test_a_scan_overtaken_by_a_newer_path_is_cancelled_and_never_marks_it(
    qtbot: QtBot,
    window: MainWindow,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workers: list[HeldWorker] = []
    monkeypatch.setattr(
        folder_scans, "_Worker", lambda answer: workers.append(HeldWorker(answer)) or workers[-1]
    )
    good = write_image_folder(tmp_path / "good", classes=("a", "b"), per_class=2)
    slow = write_image_folder(tmp_path / "slow", classes=("only",), per_class=1)
    _open_image_project(window, tmp_path, good)
    qtbot.waitUntil(lambda: bool(workers and workers[0].asked))
    worker = workers[0]
    worker.reply(worker.asked[0])
    assert window.validation.valid
    path = window.editor.data_form.pages["image_folder"].editors["path"]
    path.set_value(str(slow))
    qtbot.waitUntil(lambda: len(worker.asked) == 2)
    slow_job = worker.asked[1]
    assert slow_job.key[0] == str(slow)
    qtbot.waitUntil(lambda: "12,345 files" in window.problems_panel.summary.text())
    assert f"scanning {slow}" in window.problems_panel.summary.text()
    path.set_value(str(tmp_path / "new"))  # the user moves on before the slow scan ends
    assert worker.cancels == 1  # the process stops listing the slow folder
    write_image_folder(tmp_path / "new", classes=("x", "y"), per_class=1)
    worker.reply(slow_job)  # its answer arrives after all
    assert window.validation.checking == ["data.path"]
    assert not is_marked(path.line)
    assert "one class folder" not in problem_tooltip(path.line)
    qtbot.waitUntil(lambda: len(worker.asked) == 3)
    worker.reply(worker.asked[2])
    assert window.validation.valid and not is_marked(path.line)


def test_the_worker_stops_a_scan_the_window_no_longer_wants(tmp_path: Path) -> None:
    folder = write_image_folder(tmp_path / "pics", classes=("a", "b", "c"), per_class=1)
    generation = SimpleNamespace(value=0)

    class Count:
        """The shared count: the window moves on once the first folder is counted."""

        def __init__(self) -> None:
            self.folders = 0

        @property
        def value(self) -> int:
            return self.folders

        @value.setter
        def value(self, _found: int) -> None:
            self.folders += 1
            generation.value = 1

    def shared(count: Count) -> Shared:
        return Shared(generation, SimpleNamespace(value=0), count, SimpleNamespace(value=0))

    counted = Count()
    with pytest.raises(Cancelled):
        scan(str(folder), folders.IMAGE_EXTENSIONS, shared(counted), 0)
    assert counted.folders == 1  # not a folder more

    summary, stamps = scan(str(folder), folders.IMAGE_EXTENSIONS, shared(Count()), 1)
    assert summary.classes == ("a", "b", "c") and summary.counts == (1, 1, 1)
    assert [Path(folder_) for folder_, _ in stamps] == [folder, *(folder / c for c in "abc")]
    assert not changed(stamps)
    (folder / "b" / "new.png").write_bytes(b"")
    assert changed(stamps)
