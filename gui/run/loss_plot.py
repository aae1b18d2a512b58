"""The live loss plot: the loss per step, a smoothed curve, and what else a run reports.

Besides the primary loss it draws each replica's own mean loss (with
``training.per_replica_losses``: the engine reports each replica's share of the
reduced loss, and the share times the number of replicas is the mean over that
replica's examples, comparable with the loss), each named loss of custom step code
(a GAN's generator and discriminator), and the validation loss of each evaluation.
These extra curves are smoothed like the loss. The legend sits beside the data
(over it, in a corner, where the plot is narrow) and lists only the curves that are
shown. Past runs can be overlaid for comparison: they live beside the run's own
curves, so comparing never disturbs a live run.

Built to stay smooth for a million steps: data lives in growing numpy buffers,
curves are redrawn at most ~30 times a second and only when new data arrived,
and pyqtgraph draws only the visible range, downsampled to one bin per pixel
column: a raw loss keeps each column's minimum and maximum (peak), a smoothed
curve, which has no spikes to lose, its mean (a plain polyline, drawn about
three times faster; benchmarks/gui_bench.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from numpy.typing import NDArray
from PySide6.QtCore import QPointF, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QGraphicsWidget,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSlider,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...engine.run_events import (
    Evaluated,
    Pruning,
    RunEvent,
    RunOutcome,
    Started,
    StatusChanged,
    StepsAdded,
)
from ...engine.run_folder import format_loss
from ...engine.run_model import RunModel, Trace
from ..files.exports import save_plot_as
from ..widgets.elided_label import ElidedLabel
from .series import GrowingArray, Smoother

if TYPE_CHECKING:
    from ..runs.drawn_run_worker import DrawnRun

REDRAW_INTERVAL_MS = 33
DOWNSAMPLE_FACTOR = 1.0  # downsampling bins per pixel column: finer adds nothing visible
DEFAULT_SMOOTHING = 0.6
SLIDER_STEPS = 1000  # the slider's weight runs from 0 to 0.999
RAW_PEN = pg.mkPen(color=(31, 119, 180, 140), width=1)
SMOOTH_PEN = pg.mkPen(color=(31, 119, 180), width=2)
EVAL_COLOR = (214, 39, 40)
PRUNED_COLOR = (230, 81, 0)
SERIES_COLORS = [
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
]
COMPARE_RAW_ALPHA = 60  # a compared run's raw loss is faint; its smoothed curve is the line
REPLICA_ALPHA = 150
"""A replica's curve is lighter than the smoothed loss, the line a user reads."""
SMOOTHED_Z = 10  # the smoothed loss over every other curve: raw, replicas, compared runs
COINCIDE_RTOL = 1e-6  # replicas' losses this close (float32 rounding) are one curve
EMPTY_HINT = "The loss of each step appears here once a run starts (Run: Ctrl+R)."
REPLICA_SUFFIX = " (own mean loss)"
LEGEND_NAME_CHARS = 36
"""Longer names (a compared run's) are shortened in the middle; a cluster's replica curve
(``worker:0 replica 0 (own mean loss)``) fits."""
LEGEND_MARGIN = 6  # pixels between the axis and the legend, and after it
LEGEND_SHARE = 1 / 3
"""The most of the plot's width a legend beside the data may take; a wider one lies over it."""
SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
SINGLE_VALUE_SPAN = 0.1
"""A view of one loss value (one step, or curves that coincide) spans this fraction of it."""
DISTINCT_SPAN = 1e-6
"""Losses closer than this, relative to their size, are one value (float32 holds ~7 digits)."""


def _curve(pen: pg.QtGui.QPen, name: str | None) -> pg.PlotDataItem:
    """A curve; the plot item gives it its downsampling and clipping when it is added."""
    return pg.PlotDataItem(pen=pen, name=name, autoDownsampleFactor=DOWNSAMPLE_FACTOR)


def _downsample_as(curve: pg.PlotDataItem, *, smoothed: bool) -> None:
    """Means for a smoothed curve, peaks (the plot item's default) for a raw one."""
    curve.setDownsampling(auto=True, method="mean" if smoothed else "peak")


class _Series:
    """One extra per-step curve (a replica's or a named loss): its values and their smoothing.

    Smoothed like the loss, because a replica's own loss is as noisy as its share of
    the batch is small, and raw it hides the trend it is drawn for.
    """

    def __init__(self, curve: pg.PlotDataItem, missing_steps: int, weight: float) -> None:
        self.curve = curve
        self.buffer = GrowingArray()
        self.smoothed = GrowingArray()
        self.smoother = Smoother(weight)
        self.extend(np.full(missing_steps, np.nan))  # steps before it was reported

    def extend(self, values: NDArray[np.float64]) -> None:
        self.buffer.extend(values)
        self.smoothed.extend(self.smoother.extend(values))

    def resmooth(self, weight: float) -> None:
        self.smoother = Smoother(weight)
        self.smoothed.clear()
        self.smoothed.extend(self.smoother.extend(self.buffer.view()))


def readable_span(low: float, high: float) -> tuple[float, float]:
    """``(low, high)``, or a span around them wide enough for tick labels to read.

    A single value (one step, or replicas whose loss is the loss's to the last bit)
    gave pyqtgraph a span of nothing or of rounding error: its ticks then read
    ``1.314145565032962``, twice, over each other.
    """
    magnitude = max(abs(low), abs(high))
    if high - low > magnitude * DISTINCT_SPAN:
        return low, high
    centre = (low + high) / 2
    half = magnitude * SINGLE_VALUE_SPAN / 2 or 0.5
    return centre - half, centre + half


