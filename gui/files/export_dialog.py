"""File ▸ Export Cluster Setup: the project's cluster as files for real hosts.

A local cluster only tries a project out; a real one needs each host to start its
tasks with the right TF_CONFIG. This dialog writes those files with
:func:`engine.export.export_cluster` (the same code as ``distloop export``), offering
every format ``engine.exports`` registers with its own description and options, from
the project as the forms show it, whose ``tf_config`` is the TF_CONFIG tab's.
It stays open after writing, listing the files, so the user can export another
format, and it always shows the security note: the exported cluster's gRPC
servers accept anyone who can reach them. Beside it, as the format and volumes
change, it says what the hosts or pods need (:func:`engine.exports.storage.storage_notes`):
the project's local paths copied blindly into ``project.json`` found nothing there,
and a Kubernetes run folder without a runs volume went with its pod.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ...engine.config import Project
from ...engine.export import export_cluster
from ...engine.exports import FORMATS, format_named, pod_formats
from ...engine.exports.base import SECURITY_NOTE
from ...engine.exports.pods import DEFAULT_IMAGE
from ...engine.exports.storage import storage_notes, volume_name_problem
from ...engine.problems import Problem, ProblemsError
from ...engine.tf_config import MULTI_MACHINE_STRATEGIES
from . import file_dialogs

NOTE_STYLE = "color: #8a4b00;"
DESCRIPTION_WIDTH = 420
"""Pixels a format's description is measured at for the height it keeps: narrower than the
dialog's field column at its size, so the longest one fits in the lines kept for it."""
ERROR_COLOR = "#c62828"
INVALID_STYLE = f"border: 1px solid {ERROR_COLOR};"


def cluster_problems(project: Project, fmt: str) -> list[Problem]:
    """Why there is no cluster to export yet, in the window's terms (empty: try it)."""
    kind = project.strategy.kind
    if kind not in MULTI_MACHINE_STRATEGIES:
        return [
            Problem(
                ("strategy", "kind"),
                f"a cluster setup is for {' and '.join(MULTI_MACHINE_STRATEGIES)} projects, "
                f"not {kind}: choose one in the Strategy tab",
            )
        ]
    if project.tf_config is None and format_named(fmt).needs_tf_config:
        return [
            Problem(
                ("tf_config",),
                "the project has no TF_CONFIG: give the cluster's hosts in the TF_CONFIG tab",
            )
        ]
    return []


