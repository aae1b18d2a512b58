"""The study's plots: the optimization history, parallel coordinates, parameter importances.

Each is a note above a pyqtgraph plot, drawn from a :class:`StudyResults` that a
worker thread read (:mod:`engine.study.results` computes what they show), so drawing
is all they do on the window's thread. Each plot item exports as PNG or SVG like the
loss plot (:func:`gui.files.exports.export_plot`). Trials selected in the table are marked
in the history and the parallel coordinates; clicking a trial's point selects it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from numpy.typing import NDArray
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from ...engine.study.results import (
    ParallelCoordinates,
    StudyResults,
    history,
    parallel_coordinates,
)

POINT_BRUSH = pg.mkBrush(31, 119, 180, 200)
BEST_PEN = pg.mkPen(color=(214, 39, 40), width=2)
SELECTED_PEN = pg.mkPen(color=(255, 127, 14), width=3)
BAR_BRUSH = pg.mkBrush(31, 119, 180)
TEXT_COLOR = (60, 60, 60)
LINE_COLORS = pg.colormap.get("viridis")
"""Parallel coordinates' lines by objective: dark purple the worst, yellow the best."""
COLOR_BINS = 12  # shades of the lines' colour: more are hardly told apart, and each is an item
AXIS_PEN = pg.mkPen(color=(90, 90, 90), width=1)
LABEL_FILL = pg.mkBrush(255, 255, 255, 210)  # an axis's values stay readable over the lines


class _TrialAxis(pg.AxisItem):
    """An axis of trial numbers: whole numbers only.

    pyqtgraph ticks halfway between two trials (``0.5``, ``1.5``) when few are shown;
    a trial 1.5 reads as one that exists.
    """

    def __init__(self) -> None:
        super().__init__("bottom")

    def tickValues(
        self, minVal: float, maxVal: float, size: float
    ) -> list[tuple[float, list[float]]]:
        levels = [
            (spacing, [value for value in values if float(value).is_integer()])
            for spacing, values in super().tickValues(minVal, maxVal, size)
            if spacing >= 1
        ]
        if levels:
            return levels
        return [(1.0, [float(n) for n in range(math.ceil(minVal), math.floor(maxVal) + 1)])]


class StudyPlot(QWidget):
    """A note (what the plot shows, or why it is empty) above a plot of the study."""

    trial_clicked = Signal(int)

    def __init__(
        self, x_label: str = "", y_label: str = "", axes: dict[str, pg.AxisItem] | None = None
    ) -> None:
        super().__init__()
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #555555;")
        self.plot_widget = pg.PlotWidget(background="w", axisItems=axes)
        self.plot_item = self.plot_widget.getPlotItem()
        self.plot_item.setMenuEnabled(False)
        self.plot_item.hideButtons()
        for side in ("bottom", "left"):
            self.plot_item.getAxis(side).enableAutoSIPrefix(False)
        if x_label:
            self.plot_item.setLabel("bottom", x_label)
        if y_label:
            self.plot_item.setLabel("left", y_label)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        layout.addWidget(self.note)
        layout.addWidget(self.plot_widget, 1)
        self._selected: tuple[int, ...] = ()

    def set_selected(self, numbers: Sequence[int]) -> None:
        """Marks the trials selected in the table."""
        self._selected = tuple(numbers)
        self._draw_selection()

    def _draw_selection(self) -> None:
        """Plots that mark nothing leave this as it is."""