class _LossView(pg.ViewBox):
    """A view box whose automatic y range always spans values a label can tell apart."""

    def childrenBounds(
        self, frac: tuple[float, float] | None = None, orthoRange=(None, None), items=None
    ) -> list[list[float] | None]:
        bounds = super().childrenBounds(frac=frac, orthoRange=orthoRange, items=items)
        if bounds[1] is not None:
            low, high = bounds[1]
            if self.state["logMode"][1]:  # the view holds log10 of the losses
                low, high = np.log10(readable_span(10.0**low, 10.0**high))
            else:
                low, high = readable_span(low, high)
            bounds[1] = [float(low), float(high)]
        return bounds


class _LossAxis(pg.AxisItem):
    """The loss axis, readable in log scale too.

    pyqtgraph labels every minor tick of a log axis (``2·10⁻³``, ``3·10⁻³``...), which
    crowds into an unreadable column. Here a view within one decade labels every
    tick, one within two decades its 1, 2 and 5 ticks, a wider one its decades only.
    Values from 0.0001 to 10,000 read as decimals, others as powers of ten.
    """

    def __init__(self) -> None:
        super().__init__("left")
        self._decades = 0.0
        self._major_levels = False

    def logTickValues(
        self, minVal: float, maxVal: float, size: float, stdTicks: list
    ) -> list[tuple[float | None, list[float]]]:
        self._decades = maxVal - minVal
        levels = super().logTickValues(minVal, maxVal, size, stdTicks)
        self._major_levels = any(spacing is not None for spacing, _values in levels)
        return levels

    def logTickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        if spacing is None and self._decades > 1:  # minor ticks, which hold the decades too
            texts = [log_tick_text(10.0**value * scale) for value in values]
            if self._major_levels:  # the decades have labels of their own
                return ["" for _text in texts]
            shown = ("1",) if self._decades > 2 else ("1", "2", "5")
            return [text if text.lstrip("0.")[:1] in shown else "" for text in texts]
        return [log_tick_text(10.0**value * scale) for value in values]


def log_tick_text(value: float) -> str:
    """``0.001``, ``0.25``, ``40`` as decimals; ``10⁻⁶``, ``2·10⁻⁶`` beyond them."""
    if 1e-4 <= value < 1e5:
        return f"{value:.4g}"
    mantissa, exponent = f"{value:.0e}".split("e")
    power = "10" + str(int(exponent)).translate(SUPERSCRIPTS)
    return power if mantissa == "1" else f"{mantissa}·{power}"


def _legend_name(name: str) -> str:
    if len(name) <= LEGEND_NAME_CHARS:
        return name
    half = (LEGEND_NAME_CHARS - 1) // 2
    return f"{name[:half]}…{name[-half:]}"


class _Comparison:
    """A past run overlaid on the plot: its exact losses, a faint raw curve and a solid one.

    The solid curve is the one named in the legend; it follows the plot's smoothing
    (or shows the raw loss when smoothing is off), like the run's own curves.
    """

    def __init__(
        self,
        name: str,
        steps: Sequence[float] | NDArray[np.float64],
        losses: Sequence[float] | NDArray[np.float64],
        color: tuple[int, int, int],
    ) -> None:
        self.name = name
        self.color = color
        self.steps = np.array(steps, dtype=np.float64)
        self.losses = np.array(losses, dtype=np.float64)
        if len(self.steps) != len(self.losses):
            raise ValueError(f"{len(self.steps)} steps but {len(self.losses)} losses")
        for values in (self.steps, self.losses):
            values.flags.writeable = False
        # Unnamed: the plot would list them; the legend lists ``curve`` under ``name`` instead.
        self.raw_curve = _curve(pg.mkPen(color=(*color, COMPARE_RAW_ALPHA), width=1), None)
        self.curve = _curve(pg.mkPen(color=color, width=2), None)


class _Caption(ElidedLabel):
    """One line above the plot: the run's name, hidden when there is none.

    Not pyqtgraph's plot title: that one sets the plot's minimum width to the whole
    text, so a long run name pushed the plot (and its legend) past the widget that
    shows it, and kept it there after the title was cleared.
    """

    def __init__(self) -> None:
        super().__init__(mode=Qt.TextElideMode.ElideMiddle)  # "… (resumed)" keeps its end
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setStyleSheet("color: #555555;")
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.setVisible(False)

    def set_full_text(self, text: str, tooltip: str | None = None) -> None:
        super().set_full_text(text, tooltip)
        self.setVisible(bool(text))


class _ComparisonChip(QFrame):
    """``Comparing with 2 past runs ✕``, shown while compared runs are drawn.

    A comparison stays through new runs, study trials and another project, which is
    what a user comparing wants; one who did not see it added is told it is there, and
    one click ends it, with nothing asked.
    """

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("comparisonChip")
        self.setStyleSheet(
            "#comparisonChip { background: #fff3e0; border: 1px solid #ffb74d;"
            " border-radius: 9px; }"
        )
        self.text = QLabel()
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setAutoRaise(True)
        self.close_button.setToolTip("Stop comparing: remove the compared runs from the plot")
        self.close_button.setAccessibleName("Stop comparing")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 0, 2, 0)
        layout.setSpacing(2)
        layout.addWidget(self.text)
        layout.addWidget(self.close_button)
        self.setVisible(False)

    def show_names(self, names: Sequence[str]) -> None:
        """Says which runs are compared; hidden when none is."""
        if len(names) == 1:
            self.text.setText(f"Comparing with {_legend_name(names[0])}")
        else:
            self.text.setText(f"Comparing with {len(names)} past runs")
        self.setToolTip("Compared runs (from the Runs tab):\n" + "\n".join(names))
        self.setVisible(bool(names))


