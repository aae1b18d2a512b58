"""A study run in the window: the engine's own :class:`~engine.study.runner.Study` asks
for each trial, and each trial's run goes through the window's Run path.

``distloop sweep`` drives its trials' engines itself (:meth:`Study.run`); here the
window's :class:`~gui.run.run_controller.RunController` drives them, so a trial is a
run like any other: the plot, the status panel, the log and the runs list follow
it. The session hands the trial the run's events as its model tells every view
(:meth:`TrialRun.apply`), stops the run when the pruner says so (the plot marks
where and why), and once the run is closed tells Optuna how it ended
(:meth:`TrialRun.end`) and asks for the next. Stop, or closing the window, stops
the current trial through the normal stop path and leaves the study resumable: its
values run again when it continues, as after Ctrl-C in ``distloop sweep``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from ...engine.config import Project
from ...engine.run_events import RunEvent
from ...engine.run_model import RunModel
from ...engine.study.runner import Study, StudyPlan, TrialResult, TrialRun
from ..run.run_controller import RunController

StartTrial = Callable[[Project, Path], bool]
"""Starts a trial's project in its folder through the window's Run path; False if not."""


class StudySession(QObject):
    """At most one study at a time, run trial after trial on the window's controller."""

    changed = Signal()  # the study started, a trial started or ended, the study ended
    trial_ended = Signal(object)  # TrialResult
    ended = Signal(str)  # how: "complete", "stopped", or why it could not go on
    log = Signal(str, str)  # text, level ("info" or "warning")

    def __init__(
        self, controller: RunController, start_trial: StartTrial, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self._controller = controller
        self._start_trial = start_trial
        self._study: Study | None = None
        self._trial: TrialRun | None = None
        self._stopping = False
        controller.changed.connect(self._on_event)
        controller.idle.connect(self._on_idle)

    @property
    def running(self) -> bool:
        """From :meth:`start` until the study is complete or stopped."""
        return self._study is not None

    @property
    def study(self) -> Study | None:
        return self._study

    @property
    def folder(self) -> Path | None:
        return self._study.folder if self._study is not None else None

    @property
    def trial(self) -> TrialRun | None:
        """The trial whose run is going on now."""
        return self._trial

    def start(self, folder: Path, plan: StudyPlan) -> None:
        """Runs (or continues) the study in ``folder``, whose plan is written already.

        Raises ProblemsError, with nothing started, when another process runs it
        (:class:`~engine.study.runner.StudyBusy`) or a run is going on.
        """
        if self.running or self._controller.active:
            raise RuntimeError("a run or a study is going on")
        self._study = Study(folder, plan)
        self._stopping = False
        for number in self._study.requeue_interrupted():
            self.log.emit(f"study: trial {number} was interrupted; its values run again", "info")
        settings = plan.settings
        self.log.emit(
            f"study {folder}: {settings.sampler} sampler, {settings.pruner} pruner, "
            f"{settings.objective}; {self._study.finished_trials()} of {plan.planned_trials()} "
            "trials done",
            "info",
        )
        self.changed.emit()
        QTimer.singleShot(0, self._next)

    def stop(self) -> None:
        """Stops the current trial (its values run again when the study continues) and the
        study after it; at once when no trial runs."""
        if not self.running or self._stopping:
            return
        self._stopping = True
        if self._trial is None:
            self._end("stopped")
        elif self._trial.interrupt():
            self._controller.stop()
        # A trial being pruned is stopping already: the study ends once it has.

    def _next(self) -> None:
        study = self._study
        if study is None or self._trial is not None:
            return
        if self._stopping:
            self._end("stopped")
            return
        if study.is_complete():
            self._end("complete")
            return
        if self._controller.active:  # a run started between two trials ends first
            return
        trial = study.ask()
        if isinstance(trial, TrialResult):  # values that make no valid project: failed
            self._report(trial)
            QTimer.singleShot(0, self._next)
            return
        self._trial = trial
        self.changed.emit()
        if not self._start_trial(trial.project, trial.run_dir):
            trial.interrupt()
            self._trial = None
            trial.end()
            self._end("its trial could not start; the study is stopped")

    def _on_event(self, _model: RunModel, event: RunEvent) -> None:
        """The trial judges what its run reports (its steps, evaluations and end); the
        pruner may stop it."""
        trial = self._trial
        if trial is None or not trial.apply(event):
            return
        assert trial.pruned_at is not None
        self.log.emit(
            f"study: trial {trial.number} {trial.pruned_reason}; it stops after its step", "info"
        )
        model = self._controller.model
        if model is not None:
            model.prune(trial.pruned_at, trial.pruned_reason)
        self._controller.stop()

    def _on_idle(self) -> None:
        trial = self._trial
        if trial is None:
            if self.running:  # a run that was not the study's ended: the study goes on
                QTimer.singleShot(0, self._next)
            return
        self._trial = None
        result = trial.end()
        if result is None:
            self._end("stopped")
            return
        self._report(result)
        QTimer.singleShot(0, self._next)

    def _report(self, result: TrialResult) -> None:
        value = "" if result.value is None else f" {result.value:.6g}"
        note = f": {result.note}" if result.note and result.state == "failed" else ""
        self.log.emit(
            f"study: trial {result.number} {result.state}{value} after {result.steps} steps{note}",
            "warning" if result.state == "failed" else "info",
        )
        self.trial_ended.emit(result)
        self.changed.emit()

    def _end(self, how: str) -> None:
        study, self._study = self._study, None
        if study is None:
            return
        study.close()
        self.ended.emit(how)
        self.changed.emit()
