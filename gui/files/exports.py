"""Files the window writes for the user: a run's metrics, the plot, the project as a script.

Every export replaces its target in one step (a temporary file renamed over it),
so a full disk or a crash never leaves half a CSV or a truncated PNG where the
user expects a whole one. The ``save_*_as`` flows ask for the file themselves
and report failures in a message box, so the window only has to call them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

import pyqtgraph as pg
from pyqtgraph.exporters import ImageExporter
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPoint, QRectF, QSaveFile
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QWidget

from ...engine.config import Project
from ...engine.fileio import atomic_write_text, open_bytes
from ...engine.run_folder import EVAL_FILE, METRICS_FILE
from ...engine.script_export import ExportError, render_script
from ..common import dialogs
from . import file_dialogs

IMAGE_SUFFIXES = (".png", ".svg")
PLOT_FILTER = "PNG image (*.png);;SVG image (*.svg)"
CSV_FILTER = "CSV files (*.csv);;All files (*)"
SCRIPT_FILTER = "Python scripts (*.py);;All files (*)"
MIN_IMAGE_WIDTH = 1200  # pixels: sharp in a report even when the plot is small on screen


def copy_metrics(run_dir: Path, target: Path) -> None:
    """Writes the run's ``metrics.csv`` to ``target`` with its evaluations' columns
    (``eval.csv``: val_loss, val_accuracy, ...) joined at their steps and empty at the
    others: the export held the training loss only. A run that never evaluated is copied
    byte for byte. Links are never followed."""
    with open_bytes(run_dir / METRICS_FILE) as source:
        metrics = source.read()
    try:
        with open_bytes(run_dir / EVAL_FILE) as source:
            evaluations = source.read()
    except FileNotFoundError:
        _write_bytes(target, metrics)
        return
    _write_bytes(target, with_evaluations(metrics, evaluations))


def with_evaluations(metrics: bytes, evaluations: bytes) -> bytes:
    """``metrics.csv``'s lines, each followed by the evaluation columns of its step."""
    rows = metrics.decode("utf-8").splitlines()
    evaluated = evaluations.decode("utf-8").splitlines()
    if not rows or not evaluated:
        return metrics
    names = evaluated[0].split(",")[1:]  # after "step"
    at_step = {_step(line): line.split(",", 1)[1] if "," in line else "" for line in evaluated[1:]}
    empty = "," * (len(names) - 1)
    joined = [f"{rows[0]},{','.join(names)}"]
    joined += [f"{row},{at_step.get(_step(row), empty)}" for row in rows[1:] if row]
    return ("\n".join(joined) + "\n").encode("utf-8")


def _step(line: str) -> str:
    """A row's step as both files write it (``500``; ``500.0`` read as the same)."""
    cell = line.split(",", 1)[0]
    try:
        return str(int(float(cell)))
    except ValueError:
        return cell


def export_plot(plot_item: pg.PlotItem, target: Path) -> None:
    """Writes the plot as PNG or SVG, chosen by ``target``'s suffix.

    Raises ValueError for another suffix and OSError when the file cannot be written.
    """
    suffix = target.suffix.lower()
    if suffix == ".svg":
        _write_bytes(target, _svg_bytes(plot_item))
    elif suffix == ".png":
        exporter = ImageExporter(plot_item)
        width = max(int(plot_item.sceneBoundingRect().width()), MIN_IMAGE_WIDTH)
        exporter.parameters()["width"] = width
        _write_bytes(target, _png_bytes(exporter.export(toBytes=True)))
    else:
        raise ValueError(f"plots export as {' or '.join(IMAGE_SUFFIXES)}, not {suffix or '?'}")


