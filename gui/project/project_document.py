"""The project being edited: its file, whether it changed, and its validation.

Kept out of the main window so the window only wires views to it. The forms hold the
project's values (the document reads them through the editor); the document knows where
they came from and where they go: the file's path (the base of the project's relative
paths), what was last saved (to tell whether the user would lose anything), the recent
files, and every way a project replaces the forms' content (New, Open, an example, the
startup project), each asking about unsaved changes first, and what the project becomes
besides its file (a script, its JSON text, a cluster's setup). Saving writes atomically, so a
failed save never leaves half a project file where the user's was.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication, QMenu, QWidget

from ...engine.config import Project
from ...engine.devices import DetectedDevices
from ...engine.examples import load_example
from ...engine.fileio import atomic_write_text
from ...engine.problems import ProblemsError
from ...engine.project_file import load_project
from ...engine.validation import Validation, differences, validate
from ..common import dialogs, settings
from ..files import file_dialogs
from ..files.export_dialog import ExportDialog
from ..files.exports import save_script_as
from ..files.folder_scans import FolderScans
from .project_editor import ProjectEditor

FILE_FILTER = "Distloop projects (*.json);;All files (*)"
STARTER_EXAMPLE = "seed"


class ProjectDocument(QObject):
    """One project at a time, edited in ``editor``; dialogs open over ``window``."""

    validated = Signal(object)  # Validation: after every edit, load, save and folder scan
    replaced = Signal()  # another project is in the forms (New, Open, an example)
    title_changed = Signal(str, bool)  # the document's title, and whether it has changes
    reported = Signal(str)  # a short report for the status bar ("Saved …", "Exported …")
    warning = Signal(str)  # something the user should know, for the log

    def __init__(self, editor: ProjectEditor, window: QWidget) -> None:
        super().__init__(window)
        self._editor = editor
        self._window = window
        self._path: Path | None = None
        self._title = ""
        self._saved_data: dict[str, object] = {}
        self._validation = Validation(None)
        self.folders = FolderScans(self)
        self.folders.landed.connect(self.revalidate)
        self._detected: DetectedDevices | None = None
        editor.devices_detected.connect(self._on_devices_detected)

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def validation(self) -> Validation:
        return self._validation

    def is_modified(self) -> bool:
        return self._editor.data() != self._saved_data

    def base_dir(self) -> Path:
        """Where the project's relative paths start: its file's folder, else the working one."""
        return self._path.parent if self._path else Path.cwd()

    def project_dir(self) -> Path | None:
        """The project file's folder (custom code outside it is pointed out); None if unsaved."""
        return self._path.parent if self._path else None

    def valid_project(self, title: str, why: str) -> Project | None:
        """The project, or None after showing the problems under ``title``, ``why`` first."""
        project = self._validation.project
        if project is None:
            dialogs.show_problems(self._window, title, why, self._validation.problems)
        return project

    def revalidate(self, at_once: bool = False) -> None:
        """Runs the engine's loader on the forms' content; the views follow the signals.

        Data folders are scanned off the event loop once edits pause (``at_once``: now,
        for a project just put in the forms); their problems come with a later call.
        """
        self._validation = validate(
            self._editor.data(),
            self.base_dir(),
            self.folders,
            at_once=at_once,
            detected=self._detected,
        )
        self.validated.emit(self._validation)
        self.title_changed.emit(self._title, self.is_modified())

    def _on_devices_detected(self, found: DetectedDevices) -> None:
        """Detect devices' answer: from now on a device this machine lacks is a problem
        before Run, not a failure after TensorFlow has started."""
        self._detected = found
        self.revalidate()

    def set_project(self, project: Project, path: Path | None, title: str) -> None:
        """Puts ``project`` in the forms as the saved state of ``path`` (None: not saved)."""
        self._editor.set_project(project)
        self._path = path
        self._title = title
        self._saved_data = self._editor.data()
        self.replaced.emit()
        self.revalidate(at_once=True)
        shown = self._validation.project
        changed = differences(
            shown.model_dump(mode="json") if shown else {}, project.model_dump(mode="json")
        )
        if changed:
            self.warning.emit(
                "these values are outside what the forms can show and were changed: "
                + ", ".join(changed)
            )

    def maybe_save(self) -> bool:
        """Asks about unsaved changes; False means the user cancelled."""
        if not self.is_modified():
            return True
        answer = dialogs.ask_unsaved(self._window, self._title)
        if answer is dialogs.Unsaved.SAVE:
            return self.save()
        return answer is dialogs.Unsaved.DISCARD

    def start(self) -> None:
        """The seed example, as the project the window opens with."""
        self.set_project(load_example(STARTER_EXAMPLE), None, STARTER_EXAMPLE)

    def new(self) -> None:
        if not self.maybe_save():
            return
        seed = load_example(STARTER_EXAMPLE)
        project = seed.model_copy(update={"name": "Untitled", "description": ""})
        self.set_project(project, None, "Untitled")

    def open_example(self, name: str) -> None:
        if self.maybe_save():
            self.set_project(load_example(name), None, name)

    def open(self, path: str | Path | None = None) -> bool:
        """Opens a project file; a bad one is reported and the current project stays."""
        if not self.maybe_save():
            return False
        if path is None:
            path = file_dialogs.open_file(
                self._window, "Open project", FILE_FILTER, file_dialogs.Purpose.PROJECTS
            )
            if path is None:
                return False
        path = Path(path)
        try:
            project = load_project(path)
        except ProblemsError as exc:
            count = len(exc.problems)
            dialogs.show_problems(
                self._window,
                "Cannot open project",
                f"{path.name} has {count} problem{'s' if count != 1 else ''}; "
                "the current project is unchanged.",
                exc.problems,
            )
            if not path.is_file():
                settings.remove_recent_file(path)
            return False
        self.set_project(project, path, path.name)
        settings.add_recent_file(path)
        settings.set_last_project(path)
        return True

    def open_startup(self, path: str | None) -> None:
        """The project named on the command line, else the last one, else the seed."""
        if path:
            self.open(path)
            return
        last = settings.last_project()
        if last is None:
            return
        try:
            self.set_project(load_project(last), last, last.name)
        except ProblemsError as exc:
            self.warning.emit(f"the last project could not be reopened: {exc}")

    def save(self) -> bool:
        return self._write(self._path) if self._path else self.save_as()

    def save_as(self) -> bool:
        name = self._path.name if self._path else f"{self._title or 'project'}.json"
        answer = file_dialogs.save_file(
            self._window, "Save project", name, FILE_FILTER, file_dialogs.Purpose.PROJECTS
        )
        if answer is None:
            return False
        path, _ = answer
        return self._write(path if path.suffix else path.with_suffix(".json"))

    def _write(self, path: Path) -> bool:
        project = self.valid_project(
            "Cannot save",
            "A project file must be valid so every tool can read it; fix these first.",
        )
        if project is None:
            return False
        try:
            atomic_write_text(path, project.to_json())
        except OSError as exc:
            dialogs.show_error(self._window, "Cannot save", f"Saving {path} failed: {exc}")
            return False
        self._path = path
        self._title = path.name
        self._saved_data = self._editor.data()
        settings.add_recent_file(path)
        settings.set_last_project(path)
        self.revalidate(at_once=True)
        self.reported.emit(f"Saved {path}")
        return True

    def fill_recent_menu(self, menu: QMenu) -> None:
        """Filled as it opens, so files opened in another Distloop window are listed too."""
        menu.clear()
        files = settings.recent_files()
        for index, file in enumerate(files, start=1):
            action = menu.addAction(f"&{index} {file}")
            action.triggered.connect(lambda _checked=False, f=file: self.open(f))
        if files:
            menu.addSeparator()
        clear = menu.addAction("Clear Recent Files")
        clear.setEnabled(bool(files))
        clear.triggered.connect(settings.clear_recent_files)

    def export_script(self) -> None:
        """File ▸ Export as Script: the project as a program that trains without Distloop."""
        project = self.valid_project(
            "Cannot export as script",
            "The script is made from the project, so it must be valid; fix these first.",
        )
        if project is None:
            return
        project = project.resolve_paths(self.base_dir())
        written = save_script_as(self._window, project)
        if written is not None:
            self.reported.emit(f"Exported {written}")

    def copy_json(self) -> None:
        """The project file's text, ready to paste into an issue or a chat."""
        project = self._validation.project
        if project is None:
            self.reported.emit(f"Not copied: {self._validation.summary()}")
            return
        QApplication.clipboard().setText(project.to_json())
        self.reported.emit("Copied the project as JSON")

    def export_cluster_setup(self) -> None:
        """File ▸ Export Cluster Setup: the files that start this cluster on real hosts."""
        project = self.valid_project(
            "Cannot export the cluster setup",
            "The export includes the project, so it must be valid; fix these first.",
        )
        if project is None:
            return
        base = self.base_dir()
        ExportDialog(project.resolve_paths(base), base, self._window).exec()
