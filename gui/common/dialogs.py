"""The window's modal questions and reports, in one place so tests can answer them."""

from __future__ import annotations

import enum
import platform
from dataclasses import dataclass

import pyqtgraph as pg
import PySide6
from PySide6.QtCore import Qt, qVersion
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLineEdit,
    QMessageBox,
    QWidget,
)

from ...engine import __version__
from ...engine.cluster.preflight import Finding
from ...engine.problems import Problem
from ...engine.study.folders import StudyEntry
from ...engine.user_code import Fingerprint

MAX_LISTED = 15


class Unsaved(enum.Enum):
    SAVE = "save"
    DISCARD = "discard"
    CANCEL = "cancel"


def show_problems(parent: QWidget, title: str, text: str, problems: list[Problem]) -> None:
    """Lists the model's problems (the first few inline, all under "Show Details")."""
    listed = [f"• {problem}" for problem in problems[:MAX_LISTED]]
    if len(problems) > MAX_LISTED:
        listed.append(f"… and {len(problems) - MAX_LISTED} more")
    box = QMessageBox(QMessageBox.Icon.Warning, title, text, QMessageBox.StandardButton.Ok, parent)
    box.setInformativeText("\n".join(listed))
    if len(problems) > MAX_LISTED:
        box.setDetailedText("\n".join(str(problem) for problem in problems))
    box.exec()


def show_error(parent: QWidget, title: str, text: str, details: str = "") -> None:
    box = QMessageBox(QMessageBox.Icon.Critical, title, text, QMessageBox.StandardButton.Ok, parent)
    if details:
        box.setDetailedText(details)
    box.exec()


def ask_unsaved(parent: QWidget, name: str) -> Unsaved:
    answer = QMessageBox.question(
        parent,
        "Unsaved changes",
        f"“{name}” has changes that are not saved. Save them first?",
        QMessageBox.StandardButton.Save
        | QMessageBox.StandardButton.Discard
        | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Save,
    )
    if answer == QMessageBox.StandardButton.Save:
        return Unsaved.SAVE
    if answer == QMessageBox.StandardButton.Discard:
        return Unsaved.DISCARD
    return Unsaved.CANCEL


