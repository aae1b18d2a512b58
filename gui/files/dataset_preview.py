"""What the data section points at, shown before a run: images with their classes, class
counts, or a CSV file's first rows.

Read without TensorFlow (the window never imports it): the folder scan is the engine's
own (``engine.data_sources.folders``), so the classes and counts shown are the ones a run trains on,
and Qt's QImage decodes the same formats ``tf.io.decode_image`` does.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...engine.config import DATA_SOURCES
from ...engine.data_sources import source_named
from ...engine.data_sources.folders import FolderError, FolderSummary
from .folder_scans import FolderScans

THUMBNAIL_PX = 56
CSV_ROWS = 10
TEXTS_PER_CLASS = 3
TEXT_CHARS = 160
HINT = "Choose Preview… on the Data tab to see the data here."


class DatasetPreview(QWidget):
    """A summary line, then a table (class counts or CSV rows), then a grid of images."""

    def __init__(self, folders: FolderScans) -> None:
        """``folders`` scans the folders previewed, as it does those validation reads."""
        super().__init__()
        self._folders = folders
        self._folders.previewed.connect(self._previewed)
        self._folders.progress.connect(self._reading)
        self._asked: tuple[str, bool, str] | None = None
        """The folder being read for the preview: its path, whether its files are images,
        and what they are called (``images``, ``text files``)."""
        self.summary = QLabel(HINT)
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = QTableWidget()
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.grid_host = QWidget()
        self.grid = QGridLayout(self.grid_host)
        self.grid.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.grid_host)
        self.images = scroll
        # Side by side: the bottom dock is wide and short, and the grid needs the height.
        body = QHBoxLayout()
        body.addWidget(self.table, 1)
        body.addWidget(self.images, 3)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.summary)
        layout.addLayout(body, 1)
        self._clear()

    def show_data(self, data: Mapping[str, Any], base_dir: Path) -> None:
        """Shows the data section ``data`` (the forms' dict), its relative paths under
        ``base_dir``."""
        self._clear()
        source, path_text = data.get("source"), str(data.get("path") or "")
        preview = source_named(source).preview if source in DATA_SOURCES else "none"
        if preview == "generated":
            self.summary.setText(f"{source} data is generated when the run starts.")
            return
        if not path_text:
            self.summary.setText(f"Choose the {source} data's path first.")
            return
        path = _resolved(path_text, base_dir)
        if preview in ("images", "texts"):
            self._show_folder(path, str(source))
        elif preview == "table":
            self._show_csv(path, str(data.get("label_column") or ""))
        else:
            self.summary.setText(f"No preview for {source} data: {path}")

    def clear(self) -> None:
        """Back to the hint: another project's data must not pass for this one's."""
        if self._asked is not None:
            self._asked = None
            self._folders.stop_preview()
        self._clear()
        self.summary.setText(HINT)

    def _clear(self) -> None:
        self.table.clear()
        self.table.setRowCount(0)
        self.table.setColumnCount(0)
        self.table.hide()
        self.images.hide()
        while self.grid.count():
            item = self.grid.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()

    def _show_folder(self, path: Path, source: str) -> None:
        """Asks for the folder's summary, made off the window's thread (listing 100,000
        files and reading each image's ends froze the window 12-16 s); its progress shows
        here until :meth:`_previewed` shows the folder."""
        found = source_named(source)
        assert found.class_folders is not None
        self._asked = (str(path), found.preview == "images", found.class_folders.files)
        self.summary.setText(f"Reading {path}…")
        self._folders.preview(str(path), found.class_folders.extensions)

    def previewing(self) -> str | None:
        """The folder being read for the preview, None when none is."""
        return None if self._asked is None else self._asked[0]

    def stop_unless(self, data: Mapping[str, Any], base_dir: Path) -> None:
        """The forms changed: a folder still being read for the preview that they no longer
        name is not read on (it would show a folder the user left)."""
        if self._asked is None:
            return
        path_text = str(data.get("path") or "")
        if path_text and str(_resolved(path_text, base_dir)) == self._asked[0]:
            return
        self._asked = None
        self._folders.stop_preview()
        self.summary.setText(f"The path changed: {HINT[0].lower()}{HINT[1:]}")

    def _reading(self, text: str) -> None:
        """The scan's progress (``scanning /data… 12,345 files``) while the preview waits."""
        if self._asked is not None and text:
            self.summary.setText(text)

    def _previewed(self, path: str, summary: FolderSummary | FolderError) -> None:
        if self._asked is None or self._asked[0] != path:
            return
        _, images, kind = self._asked
        self._asked = None
        if isinstance(summary, FolderError):
            self.summary.setText(str(summary))
            return
        self.summary.setText(
            f"{path}: {sum(summary.counts)} {kind} in {_counted(len(summary.classes), 'class')}"
            + (
                f"; {_counted(summary.other_count, 'other file')} not read"
                if summary.other_count
                else ""
            )
            + (_unreadable_text(summary) if images else "")
        )
        self.table.setColumnCount(3)
        self.table.setHorizontalHeaderLabels(["Label", "Class", kind.capitalize()])
        self.table.setRowCount(len(summary.classes))
        for row, (name, count) in enumerate(zip(summary.classes, summary.counts, strict=True)):
            for column, value in enumerate((str(row), name, str(count))):
                self.table.setItem(row, column, QTableWidgetItem(value))
        self.table.show()
        if any(summary.examples) and images:
            self._show_images(summary)
        elif any(summary.examples):
            self._show_texts(summary)

    def _show_texts(self, summary: FolderSummary) -> None:
        """The start of each class's first texts, one row each, the class named first."""
        row = 0
        for label, files in enumerate(summary.examples):
            for file in files[:TEXTS_PER_CLASS]:
                try:
                    with file.open(encoding="utf-8", errors="replace") as handle:
                        text = " ".join(handle.read(TEXT_CHARS).split())
                except OSError as exc:
                    text = f"(cannot be read: {exc.strerror or exc})"
                name = QLabel(f"<b>{summary.classes[label]}</b>")
                name.setToolTip(str(file))
                self.grid.addWidget(name, row, 0)
                shown = QLabel(text)
                shown.setTextFormat(Qt.TextFormat.PlainText)
                self.grid.addWidget(shown, row, 1)
                row += 1
        self.images.show()

    def _show_images(self, summary: FolderSummary) -> None:
        """The first images of each class, one row per class, each captioned with its class."""
        for row, files in enumerate(summary.examples):
            for column, file in enumerate(files):
                self.grid.addWidget(_thumbnail(file, summary.classes[row]), row, column)
        self.images.show()

    def _show_csv(self, path: Path, label_column: str) -> None:
        try:
            with path.open(encoding="utf-8-sig", newline="") as handle:
                rows = list(itertools.islice(csv.reader(handle), CSV_ROWS + 1))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            self.summary.setText(f"cannot read {path}: {exc}")
            return
        if not rows:
            self.summary.setText(f"{path} is empty")
            return
        header, body = rows[0], rows[1:]
        label = f"; label column {label_column!r}" if label_column in header else ""
        self.summary.setText(f"{path}: first {len(body)} row(s), {len(header)} column(s){label}")
        self.table.setColumnCount(len(header))
        self.table.setHorizontalHeaderLabels(header)
        self.table.setRowCount(len(body))
        for row, values in enumerate(body):
            for column, value in enumerate(values[: len(header)]):
                self.table.setItem(row, column, QTableWidgetItem(value))
        self.table.show()


def _counted(count: int, noun: str) -> str:
    """``1 class``, ``3 classes``: the preview's counts in plain words, not "class(es)"."""
    plural = noun + ("es" if noun.endswith("s") else "s")
    return f"{count:,} {noun if count == 1 else plural}"


def _resolved(path_text: str, base_dir: Path) -> Path:
    """The forms' path as the preview reads it: relative ones under the project's folder."""
    path = Path(path_text).expanduser()
    return path if path.is_absolute() else base_dir / path


def _unreadable_text(summary: FolderSummary) -> str:
    """The images a run would fail on or skip (data.on_bad_file), found before the run: the
    grid shows only each class's first few. The scan read each file's ends for it."""
    if not summary.unreadable:
        return ""
    (path, why), count = summary.unreadable[0], summary.unreadable_count
    more = f" and {count - 1} more" if count > 1 else ""
    return f"; {count} unreadable (see On bad file): {path.relative_to(summary.root)} {why}{more}"


def _thumbnail(file: Path, class_name: str) -> QWidget:
    """One image scaled to fit a square (pixelated when small, as it trains), its class
    under it; an unreadable file says so instead of an image."""
    cell = QWidget()
    layout = QVBoxLayout(cell)
    layout.setContentsMargins(1, 1, 1, 1)
    layout.setSpacing(0)
    picture = QLabel()
    picture.setFixedSize(THUMBNAIL_PX, THUMBNAIL_PX)
    picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
    image = QImage(str(file))
    if image.isNull():
        picture.setText("unreadable")
        picture.setStyleSheet("color: #b00020; border: 1px solid #ccc;")
    else:
        scaled = image.scaled(
            THUMBNAIL_PX,
            THUMBNAIL_PX,
            Qt.AspectRatioMode.KeepAspectRatio,
            Qt.TransformationMode.FastTransformation,
        )
        picture.setPixmap(QPixmap.fromImage(scaled))
    picture.setToolTip(str(file))
    caption = QLabel(class_name)
    caption.setAlignment(Qt.AlignmentFlag.AlignCenter)
    caption.setMaximumWidth(THUMBNAIL_PX)
    layout.addWidget(picture)
    layout.addWidget(caption)
    return cell