class HistoryPlot(StudyPlot):
    """Each complete trial's objective by its number, and the best so far as a step line."""

    def __init__(self) -> None:
        super().__init__("trial", axes={"bottom": _TrialAxis()})
        self.points = pg.ScatterPlotItem(size=8, brush=POINT_BRUSH, pen=None, name="trial")
        self.best_curve = pg.PlotDataItem(pen=BEST_PEN, stepMode="center", name="best so far")
        self.marks = pg.ScatterPlotItem(size=15, brush=None, pen=SELECTED_PEN)
        self.plot_item.addLegend(offset=(-10, 10))
        self.plot_item.addItem(self.best_curve)
        self.plot_item.addItem(self.points)
        self.points.setZValue(5)  # over the best-so-far line that runs through them
        self.plot_item.addItem(self.marks)
        self.plot_item.showGrid(x=True, y=True, alpha=0.2)
        self.points.sigClicked.connect(self._clicked)
        self._where: dict[int, float] = {}

    def show_results(self, results: StudyResults) -> None:
        found = history(results.trials, results.direction)
        self.plot_item.setLabel("left", results.objective)
        numbers = np.array(found.numbers, dtype=np.float64)
        self.points.setData(x=numbers, y=np.array(found.values), data=list(found.numbers))
        if len(numbers):
            # The best so far holds until the last trial asked for, complete or not.
            last = max(t.number for t in results.trials)
            xs = np.append(numbers, last if last > numbers[-1] else last + 0.5)
            self.best_curve.setData(x=xs, y=np.array(found.best_so_far))
        else:
            self.best_curve.setData([], [])
        self._where = dict(zip(found.numbers, found.values, strict=True))
        ended = sum(1 for t in results.trials if t.state != "queued")
        self.note.setText(
            f"{results.objective} of each complete trial ({len(found.numbers)} of {ended}), "
            f"{'highest' if results.direction == 'maximize' else 'lowest'} so far in red; "
            "pruned and failed trials have none (a pruned trial's last report is in Trials)."
            if found.numbers
            else "No trial has completed yet: each complete trial's objective appears here."
        )
        self._draw_selection()

    def _draw_selection(self) -> None:
        chosen = [n for n in self._selected if n in self._where]
        self.marks.setData(x=chosen, y=[self._where[n] for n in chosen])

    def _clicked(self, _item: object, points: Sequence[pg.SpotItem], *_args: object) -> None:
        if len(points):
            self.trial_clicked.emit(int(points[0].data()))