class ExportDialog(QDialog):
    """Format, folder and image in; the written files (or every problem) out."""

    def __init__(self, project: Project, base_dir: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export Cluster Setup")
        self._project = project
        self._base_dir = base_dir
        self._folder_chosen = False
        self.written: list[Path] = []

        self.cluster_label = QLabel(self._describe_cluster())
        self.cluster_label.setWordWrap(True)
        self.format_combo = QComboBox()
        for fmt in FORMATS:
            self.format_combo.addItem(fmt, fmt)
            self.format_combo.setItemData(
                self.format_combo.count() - 1,
                format_named(fmt).description,
                Qt.ItemDataRole.ToolTipRole,
            )
        self.format_description = QLabel()
        self.format_description.setStyleSheet("color: #555555;")
        # Wrapped, and as tall as the longest description: slurm's one line widened the
        # dialog from 680 to 898 px, and every format change re-laid it out.
        self.format_description.setWordWrap(True)
        self.format_description.setMinimumHeight(
            max(
                self.fontMetrics()
                .boundingRect(0, 0, DESCRIPTION_WIDTH, 0, Qt.TextFlag.TextWordWrap, text)
                .height()
                for text in (format_named(fmt).description for fmt in FORMATS)
            )
        )
        format_column = QVBoxLayout()
        format_column.addWidget(self.format_combo)
        format_column.addWidget(self.format_description)
        self.folder_edit = QLineEdit()
        self.folder_edit.textEdited.connect(self._on_folder_edited)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._on_browse)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.folder_edit, 1)
        folder_row.addWidget(browse)
        self.image_edit = QLineEdit(DEFAULT_IMAGE)
        self.image_edit.setToolTip(
            "A container image with Distloop installed; the pods run distloop from it"
        )
        self.runs_volume_edit = self._volume_edit(
            "A PersistentVolumeClaim for the run folders (model.keras, checkpoints, metrics), "
            "which then stay after the pods end; empty: an emptyDir, lost with the pod"
        )
        self.data_volume_edit = self._volume_edit(
            "A PersistentVolumeClaim holding the files the project reads, mounted read-only; "
            "the exported project.json reads them from it"
        )
        form = QFormLayout()
        form.addRow("Format:", format_column)
        form.addRow("Output folder:", folder_row)
        form.addRow("Image:", self.image_edit)
        form.addRow("Runs volume:", self.runs_volume_edit)
        form.addRow("Data volume:", self.data_volume_edit)
        self.notes_label = QLabel()
        self.notes_label.setWordWrap(True)
        self.notes_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notes_label.setStyleSheet(NOTE_STYLE)

        self.security_label = QLabel(SECURITY_NOTE)
        self.security_label.setWordWrap(True)
        self.security_label.setStyleSheet(
            "color: #8a4b00; background: #fff4e5; border: 1px solid #f0b060; padding: 6px;"
        )
        self.result_label = QLabel()
        self.result_label.setWordWrap(True)
        self.result_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.files_list = QListWidget()
        self.files_list.setVisible(False)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.export_button = buttons.addButton("Export", QDialogButtonBox.ButtonRole.ActionRole)
        self.export_button.setDefault(True)
        self.export_button.clicked.connect(self.export)
        self.open_folder_button = buttons.addButton(
            "Open Folder", QDialogButtonBox.ButtonRole.ActionRole
        )
        self.open_folder_button.setEnabled(False)
        self.open_folder_button.clicked.connect(self._open_folder)
        buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addWidget(self.cluster_label)
        layout.addLayout(form)
        layout.addWidget(self.notes_label)
        layout.addWidget(self.security_label)
        layout.addWidget(self.result_label)
        layout.addWidget(self.files_list, 100)
        # Spare height goes here while the list is hidden, not to the labels above (the
        # cluster's description grew and shrank as a format's notes showed and hid).
        layout.addStretch(1)
        layout.addWidget(buttons)
        self.format_combo.currentIndexChanged.connect(self._on_format_changed)
        self._cluster_problems: list[Problem] = []
        self._on_format_changed()
        self.resize(680, 560)

    def _volume_edit(self, tip: str) -> QLineEdit:
        edit = QLineEdit()
        edit.setPlaceholderText("(none)")
        edit.setToolTip(f"{tip}. For the {pod_formats()} formats.")
        edit.textChanged.connect(self._show_storage)
        return edit

    # --- choices ------------------------------------------------------------------------

    def fmt(self) -> str:
        return str(self.format_combo.currentData())

    def folder(self) -> Path | None:
        text = self.folder_edit.text().strip()
        return Path(text).expanduser() if text else None

    def runs_volume(self) -> str | None:
        return self._volume(self.runs_volume_edit)

    def data_volume(self) -> str | None:
        return self._volume(self.data_volume_edit)

    def _volume(self, edit: QLineEdit) -> str | None:
        """The claim typed for a format that mounts volumes; None otherwise."""
        text = edit.text().strip()
        return text if text and format_named(self.fmt()).pods else None

    def set_folder(self, folder: str | Path) -> None:
        """A folder the user chose: it stays when the format changes."""
        self._folder_chosen = True
        self.folder_edit.setText(str(folder))

    def choose_folder(self) -> str | None:
        """The folder the user picks, or None if they cancel (a method, so tests can answer)."""
        chosen = file_dialogs.choose_folder(
            self, "Export cluster setup into", file_dialogs.Purpose.EXPORTS
        )
        return None if chosen is None else str(chosen)

    # --- writing ------------------------------------------------------------------------

    def export(self) -> list[Path]:
        """Writes the chosen format; shows the files, or why nothing was written."""
        folder = self.folder()
        if folder is None:
            self._show_error("Choose an output folder first.")
            return []
        try:
            written = export_cluster(
                self._project,
                folder,
                self.fmt(),
                image=self.image_edit.text().strip() or DEFAULT_IMAGE,
                base_dir=self._base_dir,
                runs_volume=self.runs_volume(),
                data_volume=self.data_volume(),
            )
        except ProblemsError as exc:
            self._show_problems(exc.problems)
            return []
        except ValueError as exc:  # a volume that is no Kubernetes name
            self._show_error(f"Nothing was written: {exc}.")
            return []
        except OSError as exc:
            self._show_error(f"Writing into {folder} failed: {exc}")
            return []
        self.written = written
        self.result_label.setStyleSheet("")
        self.result_label.setText(
            f"Wrote {len(written)} file(s) into {folder} ({self.fmt()}); its README.md says "
            "how to start the cluster:"
        )
        self.files_list.clear()
        self.files_list.addItems([str(path.relative_to(folder)) for path in written])
        self.files_list.setVisible(True)
        self.open_folder_button.setEnabled(True)
        return written

    def _describe_cluster(self) -> str:
        config = self._project.tf_config
        if config is None:
            return f"Project “{self._project.name}” ({self._project.strategy.kind})."
        tasks = ", ".join(f"{task} at {config.address(task)}" for task in config.tasks())
        return (
            f"Project “{self._project.name}” ({self._project.strategy.kind}), with the cluster "
            f"of its TF_CONFIG tab: {tasks}."
        )

    def _show_problems(self, problems: list[Problem]) -> None:
        listed = "\n".join(f"• {problem}" for problem in problems)
        count = len(problems)
        self._show_error(
            f"Nothing was written: the cluster has {count} problem{'s' if count != 1 else ''}:"
            f"\n{listed}"
        )

    def _show_error(self, text: str) -> None:
        self.result_label.setStyleSheet(f"color: {ERROR_COLOR};")
        self.result_label.setText(text)
        self.files_list.setVisible(False)
        self.open_folder_button.setEnabled(False)

    def _on_format_changed(self) -> None:
        fmt = self.fmt()
        export_format = format_named(fmt)
        self.format_description.setText(export_format.description)
        pods = export_format.pods
        for edit in (self.image_edit, self.runs_volume_edit, self.data_volume_edit):
            edit.setEnabled(pods)
        if not self._folder_chosen:
            self.folder_edit.setText(str(self._base_dir / f"cluster-{fmt}"))
        self._cluster_problems = cluster_problems(self._project, fmt)
        if self._cluster_problems:
            self._show_problems(self._cluster_problems)
        else:  # the last format's files are not this one's
            self.result_label.clear()
            self.result_label.setStyleSheet("")
            self.files_list.clear()
            self.files_list.setVisible(False)
            self.open_folder_button.setEnabled(False)
        self._show_storage()

    def _show_storage(self) -> None:
        """Marks a volume that is no Kubernetes name, and says what the cluster needs."""
        problems = []
        for what, edit in (
            ("Runs volume", self.runs_volume_edit),
            ("Data volume", self.data_volume_edit),
        ):
            claim = self._volume(edit)
            problem = None if claim is None else volume_name_problem(claim)
            edit.setStyleSheet(INVALID_STYLE if problem else "")
            if problem:
                problems.append(f"{what}: {problem}")
        self.export_button.setEnabled(not self._cluster_problems and not problems)
        if problems:
            self.notes_label.setStyleSheet(f"color: {ERROR_COLOR};")
            self.notes_label.setText("\n".join(problems))
        else:
            notes = storage_notes(
                self._project,
                self.fmt(),
                base_dir=self._base_dir,
                runs_volume=self.runs_volume(),
                data_volume=self.data_volume(),
            )
            self.notes_label.setStyleSheet(NOTE_STYLE)
            self.notes_label.setText("\n".join(f"• {note}" for note in notes))
        self.notes_label.setVisible(bool(self.notes_label.text()))

    def _on_folder_edited(self, _text: str) -> None:
        self._folder_chosen = True

    def _on_browse(self) -> None:
        chosen = self.choose_folder()
        if chosen:
            self.set_folder(chosen)

    def _open_folder(self) -> None:
        folder = self.folder()
        if folder is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))