def confirm_stop_run(parent: QWidget) -> bool:
    """Closing during a run stops it; the user must agree."""
    answer = QMessageBox.question(
        parent,
        "A run is in progress",
        "Closing Distloop stops the run (its folder keeps the steps done so far). Close anyway?",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


def confirm_long_run(parent: QWidget, eta: str, steps: int, rate: float) -> tuple[bool, bool]:
    """A run that would take over a day (999,999,999 steps: an ETA of 2964 h) is asked
    about once its speed is measured; (keep running, ask again next time)."""
    box = QMessageBox(
        QMessageBox.Icon.Question,
        "A long run",
        f"At {rate:,.0f} steps/s, this run's {steps:,} steps take about {eta}. Keep it running?",
        QMessageBox.StandardButton.NoButton,
        parent,
    )
    box.setInformativeText("Stop saves a checkpoint; Resume in the Runs list continues from it.")
    keep = box.addButton("Keep Running", QMessageBox.ButtonRole.AcceptRole)
    box.addButton("Stop the Run", QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(keep)
    box.setCheckBox(QCheckBox("Don't ask again about long runs"))
    box.exec()
    return box.clickedButton() is keep, not box.checkBox().isChecked()


def confirm_stop_study(parent: QWidget) -> bool:
    """Closing during a study stops its trial; the study goes on when the window opens again."""
    answer = QMessageBox.question(
        parent,
        "A study is running",
        "Closing Distloop stops the study's current trial (its values run again later). "
        "The next time Distloop opens, it offers to continue the study. Close anyway?",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


def confirm_start_over(parent: QWidget, name: str) -> bool:
    """A run without a checkpoint cannot continue: resuming it trains from step 1 again."""
    answer = QMessageBox.question(
        parent,
        "Resume starts over",
        f"{name} has no checkpoint (training.checkpoint_every was off and it did not stop "
        "cleanly), so resuming it trains from step 1 again in its folder. Resume anyway?",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


def confirm_run_despite_findings(parent: QWidget, findings: list[Finding]) -> bool:
    """Run on Hosts after a pre-flight that found problems: each would stop or hang the
    cluster, so not running is the default (``distloop launch --no-preflight`` is the
    command line's way to run anyway)."""
    listed = [f"• {finding}" for finding in findings[:MAX_LISTED]]
    if len(findings) > MAX_LISTED:
        listed.append(f"… and {len(findings) - MAX_LISTED} more")
    box = QMessageBox(
        QMessageBox.Icon.Warning,
        "Check Cluster found problems",
        f"Check Cluster found {len(findings)} problem(s) that would stop or hang this cluster "
        "(listed in the TF_CONFIG tab, each with its fix). Run on the hosts anyway?",
        QMessageBox.StandardButton.Cancel,
        parent,
    )
    box.setInformativeText("\n".join(listed))
    run = box.addButton("Run Anyway", QMessageBox.ButtonRole.AcceptRole)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    return box.clickedButton() is run


def show_stacks(parent: QWidget, blame: list[str], files: list[str]) -> None:
    """Where a cluster's tasks stand; not modal: the run goes on while it is read."""
    box = QMessageBox(
        QMessageBox.Icon.Information,
        "Stacks of the cluster's tasks",
        "\n".join(blame) or "Every task answered.",
        QMessageBox.StandardButton.Ok,
        parent,
    )
    box.setInformativeText("Each task's stacks are in:\n" + "\n".join(files))
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.setModal(False)
    box.show()


def confirm_continue_study(parent: QWidget, entry: StudyEntry) -> bool:
    """The window was closed (or ended) during a study: continue it now?"""
    again = (
        " The trial that was running runs again from its start."
        if entry.running or entry.waiting
        else ""
    )
    answer = QMessageBox.question(
        parent,
        "Continue the study?",
        f"The study of {entry.name} stopped when the window closed, with {entry.ended} of "
        f"{entry.planned} trials done.{again}\n\nContinue it now? (Later: Continue in the "
        "Studies tab.)",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.Yes,
    )
    return answer == QMessageBox.StandardButton.Yes


def trust_custom_code(parent: QWidget, code: Fingerprint) -> bool:
    """Running a project's custom code executes it with the user's rights: ask first."""
    where = (
        f"\n\nWarning: this file is outside the project's folder ({code.project_dir})."
        if code.outside_project
        else ""
    )
    answer = QMessageBox.question(
        parent,
        "Run custom step code?",
        f"This project runs the Python file\n\n{code.path}\n(sha256 {code.sha256})"
        f"{where}\n\nIt runs with your permissions and can do anything you can. Run it only "
        "if you trust it. Distloop remembers a yes until the file changes.",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


def trust_launch(parent: QWidget, unusual: list[str]) -> bool:
    """A launch that runs more than Distloop (a host's own command line, an ssh
    configuration file) may come from a project or run folder of anyone's: ask first."""
    listed = "\n".join(f"• {line}" for line in unusual)
    answer = QMessageBox.question(
        parent,
        "Run these commands?",
        f"This launch runs more than Distloop itself:\n\n{listed}\n\nThey run with your "
        "permissions, on the hosts or on this machine. Go on only if you trust them. "
        "Distloop remembers a yes for exactly these.",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes


def about_html(tensorflow_version: str | None) -> str:
    """The versions a bug report needs; TensorFlow's only once an engine process said it."""
    tensorflow = tensorflow_version or (
        "shown after a run or device detection (only engine processes load it)"
    )
    return (
        f"<h3>Distloop {__version__}</h3>"
        "<p>TensorFlow distributed training with custom training loops.</p>"
        f"<p>Qt {qVersion()}<br>PySide6 {PySide6.__version__}<br>"
        f"pyqtgraph {pg.__version__}<br>Python {platform.python_version()}<br>"
        f"TensorFlow: {tensorflow}</p>"
    )


def about(parent: QWidget, html: str) -> None:
    QMessageBox.about(parent, "About Distloop", html)


@dataclass(frozen=True)
class MlflowChoice:
    """What the MLflow dialog was given: the store, and whether runs log live."""

    tracking_uri: str
    experiment: str
    live: bool


def ask_mlflow(
    parent: QWidget, title: str, uri: str, experiment: str, live: bool | None
) -> MlflowChoice | None:
    """Asks for the MLflow tracking URI and experiment, and (``live`` not None) whether the
    window logs each run while it trains; None when cancelled."""
    dialog = QDialog(parent)
    dialog.setWindowTitle(title)
    form = QFormLayout(dialog)
    uri_edit = QLineEdit(uri)
    uri_edit.setPlaceholderText("MLflow's default (MLFLOW_TRACKING_URI)")
    uri_edit.setToolTip("http://host:5000, sqlite:///path/mlflow.db, databricks, ...")
    experiment_edit = QLineEdit(experiment)
    form.addRow("Tracking URI", uri_edit)
    form.addRow("Experiment", experiment_edit)
    live_box = QCheckBox("Log each run to MLflow while it trains")
    live_box.setChecked(bool(live))
    if live is not None:
        form.addRow(live_box)
    buttons = QDialogButtonBox(
        QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
    )
    buttons.accepted.connect(dialog.accept)
    buttons.rejected.connect(dialog.reject)
    form.addRow(buttons)
    dialog.setMinimumWidth(460)
    if dialog.exec() != QDialog.DialogCode.Accepted:
        return None
    return MlflowChoice(
        uri_edit.text().strip(), experiment_edit.text().strip(), live_box.isChecked()
    )
