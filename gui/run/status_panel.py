"""Where the run stands: step, loss, speed, time, progress, and what TensorFlow really runs.

A view of the run's model (``engine.run_model``), which owns the numbers (the rate,
the ETA, the training clock); the panel only words them.
"""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QVBoxLayout,
    QWidget,
)

from ...engine.formatting import format_count, format_duration
from ...engine.run_events import (
    Evaluated,
    FindingsChanged,
    PhaseChanged,
    Pruning,
    RunEvent,
    RunFailure,
    RunOutcome,
    RunPhase,
    Started,
    StatusChanged,
    StepsAdded,
)
from ...engine.run_folder import format_loss
from ...engine.run_history import RunSummary
from ...engine.run_model import RunModel
from ..widgets.elided_label import ElidedLabel

LONG_VALUES_WIDTH = 150
"""The last column's least width: the run and its devices, elided, still say which."""
ROWS = 4  # fields fill columns of four rows: the panel stays low and the plot keeps the height
ELIDED = {
    "validation": Qt.TextElideMode.ElideRight,
    "devices": Qt.TextElideMode.ElideRight,
    "run_dir": Qt.TextElideMode.ElideMiddle,  # a run's name ends in what tells it apart: #3
}
"""The values as long as a sentence, shortened with "…" to their column's width."""
_TASK_DEVICE = re.compile(r"/job:([^/]+)/replica:\d+/task:(\d+)(?:/device:(.+))?")


def short_device(name: str) -> str:
    """``CPU:1`` on this machine; ``worker:1 CPU:0`` in a cluster, whose tasks all have a CPU:0."""
    match = _TASK_DEVICE.fullmatch(name)
    if match is None:
        return name.rsplit("/device:", 1)[-1]
    job, task, device = match.groups()
    if device is None:  # a task as a whole (a parameter-server coordinator's workers)
        return f"{job}:{task}"
    return device if job == "localhost" else f"{job}:{task} {device}"