class ParallelPlot(StudyPlot):
    """One vertical axis per parameter and one for the objective; a line per complete
    trial, coloured by its objective (yellow the best).

    Lines of a like colour are one curve (each line ends in a NaN), so a study of
    hundreds of trials is a few dozen items to draw, not hundreds: with one item a
    line, 300 trials took 1.7 s of the window's thread to show.
    """

    def __init__(self) -> None:
        super().__init__()
        self.plot_item.hideAxis("left")
        self.plot_item.setMouseEnabled(x=False, y=False)
        self._coordinates: ParallelCoordinates | None = None
        self._lines: dict[int, NDArray[np.float64]] = {}
        self.marks = pg.PlotDataItem(pen=SELECTED_PEN, connect="finite")
        self.marks.setZValue(10)

    def show_results(self, results: StudyResults) -> None:
        found = parallel_coordinates(
            results.trials, results.axes, results.objective, results.direction
        )
        if found == self._coordinates:
            return  # a refresh that changed no complete trial
        self._coordinates = found
        self.plot_item.clear()
        self.plot_item.disableAutoRange()  # the ranges are set below: none computed per item
        count = len(found.axes)
        for index, axis in enumerate(found.axes):
            self.plot_item.addItem(pg.InfiniteLine(pos=index, angle=90, pen=AXIS_PEN))
            for position, label in axis.ticks:
                text = pg.TextItem(label, color=TEXT_COLOR, anchor=(0, 0.5), fill=LABEL_FILL)
                text.setPos(index + 0.02, position)
                text.setZValue(20)
                self.plot_item.addItem(text)
        self._lines = {
            number: np.array([axis.positions[line] for axis in found.axes], dtype=np.float64)
            for line, number in enumerate(found.numbers)
        }
        shades: dict[int, list[int]] = {}
        for line, number in enumerate(found.numbers):
            shade = min(int(found.quality[line] * COLOR_BINS), COLOR_BINS - 1)
            shades.setdefault(shade, []).append(number)
        for shade in sorted(shades):  # the best drawn last, on top
            color = LINE_COLORS.map((shade + 0.5) / COLOR_BINS, mode="qcolor")
            xs, ys = self._paths(shades[shade])
            self.plot_item.addItem(
                pg.PlotDataItem(xs, ys, pen=pg.mkPen(color=color, width=2), connect="finite")
            )
        self.plot_item.addItem(self.marks)
        bottom = self.plot_item.getAxis("bottom")
        names = _short_names([axis.name for axis in found.axes])
        scales = [axis.scale for axis in found.axes]
        bottom.setTicks(
            [
                [
                    (i, f"{name} (log)" if scale == "log" else name)
                    for i, (name, scale) in enumerate(zip(names, scales, strict=True))
                ]
            ]
        )
        self.plot_item.setXRange(-0.5, max(count - 1, 1) + 0.5, padding=0)
        self.plot_item.setYRange(-0.05, 1.05, padding=0)
        self.note.setText(
            f"{len(found.numbers)} complete trials, one line each, through every parameter's "
            f"searched range and {results.objective}; yellow the "
            f"{'highest' if results.direction == 'maximize' else 'lowest'} {results.objective}, "
            "dark purple the other end. Log ranges are spaced by their logarithm."
            if found.numbers
            else "No trial has completed yet: each complete trial becomes a line here."
        )
        self._draw_selection()

    def _paths(self, numbers: Sequence[int]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The lines of trials ``numbers`` as one curve, a NaN after each."""
        if not numbers:
            return np.empty(0), np.empty(0)
        count = len(self._coordinates.axes) if self._coordinates else 0
        xs = np.tile(np.append(np.arange(count, dtype=np.float64), np.nan), len(numbers))
        ys = np.concatenate([np.append(self._lines[n], np.nan) for n in numbers])
        return xs, ys

    def _draw_selection(self) -> None:
        chosen = [n for n in self._selected if n in self._lines]
        xs, ys = self._paths(chosen)
        self.marks.setData(xs, ys)

    def drawn_trials(self) -> list[int]:
        return list(self._lines)


class ImportancePlot(StudyPlot):
    """Optuna's parameter importances as bars, the most important on top."""

    def __init__(self) -> None:
        super().__init__("importance")
        self.plot_item.setMouseEnabled(x=False, y=False)
        self.values: dict[str, float] = {}

    def show_results(self, results: StudyResults) -> None:
        found = results.importance
        self.values = dict(found.values)
        self.plot_item.clear()
        self.note.setText(found.note)
        names = list(found.values)
        left = self.plot_item.getAxis("left")
        if not names:
            left.setTicks([[]])
            self.plot_item.setXRange(0, 1)
            self.plot_item.setYRange(0, 1)
            return
        ys = np.arange(len(names))[::-1].astype(np.float64)  # the first (most important) on top
        widths = np.array([found.values[name] for name in names])
        self.plot_item.addItem(
            pg.BarGraphItem(x0=0, y=ys, height=0.6, width=widths, brush=BAR_BRUSH, pen=None)
        )
        for y, width in zip(ys, widths, strict=True):
            text = pg.TextItem(f"{width:.0%}", color=TEXT_COLOR, anchor=(0, 0.5))
            text.setPos(width, y)
            self.plot_item.addItem(text)
        left.setTicks([[(y, name) for y, name in zip(ys, names, strict=True)]])
        self.plot_item.setXRange(0, max(float(widths.max()), 0.05) * 1.2, padding=0)
        self.plot_item.setYRange(-0.6, len(names) - 0.4, padding=0)


def _short_names(paths: list[str]) -> list[str]:
    """Each dotted path by its shortest ending that no other path shares
    (``learning_rate``, ``layers.0.units`` beside ``layers.2.units``)."""
    short = []
    for path in paths:
        parts = path.split(".")
        for size in range(1, len(parts) + 1):
            tail = ".".join(parts[-size:])
            if sum(1 for other in paths if other == tail or other.endswith(f".{tail}")) == 1:
                break
        short.append(tail)
    return short
