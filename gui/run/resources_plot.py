"""The Resources tab under the loss: each task's CPU, memory, GPU or input wait per step.

One measure at a time (a choice above the plot), one curve per task (and per GPU), on
the loss plot's own step axis: the two views pan and zoom together, and the loss plot's
crosshair is drawn here too, with each task's value at that step. A live run's samples
come with its model's events (``ResourcesSampled``); a past run's from its
``system_metrics.csv`` files (``engine.system_metrics.read_samples``), read off the
window's thread (a run of days has a sample a second). The runs compared with the loss
are overlaid here too, dashed, named by run.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, QTimer
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ...engine.run_events import ResourcesSampled, RunEvent
from ...engine.run_model import RunModel
from ...engine.system_metrics import read_samples
from ..common.background import Background, WhenBusy
from .loss_plot import LossPlot

MEASURES: dict[str, tuple[str, float]] = {
    "CPU (% of a core)": ("cpu_percent", 1.0),
    "Memory (MiB)": ("rss_mb", 1.0),
    "Input wait (% of each step)": ("input_wait_share", 100.0),
    "Held up (% of the time)": ("held_share", 100.0),
    "GPU (%)": ("_util_percent", 1.0),
    "GPU memory (MiB)": ("_memory_mb", 1.0),
}
"""What the view can show: the sample column (a GPU's: the end of ``gpuN…``) and its scale."""
MIN_HEIGHT = 100
"""Pixels of graph: its curves and legend stay readable in the tab under the loss plot,
which is no taller than the runs list's five rows."""
REDRAW_INTERVAL_MS = 1000
"""Samples come once a second per task: a cluster's are drawn together, not one by one."""
COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189)]
Row = dict[str, float | None]
THIS_RUN = "this run"
"""A single run's curve (it has no tasks to name)."""
Samples = dict[str | None, list[Row]]
"""A run's samples by task (None: a single run's own)."""