class StatusPanel(QWidget):
    """Fed by the run's messages; shows the numbers a user watches during training."""

    def __init__(self) -> None:
        super().__init__()
        self._model: RunModel | None = None
        self._stepped = False  # the run has reported a step of its own

        # Cut at the panel's width with "…" (the whole line is its tooltip, and a failure's
        # is first in the problems list), never widening the window nor wrapping.
        self.state = ElidedLabel("Idle")
        self.state.setStyleSheet("font-weight: bold;")
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("")
        self.values: dict[str, QLabel] = {}
        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        # The short numbers in the first two columns; the long texts (validation metrics,
        # devices, the run's name) share the last, widest one, each elided there.
        fields = [
            ("step", "Step"),
            ("loss", "Loss"),
            ("rate", "Steps/s"),
            ("elapsed", "Elapsed"),
            ("eta", "ETA"),
            ("strategy", "Strategy"),
            ("replicas", "Replicas"),
            ("tensorflow", "TensorFlow"),
            ("validation", "Validation"),
            ("devices", "Devices"),
            ("run_dir", "Run"),
        ]
        for index, (key, title) in enumerate(fields):
            label = ElidedLabel("—", ELIDED[key]) if key in ELIDED else QLabel("—")
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.values[key] = label
            row, column = index % ROWS, 2 * (index // ROWS)
            caption = QLabel(f"{title}:")
            caption.setStyleSheet("color: #555555;")
            grid.addWidget(caption, row, column)
            grid.addWidget(label, row, column + 1)
        grid.setVerticalSpacing(2)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 1)
        grid.setColumnStretch(5, 4)
        grid.setColumnMinimumWidth(5, LONG_VALUES_WIDTH)

        # What slows the run, in words (``engine.findings``): the evidence in its tooltip. On
        # the state's line, which has room, so the panel takes no height from the plot.
        self.findings = ElidedLabel("")
        self.findings.setStyleSheet("color: #b26a00;")
        header = QHBoxLayout()
        header.addWidget(self.state, 2)
        header.addWidget(self.findings, 3)
        header.addWidget(self.progress, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        layout.setSpacing(2)
        layout.addLayout(header)
        layout.addLayout(grid)
        self.setMaximumHeight(self.sizeHint().height())

        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._update_times)

    def clear(self) -> None:
        """Idle, showing no run (another project was opened)."""
        self._model = None
        self._stepped = False
        self._clock.stop()
        for key in ("step", "loss", "rate", "elapsed", "eta", "strategy", "replicas"):
            self.values[key].setText("—")
        for key in ELIDED:
            self._long(key, "—")
        self._say("Idle")
        self.findings.set_full_text("")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("")

    def follow(self, model: RunModel, run_dir: str, name: str = "") -> None:
        """Shows ``model``'s run from now on: everything reset, the clock started.

        The run is shown by ``name`` (the one the runs panel lists), else by its
        folder's name; the tooltip has the folder. A resumed run's model holds its
        earlier steps; the panel shows this run's own from its first report on.
        """
        self._model = model
        self._stepped = False
        for key in ("step", "loss", "rate", "eta", "strategy", "replicas"):
            self.values[key].setText("—")
        self._long("validation", "—")
        self._long("devices", "—")
        self.findings.set_full_text("")
        self._long("run_dir", name or Path(run_dir).name, f"{name}\n{run_dir}" if name else run_dir)
        # Only what is true: the engine says what it does (loading TensorFlow, for a cold
        # one) in its phases, which follow at once.
        self._say("Starting…")
        self._set_progress()
        self._update_times()
        self._clock.start()

    def show_past(self, run: RunSummary) -> None:
        """Describes a past run drawn in the plot (from the Runs list), saying it is one:
        the numbers of the last live run beside another run's curves misled."""
        self._model = None
        self._stepped = False
        self._clock.stop()
        loss = "" if run.final_loss is None else f", final loss {format_loss(run.final_loss)}"
        self._say(f"Past run: {run.status} at step {run.steps:,}{loss}", run.error)
        self.values["step"].setText(f"{run.steps:,}")
        self.values["loss"].setText("—" if run.final_loss is None else format_loss(run.final_loss))
        self.values["rate"].setText(
            f"{run.steps / run.duration_s:,.1f}" if run.duration_s and run.steps else "—"
        )
        self.values["elapsed"].setText(
            "—" if run.duration_s is None else format_duration(run.duration_s)
        )
        self.values["eta"].setText("—")
        self.values["strategy"].setText(run.strategy or "—")
        self.values["strategy"].setToolTip("")
        self.values["replicas"].setText("—" if run.num_replicas is None else str(run.num_replicas))
        self.values["tensorflow"].setText("—")
        best = run.best_validation or {}
        self._long("validation", ", ".join(f"{k} {v:.6g}" for k, v in best.items()) or "—")
        self._long("devices", "—")
        self.findings.set_full_text("")
        self._long("run_dir", run.name, f"{run.name}\n{run.path}")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("")

    def show_job_state(self, model: RunModel, job_id: str, state: str) -> None:
        """A batch job's state while it waits or starts (``PENDING (Resources)``): the
        headline until its run reports, then the run's own."""
        if model is self._model and model.started is None and model.outcome is None:
            self._say(f"Slurm job {job_id}: {state}")

    def show_change(self, model: RunModel, event: RunEvent) -> None:
        """``model`` changed by ``event``: the labels follow."""
        if model is not self._model:  # an earlier run's model
            return
        match event:
            case Started() as started:
                self._run_started(started)
            case PhaseChanged(phase):
                self._phase(phase)
            case StepsAdded() as steps:
                self._metrics(steps)
            case Evaluated() as evaluation:
                self._evaluation(evaluation)
            case FindingsChanged(findings):
                self.findings.set_full_text(
                    "; ".join(f.text for f in findings),
                    "\n".join(f.line for f in findings) or None,
                )
            case StatusChanged(outcome=RunOutcome(failure=None) as outcome):
                self._finished(outcome)
            case StatusChanged(outcome=RunOutcome(failure=RunFailure() as failure)):
                self._failed(failure)
            case Pruning(reason=reason):
                self._say(f"Pruning… ({reason})")
            case StatusChanged() if model.pruned is not None:
                self._say(f"Pruning… ({model.pruned[1]})")
            case StatusChanged(status="stopping"):
                self._say("Stopping… (the engine stops after the current step)")

    def _phase(self, phase: RunPhase | None) -> None:
        """The headline says what the engine does outside its steps, with how far it is
        where that can be counted; back to "Running" once steps follow."""
        if phase is None:
            self._say("Running")
            self._set_progress()
            return
        self._say(f"{phase.name[:1].upper()}{phase.name[1:]}…")
        if phase.total:
            self.progress.setRange(0, phase.total)
            self.progress.setValue(phase.done or 0)
            self.progress.setFormat(f"{phase.done or 0:,} of {phase.total:,}")
        else:
            self.progress.setRange(0, 0)  # busy: nothing to count
            self.progress.setFormat("")

    def _run_started(self, message: Started) -> None:
        if self._model is None or self._model.phase is None:
            self._say("Running")
        self.values["strategy"].setText(message.strategy_kind or message.strategy)
        self.values["strategy"].setToolTip(f"TensorFlow's {message.strategy}")
        self.values["replicas"].setText(str(message.num_replicas))
        devices = ", ".join(map(short_device, message.devices)) or "—"
        self._long("devices", devices, "\n".join(message.devices))
        self.set_tensorflow_version(message.tensorflow_version)
        self._set_progress()

    def _metrics(self, message: StepsAdded) -> None:
        if not message.steps:
            return
        self._stepped = True
        self._show_step()
        self.values["loss"].setText(format_loss(message.losses[-1]))
        if self._model is not None and self._model.finishing:
            # Training is over: what is left is saving, then the engine's end message.
            self._say("Saving the final checkpoint and model…")
            self.values["eta"].setText("—")
        self._set_progress()
        self._update_times()

    def _evaluation(self, message: Evaluated) -> None:
        """The latest validation metrics, e.g. ``val_loss 0.31, val_accuracy 0.94 (step 500)``."""
        values = ", ".join(f"{name} {value:.6g}" for name, value in message.metrics.items())
        self._long("validation", f"{values} (step {message.step:,})")

    def _finished(self, message: RunOutcome) -> None:
        self._stepped = self._stepped or bool(message.last_step)
        words = "Finished" if message.status == "finished" else "Stopped"
        if self._model is not None and self._model.pruned is not None:
            words = "Pruned"
        loss = (
            "" if message.final_loss is None else f", final loss {format_loss(message.final_loss)}"
        )
        self._say(f"{words} at step {message.last_step}{loss}")
        self._end()

    def _failed(self, message: RunFailure) -> None:
        where = f" in {message.task}" if message.task else ""  # the cluster task that failed
        # A known failure's message says what to fix (a file, a field): it stays in view
        # once the dialog is closed, where an error type alone would say little.
        text = (
            f"Failed{where}: {message.message}"
            if message.known
            else f"Failed: {message.error_type}{where}"
        )
        self._say(text, message.message if message.known else None, failed=True)
        self._end()

    def _say(self, text: str, tooltip: str | None = None, *, failed: bool = False) -> None:
        """The headline: what the run is doing, or how it ended (red when it failed)."""
        self.state.set_full_text(text, tooltip)
        self.state.setStyleSheet(f"font-weight: bold;{' color: #c62828;' if failed else ''}")

    def _long(self, key: str, text: str, tooltip: str | None = None) -> None:
        label = self.values[key]
        assert isinstance(label, ElidedLabel)
        label.set_full_text(text, tooltip)

    def set_tensorflow_version(self, version: str) -> None:
        self.values["tensorflow"].setText(version)

    def _elapsed_text(self) -> str:
        """The run's training time on the engine's clock (the model's), ticking between reports.

        The status panel, the runs table and the log give one duration for one run;
        the engine's start-up before the first step is not training and shows as "—".
        """
        elapsed = None if self._model is None else self._model.elapsed_s()
        return "—" if elapsed is None else format_duration(elapsed)

    def rate(self) -> float | None:
        """Steps per second over the last few seconds of training."""
        return None if self._model is None else self._model.rate()

    def _end(self) -> None:
        self._clock.stop()
        self._set_progress()  # a busy bar stops moving once the run is over
        self.values["eta"].setText("—")
        self._show_step()
        self._update_times()

    def _show_step(self) -> None:
        """``5,000 / 10,000``; from 100,000 on compact (``500M / 1.00B``), exact in the tooltip.

        The whole count of a billion-step run (``499,999,999 / 999,999,999``) took the
        width of the panel's last column: at 1024 px its devices and run showed nothing.
        """
        model = self._model
        last = None if model is None or not self._stepped else model.last_step
        label = self.values["step"]
        if last is None:
            label.setText("—")
            label.setToolTip("")
            return
        total = model.total_steps if model is not None else None
        label.setText(
            f"{format_count(last)} / {format_count(total)}" if total else format_count(last)
        )
        label.setToolTip(f"step {last:,} of {total:,}" if total else f"step {last:,}")

    def _set_progress(self) -> None:
        model = self._model
        span = None if model is None else model.progress()
        if span is not None:
            done, steps = span
            self.progress.setRange(0, steps)
            self.progress.setValue(done)
            self.progress.setFormat("%p%")
        else:
            self.progress.setRange(0, 0 if model is not None and model.live else 1)
            self.progress.setFormat("")

    def _update_times(self) -> None:
        model = self._model
        if model is None:
            return
        self.values["elapsed"].setText(self._elapsed_text())
        rate = model.rate()
        if rate:
            self.values["rate"].setText(f"{rate:,.1f}")
        eta = model.eta_s()
        if eta is not None:
            self.values["eta"].setText(format_duration(eta))
