"""Find Learning Rate...: the range test of ``distloop lr-find``, from the optimizer form.

The trial is an engine process like a run's (``open_run``, its own finder folder beside
the runs folder), polled on a timer, so the window never waits on it and never loads
TensorFlow. When it ends, the loss is drawn against the rate (log x) with the suggestion
marked; Use This Rate hands the rate to whoever opened the dialog (the optimizer form),
and the plot exports as PNG or SVG like the loss plot.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ...engine.cluster_layout import local_cluster_tasks, runs_as_cluster
from ...engine.config import Project
from ...engine.lr_finder import (
    RateRange,
    Suggestion,
    cannot_find_on,
    finder_project,
    read_curve,
    suggest,
)
from ...engine.lr_finder import write_range as mark_range
from ...engine.problems import ProblemsError
from ...engine.run_checks import pre_run_problems
from ...engine.run_events import RunOutcome
from ...engine.run_folder import new_run_dir
from ...engine.run_handle import EngineHandle, open_run
from ...engine.run_history import finder_runs_root
from ...engine.run_model import RunModel
from ..common import dialogs
from ..files import file_dialogs
from ..files.exports import IMAGE_SUFFIXES, PLOT_FILTER, export_plot
from ..project.field_editors import FloatEdit

POLL_MS = 100

Opener = Callable[[Project, Path], EngineHandle]


def _open_engine(project: Project, run_dir: Path) -> EngineHandle:
    return open_run(project, run_dir)  # a multi-worker project's as a local cluster


class LrFinderDialog(QDialog):
    """Runs one range test of ``project`` and offers its suggested rate."""

    rate_chosen = Signal(float)

    def __init__(
        self,
        project: Project,
        runs_root: Path,
        parent: QWidget | None = None,
        *,
        opener: Opener = _open_engine,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Find Learning Rate")
        self._project, self._runs_root, self._opener = project, runs_root, opener
        self._engine: EngineHandle | None = None
        self._model = RunModel()
        """The finder run's steps and end, read from its engine's messages."""
        self.run_dir: Path | None = None
        self.suggestion: Suggestion | None = None
        defaults = RateRange()
        self.low = _rate_box(defaults.low)
        self.high = _rate_box(defaults.high)
        self.steps = QSpinBox()
        self.steps.setRange(10, 10_000)
        self.steps.setValue(defaults.steps)
        form = QFormLayout()
        form.addRow("Lowest rate:", self.low)
        form.addRow("Highest rate:", self.high)
        form.addRow("Steps:", self.steps)
        self.status = QLabel(
            "A short run of this project on its own strategy raises the rate exponentially "
            "from the lowest to the highest and stops once the loss diverges."
        )
        self.status.setWordWrap(True)
        self.plot = pg.PlotWidget(background="w")
        self.plot.setMinimumSize(520, 300)
        self.plot.setLogMode(x=True, y=False)
        self.plot.setLabel("bottom", "learning rate")
        self.plot.setLabel("left", "loss")
        self.plot.addLegend()
        self.start_button = QPushButton("Start")
        self.start_button.clicked.connect(self.start)
        self.use_button = QPushButton("Use This Rate")
        self.use_button.setEnabled(False)
        self.use_button.clicked.connect(self._use)
        self.export_button = QPushButton("Export Plot...")
        self.export_button.setEnabled(False)
        self.export_button.clicked.connect(self._export)
        close = QPushButton("Close")
        close.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        for button in (self.start_button, self.use_button, self.export_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(close)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.status)
        layout.addWidget(self.plot, 1)
        layout.addLayout(buttons)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)

    @property
    def running(self) -> bool:
        return self._engine is not None

    def rates(self) -> RateRange:
        return RateRange(low=self.low.value(), high=self.high.value(), steps=self.steps.value())

    def start(self) -> None:
        """Starts the trial in its own engine process; says in one line why it cannot."""
        rates = self.rates()
        problem = rates.problem()
        problem = problem or cannot_find_on(self._project)
        finder = finder_project(self._project, rates)
        if problem is None:
            try:
                tasks = len(local_cluster_tasks(finder)) if runs_as_cluster(finder) else 1
                found = pre_run_problems(finder, processes=tasks)
                problem = str(found[0]) if found else None
            except ProblemsError as exc:  # a cluster this machine cannot lay out
                problem = str(exc)
        if problem is not None:
            self.status.setText(f"Cannot start: {problem}")
            return
        try:
            self.run_dir = new_run_dir(
                f"{self._project.name} lr-find", finder_runs_root(self._runs_root)
            )
            mark_range(self.run_dir, rates)
            self._model = RunModel(run_dir=self.run_dir)
            self._engine = self._opener(finder, self.run_dir)
            self._engine.start()
        except OSError as exc:
            self._engine = None
            self.status.setText(f"Cannot start: {exc}")
            return
        self.start_button.setEnabled(False)
        self.use_button.setEnabled(False)
        self.status.setText(f"Starting the engine (finder run in {self.run_dir})…")
        self._timer.start()

    def _poll(self) -> None:
        if self._engine is None:
            return
        steps = self._model.trace.steps
        before = len(steps)
        for message in self._engine.poll(0):
            self._model.apply(message)
        if len(steps) > before:
            self.status.setText(f"Step {steps[-1]} of {self.steps.value()}…")
        ended = self._model.outcome
        if ended is None and not self._engine.done:
            return
        self._timer.stop()
        self._engine.close()
        self._engine = None
        self.start_button.setEnabled(True)
        self._show_result(ended)

    def _show_result(self, ended: RunOutcome | None) -> None:
        assert self.run_dir is not None
        curve = read_curve(self.run_dir)
        self.suggestion = suggest(curve, self.rates().diverge)
        self.plot.clear()
        if curve.rates:
            self.plot.plot(curve.rates, curve.losses, pen=pg.mkPen("#b0b0b0"), name="loss")
            self.plot.plot(
                curve.rates, curve.smoothed, pen=pg.mkPen("#1f77b4", width=2), name="smoothed loss"
            )
            finite = [loss for loss in curve.losses if math.isfinite(loss)]
            if finite:  # the divergence's spike would flatten the part that matters
                top = min(max(finite), 2 * curve.smoothed[0])
                self.plot.setYRange(min(finite), max(top, min(finite) + 1e-6))
        self.export_button.setEnabled(bool(curve.rates))
        if self.suggestion is None:
            failure = ended.failure if ended is not None else None
            why = failure.message.splitlines()[0] if failure is not None else ""
            self.status.setText(
                f"No rate to suggest: {len(curve.rates)} step(s) trained before the loss "
                f"diverged or the run ended{f' ({why})' if why else ''}; try a lower rate."
            )
            return
        marker = pg.InfiniteLine(
            math.log10(self.suggestion.rate),
            angle=90,
            pen=pg.mkPen("#d62728", width=2, style=Qt.PenStyle.DashLine),
            label=f"{self.suggestion.rate:.3g}",
            labelOpts={"position": 0.9, "color": "#d62728"},
        )
        self.plot.addItem(marker)
        ended_early = ", stopped early: the loss diverged" if curve.stopped_early else ""
        self.status.setText(
            f"Suggested learning rate: {self.suggestion.rate:.3g} ({self.suggestion.rule}; "
            f"the steepest descent was at {self.suggestion.steepest:.3g}). "
            f"{len(curve.rates)} of {curve.planned_steps} steps{ended_early}."
        )
        self.use_button.setEnabled(True)

    def _use(self) -> None:
        if self.suggestion is not None:
            self.rate_chosen.emit(float(f"{self.suggestion.rate:.3g}"))
            self.accept()

    def _export(self) -> None:
        answer = file_dialogs.save_file(
            self, "Export plot", "lr-find.png", PLOT_FILTER, file_dialogs.Purpose.EXPORTS
        )
        if answer is None:
            return
        target, chosen = answer
        if target.suffix.lower() not in IMAGE_SUFFIXES:
            target = target.with_name(target.name + (".svg" if "svg" in chosen else ".png"))
        try:
            export_plot(self.plot.getPlotItem(), target)
        except OSError as exc:
            dialogs.show_error(self, "Cannot export the plot", f"Writing {target} failed: {exc}")

    def done(self, result: int) -> None:
        """Closing the dialog ends a trial still running: its folder keeps what it trained."""
        if self._engine is not None:
            self._timer.stop()
            self._engine.kill()
            self._engine.close()
            self._engine = None
        super().done(result)


def _rate_box(value: float) -> FloatEdit:
    box = FloatEdit(1e-12, 100.0, least_step=1e-12)
    box.set_value(value)
    return box
