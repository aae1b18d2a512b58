"""The Cluster dock: one row per task of a local cluster run, and each task's own log.

The plot, status and log panels show a cluster run as one run (the chief's
metrics, every task's log lines tagged with the task). What only a cluster has
lives here: each task's address, process, state and progress, so a stalled or
failed worker is visible at a glance, and the log of the selected task alone,
since the shared log interleaves every task's lines.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDockWidget,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...engine.engine_handle import TaskInfo
from ...engine.run_events import (
    Logged,
    RunEvent,
    RunFailure,
    RunOutcome,
    StatusChanged,
    TasksChanged,
)
from ...engine.run_folder import LOG_FILE
from ...engine.run_model import RunModel
from ...engine.system_metrics import sample_row
from ...engine.tf_config import MULTI_MACHINE_STRATEGIES
from ..files.log_file_window import LogFileWindow
from .run_controller import RunController

COLUMNS = (
    "Task",
    "Address",
    "State",
    "PID",
    "Last step",
    "CPU",
    "Memory",
    "GPU",
    "Input wait",
    "Last log line",
)
NUMBER_COLUMNS = tuple(COLUMNS.index(name) for name in ("PID", "Last step", "CPU", "Memory"))
LAST_LINE_COLUMN = COLUMNS.index("Last log line")
STATE_COLUMN = COLUMNS.index("State")
MAX_TASK_LINES = 5_000
STATE_COLORS = {
    "starting": QColor("#757575"),
    "failed": QColor("#c62828"),
    "finished": QColor("#2e7d32"),
    "stopped": QColor("#b26a00"),
}
IDLE_HINT = (
    f"Run starts a {' or '.join(MULTI_MACHINE_STRATEGIES)} project as a local cluster: "
    "every task its own engine process on this machine. Its tasks appear here."
)
SECURITY_TIP = (
    "The tasks run in a private network of their own where the system allows it (the log "
    "says so), and their ports are reachable only inside it. Where it does not (the log "
    "warns), TensorFlow's gRPC servers, unauthenticated and listening on every network "
    "interface, are open to the network while the run lasts: run clusters on a trusted "
    "network only."
)


def resource_cells(row: Mapping[str, float | None] | None) -> tuple[str, str, str, str]:
    """A task's latest sample (as ``engine.system_metrics.sample_row`` names its values) as
    the table shows it: CPU, memory, GPUs and input wait; blank before its first sample, and
    no GPU text where the task has none (or no NVML)."""
    if row is None:
        return "", "", "", ""
    busy = [key for key in row if key.startswith("gpu") and key.endswith("_util_percent")]
    memory = [row[key.replace("util_percent", "memory_mb")] or 0 for key in busy]
    gpus = ", ".join(
        f"{row[key] or 0:.0f}% {mb / 1024:.1f} GiB" for key, mb in zip(busy, memory, strict=True)
    )
    share = row["input_wait_share"]
    wait = "" if share is None else f"{share:.0%}"
    return f"{row['cpu_percent'] or 0:.0f}%", f"{row['rss_mb'] or 0:,.0f} MiB", gpus, wait


class ClusterPanel(QDockWidget):
    """Follows the run controller's cluster tasks and the run's messages while a cluster runs."""

    def __init__(self, runs: RunController, parent: QWidget | None = None) -> None:
        super().__init__("Cluster", parent)
        self.setObjectName("clusterDock")
        self._runs = runs
        self._following = False  # True from a cluster's start until its run is idle
        self._model: RunModel | None = None  # the cluster run followed, or the last one
        self._tasks: list[TaskInfo] = []
        self._logs: dict[str, deque[str]] = {}

        self.hint = QLabel(IDLE_HINT)
        self.hint.setWordWrap(True)
        self.hint.setToolTip(SECURITY_TIP)
        self.hint.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        for column in range(LAST_LINE_COLUMN):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._show_selected_log)
        self.table.cellDoubleClicked.connect(lambda _row, _column: self.open_task_log())

        self.log_title = QLabel("Select a task to see its log")
        self.task_log = QPlainTextEdit()
        self.task_log.setReadOnly(True)
        self.task_log.setMaximumBlockCount(MAX_TASK_LINES)
        self.task_log.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.task_log.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.open_log_button = QPushButton("Show engine.log")
        self.open_log_button.setToolTip(
            "Show the selected task's engine.log from its run folder (tasks/<type>-<index>/), "
            "with everything it logged (also a double-click on its row)"
        )
        self.open_log_button.setEnabled(False)
        self.open_log_button.clicked.connect(self.open_task_log)

        title_row = QHBoxLayout()
        title_row.addWidget(self.log_title, 1)
        title_row.addWidget(self.open_log_button)
        log_side = QWidget()
        log_layout = QVBoxLayout(log_side)
        log_layout.setContentsMargins(0, 0, 0, 0)
        log_layout.addLayout(title_row)
        log_layout.addWidget(self.task_log, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.table)
        self.splitter.addWidget(log_side)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        body = QWidget()
        layout = QVBoxLayout(body)
        layout.setContentsMargins(4, 2, 4, 4)
        layout.addWidget(self.hint)
        layout.addWidget(self.splitter, 1)
        self.setWidget(body)

        runs.changed.connect(self.show_change)
        runs.idle.connect(self._on_idle)

    # --- what the table shows -----------------------------------------------------------

    def tasks(self) -> list[TaskInfo]:
        return list(self._tasks)

    def show_tasks(self, tasks: list[TaskInfo]) -> None:
        """Updates the rows in place, so the selection and scroll position stay."""
        if [t.name for t in tasks] != [t.name for t in self._tasks]:
            self.table.setRowCount(len(tasks))
        self._tasks = list(tasks)
        for row, task in enumerate(tasks):
            values = (
                task.name,
                task.address,
                task.state,
                "" if task.pid is None else str(task.pid),
                "" if task.last_step is None else f"{task.last_step:,}",
                *resource_cells(None if task.resources is None else sample_row(task.resources)),
                task.last_line,
            )
            for column, value in enumerate(values):
                self._set_cell(row, column, value)
            color = STATE_COLORS.get(task.state)
            self.table.item(row, STATE_COLUMN).setData(
                Qt.ItemDataRole.ForegroundRole, QBrush(color) if color else None
            )
            self.table.item(row, LAST_LINE_COLUMN).setToolTip(task.last_line)
        if tasks and not self.table.selectedItems():
            self.table.selectRow(0)
        self._show_log_title()

    def _set_cell(self, row: int, column: int, text: str) -> None:
        item = self.table.item(row, column)
        if item is None:
            item = QTableWidgetItem()
            if column in NUMBER_COLUMNS:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.table.setItem(row, column, item)
        if item.text() != text:
            item.setText(text)

    def cell(self, task: str, column: str) -> str:
        """The text shown for ``task`` under ``column`` (``"State"``)."""
        row = [t.name for t in self._tasks].index(task)
        return self.table.item(row, COLUMNS.index(column)).text()

    # --- each task's log ----------------------------------------------------------------

    def selected_task(self) -> TaskInfo | None:
        rows = {index.row() for index in self.table.selectedIndexes()}
        return self._tasks[min(rows)] if rows else None

    def add_log(self, message: Logged) -> None:
        """Keeps a cluster task's line for its own log view."""
        if not self._following or message.task is None:
            return
        line = f"{time.strftime('%H:%M:%S')} {message.level.upper():<7} {message.text}"
        self._logs.setdefault(message.task, deque(maxlen=MAX_TASK_LINES)).append(line)
        selected = self.selected_task()
        if selected is not None and selected.name == message.task:
            self.task_log.appendPlainText(line)

    def task_lines(self, task: str) -> list[str]:
        return list(self._logs.get(task, ()))

    def _show_selected_log(self) -> None:
        task = self.selected_task()
        self.open_log_button.setEnabled(task is not None)
        self._show_log_title()
        if task is None:
            self.task_log.clear()
            return
        self.task_log.setPlainText("\n".join(self._logs.get(task.name, ())))
        bar = self.task_log.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _show_log_title(self) -> None:
        """The pid arrives with the first refresh after the processes started."""
        task = self.selected_task()
        self.log_title.setText(
            "Select a task to see its log"
            if task is None
            else f"Log of {task.name} (pid {task.pid or '—'})"
        )

    def open_task_log(self) -> LogFileWindow | None:
        """Shows the selected task's engine.log in a window (no desktop viewer needed)."""
        task = self.selected_task()
        if task is None:
            return None
        window = LogFileWindow(task.run_dir / LOG_FILE, f"engine.log of {task.name}", self)
        window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        window.show()
        return window

    # --- the run ------------------------------------------------------------------------

    def show_change(self, model: RunModel, event: RunEvent) -> None:
        """Follows a cluster run from its first tasks to its end."""
        match event:
            case TasksChanged(tasks) if model is not self._model:
                self._model = model
                self._on_cluster_started(list(tasks))
            case _ if model is not self._model:  # a single-process run, or an earlier one
                return
            case TasksChanged(tasks):
                self.show_tasks(list(tasks))
            case Logged() as line:
                self.add_log(line)
            case StatusChanged(outcome=RunOutcome(failure=None) as finished):
                self._on_finished(finished)
            case StatusChanged(outcome=RunOutcome(failure=RunFailure() as failed)):
                self._on_failed(failed)

    def _on_cluster_started(self, tasks: list[TaskInfo]) -> None:
        self._following = True
        self._logs.clear()
        self._tasks = []
        self.table.setRowCount(0)
        self.task_log.clear()
        self.show_tasks(tasks)
        names = ", ".join(f"{task.name} ({task.address})" for task in tasks)
        if self._runs.hosts is None:
            self._set_hint(f"Local cluster on this machine: {names}.")
        else:  # the pid is the ssh channel's here; the log, the task's messages over it
            self._set_hint(f"Cluster on its hosts, each task started over ssh: {names}.")
        self.show()
        self.raise_()

    def _on_finished(self, message: RunOutcome) -> None:
        if self._following:
            self._set_hint(f"The cluster run {message.status} at step {message.last_step}.")

    def _on_failed(self, message: RunFailure) -> None:
        if not self._following:
            return
        if message.task is None:
            text = f"The cluster run failed: {message.error_type}: {message.message}"
        else:
            detail = message.message.removeprefix(f"{message.task} failed: ")
            text = (
                f"{message.task} failed: {message.error_type}: {detail}. "
                "The other tasks were stopped."
            )
        self._set_hint(text, "#c62828")

    def _on_idle(self) -> None:
        self._following = False

    def _set_hint(self, text: str, color: str | None = None) -> None:
        self.hint.setText(text)
        self.hint.setStyleSheet(f"color: {color}; font-weight: bold;" if color else "")
