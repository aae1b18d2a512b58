"""Starting and continuing a study from the window: Add Sweep…, Continue in the Studies
tab, and the offer, at the next start, to continue the study the window was running when
it closed or died.

The flow owns the Add Sweep… action and its enable rule; the window places the action in
its Run menu and the Studies tab's toolbar, and tells the flow when the project's
validity changes. Each study still runs in :class:`~gui.study.study_session.StudySession`,
trial after trial on the window's Run path; the flow only asks, checks and starts it,
and keeps the mark (:data:`UNFINISHED_STUDY_KEY`) that makes a study interrupted by the
window's end one the next window offers to continue.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QSettings, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QWidget

from ...engine.problems import ProblemsError
from ...engine.study.folders import read_entry
from ...engine.study.runner import StudyPlan, new_study_dir, read_plan, write_plan
from ..common import dialogs
from ..run.run_controller import RunController
from ..run.run_starter import RunStarter
from ..runs.runs_panel import RunsPanel
from .study_dialog import ask_study
from .study_session import StudySession

UNFINISHED_STUDY_KEY = "studies/unfinished"
"""The folder of the study the window runs; kept when it closes mid-study, so the next
start offers to continue it (and after a crash too)."""


class StudyFlow(QObject):
    """Add Sweep…, Continue and the offer to continue: one study at a time, never beside
    a run."""

    started = Signal(object)  # Path: the study folder now running (the Studies tab shows it)
    reported = Signal(str)  # a line for the window's status bar
    log = Signal(str, str)  # text, level: a line for the log

    def __init__(
        self,
        window: QWidget,
        controller: RunController,
        starter: RunStarter,
        session: StudySession,
        runs_panel: RunsPanel,
        closing: Callable[[], bool],
    ) -> None:
        """``window``: the dialogs' parent. ``closing``: whether the window is closing, its
        user's word given, so a study it stops stays marked for the next start."""
        super().__init__(window)
        self._window = window
        self._controller = controller
        self._starter = starter
        self._session = session
        self._runs_panel = runs_panel
        self._closing = closing
        self.add_sweep_action = QAction("Add &Sweep…", self)
        tip = (
            "Search settings of the project with an Optuna study: trials that learn from "
            "each other, pruned while they train"
        )
        self.add_sweep_action.setToolTip(tip)
        self.add_sweep_action.setStatusTip(tip)
        self.add_sweep_action.setShortcut(QKeySequence("Ctrl+Shift+W"))
        self.add_sweep_action.triggered.connect(lambda _checked=False: self.add_sweep())
        session.ended.connect(self._on_ended)

    def update_action(self, valid: bool) -> None:
        """Add Sweep… needs a project Run would start (``valid``), and no run or study."""
        idle = not self._controller.active and not self._session.running
        self.add_sweep_action.setEnabled(valid and idle)

    def add_sweep(self) -> None:
        """Add Sweep…: asks for a study over the project as Run would start it, and runs it."""
        if self._controller.active or self._session.running:
            return
        base = self._starter.project_for_queue()
        if base is None:
            return
        request = ask_study(self._window, base)
        if request is None:
            return
        try:
            folder = request.folder or new_study_dir(base.name, self._runs_panel.runs_root)
            if not request.resume:
                write_plan(folder, request.plan)
        except OSError as exc:
            dialogs.show_error(
                self._window, "Cannot start the study", f"{exc.strerror or exc}: {exc}"
            )
            return
        self._start(folder, request.plan)

    def continue_study(self, folder: Path) -> None:
        """Continues the study in ``folder``: the trial it stopped in runs again."""
        if self._controller.active or self._session.running:
            return
        try:
            plan = read_plan(folder)
        except ProblemsError as exc:
            dialogs.show_error(self._window, "Cannot continue the study", str(exc).splitlines()[-1])
            return
        if self._starter.may_run_custom_code(plan.project, None):
            self._start(folder, plan)

    def offer_to_continue(self) -> None:
        """A study the window ran when it was closed (or killed) is offered to continue."""
        if self._controller.active or self._session.running:
            return  # the mark is this window's own study's
        store = QSettings()
        saved = store.value(UNFINISHED_STUDY_KEY)
        store.remove(UNFINISHED_STUDY_KEY)
        if not isinstance(saved, str) or not saved:
            return
        entry = read_entry(Path(saved))
        if entry.state != "stopped" or entry.plan is None:
            return
        if dialogs.confirm_continue_study(self._window, entry):
            self.continue_study(entry.folder)

    def _start(self, folder: Path, plan: StudyPlan) -> None:
        problems = plan.problems()
        try:
            if problems:
                raise ProblemsError(problems, str(folder))
            self._session.start(folder, plan)
        except ProblemsError as exc:
            dialogs.show_error(self._window, "Cannot run the study", str(exc).replace("\n", " "))
            return
        QSettings().setValue(UNFINISHED_STUDY_KEY, str(folder))
        self.started.emit(folder)

    def _on_ended(self, how: str) -> None:
        self.reported.emit(f"Study {how}")
        closing = self._closing()
        if how != "complete" and not closing:
            self.log.emit(
                f"study {how}: Continue in the Studies tab goes on where it stopped", "warning"
            )
        # Closing the window keeps the mark: the next start offers to continue the study.
        if not closing:
            QSettings().remove(UNFINISHED_STUDY_KEY)
        self._runs_panel.refresh()
