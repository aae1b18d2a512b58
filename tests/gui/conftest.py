"""GUI test setup: offscreen Qt, throw-away settings, an asyncio loop on Qt's, canned dialogs."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import asyncio
import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import qasync
from distloop.engine.validation import Validation
from distloop.gui.common import dialogs
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtCore import QCoreApplication, QSettings
from PySide6.QtWidgets import QApplication, QDialog, QFileDialog, QInputDialog, QMessageBox


@pytest.fixture(autouse=True)
def collected_on_this_thread() -> Iterator[None]:
    """As in the app (``gui/common/garbage.py``): while a test's windows live no cycle is
    collected on another thread (a QObject destroyed there deadlocked the worker); what
    the test left is collected here, on the window's thread, once it is done."""
    gc.disable()
    yield
    gc.collect()
    gc.enable()


@pytest.fixture(autouse=True)
def isolated_settings(qapp: QApplication, tmp_path: Path) -> Iterator[None]:
    """Every test gets empty settings in its own folder, never the user's."""
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(
        QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "settings")
    )
    QCoreApplication.setOrganizationName("DistloopTests")
    QCoreApplication.setApplicationName("DistloopTests")
    QSettings().clear()
    yield
    QSettings().clear()


@pytest.fixture(autouse=True)
def no_modal_dialogs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A modal dialog nobody answers fails its test instead of waiting for ever.

    Offscreen, a dialog's own event loop never ends, and pytest-timeout's alarm cannot
    end it either (its handler runs only when Qt calls back into Python). Tests answer
    the dialogs they expect through ``dialog_recorder`` or their own patches; any other
    is answered "cancel" here and named when the test ends.
    """
    opened: list[str] = []

    def refuse(kind: str, answer: object) -> Callable[..., Any]:
        def opening(*args: Any, **_kwargs: Any) -> object:
            texts = [arg for arg in args if isinstance(arg, str)]
            opened.append(f"{kind}: {texts[0] if texts else ''}")
            return answer

        return opening

    def exec_dialog(dialog: QDialog) -> int:
        opened.append(f"{type(dialog).__name__}.exec: {dialog.windowTitle()}")
        return int(QDialog.DialogCode.Rejected.value)

    no = QMessageBox.StandardButton.No
    answers: dict[type, dict[str, object]] = {
        QMessageBox: {"question": no, "warning": no, "critical": no, "information": no},
        QFileDialog: {
            "getOpenFileName": ("", ""),
            "getOpenFileNames": ([], ""),
            "getSaveFileName": ("", ""),
            "getExistingDirectory": "",
        },
        QInputDialog: {name: (None, False) for name in ("getText", "getInt", "getItem")},
    }
    for cls, statics in answers.items():
        for name, answer in statics.items():
            opening = refuse(f"{cls.__name__}.{name}", answer)
            monkeypatch.setattr(cls, name, staticmethod(opening))
    for cls in (QDialog, QMessageBox, QFileDialog, QInputDialog):
        monkeypatch.setattr(cls, "exec", exec_dialog)
    yield
    assert not opened, f"modal dialogs that would have waited for a user: {opened}"


@pytest.fixture
def qloop(qapp: QApplication) -> Iterator[qasync.QEventLoop]:
    """asyncio running on Qt's event loop, as in the app; qtbot's waits drive both."""
    loop = qasync.QEventLoop(qapp, already_running=True)
    asyncio.set_event_loop(loop)
    yield loop
    # Not loop.stop(): it calls QCoreApplication.exit(), which outside exec() leaves Qt's
    # "quit now" flag set, and every later QEventLoop.exec (qtbot.wait) returns at once.
    loop._QEventLoop__is_running = False  # type: ignore[attr-defined]
    asyncio.events._set_running_loop(None)
    loop.close()
    asyncio.set_event_loop(None)


class DialogRecorder:
    """Stands in for the modal dialogs: records what would be shown, answers as told."""

    def __init__(self) -> None:
        self.shown: list[tuple[str, str, str]] = []  # (kind, title, text)
        self.problems: list[list[object]] = []
        self.unsaved_answer = dialogs.Unsaved.DISCARD
        self.confirm_stop = True
        self.start_over = True
        self.trust_launch = True

    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.shown]


@pytest.fixture
def dialog_recorder(monkeypatch: pytest.MonkeyPatch) -> DialogRecorder:
    recorder = DialogRecorder()

    def show_problems(_parent: object, title: str, text: str, problems: list[object]) -> None:
        recorder.shown.append(("problems", title, text))
        recorder.problems.append(list(problems))

    def show_error(_parent: object, title: str, text: str, details: str = "") -> None:
        recorder.shown.append(("error", title, f"{text}\n{details}"))

    def ask_unsaved(_parent: object, name: str) -> dialogs.Unsaved:
        recorder.shown.append(("unsaved", name, ""))
        return recorder.unsaved_answer

    def confirm_stop_run(_parent: object) -> bool:
        recorder.shown.append(("confirm_stop", "", ""))
        return recorder.confirm_stop

    def confirm_start_over(_parent: object, name: str) -> bool:
        recorder.shown.append(("start_over", name, ""))
        return recorder.start_over

    def trust_launch(_parent: object, unusual: list[str]) -> bool:
        recorder.shown.append(("trust_launch", "", "\n".join(unusual)))
        return recorder.trust_launch

    def about(_parent: object, html: str) -> None:
        recorder.shown.append(("about", "About Distloop", html))

    for name, function in {
        "show_problems": show_problems,
        "show_error": show_error,
        "ask_unsaved": ask_unsaved,
        "confirm_stop_run": confirm_stop_run,
        "confirm_start_over": confirm_start_over,
        "about": about,
        "trust_launch": trust_launch,
    }.items():
        monkeypatch.setattr(dialogs, name, function)
    return recorder


@pytest.fixture
def make_window(
    qtbot, qloop: qasync.QEventLoop, tmp_path: Path, dialog_recorder: DialogRecorder
) -> Iterator[Callable[..., MainWindow]]:
    """Builds main windows whose runs go under ``tmp_path``; ends their runs afterwards."""
    windows: list[MainWindow] = []

    def make(**kwargs: Any) -> MainWindow:
        kwargs.setdefault("runs_root", tmp_path / "runs")
        window = MainWindow(**kwargs)
        qtbot.addWidget(window)
        windows.append(window)
        return window

    yield make
    for window in windows:
        if window.controller.active:
            window.controller.stop()
            qtbot.waitUntil(lambda w=window: not w.controller.active, timeout=30_000)


@pytest.fixture
def window(make_window: Callable[..., MainWindow]) -> MainWindow:
    return make_window()


@pytest.fixture
def scanned(qtbot) -> Callable[[MainWindow], Validation]:
    """Waits until the window's data folders are scanned (off its event loop, once edits
    pause) and judged; returns the validation then."""

    def wait(window: MainWindow) -> Validation:
        qtbot.waitUntil(
            lambda: not window.document.folders.scanning() and not window.validation.checking,
            timeout=30_000,  # the scanning process's start imports the engine's models
        )
        return window.validation

    return wait
