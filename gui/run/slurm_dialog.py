"""Submit to Slurm: the job's shape (nodes, tasks per node, partition, time) and its folder.

The same fields as ``distloop submit``'s flags, checked by the same rules
(:meth:`engine.exports.slurm.SlurmJob.problems`) as they are typed, so OK is offered
only for a job ``sbatch`` would be given. The job's folder must be on a file system every node
sees: the tasks write the run folder there, and the window follows the chief's messages
from it.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ...engine.exports.slurm import SlurmJob
from ..files import file_dialogs


class SlurmDialog(QDialog):
    """The job to submit; :meth:`job` and :meth:`folder` once accepted."""

    def __init__(
        self, strategy_kind: str, tasks: int, folder: Path, parent: QWidget | None = None
    ) -> None:
        """``tasks``: the project's cluster's (one node each, as ``distloop submit`` does)."""
        super().__init__(parent)
        self.setWindowTitle("Submit to Slurm")
        self._kind = strategy_kind
        self.nodes = QSpinBox()
        self.nodes.setRange(1, 10_000)
        self.nodes.setValue(max(tasks, 1))
        self.nodes.setToolTip("sbatch --nodes: the tasks fill the nodes in order")
        self.tasks_per_node = QSpinBox()
        self.tasks_per_node.setRange(1, 1024)
        self.tasks_per_node.setToolTip("sbatch --ntasks-per-node: one TensorFlow task each")
        self.partition = QLineEdit()
        self.partition.setPlaceholderText("the cluster's default")
        self.partition.setToolTip("sbatch --partition")
        self.time = QLineEdit()
        self.time.setPlaceholderText("the partition's limit (e.g. 90, 1:30:00, 2-0)")
        self.time.setToolTip(
            "sbatch --time: near it, Slurm's warning (--signal=TERM@120) stops every task at "
            "one step with a checkpoint"
        )
        self.folder_edit = QLineEdit(str(folder))
        self.folder_edit.setToolTip(
            "The job's folder (slurm.sbatch, the job's output, runs/<job id>/): on a file "
            "system every node sees"
        )
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.folder_edit, 1)
        folder_row.addWidget(browse)
        form = QFormLayout()
        form.addRow("Nodes:", self.nodes)
        form.addRow("Tasks per node:", self.tasks_per_node)
        form.addRow("Partition:", self.partition)
        form.addRow("Time limit:", self.time)
        form.addRow("Output folder:", folder_row)
        self.problems = QLabel()
        self.problems.setWordWrap(True)
        self.problems.setStyleSheet("color: #c62828;")
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.submit_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.submit_button.setText("Submit")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.problems)
        layout.addWidget(self.buttons)
        for spin in (self.nodes, self.tasks_per_node):
            spin.valueChanged.connect(self._check)
        for edit in (self.partition, self.time, self.folder_edit):
            edit.textChanged.connect(self._check)
        self.resize(520, self.sizeHint().height())
        self._check()

    def job(self) -> SlurmJob:
        return SlurmJob(
            nodes=self.nodes.value(),
            tasks_per_node=self.tasks_per_node.value(),
            time=self.time.text().strip() or None,
            partition=self.partition.text().strip() or None,
        )

    def folder(self) -> Path:
        return Path(self.folder_edit.text().strip()).expanduser()

    def _check(self) -> None:
        found = [str(problem) for problem in self.job().problems(self._kind)]
        if not self.folder_edit.text().strip():
            found.append("output folder: give the job's folder")
        self.problems.setText("\n".join(found))
        self.problems.setVisible(bool(found))
        self.submit_button.setEnabled(not found)

    def _browse(self) -> None:
        chosen = file_dialogs.choose_folder(self, "The job's folder", file_dialogs.Purpose.EXPORTS)
        if chosen is not None:
            self.folder_edit.setText(str(chosen))


def ask_slurm_job(
    parent: QWidget, strategy_kind: str, tasks: int, folder: Path
) -> tuple[SlurmJob, Path] | None:
    """Submit to Slurm's dialog: the job and its folder, or None when cancelled."""
    dialog = SlurmDialog(strategy_kind, tasks, folder, parent)
    if dialog.exec() != QDialog.DialogCode.Accepted:
        return None
    return dialog.job(), dialog.folder()