def export_widget(widget: QWidget, target: Path) -> None:
    """Writes a widget as it looks on screen (a table) as PNG or SVG, by ``target``'s suffix.

    Raises ValueError for another suffix and OSError when the file cannot be written.
    """
    suffix = target.suffix.lower()
    if suffix == ".png":
        _write_bytes(target, _png_bytes(widget.grab().toImage()))
        return
    if suffix != ".svg":
        raise ValueError(f"views export as {' or '.join(IMAGE_SUFFIXES)}, not {suffix or '?'}")
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(widget.size())
    generator.setViewBox(widget.rect())
    generator.setTitle(f"Distloop {widget.windowTitle() or 'view'}")
    painter = QPainter(generator)
    try:
        widget.render(painter, QPoint())
    finally:
        painter.end()
    buffer.close()
    _write_bytes(target, bytes(data.data()))


class Plot(Protocol):
    """A plot that can be saved: the loss plot, a study's plots."""

    plot_item: pg.PlotItem

    def redraw(self) -> None:
        """Draws what arrived since the last timer tick."""


def save_plot_as(parent: QWidget, plot: Plot) -> Path | None:
    """Asks where to save the plot (PNG or SVG) and writes it; returns the file written."""
    answer = file_dialogs.save_file(
        parent, "Export plot", "loss.png", PLOT_FILTER, file_dialogs.Purpose.EXPORTS
    )
    if answer is None:
        return None
    target, chosen_filter = answer
    if target.suffix.lower() not in IMAGE_SUFFIXES:
        target = target.with_name(target.name + (".svg" if "svg" in chosen_filter else ".png"))
    plot.redraw()  # what arrived since the last timer tick belongs in the picture too
    try:
        export_plot(plot.plot_item, target)
    except OSError as exc:
        dialogs.show_error(parent, "Cannot export the plot", f"Writing {target} failed: {exc}")
        return None
    return target


def save_script_as(parent: QWidget, project: Project) -> Path | None:
    """Renders the project as a standalone TensorFlow script, asks where, and writes it.

    The script is rendered first, so a project a script cannot reproduce is
    explained before the user picks a file.
    """
    try:
        script = render_script(project)
    except ExportError as exc:
        dialogs.show_error(parent, "Cannot export as script", str(exc))
        return None
    slug = re.sub(r"[^a-z0-9]+", "_", project.name.lower()).strip("_") or "train"
    answer = file_dialogs.save_file(
        parent, "Export as script", f"{slug}.py", SCRIPT_FILTER, file_dialogs.Purpose.EXPORTS
    )
    if answer is None:
        return None
    chosen, _ = answer
    target = chosen if chosen.suffix else chosen.with_suffix(".py")
    try:
        atomic_write_text(target, script)
    except OSError as exc:
        dialogs.show_error(parent, "Cannot export as script", f"Writing {target} failed: {exc}")
        return None
    return target


def _png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise OSError("the plot could not be encoded as PNG")
    buffer.close()
    return bytes(data.data())


def _svg_bytes(plot_item: pg.PlotItem) -> bytes:
    """The plot drawn by Qt's SVG generator, on the plot's white background.

    Not pyqtgraph's SVGExporter: with Qt 6 it fails on every closed path (the
    view box's outline, round symbols; pyqtgraph issue 3495).
    """
    source = plot_item.sceneBoundingRect()
    target = QRectF(0, 0, source.width(), source.height())
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(source.size().toSize())
    generator.setViewBox(target)
    generator.setTitle("Distloop loss plot")
    painter = QPainter(generator)
    try:
        painter.fillRect(target, QColor("white"))
        plot_item.scene().render(painter, target, source)
    finally:
        painter.end()
    buffer.close()
    return bytes(data.data())


def _write_bytes(target: Path, payload: bytes) -> None:
    """Qt's atomic file: written beside ``target`` and renamed over it on commit."""
    file = QSaveFile(str(target))
    if not file.open(QIODevice.OpenModeFlag.WriteOnly):
        raise OSError(f"cannot write {target}: {file.errorString()}")
    file.write(payload)
    if not file.commit():
        raise OSError(f"cannot write {target}: {file.errorString()}")
