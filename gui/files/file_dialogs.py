"""Every file dialog of the window starts where the last dialog *for the same purpose* ended.

Open started beside the project, Export Plot in the project's folder, Export Metrics
in the home folder, Try It and Import TF_CONFIG in the working directory: each a
different place to find again. One folder for all of them was no better: a Save
Project dialog offered a class folder of the training data. Now each dialog names its
:class:`Purpose` (projects, data, exports) and starts where the last dialog of that
purpose ended (remembered across sessions); a purpose not used yet starts in the
projects' folder, else the home folder; a save suggests its file name there.
"""

from __future__ import annotations

import enum
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from ..common import settings


class Purpose(enum.Enum):
    """What a dialog picks, and so which remembered folder it starts in."""

    PROJECTS = "projects"
    """Project files, studies, and the settings files a project names (TF_CONFIG, ssh)."""
    DATA = "data"
    """Training data (a data path's Browse) and the inputs Try It predicts."""
    EXPORTS = "exports"
    """What Distloop writes out: plots, scripts, metrics, a cluster's setup, a job folder."""


def last_folder(purpose: Purpose) -> Path:
    """Where the last dialog for ``purpose`` ended, else the projects', else the home folder."""
    return (
        settings.last_folder(purpose.value)
        or settings.last_folder(Purpose.PROJECTS.value)
        or Path.home()
    )


def open_file(
    parent: QWidget, title: str, file_filter: str, purpose: Purpose, start: Path | None = None
) -> Path | None:
    """One existing file, or None if the user cancels. ``start``: a better first place."""
    chosen, _ = QFileDialog.getOpenFileName(
        parent, title, str(start or last_folder(purpose)), file_filter
    )
    return _remembered(chosen, purpose)


def open_files(parent: QWidget, title: str, file_filter: str, purpose: Purpose) -> list[Path]:
    chosen, _ = QFileDialog.getOpenFileNames(parent, title, str(last_folder(purpose)), file_filter)
    if chosen:
        settings.remember_folder(purpose.value, Path(chosen[0]).parent)
    return [Path(name) for name in chosen]


def save_file(
    parent: QWidget, title: str, name: str, file_filter: str, purpose: Purpose
) -> tuple[Path, str] | None:
    """Where to save (the file, the filter chosen), offering ``name`` in the last folder."""
    chosen, chosen_filter = QFileDialog.getSaveFileName(
        parent, title, str(last_folder(purpose) / name), file_filter
    )
    path = _remembered(chosen, purpose)
    return None if path is None else (path, chosen_filter)


def choose_folder(
    parent: QWidget, title: str, purpose: Purpose, start: Path | None = None
) -> Path | None:
    """A folder, or None if the user cancels. ``start``: a better first place."""
    chosen = QFileDialog.getExistingDirectory(parent, title, str(start or last_folder(purpose)))
    if not chosen:
        return None
    settings.remember_folder(purpose.value, Path(chosen))
    return Path(chosen)


def _remembered(chosen: str, purpose: Purpose) -> Path | None:
    if not chosen:
        return None
    settings.remember_folder(purpose.value, Path(chosen).parent)
    return Path(chosen)
