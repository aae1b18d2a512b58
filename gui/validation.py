"""Judging the forms' content exactly as the CLI judges a project file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.config import Project, load_project_data, uneven_batch_warnings
from ..engine.datasets import project_folder_problems
from ..engine.model_shapes import model_file_problems
from ..engine.problems import Problem, ProblemsError
from .folder_scans import FolderScans


@dataclass(frozen=True)
class Validation:
    """The project the forms describe, or the problems that keep it from being one."""

    project: Project | None
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checking: list[str] = field(default_factory=list)
    """Folder fields (``data.path``) whose folder is still being scanned: not judged yet."""

    @property
    def valid(self) -> bool:
        """Runnable: a project (which can be saved) and nothing in the way of a run, such
        as a data folder that is missing or holds one class, or still being scanned."""
        return self.project is not None and not self.problems and not self.checking

    def summary(self) -> str:
        """The status line's words: why Run is disabled, or that it is not."""
        if self.valid:
            return "Ready to run"
        if not self.problems:
            return f"Checking {', '.join(self.checking)}…"
        count = len(self.problems)
        return f"Cannot run: {count} problem{'s' if count != 1 else ''}"


def validate(
    data: dict[str, Any],
    base_dir: Path | None = None,
    folders: FolderScans | None = None,
    *,
    at_once: bool = False,
) -> Validation:
    """Runs the engine's own loader on the forms' dict: same rules, same messages.

    With ``base_dir`` (where relative paths start) and ``folders`` (the scans made off
    the event loop), data folders and model files are checked too, as ``distloop
    validate`` checks them: their problems keep the project from running, not from being
    saved. A folder not scanned yet is asked for (now with ``at_once``, else once edits
    pause) and listed in :attr:`Validation.checking`.
    """
    try:
        project = load_project_data(data, "the project")
    except ProblemsError as exc:
        return Validation(None, exc.problems)
    notes = uneven_batch_warnings(project)
    if base_dir is None or folders is None:
        return Validation(project, [], notes)
    resolved = project.resolve_paths(base_dir)
    files = model_file_problems(resolved.model)
    checking = folders.missing(resolved, at_once=at_once)
    if not checking:
        files = project_folder_problems(resolved, folders.cached) + files
    return Validation(project, files, notes, checking)


def differences(shown: Any, loaded: Any, path: str = "") -> list[str]:
    """Paths where the forms show something else than the file holds.

    A spin box holds 32-bit integers and twelve decimals; a file may hold more.
    Listing what changed on loading keeps such a change from passing unnoticed.
    """
    if isinstance(shown, dict) and isinstance(loaded, dict):
        return [
            found
            for key in sorted(shown.keys() | loaded.keys())
            for found in differences(shown.get(key), loaded.get(key), f"{path}.{key}".lstrip("."))
        ]
    if isinstance(shown, list) and isinstance(loaded, list) and len(shown) == len(loaded):
        return [
            found
            for index, (a, b) in enumerate(zip(shown, loaded, strict=True))
            for found in differences(a, b, f"{path}.{index}")
        ]
    return [] if shown == loaded else [path or "(project)"]