class ResourcesPlot(QWidget):
    """Follows a run's samples, or shows a past run's; see the module docstring."""

    def __init__(self, loss_plot: LossPlot) -> None:
        super().__init__()
        self._loss = loss_plot
        self._model: RunModel | None = None
        self._rows: Samples = {}
        self._compared: dict[str, Samples] = {}
        """The compared runs' samples, by run name."""
        self._reader = Background(self, WhenBusy.REPLACE, name="resources-reader")
        self._reader.done.connect(self._read_own)
        self._compared_reader = Background(self, WhenBusy.REPLACE, name="resources-reader")
        self._compared_reader.done.connect(self._read_compared)
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._drawn: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        """What the curves show, kept for the crosshair's readout (it follows the mouse)."""
        self._dirty = False

        self.measure = QComboBox()
        self.measure.addItems(list(MEASURES))
        self.measure.setToolTip("What each task used, sampled once a second, by step")
        self.readout = QLabel()
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.plot_widget = pg.PlotWidget(background="w")
        self.plot_widget.setMinimumHeight(MIN_HEIGHT)
        self.plot_item = self.plot_widget.getPlotItem()
        self.plot_item.setLabel("bottom", "step")
        self.plot_item.getAxis("left").enableAutoSIPrefix(False)
        self.plot_item.setXLink(loss_plot.plot_item)  # one step axis: pan and zoom together
        self.legend = self.plot_item.addLegend(offset=(-10, 10))
        self.v_line = pg.InfiniteLine(
            angle=90, movable=False, pen=pg.mkPen(color=(120, 120, 120), style=Qt.PenStyle.DashLine)
        )
        self.v_line.setVisible(False)
        self.plot_item.addItem(self.v_line, ignoreBounds=True)

        top = QHBoxLayout()
        top.addWidget(QLabel("Resources:"))
        top.addWidget(self.measure)
        top.addWidget(self.readout, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.plot_widget, 1)

        self.measure.currentTextChanged.connect(lambda _: self.redraw())
        self._timer = QTimer(self)
        self._timer.setInterval(REDRAW_INTERVAL_MS)
        self._timer.timeout.connect(self._redraw_if_new)
        self._timer.start()
        loss_plot.plot_widget.scene().sigMouseMoved.connect(self._on_loss_mouse)
        self.plot_widget.scene().sigMouseMoved.connect(self._on_own_mouse)

    # --- data ---------------------------------------------------------------------------

    def clear(self) -> None:
        self._model = None
        self._rows = {}
        self._reader.cancel()
        self.readout.clear()
        self.redraw()

    def follow(self, model: RunModel) -> None:
        """Shows ``model``'s samples so far and those to come."""
        self._model = model
        self._reader.cancel()  # a past run's samples still being read are not wanted now
        self._rows = {task: [dict(row) for row in rows] for task, rows in model.resources.items()}
        self.redraw()

    def show_change(self, model: RunModel, event: RunEvent) -> None:
        if model is self._model and isinstance(event, ResourcesSampled):
            self._rows.setdefault(event.task, []).append(dict(event.row))
            self._dirty = True

    def show_past(self, run_dir: Path) -> None:
        """A past run's samples, from its files (none: an empty view), once read."""
        self._model = None
        self._rows = {}  # not another run's while this one is read
        self.redraw()
        self._reader.start(lambda _progress: read_samples(run_dir))

    def compare(self, runs: list[tuple[str, Path]]) -> None:
        """Overlays the samples of ``runs`` (name, folder), the runs compared with the loss,
        once read; an empty list takes them away."""
        if not runs:
            self._compared_reader.cancel()
            self._read_compared(None, {})
            return
        self._compared_reader.start(
            lambda _progress: {name: read_samples(folder) for name, folder in runs}
        )

    @property
    def reading(self) -> bool:
        """Samples asked for are being read (they are drawn once read)."""
        return self._reader.running or self._compared_reader.running

    def _read_own(self, _key: None, samples: Samples) -> None:
        self._rows = samples
        self.redraw()

    def _read_compared(self, _key: None, samples: dict[str, Samples]) -> None:
        self._compared = samples
        self.redraw()

    def series(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """What the view draws for the chosen measure: steps and values by curve name (a
        compared run's curves are named ``RUN: TASK``)."""
        found = self._series_of(self._rows)
        for run, samples in self._compared.items():
            for name, points in self._series_of(samples).items():
                found[f"{run}: {name}" if name != THIS_RUN else run] = points
        return found

    def compared_names(self) -> set[str]:
        """The curves of compared runs, drawn dashed."""
        return set(self.series()) - set(self._series_of(self._rows))

    def _series_of(self, samples: Samples) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        column, scale = MEASURES[self.measure.currentText()]
        found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for task, rows in sorted(samples.items(), key=lambda item: item[0] or ""):
            columns = [column] if not column.startswith("_") else _gpu_columns(rows, column)
            for name in columns:
                points = [
                    (row["step"], value * scale)
                    for row in rows
                    if row.get("step") is not None and (value := row.get(name)) is not None
                    if math.isfinite(value)
                ]
                if not points:
                    continue
                label = " ".join(
                    part for part in (task, name.split("_")[0] if name != column else "") if part
                )
                table = np.asarray(points, dtype=np.float64)
                found[label or THIS_RUN] = (table[:, 0], table[:, 1])
        return found

    def _redraw_if_new(self) -> None:
        if self._dirty:
            self.redraw()

    def redraw(self) -> None:
        self._dirty = False
        self._drawn = self.series()
        for curve in self._curves.values():
            self.plot_item.removeItem(curve)
        self.legend.clear()
        self._curves = {}
        compared = self.compared_names()
        for index, (name, (steps, values)) in enumerate(self._drawn.items()):
            style = Qt.PenStyle.DashLine if name in compared else Qt.PenStyle.SolidLine
            pen = pg.mkPen(color=COLORS[index % len(COLORS)], width=2, style=style)
            curve = pg.PlotDataItem(steps, values, pen=pen, name=name)
            self.plot_item.addItem(curve)
            self._curves[name] = curve
        self.plot_item.setLabel("left", self.measure.currentText())

    # --- the crosshair, shared with the loss plot ----------------------------------------

    def _on_loss_mouse(self, position: QPointF) -> None:
        if self._loss.plot_item.sceneBoundingRect().contains(position):
            self.show_readout(self._loss.plot_item.vb.mapSceneToView(position).x())

    def _on_own_mouse(self, position: QPointF) -> None:
        if self.plot_item.sceneBoundingRect().contains(position):
            x = self.plot_item.vb.mapSceneToView(position).x()
            self.show_readout(x)
            if len(self._loss.steps()):
                self._loss.show_readout(x)

    def show_readout(self, x: float) -> None:
        """The crosshair at step ``x``, and each curve's value at the sample nearest it."""
        parts = []
        for name, (steps, values) in self._drawn.items():
            index = int(np.argmin(np.abs(steps - x)))
            parts.append(f"{name}: {values[index]:.4g} (step {int(steps[index])})")
        self.v_line.setPos(x)
        self.v_line.setVisible(bool(parts))
        self.readout.setText("   ".join(parts))


def _gpu_columns(rows: list[Row], suffix: str) -> list[str]:
    """The ``gpuN…`` columns of one measure, in GPU order: none on a machine without."""
    names = {name for row in rows[:1] for name in row if name.endswith(suffix)}
    return sorted(names, key=lambda name: int(name[3:].split("_")[0]))
