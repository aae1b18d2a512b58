"""Where the run stands: step, loss, speed, time, progress, and what TensorFlow really runs."""

from __future__ import annotations

import re
import time
from collections import deque
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ..engine.formatting import format_duration
from ..engine.messages import EvalMetrics, RunFailed, RunFinished, RunStarted, StepMetrics
from ..engine.run_folder import format_loss

ROWS = 4  # fields fill columns of four rows: the panel stays low and the plot keeps the height
_TASK_DEVICE = re.compile(r"/job:([^/]+)/replica:\d+/task:(\d+)(?:/device:(.+))?")
RATE_WINDOW_S = 5.0  # steps/s over the last seconds, so the ETA follows speed changes


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
        self._total: int | None = None
        self._first_step = 1
        self._last_step: int | None = None
        self._started_at: float | None = None
        self._ended_at: float | None = None
        self._engine_clock: tuple[float, float] | None = None
        """The engine's last reported ``elapsed_s`` and when it arrived (monotonic)."""
        self._rate_points: deque[tuple[float, int]] = deque()

        self.state = QLabel("Idle")
        self.state.setStyleSheet("font-weight: bold;")
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("")
        self.values: dict[str, QLabel] = {}
        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        fields = [
            ("step", "Step"),
            ("loss", "Loss"),
            ("validation", "Validation"),
            ("rate", "Steps/s"),
            ("elapsed", "Elapsed"),
            ("eta", "ETA"),
            ("strategy", "Strategy"),
            ("replicas", "Replicas"),
            ("devices", "Devices"),
            ("tensorflow", "TensorFlow"),
            ("run_dir", "Run"),
        ]
        for index, (key, title) in enumerate(fields):
            label = QLabel("—")
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.values[key] = label
            row, column = index % ROWS, 2 * (index // ROWS)
            caption = QLabel(f"{title}:")
            caption.setStyleSheet("color: #555555;")
            grid.addWidget(caption, row, column)
            grid.addWidget(label, row, column + 1)
        grid.setVerticalSpacing(2)
        grid.setColumnStretch(1, 2)
        grid.setColumnStretch(3, 2)
        grid.setColumnStretch(5, 3)
        for key in ("devices", "run_dir", "validation"):
            # Elided by width, not wrapped: a wrapped line would make the panel taller.
            self.values[key].setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

        header = QHBoxLayout()
        header.addWidget(self.state, 1)
        header.addWidget(self.progress, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        layout.setSpacing(2)
        layout.addLayout(header)
        layout.addLayout(grid)
        self.setMaximumHeight(self.sizeHint().height())

        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._update_times)

    def start(self, total_steps: int | None, run_dir: str, name: str = "") -> None:
        """A run was asked for: reset everything and start the clock.

        The run is shown by ``name`` (the one the runs panel lists), else by its
        folder's name; the tooltip has the folder.
        """
        self._total = total_steps
        self._first_step = 1
        self._last_step = None
        self._started_at = time.monotonic()
        self._ended_at = None
        self._engine_clock = None
        self._rate_points.clear()
        for key in ("step", "loss", "rate", "eta", "validation", "strategy", "replicas", "devices"):
            self.values[key].setText("—")
        self.values["run_dir"].setText(name or Path(run_dir).name)
        self.values["run_dir"].setToolTip(run_dir)
        self.state.setText("Starting… (TensorFlow loads in the engine process)")
        self._set_progress()
        self._update_times()
        self._clock.start()

    def run_started(self, message: RunStarted) -> None:
        self._first_step = message.first_step
        if message.total_steps is not None:
            self._total = message.total_steps
        self.state.setText("Running")
        self.values["strategy"].setText(message.strategy_kind or message.strategy)
        self.values["strategy"].setToolTip(f"TensorFlow's {message.strategy}")
        self.values["replicas"].setText(str(message.num_replicas))
        self.values["devices"].setText(", ".join(map(short_device, message.devices)) or "—")
        self.values["devices"].setToolTip("\n".join(message.devices))
        self.set_tensorflow_version(message.tensorflow_version)
        self._set_progress()

    def metrics(self, message: StepMetrics) -> None:
        if not message.steps:
            return
        self._last_step = message.steps[-1]
        self.values["step"].setText(self._step_text())
        self.values["loss"].setText(format_loss(message.losses[-1]))
        if not self._rate_points:
            self._rate_points.append((message.elapsed_s[0], message.steps[0]))
        self._rate_points.append((message.elapsed_s[-1], message.steps[-1]))
        self._engine_clock = (message.elapsed_s[-1], time.monotonic())
        while len(self._rate_points) > 2 and (
            self._rate_points[-1][0] - self._rate_points[1][0] >= RATE_WINDOW_S
        ):
            self._rate_points.popleft()
        self._set_progress()
        self._update_times()

    def evaluation(self, message: EvalMetrics) -> None:
        """The latest validation metrics, e.g. ``val_loss 0.31, val_accuracy 0.94 (step 500)``."""
        values = ", ".join(f"{name} {value:.6g}" for name, value in message.metrics.items())
        self.values["validation"].setText(f"{values} (step {message.step:,})")
        self.values["validation"].setToolTip(self.values["validation"].text())

    def stopping(self) -> None:
        self.state.setText("Stopping… (the engine stops after the current step)")

    def finished(self, message: RunFinished) -> None:
        self._last_step = message.last_step if message.last_step else self._last_step
        words = "Finished" if message.status == "finished" else "Stopped"
        loss = (
            "" if message.final_loss is None else f", final loss {format_loss(message.final_loss)}"
        )
        self.state.setText(f"{words} at step {message.last_step}{loss}")
        self._engine_clock = (message.elapsed_s, time.monotonic())
        self._end()

    def failed(self, message: RunFailed) -> None:
        where = f" in {message.task}" if message.task else ""  # the cluster task that failed
        self.state.setText(
            f"<span style='color:#c62828'>Failed: {message.error_type}{where}</span>"
        )
        if self._engine_clock is not None:  # a failed run trained until its last step
            self._engine_clock = (self._engine_clock[0], time.monotonic())
        self._end()

    def set_tensorflow_version(self, version: str) -> None:
        self.values["tensorflow"].setText(version)

    def _elapsed_text(self) -> str:
        """The run's training time on the engine's clock, ticking between its reports.

        It is the clock of metrics.csv's ``elapsed_s`` (continued by a resume) and of
        the engine's final report, so the status panel, the runs table and the log give
        one duration for one run; the engine's start-up before the first step is not
        training and shows as "—".
        """
        if self._engine_clock is None:
            return "—"
        engine_s, received = self._engine_clock
        end = self._ended_at if self._ended_at is not None else time.monotonic()
        return format_duration(engine_s + max(0.0, end - received))

    def rate(self) -> float | None:
        """Steps per second over the last few seconds of training."""
        if len(self._rate_points) < 2:
            return None
        (t0, s0), (t1, s1) = self._rate_points[0], self._rate_points[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None

    def _end(self) -> None:
        self._ended_at = time.monotonic()
        self._clock.stop()
        self.values["eta"].setText("—")
        self.values["step"].setText(self._step_text())
        self._update_times()

    def _step_text(self) -> str:
        if self._last_step is None:
            return "—"
        return f"{self._last_step:,} / {self._total:,}" if self._total else f"{self._last_step:,}"

    def _set_progress(self) -> None:
        if self._total:
            done = 0 if self._last_step is None else self._last_step - self._first_step + 1
            span = self._total - self._first_step + 1
            self.progress.setRange(0, max(span, 1))
            self.progress.setValue(max(0, min(done, span)))
            self.progress.setFormat("%p%")
        else:
            self.progress.setRange(0, 0 if self._ended_at is None and self._started_at else 1)
            self.progress.setFormat("")

    def _update_times(self) -> None:
        if self._started_at is None:
            return
        self.values["elapsed"].setText(self._elapsed_text())
        rate = self.rate()
        if rate:
            self.values["rate"].setText(f"{rate:,.1f}")
        if self._ended_at is None and rate and self._total and self._last_step is not None:
            self.values["eta"].setText(format_duration((self._total - self._last_step) / rate))