class LossPlot(QWidget):
    """Appends steps as they come; ``steps()``/``losses()`` expose exactly what is plotted."""

    clear_comparisons_requested = Signal()
    """The comparison chip's close button: the runs panel, which chose them, clears them."""
    reported = Signal(str)
    """A line for the status bar (the file an export wrote)."""

    def __init__(self) -> None:
        super().__init__()
        self._steps = GrowingArray()
        self._losses = GrowingArray()
        self._smoothed = GrowingArray()
        self._replicas: list[_Series] = []
        self._coinciding: set[int] = set()
        """The replicas whose every loss so far is replica 0's: drawn over it, said in the
        legend (two replicas of one seed's data differ in nothing)."""
        self._named: dict[str, _Series] = {}
        self._eval_steps = GrowingArray()
        self._eval_losses = GrowingArray()
        self._comparisons: dict[str, _Comparison] = {}
        self._smoother = Smoother(DEFAULT_SMOOTHING)
        self._num_replicas: int | None = None
        self._replica_task: str | None = None
        self._model: RunModel | None = None  # the run the plot follows
        self.pruned_mark: pg.InfiniteLine | None = None
        """Where a study's pruner stopped the run shown, its reason as the tooltip."""
        self._dirty = False
        self.redraw_count = 0

        self.plot_widget = pg.PlotWidget(
            background="w", viewBox=_LossView(), axisItems={"left": _LossAxis()}
        )
        self.plot_item = self.plot_widget.getPlotItem()
        self.plot_item.setLabel("bottom", "step")
        self.plot_item.setLabel("left", "loss")
        for side in ("bottom", "left"):
            # A metric's name is its unit: never "val_accuracy (x0.001)" for values near 1.
            self.plot_item.getAxis(side).enableAutoSIPrefix(False)
        self._build_legend()
        self.plot_item.setMouseEnabled(x=True, y=True)
        # The plot item imposes these on every curve it holds (its context menu edits them).
        self.plot_item.setDownsampling(auto=True, mode="peak")
        self.plot_item.setClipToView(True)
        self.raw_curve = _curve(RAW_PEN, "loss")
        self.raw_curve.setSymbolBrush(SMOOTH_PEN.color())
        self.raw_curve.setSymbolPen(None)
        self.raw_curve.setSymbolSize(7)
        self.smooth_curve = _curve(SMOOTH_PEN, "smoothed")
        self.smooth_curve.setZValue(SMOOTHED_Z)
        self.plot_item.addItem(self.raw_curve)
        self.plot_item.addItem(self.smooth_curve)
        _downsample_as(self.smooth_curve, smoothed=True)
        self.eval_curve = pg.PlotDataItem(
            pen=pg.mkPen(color=EVAL_COLOR, width=1, style=Qt.PenStyle.DashLine),
            symbol="o",
            symbolSize=6,
            symbolBrush=EVAL_COLOR,
            symbolPen=None,
            name="val_loss",
        )
        self._build_crosshair()

        self.hint = pg.TextItem(EMPTY_HINT, color=(120, 120, 120), anchor=(0.5, 0.5))
        self.plot_item.addItem(self.hint, ignoreBounds=True)
        self._show_hint()
        self._rebuild_legend()

        self.smooth_checkbox = QCheckBox("Smoothing")
        self.smooth_checkbox.setChecked(True)
        self.smooth_checkbox.setToolTip("Exponential moving average (TensorBoard's, debiased)")
        self.smooth_slider = QSlider(Qt.Orientation.Horizontal)
        self.smooth_slider.setRange(0, SLIDER_STEPS - 1)
        self.smooth_slider.setValue(round(DEFAULT_SMOOTHING * SLIDER_STEPS))
        self.smooth_slider.setMaximumWidth(160)
        self.smooth_slider.setToolTip("Smoothing weight: 0 follows the loss, 0.999 averages long")
        self.smooth_value = QLabel(f"{DEFAULT_SMOOTHING:.3f}")
        self.log_checkbox = QCheckBox("Log scale")
        # Off by default: pyqtgraph replays the grid's lines on every frame, which cost
        # ~15 ms a frame here and pushed the event loop's p99 latency past 100 ms while a
        # run streamed 5,000 steps/s (benchmarks/gui_bench.py).
        self.grid_checkbox = QCheckBox("Grid")
        self.grid_checkbox.setToolTip("Grid lines (they make every frame slower to draw)")
        self.replica_checkbox = QCheckBox("Replicas")
        self.replica_checkbox.setChecked(True)
        self.replica_checkbox.setEnabled(False)
        self.replica_checkbox.setToolTip(
            "Each replica's own loss (enable training.per_replica_losses to get them)"
        )
        self.auto_range_button = QPushButton("Auto-range")
        self.auto_range_button.setToolTip("Fit the view to all the data and follow new steps")
        self.caption_label = _Caption()
        self.readout = QLabel()
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        controls = QHBoxLayout()
        controls.addWidget(self.smooth_checkbox)
        controls.addWidget(self.smooth_slider)
        controls.addWidget(self.smooth_value)
        controls.addSpacing(12)
        controls.addWidget(self.log_checkbox)
        controls.addWidget(self.grid_checkbox)
        controls.addWidget(self.replica_checkbox)
        controls.addStretch(1)
        controls.addWidget(self.auto_range_button)
        self.comparison_chip = _ComparisonChip()
        self.comparison_chip.close_button.clicked.connect(self.clear_comparisons_requested)
        caption_row = QHBoxLayout()
        caption_row.addWidget(self.caption_label, 1)
        caption_row.addWidget(self.comparison_chip)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(controls)
        layout.addLayout(caption_row)
        layout.addWidget(self.plot_widget, 1)
        layout.addWidget(self.readout)

        self.smooth_checkbox.toggled.connect(self._on_smoothing_toggled)
        self.smooth_slider.valueChanged.connect(self._on_slider)
        self.log_checkbox.toggled.connect(lambda on: self.plot_item.setLogMode(y=on))
        self._build_actions()
        self.grid_checkbox.toggled.connect(
            lambda on: self.plot_item.showGrid(x=on, y=on, alpha=0.2)
        )
        self.replica_checkbox.toggled.connect(self._on_replicas_toggled)
        self.auto_range_button.clicked.connect(self.auto_range)

        self._timer = QTimer(self)
        self._timer.setInterval(REDRAW_INTERVAL_MS)
        self._timer.timeout.connect(self._on_timer)
        self._timer.start()

    # --- data ---------------------------------------------------------------------------

    def append(
        self,
        steps: Sequence[int] | NDArray[np.float64],
        losses: Sequence[float] | NDArray[np.float64],
        replica_losses: Sequence[Sequence[float]] | None = None,
        named_losses: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
        """Adds a batch of steps; the next timer tick draws it."""
        if len(steps) != len(losses):
            raise ValueError(f"{len(steps)} steps but {len(losses)} losses")
        if not len(steps):
            return
        legend_entries = (
            bool(len(self._steps)),
            len(self._replicas) + len(self._named),
            frozenset(self._coinciding),
        )
        self._steps.extend(steps)
        self._losses.extend(losses)
        self._smoothed.extend(self._smoother.extend(losses))
        if replica_losses is not None:
            table = np.asarray(replica_losses, dtype=np.float64)
            known = len(self._replicas)
            while len(self._replicas) < table.shape[1]:
                name = f"{self._replica_name(len(self._replicas))}{REPLICA_SUFFIX}"
                self._replicas.append(self._new_series(name, 1, len(steps)))
            self._coinciding = {
                index
                for index in range(1, table.shape[1])
                if (index in self._coinciding or index >= known)
                and np.allclose(table[:, index], table[:, 0], rtol=COINCIDE_RTOL, equal_nan=True)
            }
            # A share of the global batch's loss, times the replicas, is the replica's mean.
            scale = self._num_replicas or table.shape[1]
            for index, series in enumerate(self._replicas):
                column = table[:, index] * scale if index < table.shape[1] else np.nan
                series.extend(np.broadcast_to(column, (len(steps),)))
            self.replica_checkbox.setEnabled(True)
        if named_losses is not None:
            for name in named_losses:
                if name not in self._named:
                    self._named[name] = self._new_series(name, 2, len(steps))
            for name, series in self._named.items():
                values = named_losses.get(name, np.full(len(steps), np.nan))
                series.extend(np.asarray(values, dtype=np.float64))
        self._dirty = True
        self.hint.setVisible(False)
        now = (True, len(self._replicas) + len(self._named), frozenset(self._coinciding))
        if legend_entries != now:
            self._rebuild_legend()

    def follow(self, model: RunModel) -> None:
        """Draws ``model``'s run as it grows: a loaded (or resumed) run's steps at once."""
        self._model = model
        self.show_trace(model.trace)
        self._mark_pruned(model)

    def show_change(self, model: RunModel, event: RunEvent) -> None:
        """``model`` changed by ``event``: draws what it added (or dropped) when it is the
        run shown."""
        if model is not self._model:  # an earlier run's model, or the plot was cleared
            return
        match event:
            case Started() as started:
                self.set_num_replicas(started.num_replicas, started.task)
                self.show_trace(model.trace)
            case StepsAdded() | Evaluated():
                self.show_trace(model.trace)
            case Pruning(step, reason):
                self.mark_pruned(step, reason)
            case StatusChanged(outcome=RunOutcome(failure=None)) if model.pruned is None:
                self._unmark_pruned()  # it reached its last step before the pruner's stop

    def _mark_pruned(self, model: RunModel) -> None:
        if model.pruned is not None:
            self.mark_pruned(*model.pruned)

    def _unmark_pruned(self) -> None:
        if self.pruned_mark is not None:
            self.plot_item.removeItem(self.pruned_mark)
            self.pruned_mark = None

    def mark_pruned(self, step: int, reason: str) -> None:
        """A dashed line at the step a study's pruner judged the run, labelled with where and
        by which pruner; why (``loss 2.3 was worse than the median ...``) in the caption,
        the whole reason in the line's tooltip."""
        if self.pruned_mark is not None:
            return
        where, _, why = reason.partition(": ")
        pen = pg.mkPen(color=PRUNED_COLOR, width=2, style=Qt.PenStyle.DashLine)
        self.pruned_mark = pg.InfiniteLine(
            pos=step,
            angle=90,
            pen=pen,
            # Two short lines, on the side of the line with more room: beside an early step
            # on its left, the label ran off the plot's left edge.
            label=(where or f"pruned at step {step}").replace(" by ", "\nby ", 1),
            labelOpts={"position": 0.92, "color": PRUNED_COLOR, "anchors": [(0, 0), (1, 0)]},
        )
        self.pruned_mark.setToolTip(reason)
        self.plot_item.addItem(self.pruned_mark, ignoreBounds=True)
        if why and why not in self.caption():
            self.set_caption(f"{self.caption()} — {why}" if self.caption() else why)

    def show_trace(self, trace: Trace) -> None:
        """Draws what the run's trace has and the plot does not yet.

        The one way a run reaches the plot, live (after every batch) and loaded from
        its folder alike; steps the trace dropped (a resume redoes them) go too.
        """
        drawn = len(self._steps)
        if drawn > len(trace.steps):
            self.truncate_after(trace.steps[-1] if trace.steps else 0)
            drawn = len(self._steps)
        if drawn < len(trace.steps):
            self.append(
                trace.steps[drawn:],
                trace.losses[drawn:],
                trace.replica_losses(drawn),
                {name: values[drawn:] for name, values in trace.named_losses.items()} or None,
            )
        evaluated = [(step, m["val_loss"]) for step, m in trace.evaluations if "val_loss" in m]
        for step, val_loss in evaluated[len(self._eval_steps) :]:
            self.add_evaluation(step, val_loss)

    def show_drawn(self, drawn: DrawnRun) -> None:
        """Draws a past run read off the window's thread (:mod:`gui.runs.run_drawing`):
        its curves as they were read, already smoothed and, for a long run, already cut to
        what the plot draws, so nothing of the run's length is done here."""
        self.clear()
        self._steps.extend(drawn.steps)
        self._losses.extend(drawn.loss[0])
        self._smoothed.extend(drawn.loss[1])
        for values, smoothed in drawn.replicas:
            name = f"replica {len(self._replicas)}{REPLICA_SUFFIX}"
            series = self._new_series(name, 1, len(self._steps))
            series.buffer.extend(values)
            series.smoothed.extend(smoothed)
            self._replicas.append(series)
        for name, (values, smoothed) in drawn.named.items():
            series = self._new_series(name, 2, len(self._steps))
            series.buffer.extend(values)
            series.smoothed.extend(smoothed)
            self._named[name] = series
        self.replica_checkbox.setEnabled(bool(self._replicas))
        for step, val_loss in zip(*drawn.evaluations, strict=True):
            self.add_evaluation(float(step), float(val_loss))
        self._dirty = True
        self.hint.setVisible(not len(self._steps) and not len(self._eval_steps))
        self._rebuild_legend()

    def show_busy(self, text: str) -> None:
        """Says in the empty plot what is being read for it (a past run: its share read)."""
        if self.hint.isVisible() and not len(self._steps):
            self.hint.setText(text)  # the view is set already: a new range would relayout
        else:
            self._show_hint(text)

    def set_num_replicas(self, replicas: int, task: str | None = None) -> None:
        """The run's replicas in sync (all tasks'), which turn a replica's share into its mean.

        Until a run says, the replicas reported are taken to be all of them (one machine).
        ``task`` is the cluster task whose replicas the run reports (its chief's): the
        curves then say whose they are, as the others' are not among them.
        """
        self._num_replicas = replicas if replicas > 0 else None
        self._replica_task = task

    def _replica_name(self, index: int) -> str:
        """``replica 0``; in a cluster, whose: ``worker:0 replica 0`` (of the run's replicas,
        a cluster reports its chief's alone)."""
        return f"{self._replica_task} replica {index}" if self._replica_task else f"replica {index}"

    def _new_series(self, name: str, width: int, new_steps: int) -> _Series:
        """A replica's curve (``width`` 1) is lighter than a named loss's, which is a loss
        of its own (a GAN's generator); both lie under the smoothed loss."""
        color = SERIES_COLORS[(len(self._replicas) + len(self._named)) % len(SERIES_COLORS)]
        alpha = REPLICA_ALPHA if width == 1 else 255
        curve = _curve(pg.mkPen(color=(*color, alpha), width=width), name)
        self.plot_item.addItem(curve)
        _downsample_as(curve, smoothed=self.smooth_checkbox.isChecked())
        series = _Series(curve, len(self._steps) - new_steps, self.smoothing_weight())
        if name.startswith("replica"):
            curve.setVisible(self.replica_checkbox.isChecked())
        return series

    def add_evaluation(self, step: int, val_loss: float) -> None:
        """Adds an evaluation's validation loss as a marker on its step."""
        first = not self._eval_steps
        if first:
            self.plot_item.addItem(self.eval_curve)
        self._eval_steps.extend([step])
        self._eval_losses.extend([val_loss])
        self._dirty = True
        if first:
            self._rebuild_legend()

    def truncate_after(self, last_step: int) -> None:
        """Drops everything after ``last_step``: a resumed run redoes those steps.

        The engine restarts from its last checkpoint and trains the later steps
        again, so the plot keeps exactly the steps the run folder keeps.
        """
        keep = int(np.searchsorted(self._steps.view(), last_step, side="right"))
        kept_evals = int(np.searchsorted(self._eval_steps.view(), last_step, side="right"))
        if keep == len(self._steps) and kept_evals == len(self._eval_steps):
            return
        for buffer in (self._steps, self._losses, *self._series_buffers()):
            buffer.truncate(keep)
        self._eval_steps.truncate(kept_evals)
        self._eval_losses.truncate(kept_evals)
        self._resmooth()
        self._dirty = True

    def _series_buffers(self) -> list[GrowingArray]:
        return [series.buffer for series in self._extra_series()]

    def _extra_series(self) -> list[_Series]:
        return [*self._replicas, *self._named.values()]

    def _resmooth(self) -> None:
        """Smooths every loss again from the first: only appends may continue the average."""
        weight = self.smoothing_weight()
        self._smoother = Smoother(weight)
        self._smoothed.clear()
        self._smoothed.extend(self._smoother.extend(self._losses.view()))
        for series in self._extra_series():
            series.resmooth(weight)

    # --- comparison with past runs --------------------------------------------------------

    def add_comparison(
        self,
        key: str,
        name: str,
        steps: Sequence[float] | NDArray[np.float64],
        losses: Sequence[float] | NDArray[np.float64],
    ) -> None:
        """Overlays a past run in a colour of its own, named ``name`` in the legend.

        ``key`` (the run folder) identifies the run: comparing it again replaces
        its curves instead of stacking a copy.
        """
        self.remove_comparison(key)
        used = {comparison.color for comparison in self._comparisons.values()}
        free = [color for color in SERIES_COLORS if color not in used]
        color = free[0] if free else SERIES_COLORS[len(self._comparisons) % len(SERIES_COLORS)]
        comparison = _Comparison(name, steps, losses, color)
        self.plot_item.addItem(comparison.raw_curve)
        self.plot_item.addItem(comparison.curve)
        self._comparisons[key] = comparison
        self._draw_comparison(comparison)
        self.hint.setVisible(False)
        self._rebuild_legend()
        self.comparison_chip.show_names(list(self.comparison_names().values()))
        self.plot_item.enableAutoRange()

    def remove_comparison(self, key: str) -> None:
        comparison = self._comparisons.pop(key, None)
        if comparison is not None:
            self.plot_item.removeItem(comparison.raw_curve)
            self.plot_item.removeItem(comparison.curve)
            self._rebuild_legend()
            self.comparison_chip.show_names(list(self.comparison_names().values()))

    def clear_comparisons(self) -> None:
        """Removes every compared run; the run's own curves stay."""
        for key in list(self._comparisons):
            self.remove_comparison(key)
        if not len(self._steps):
            self._show_hint()

    def comparisons(self) -> dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]]:
        """(steps, losses) of each compared run by its legend name, exactly as given."""
        return {c.name: (c.steps, c.losses) for c in self._comparisons.values()}

    def set_comparison_axes(self, x_label: str, y_label: str) -> None:
        """Names the axes after what the compared runs show (``val_loss`` against wall time).

        The run's own curves are always the loss against the step: the runs panel
        compares by anything else only while none are drawn.
        """
        self.plot_item.setLabel("bottom", x_label)
        self.plot_item.setLabel("left", y_label)

    def axis_labels(self) -> tuple[str, str]:
        """(bottom, left) as the plot names its axes now."""
        return self.plot_item.getAxis("bottom").labelText, self.plot_item.getAxis("left").labelText

    def comparison_names(self) -> dict[str, str]:
        """The legend name of each compared run, by its key."""
        return {key: comparison.name for key, comparison in self._comparisons.items()}

    def legend_names(self) -> list[str]:
        """The names the legend lists, top to bottom."""
        return [label.text for _sample, label in self.legend.items]

    def _draw_comparison(self, comparison: _Comparison) -> None:
        smoothing = self.smooth_checkbox.isChecked()
        comparison.raw_curve.setVisible(smoothing)
        _downsample_as(comparison.curve, smoothed=smoothing)
        if smoothing:
            comparison.raw_curve.setData(comparison.steps, comparison.losses)
            smoothed = Smoother(self.smoothing_weight()).extend(comparison.losses)
            comparison.curve.setData(comparison.steps, smoothed)
        else:
            comparison.curve.setData(comparison.steps, comparison.losses)
        # A line needs two points: a run of one step (or evaluation) shows a dot.
        comparison.curve.setSymbol("o" if len(comparison.steps) == 1 else None)
        comparison.curve.setSymbolBrush(comparison.curve.opts["pen"].color())

    def _build_legend(self) -> None:
        """A legend beside the data, in a column of the plot item's own layout kept for it;
        over the data, in a corner, where that column would take the plot's room.

        Anchored in the view box, it covered the newest steps (and the curves of a
        run with many replicas); a column of the plot item keeps it out of the data
        and in exported images. At 1024x700 that column (six entries, ~270 px) left the
        data 225 px: there it lies over the view's top right, on a pale ground, and can
        be dragged off what it hides.
        """
        self.legend = pg.LegendItem(offset=None, verSpacing=-4, labelTextColor=(40, 40, 40))
        self._legend_space = QGraphicsWidget()
        self.plot_item.layout.addItem(self._legend_space, 2, 3)
        self._legend_over_data: bool | None = None
        self._place_legend()

    def legend_over_data(self) -> bool:
        """Whether the legend lies over the data (the plot is narrow) or beside it."""
        return bool(self._legend_over_data)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._place_legend()

    def _place_legend(self) -> None:
        """Beside the data while its column takes at most :data:`LEGEND_SHARE` of the width,
        else over the data; the column it leaves is given back to the data."""
        needed = self.legend.width() + 2 * LEGEND_MARGIN if self.legend.items else 0
        over = needed > LEGEND_SHARE * self.width()
        if over != self._legend_over_data:
            self._legend_over_data = over
            if over:
                self.legend.setParentItem(self.plot_item.vb)
                self.legend.anchor(itemPos=(1, 0), parentPos=(1, 0), offset=(-4, 4))
                self.legend.setBrush(255, 255, 255, 190)
                self.legend.setPen(200, 200, 200)
            else:
                self.legend.setParentItem(self.plot_item)
                self.legend.anchor(itemPos=(1, 0), parentPos=(1, 0), offset=(-LEGEND_MARGIN, 4))
                self.legend.setBrush(None)
                self.legend.setPen(None)
        width = 0 if over else needed
        self._legend_space.setMinimumWidth(width)
        self._legend_space.setMaximumWidth(width)
        self.plot_item.layout.setColumnFixedWidth(3, width)

    def _rebuild_legend(self) -> None:
        """Lists the curves that hold data and are switched on: the run's own, then compared runs.

        A curve hidden by clicking its legend entry stays listed: that entry brings it back.
        """
        self.legend.clear()
        curves: list[pg.PlotDataItem] = []
        if len(self._steps):
            curves.append(self.raw_curve)
            if self.smooth_checkbox.isChecked():
                curves.append(self.smooth_curve)
            if self.replica_checkbox.isChecked():
                curves += [series.curve for series in self._replicas]
            curves += [series.curve for series in self._named.values()]
        if self._eval_steps:
            curves.append(self.eval_curve)
        same = {self._replicas[index].curve: index for index in self._coinciding}
        for curve in curves:
            name = curve.name()
            if curve in same:  # drawn exactly over replica 0, which it hides
                name = f"{self._replica_name(same[curve])} (= replica 0)"
            self.legend.addItem(curve, _legend_name(name))
        for comparison in self._comparisons.values():
            self.legend.addItem(comparison.curve, _legend_name(comparison.name))
        self._place_legend()

    def set_caption(self, text: str) -> None:
        """Names what the plot shows (a past run, a resumed one) above it; empty hides it."""
        self.caption_label.set_full_text(text)

    def caption(self) -> str:
        """The caption as given, however much of it fits on screen."""
        return self.caption_label.full_text()

    def clear(self) -> None:
        """Empties the plot for a new run (smoothing settings and compared runs stay)."""
        self._model = None
        self._unmark_pruned()
        for buffer in (self._steps, self._losses, self._smoothed):
            buffer.clear()
        for series in self._extra_series():
            self.plot_item.removeItem(series.curve)
        self._replicas = []
        self._coinciding = set()
        self._named = {}
        self._num_replicas = None
        self._replica_task = None
        for line in (self.v_line, self.h_line):  # no crosshair left over the empty plot
            line.setVisible(False)
        if self._eval_steps:
            self.plot_item.removeItem(self.eval_curve)
            # Re-added holding these points, the curve would ask for its view before it is
            # in one (pyqtgraph raises) and keep the old run's markers.
            self.eval_curve.clear()
        self._eval_steps.clear()
        self._eval_losses.clear()
        self.replica_checkbox.setEnabled(False)
        self._smoother = Smoother(self.smoothing_weight())
        self.readout.clear()
        self.set_caption("")
        self._dirty = True
        self.redraw()
        self._rebuild_legend()
        if self._comparisons:
            self.plot_item.enableAutoRange()
        else:
            self._show_hint()

    def steps(self) -> NDArray[np.float64]:
        return self._steps.view()

    def losses(self) -> NDArray[np.float64]:
        return self._losses.view()

    def smoothed(self) -> NDArray[np.float64]:
        return self._smoothed.view()

    def replica_losses(self) -> list[NDArray[np.float64]]:
        """Each replica's own mean loss per step (its reported share times the replicas)."""
        return [series.buffer.view() for series in self._replicas]

    def replica_smoothed(self) -> list[NDArray[np.float64]]:
        return [series.smoothed.view() for series in self._replicas]

    def named_losses(self) -> dict[str, NDArray[np.float64]]:
        return {name: series.buffer.view() for name, series in self._named.items()}

    def evaluations(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(steps, val_loss) of every evaluation so far."""
        return self._eval_steps.view(), self._eval_losses.view()

    @property
    def replica_curves(self) -> list[pg.PlotDataItem]:
        return [series.curve for series in self._replicas]

    # --- drawing ------------------------------------------------------------------------

    def _on_timer(self) -> None:
        if self._dirty:
            self.redraw()

    def redraw(self) -> None:
        """Hands the buffers to the curves now (the timer calls this when data arrived)."""
        self._dirty = False
        self.redraw_count += 1
        steps = self._steps.view()
        # A line needs two points: a run of one step (or its first) shows a dot.
        self.raw_curve.setSymbol("o" if len(steps) == 1 else None)
        self.raw_curve.setData(steps, self._losses.view())
        if self.smooth_curve.isVisible():
            self.smooth_curve.setData(steps, self._smoothed.view())
        smoothing = self.smooth_checkbox.isChecked()
        for series in self._extra_series():
            if series.curve.isVisible():
                values = series.smoothed if smoothing else series.buffer
                series.curve.setData(steps, values.view())
        if self._eval_steps:
            self.eval_curve.setData(self._eval_steps.view(), self._eval_losses.view())

    def _show_hint(self, text: str = EMPTY_HINT) -> None:
        """An empty plot says what will appear in it, centred in a unit view."""
        self.hint.setText(text)
        self.plot_item.setRange(xRange=(0, 1), yRange=(0, 1), padding=0.05)
        self.hint.setPos(0.5, 0.5)
        self.hint.setVisible(True)
        self.plot_item.enableAutoRange()

    def _build_actions(self) -> None:
        """The View menu's Auto-Range and Log Scale (twins of the plot's own controls) and
        the File menu's Export Plot: the plot's, wherever the window lists them."""
        self.auto_range_action = QAction("&Auto-Range Plot", self)
        self.auto_range_action.setShortcut(QKeySequence("Ctrl+0"))
        self.auto_range_action.triggered.connect(self.auto_range)
        self.log_scale_action = QAction("&Log Scale", self, checkable=True)
        self.log_scale_action.toggled.connect(self.log_checkbox.setChecked)
        self.log_checkbox.toggled.connect(self.log_scale_action.setChecked)
        tip = "Save the loss plot as a PNG or SVG image"
        self.export_action = QAction("Export &Plot…", self)
        self.export_action.setShortcut(QKeySequence("Ctrl+Shift+P"))
        self.export_action.setStatusTip(tip)
        self.export_action.setToolTip(tip)
        self.export_action.triggered.connect(self.export)

    def auto_range(self) -> None:
        self.plot_item.enableAutoRange()

    def export(self) -> None:
        """Asks where, and writes the plot as the user sees it there (PNG or SVG)."""
        written = save_plot_as(self.window(), self)
        if written is not None:
            self.reported.emit(f"Exported {written}")

    def smoothing_weight(self) -> float:
        return self.smooth_slider.value() / SLIDER_STEPS

    def set_smoothing_weight(self, weight: float) -> None:
        self.smooth_slider.setValue(round(weight * SLIDER_STEPS))

    def _on_slider(self, value: int) -> None:
        """A new weight recomputes the whole curve: only appends must never rewrite it."""
        self.smooth_value.setText(f"{value / SLIDER_STEPS:.3f}")
        self._resmooth()
        for comparison in self._comparisons.values():
            self._draw_comparison(comparison)
        self._dirty = True

    def _on_smoothing_toggled(self, on: bool) -> None:
        self.smooth_curve.setVisible(on)
        self.smooth_slider.setEnabled(on)
        for series in self._extra_series():
            _downsample_as(series.curve, smoothed=on)
        for comparison in self._comparisons.values():
            self._draw_comparison(comparison)
        self._rebuild_legend()
        self._dirty = True

    def _on_replicas_toggled(self, on: bool) -> None:
        for series in self._replicas:
            series.curve.setVisible(on)
        self._rebuild_legend()
        self._dirty = True

    # --- crosshair ----------------------------------------------------------------------

    def _build_crosshair(self) -> None:
        pen = pg.mkPen(color=(120, 120, 120), style=Qt.PenStyle.DashLine)
        self.v_line = pg.InfiniteLine(angle=90, movable=False, pen=pen)
        self.h_line = pg.InfiniteLine(angle=0, movable=False, pen=pen)
        for line in (self.v_line, self.h_line):
            line.setVisible(False)
            self.plot_item.addItem(line, ignoreBounds=True)
        self.plot_widget.scene().sigMouseMoved.connect(self._on_mouse_moved)

    def _on_mouse_moved(self, position: QPointF) -> None:
        view = self.plot_item.vb
        inside = self.plot_item.sceneBoundingRect().contains(position)
        if not inside or not len(self._steps):
            self.v_line.setVisible(False)
            self.h_line.setVisible(False)
            return
        self.show_readout(view.mapSceneToView(position).x())

    def show_readout(self, x: float) -> None:
        """Snaps the crosshair to the step nearest ``x`` and writes its values."""
        steps = self._steps.view()
        index = int(np.clip(np.searchsorted(steps, x), 1, len(steps) - 1)) if len(steps) > 1 else 0
        if index and abs(steps[index - 1] - x) <= abs(steps[index] - x):
            index -= 1
        loss = float(self._losses.view()[index])
        self.v_line.setPos(steps[index])
        log = self.log_checkbox.isChecked()
        self.h_line.setPos(np.log10(loss) if log and loss > 0 else loss)
        self.v_line.setVisible(True)
        self.h_line.setVisible(not log or loss > 0)
        parts = [f"step {int(steps[index])}", f"loss {format_loss(loss)}"]
        if self.smooth_checkbox.isChecked():
            parts.append(f"smoothed {self._smoothed.view()[index]:.6g}")
        extras = {self._replica_name(i): series for i, series in enumerate(self._replicas)}
        extras.update(self._named)
        parts += [
            f"{name}: {format_loss(float(series.buffer.view()[index]))}"
            for name, series in extras.items()
        ]
        self.readout.setText("   ".join(parts))
