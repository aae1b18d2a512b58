"""Every file dialog of the window starts in one folder: the last one a dialog ended in.

Open started beside the project, Export Plot in the project's folder, Export Metrics
in the home folder, Try It and Import TF_CONFIG in the working directory: each a
different place to find again. Now each starts where the user last picked a file
or folder, in any of them (remembered across sessions), and a save suggests its
file name there.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from ..shell import settings


def open_file(
    parent: QWidget, title: str, file_filter: str, start: Path | None = None
) -> Path | None:
    """One existing file, or None if the user cancels. ``start``: a better first place."""
    chosen, _ = QFileDialog.getOpenFileName(
        parent, title, str(start or settings.last_folder()), file_filter
    )
    return _remembered(chosen)


def open_files(parent: QWidget, title: str, file_filter: str) -> list[Path]:
    chosen, _ = QFileDialog.getOpenFileNames(
        parent, title, str(settings.last_folder()), file_filter
    )
    if chosen:
        settings.remember_folder(Path(chosen[0]).parent)
    return [Path(name) for name in chosen]


def save_file(parent: QWidget, title: str, name: str, file_filter: str) -> tuple[Path, str] | None:
    """Where to save (the file, the filter chosen), offering ``name`` in the last folder."""
    chosen, chosen_filter = QFileDialog.getSaveFileName(
        parent, title, str(settings.last_folder() / name), file_filter
    )
    path = _remembered(chosen)
    return None if path is None else (path, chosen_filter)


def choose_folder(parent: QWidget, title: str, start: Path | None = None) -> Path | None:
    """A folder, or None if the user cancels. ``start``: a better first place."""
    chosen = QFileDialog.getExistingDirectory(parent, title, str(start or settings.last_folder()))
    if not chosen:
        return None
    settings.remember_folder(Path(chosen))
    return Path(chosen)


def _remembered(chosen: str) -> Path | None:
    if not chosen:
        return None
    settings.remember_folder(Path(chosen).parent)
    return Path(chosen)
