"""The TF_CONFIG tab's hosts: where Run on Hosts starts each task, how ssh reaches them,
and what Check Cluster found.

The hosts are the TF_CONFIG's own (each task's ``host:port``); ssh reaches each by that
name unless the SSH config file maps it (``Host`` entries: user, address, port,
ProxyJump). The SSH config file, the remote command and the remote folder are the
user's, not the project's (another user's machines need their own), so they are kept in
the settings, not in the project file. Pre-flight findings are listed one per row with
the host and field they are about, what is wrong and the fix.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...engine.cluster.preflight import Finding
from ...engine.cluster.run_plans import HostsPlan
from ...engine.cluster.ssh import DEFAULT_REMOTE_DIR, SshLaunch, launch_hosts
from ...engine.config import Project, SshHost
from ..common import settings
from ..files import file_dialogs

HOST_COLUMNS = ("Host", "Tasks", "SSH destination")
FINDING_COLUMNS = ("Host", "Field", "What", "Fix")
_VISIBLE_FINDINGS = 6  # rows before the findings table scrolls
_FIT = QHeaderView.ResizeMode.ResizeToContents


def _table(columns: tuple[str, ...], stretch: tuple[int, ...]) -> QTableWidget:
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setWordWrap(True)
    table.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
    header = table.horizontalHeader()
    for column in range(len(columns)):
        fits = column not in stretch
        header.setSectionResizeMode(column, _FIT if fits else QHeaderView.ResizeMode.Stretch)
    table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    return table


def _fit_rows(table: QTableWidget, most: int) -> None:
    """The table as tall as its rows, up to ``most`` of them; it scrolls beyond."""
    table.resizeRowsToContents()
    shown = min(table.rowCount(), most)
    rows = sum(table.rowHeight(row) for row in range(shown))
    header = table.horizontalHeader().height() if table.horizontalHeader().isVisible() else 0
    table.setFixedHeight(rows + header + 2 * table.frameWidth() + (0 if shown else 24))


class HostsPanel(QGroupBox):
    """Run on Hosts' settings and Check Cluster's findings, under the TF_CONFIG editor."""

    options_changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Run on hosts (over SSH)", parent)
        self.setObjectName("hosts_panel")
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.hosts_table = _table(HOST_COLUMNS, (2,))
        self.hosts_table.setToolTip(
            "The TF_CONFIG's hosts: each task starts on its host over ssh "
            "(`ssh HOST`, or what the SSH config file maps that name to)."
        )

        self.ssh_config_edit = QLineEdit()
        self.ssh_config_edit.setObjectName("ssh_config")
        self.ssh_config_edit.setPlaceholderText("~/.ssh/config")
        self.ssh_config_edit.setToolTip(
            "An ssh configuration file (ssh -F FILE): Host entries mapping the TF_CONFIG host "
            "names to users, addresses, ports, keys or a ProxyJump. Empty: your ~/.ssh/config."
        )
        browse = QPushButton("Browse…")
        browse.setToolTip("Choose the ssh configuration file")
        browse.clicked.connect(self._browse_ssh_config)
        ssh_row = QHBoxLayout()
        ssh_row.addWidget(self.ssh_config_edit, 1)
        ssh_row.addWidget(browse)
        self.remote_command_edit = QLineEdit()
        self.remote_command_edit.setObjectName("remote_command")
        self.remote_command_edit.setPlaceholderText("distloop")
        self.remote_command_edit.setToolTip(
            "How every host runs Distloop, e.g. /opt/venv/bin/distloop (the same version on "
            "every host). Empty: each host's own (the project's launch.hosts), else distloop "
            "on the remote PATH."
        )
        self.remote_dir_edit = QLineEdit()
        self.remote_dir_edit.setObjectName("remote_dir")
        self.remote_dir_edit.setPlaceholderText(f"{DEFAULT_REMOTE_DIR} (in the remote home)")
        self.remote_dir_edit.setToolTip(
            "Where each host keeps the run's folders (relative: in the remote user's home; "
            "empty: each host's own in the project's launch.hosts, else distloop-runs). "
            "At the end the chief's folder is copied back here, into the runs list."
        )
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("SSH config:", ssh_row)
        form.addRow("Remote command:", self.remote_command_edit)
        form.addRow("Remote folder:", self.remote_dir_edit)
        for edit in (self.ssh_config_edit, self.remote_command_edit, self.remote_dir_edit):
            edit.editingFinished.connect(self._save_options)

        self.check_button = QToolButton()
        self.check_button.setObjectName("check_cluster")
        self.check_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.check_button.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        self.progress = QProgressBar()
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(12)
        self.progress.hide()
        check_row = QHBoxLayout()
        check_row.addWidget(self.check_button)
        check_row.addWidget(self.progress, 1)
        check_row.addStretch(0)
        self.check_status = QLabel("Not checked yet.")
        self.check_status.setObjectName("check_status")
        self.check_status.setWordWrap(True)
        self.check_status.setTextFormat(Qt.TextFormat.PlainText)
        self.findings_table = _table(FINDING_COLUMNS, (2, 3))
        self.findings_table.hide()

        layout = QVBoxLayout(self)
        layout.addWidget(self.note)
        layout.addWidget(self.hosts_table)
        layout.addLayout(form)
        layout.addLayout(check_row)
        layout.addWidget(self.check_status)
        layout.addWidget(self.findings_table)
        self.set_options(settings.launch_options())
        self.set_plan(HostsPlan(refusal="no project yet"))

    # --- the hosts -----------------------------------------------------------------------

    def set_plan(self, plan: HostsPlan) -> None:
        """The hosts of the project as the forms show it, and whether Run on Hosts applies."""
        self.hosts_table.setRowCount(len(plan.hosts))
        for row, (host, tasks) in enumerate(plan.hosts.items()):
            way_in = plan.ways_in.get(host, SshHost())
            port = f" -p {way_in.port}" if way_in.port is not None else ""
            texts = (host, ", ".join(tasks), f"ssh {way_in.destination or host}{port}")
            there = [
                f"runs {way_in.command}" if way_in.command else "",
                f"in {way_in.remote_dir}" if way_in.remote_dir else "",
            ]
            tip = "; ".join(t for t in there if t)
            for column, text in enumerate(texts):
                item = QTableWidgetItem(text)
                item.setToolTip(
                    f"{text} (the project's launch.hosts: {tip})" if tip and column == 2 else text
                )
                self.hosts_table.setItem(row, column, item)
        self.hosts_table.setVisible(bool(plan.hosts))
        _fit_rows(self.hosts_table, 6)
        self.note.setText(
            f"Run ▸ Run on Hosts starts each task on its host, over ssh, after Check Cluster's "
            f"checks; the run is followed here like Run Cluster's. {len(plan.hosts)} host(s)."
            if plan.runnable
            else f"Run on Hosts does not apply: {plan.refusal}."
        )

    # --- how ssh reaches them ------------------------------------------------------------

    def options(self) -> dict[str, str]:
        """The fields as typed (empty: the default)."""
        return {
            "ssh_config": self.ssh_config_edit.text().strip(),
            "remote_command": self.remote_command_edit.text().strip(),
            "remote_dir": self.remote_dir_edit.text().strip(),
        }

    def set_options(self, options: dict[str, str]) -> None:
        self.ssh_config_edit.setText(options.get("ssh_config", ""))
        self.remote_command_edit.setText(options.get("remote_command", ""))
        self.remote_dir_edit.setText(options.get("remote_dir", ""))

    def launch(self, project: Project, run_name: str) -> SshLaunch:
        """The engine's SshLaunch for ``project``'s run (or check) named ``run_name``: the
        project's ways into its hosts, and these fields, which win over every host's own
        (as ``distloop launch --remote-command/--remote-dir`` do)."""
        options = self.options()
        return SshLaunch(
            run_name=run_name,
            ssh_config=Path(options["ssh_config"]).expanduser() if options["ssh_config"] else None,
            remote_command=options["remote_command"] or None,
            remote_dir=options["remote_dir"] or None,
            hosts=launch_hosts(project),
        )

    def _save_options(self) -> None:
        settings.set_launch_options(self.options())
        self.options_changed.emit()

    def _browse_ssh_config(self) -> None:
        path = file_dialogs.open_file(
            self, "SSH configuration file", "All files (*)", file_dialogs.Purpose.PROJECTS
        )
        if path is not None:
            self.ssh_config_edit.setText(str(path))
            self._save_options()

    # --- Check Cluster -------------------------------------------------------------------

    def last_shown(self) -> QWidget:
        """The lowest part of the check on show: the findings, else the check's line."""
        return self.findings_table if self.findings_table.isVisibleTo(self) else self.check_status

    def show_checking(self) -> None:
        self.progress.setRange(0, 0)  # busy until the first step says how many there are
        self.progress.show()
        self.check_status.setText("Checking the hosts over ssh…")
        self.findings_table.setRowCount(0)
        self.findings_table.hide()

    def show_progress(self, done: int, total: int, text: str) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(min(done, total))
        self.check_status.setText(f"Checking ({done} of {total}): {text}…")

    def show_findings(self, findings: list[Finding], hosts: int, tasks: int) -> None:
        self.progress.hide()
        if not findings:
            self.check_status.setText(
                f"✓ Ready: {hosts} host(s), {tasks} task(s): ssh, versions, devices, data, "
                "free ports and every pair of tasks checked."
            )
            self.findings_table.hide()
            return
        self.check_status.setText(
            f"{len(findings)} problem(s) would stop or hang this cluster; each with its fix:"
        )
        self.findings_table.setRowCount(len(findings))
        for row, finding in enumerate(findings):
            texts = (finding.host, finding.field, finding.what, finding.fix)
            for column, text in enumerate(texts):
                item = QTableWidgetItem(text)
                item.setToolTip(str(finding))
                self.findings_table.setItem(row, column, item)
        self.findings_table.show()
        _fit_rows(self.findings_table, _VISIBLE_FINDINGS)

    def show_check_failed(self, text: str) -> None:
        self.progress.hide()
        self.check_status.setText(f"The check could not run: {text}")
