"""The TF_CONFIG editor: the cluster every task of a multi-machine run shares.

Users build the cluster one ``host:port`` row at a time, or import a TF_CONFIG they
already have, and see every mistake where it is as they type. All rules come from
:mod:`engine.tf_config` (the project validator and the cluster tools use the same
module), so the editor never accepts what a run would reject, nor the reverse.
Problems carry project-relative paths (``tf_config.cluster.worker.1``) so they read
the same here as in the main window's problem list.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication, QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...engine.config import STRATEGY_KINDS
from ...engine.problems import (
    RULE_ERROR_TYPE,
    Loc,
    Problem,
    ProblemsError,
    parse_json_text,
    problems_from_validation_error,
)
from ...engine.tf_config import (
    JOB_TYPES,
    LOCAL_CLUSTERS,
    MULTI_MACHINE_STRATEGIES,
    TF_CONFIG_VAR,
    TaskSpec,
    TFConfig,
    parse_address,
    parse_tf_config_text,
    strategy_problems,
)
from ..files import file_dialogs
from ..widgets.flow_layout import FlowLayout
from .field_editors import wheel_only_when_focused
from .tf_config_table import JobGrid, JobTable, mark_widget

# Only rule errors (RULE_ERROR_TYPE) can be shown in the tables; any other error means
# the text has a shape the editor cannot hold (a number where an address goes).

_FIRST_LOCAL_PORT = 12345
_MAX_TASK_INDEX = 2**31 - 1  # what a QSpinBox can show
_MAX_LISTED_PROBLEMS = 20

_USE_TOOLTIP = (
    f"TF_CONFIG tells each process of a multi-machine run ({', '.join(MULTI_MACHINE_STRATEGIES)}) "
    "the whole cluster and which task it is."
)
_TYPE_TOOLTIP = "The job of the task this TF_CONFIG is for; each process gets its own."
_INDEX_TOOLTIP = "The task's position in its job (0 is the first row)."


def describe_problems(problems: list[Problem]) -> str:
    """Problems of imported text, one per line, with paths inside that TF_CONFIG."""
    lines = [
        f"• {'.'.join(str(part) for part in p.loc) or 'TF_CONFIG'}: {p.message}"
        for p in problems[:_MAX_LISTED_PROBLEMS]
    ]
    if len(problems) > _MAX_LISTED_PROBLEMS:
        lines.append(f"… and {len(problems) - _MAX_LISTED_PROBLEMS} more")
    return "\n".join(lines)


def _labelled(text: str, field: QWidget) -> QWidget:
    """A label and its field as one piece, which a wrapping row never splits."""
    piece = QWidget()
    row = QHBoxLayout(piece)
    row.setContentsMargins(0, 0, 0, 0)
    row.addWidget(QLabel(text))
    row.addWidget(field)
    return piece


class PasteDialog(QDialog):
    """A text box for a TF_CONFIG; it closes only once the editor has imported the text.

    Staying open on failure keeps the pasted text, so the user fixes it instead of
    pasting it again.
    """

    def __init__(self, editor: TFConfigEditor) -> None:
        super().__init__(editor)
        self._editor = editor
        self.setWindowTitle("Import TF_CONFIG")
        self.text_edit = QPlainTextEdit()
        self.text_edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text_edit.setPlaceholderText(
            '{"cluster": {"worker": ["host1:2222", "host2:2222"]}, '
            '"task": {"type": "worker", "index": 0}}'
        )
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.import_button = buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.import_button.setText("Import")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Paste a TF_CONFIG (the JSON of the environment variable):"))
        layout.addWidget(self.text_edit)
        layout.addWidget(buttons)
        self.resize(560, 320)

    def accept(self) -> None:
        if self._editor.import_text(self.text_edit.toPlainText(), "the pasted text"):
            super().accept()


class _ProblemList(QListWidget):
    """The tab's own problems, each wrapped to the list's width and whole in its tooltip.

    A long message was cut at the dock's edge: every row had the first row's height.
    The list is as tall as its first :data:`SHOWN_PROBLEMS` rows as they wrap at its
    width now, measured again whenever that width changes.
    """

    def __init__(self) -> None:
        super().__init__()
        self.setWordWrap(True)
        self.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setResizeMode(QListWidget.ResizeMode.Adjust)
        self.setVerticalScrollMode(QListWidget.ScrollMode.ScrollPerPixel)

    def fit_height(self) -> None:
        """As tall as the laid-out rows' content, measured twice: rows laid out beside a
        vertical scrollbar wrap narrower, and are laid out again at the full width once
        the first height hid it (once only, a scrollbar stayed beside two short rows)."""
        for _ in range(2):
            self.executeDelayedItemsLayout()
            if self.count() <= SHOWN_PROBLEMS:
                height = self.contentsSize().height()
            else:
                rows = range(SHOWN_PROBLEMS)
                height = sum(self.visualRect(self.model().index(row, 0)).height() for row in rows)
            self.setFixedHeight(max(height, 1) + 2 * self.frameWidth())
            self.updateGeometries()

    def resizeEvent(self, event: QResizeEvent) -> None:
        width_changed = event.size().width() != event.oldSize().width()
        super().resizeEvent(event)
        if width_changed:
            self.fit_height()


SHOWN_PROBLEMS = 5
"""Problems the TF_CONFIG tab shows without scrolling its list."""


class TFConfigEditor(QWidget):
    """Edits an optional TF_CONFIG and checks it, with the chosen strategy, as the user types.

    ``tf_config_data`` is the raw content even when it breaks rules, so the main
    window's project validation reports the same problems; ``tf_config`` is the
    validated model, or None.
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._strategy_kind: str | None = None
        self._task_type = "worker"
        self._task_index = 0
        self._config: TFConfig | None = None
        self._problems: list[Problem] = []
        self._external: list[Problem] = []

        self.use_checkbox = QCheckBox("Use TF_CONFIG")
        self.use_checkbox.setObjectName("use_tf_config")
        self.use_checkbox.setToolTip(_USE_TOOLTIP)
        self.use_checkbox.toggled.connect(self._on_use_toggled)
        self.paste_button = QPushButton("Paste/Import…")
        self.paste_button.setToolTip("Import a TF_CONFIG from text you paste.")
        self.paste_button.clicked.connect(self._on_paste)
        self.file_button = QPushButton("Import from file…")
        self.file_button.setToolTip("Import a TF_CONFIG from a JSON file.")
        self.file_button.clicked.connect(self._on_import_file)
        self.env_button = QPushButton("From environment")
        self.env_button.setToolTip("Import the TF_CONFIG environment variable of this app.")
        self.env_button.clicked.connect(self._on_import_environment)
        # Rows that wrap (the import buttons, the task selector, the job tables two by two
        # or one above the other): the editor fits the Project dock at any width the
        # window gives it, without scrolling sideways.
        imports = FlowLayout()
        imports.addWidget(self.paste_button)
        imports.addWidget(self.file_button)
        imports.addWidget(self.env_button)
        use_note = QLabel("(multi-machine strategies)")
        use_note.setToolTip(_USE_TOOLTIP)
        use = FlowLayout(spacing=2)  # the note reads on, or goes under it in a narrow dock
        use.addWidget(self.use_checkbox)
        use.addWidget(use_note)
        top = QVBoxLayout()
        top.addLayout(use)
        top.addLayout(imports)

        self.body = QWidget()
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
        body.addWidget(self._build_cluster(), 1)
        body.addLayout(self._build_task_row())
        body.addLayout(self._build_localhost_row())

        # Problems and preview stay enabled when TF_CONFIG is off: parameter_server
        # without TF_CONFIG is a problem the user must be able to read.
        self.problems_label = QLabel()
        self.problems_label.setWordWrap(True)
        self.problem_list = _ProblemList()
        self.problem_list.itemActivated.connect(self._on_problem_activated)
        self.problem_list.itemClicked.connect(self._on_problem_activated)
        self.preview = QPlainTextEdit()
        self.preview.setObjectName("tf_config_preview")
        self.preview.setReadOnly(True)
        self.preview.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.preview.setMinimumHeight(60)

        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.body, 3)
        layout.addWidget(self.problems_label)
        layout.addWidget(self.problem_list)
        layout.addLayout(self._build_preview_header())
        layout.addWidget(self.preview, 1)
        self.body.setEnabled(False)
        self._refresh()

    # --- public API --------------------------------------------------------------------

    def set_tf_config(self, config: TFConfig | None) -> None:
        """Shows a project's TF_CONFIG (None: not used). Loading is not an edit: no ``changed``."""
        self._external = []
        if config is None:
            self._load({}, TaskSpec(type="worker", index=0))
            self._set_used(False)
        else:
            self._load(config.cluster, config.task)
        self._refresh()

    def tf_config_data(self) -> dict[str, Any] | None:
        """The TF_CONFIG exactly as shown, even if invalid; None when TF_CONFIG is off."""
        if not self.use_checkbox.isChecked():
            return None
        cluster = {
            job: self.tables[job].addresses() for job in JOB_TYPES if self.tables[job].addresses()
        }
        return {"cluster": cluster, "task": {"type": self._task_type, "index": self._task_index}}

    def tf_config(self) -> TFConfig | None:
        """The validated TF_CONFIG; None when it is off or breaks a rule."""
        return self._config

    def set_strategy_kind(self, kind: str) -> None:
        """The main window's strategy, so the rules joining it and TF_CONFIG are checked too."""
        if kind not in STRATEGY_KINDS:
            raise ValueError(f"unknown strategy kind {kind!r}; expected one of {STRATEGY_KINDS}")
        self._strategy_kind = kind
        self._refresh()

    def problems(self) -> list[Problem]:
        """What is wrong now, paths relative to the project (``tf_config.task.index``)."""
        return list(self._problems)

    def mark_problems(self, problems: list[Problem]) -> None:
        """Also marks the project-level problems under ``tf_config`` until the next edit."""
        self._external = [p for p in problems if p.loc[:1] == ("tf_config",)]
        self._show_problems()

    # --- import -------------------------------------------------------------------------

    def import_text(self, text: str, source: str = "the text") -> bool:
        """Replaces the TF_CONFIG with ``text``; True when it was imported.

        Text the tables cannot hold is refused with every problem listed, leaving
        the content untouched. Text that only breaks rules (a second chief, a bad
        port) is imported if the user agrees, and then marked like a typed mistake.
        """
        try:
            config = parse_tf_config_text(text)
        except ProblemsError as exc:
            problems = exc.problems
        except (ValueError, RecursionError) as exc:
            # json.loads raises these for integers of over 4300 digits and deep nesting.
            problems = [Problem((), f"not readable as JSON: {exc}")]
        else:
            self._import(config.cluster, config.task)
            return True
        if any(problem.loc == () for problem in problems):
            self.report_import_problems(source, problems)
            return False
        data = parse_json_text(text, source)  # parsed once already: a byte order mark is skipped
        cluster = data.get("cluster")
        if (
            isinstance(cluster, dict)
            and "master" in cluster
            and "chief" not in cluster
            and self.ask_rename_master()
        ):
            data["cluster"] = {
                ("chief" if job == "master" else job): addresses
                for job, addresses in cluster.items()
            }
        return self._import_data(data, source)

    def import_file(self, path: str | os.PathLike[str]) -> bool:
        """Imports a JSON file holding a TF_CONFIG; True when it was imported."""
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.report_import_problems(file.name, [Problem((), f"cannot read {file}: {exc}")])
            return False
        return self.import_text(text, file.name)

    def import_environment(self) -> bool:
        """Imports this process's TF_CONFIG environment variable; True when it was imported."""
        text = os.environ.get(TF_CONFIG_VAR)
        if text is None:
            problem = Problem((), "the TF_CONFIG environment variable is not set")
            self.report_import_problems("the environment", [problem])
            return False
        return self.import_text(text, "the TF_CONFIG environment variable")

    # --- questions and reports (methods, so tests can answer them) -----------------------

    def ask_rename_master(self) -> bool:
        """Whether to turn an imported TensorFlow 1 ``master`` job into ``chief``."""
        answer = QMessageBox.question(
            self,
            "Rename master to chief?",
            "This TF_CONFIG has a 'master' job, TensorFlow 1's name for the chief.\n"
            "TensorFlow 2 only knows 'chief'. Rename the job to 'chief' and import it?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.Yes,
        )
        return answer == QMessageBox.StandardButton.Yes

    def ask_import_with_problems(self, source: str, problems: list[Problem]) -> bool:
        """Whether to import a TF_CONFIG that breaks rules, to fix it in the editor."""
        answer = QMessageBox.question(
            self,
            "Import TF_CONFIG with problems?",
            f"{source[:1].upper()}{source[1:]} has {len(problems)} problem(s):\n\n"
            f"{describe_problems(problems)}\n\n"
            "Import it anyway and fix them here? They will be marked in the tables.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.Yes,
        )
        return answer == QMessageBox.StandardButton.Yes

    def report_import_problems(self, source: str, problems: list[Problem]) -> None:
        """Tells why nothing was imported; the current TF_CONFIG is untouched."""
        QMessageBox.warning(
            self,
            "TF_CONFIG not imported",
            f"Nothing was imported from {source}; it has {len(problems)} problem(s):\n\n"
            f"{describe_problems(problems)}",
        )

    def choose_import_file(self) -> str | None:
        """The JSON file the user picks, or None if they cancel."""
        path = file_dialogs.open_file(
            self,
            "Import TF_CONFIG",
            "JSON files (*.json);;All files (*)",
            file_dialogs.Purpose.PROJECTS,
        )
        return None if path is None else str(path)

    # --- building ------------------------------------------------------------------------

    def _build_cluster(self) -> JobGrid:
        self.tables: dict[str, JobTable] = {}
        for job in JOB_TYPES:
            table = JobTable(job, self._suggest_address)
            table.edited.connect(self._on_edited)
            self.tables[job] = table
        self.cluster_frame = JobGrid(list(self.tables.values()))
        self.cluster_frame.setObjectName("cluster_frame")
        return self.cluster_frame

    def _build_task_row(self) -> FlowLayout:
        self.task_type_combo = QComboBox()
        self.task_type_combo.setObjectName("task_type")
        self.task_type_combo.setToolTip(_TYPE_TOOLTIP)
        self.task_type_combo.setMinimumContentsLength(9)
        self.task_type_combo.currentTextChanged.connect(self._on_task_type_changed)
        wheel_only_when_focused(self.task_type_combo)
        self.task_index_spin = QSpinBox()
        self.task_index_spin.setObjectName("task_index")
        self.task_index_spin.setToolTip(_INDEX_TOOLTIP)
        self.task_index_spin.setMinimumWidth(70)
        self.task_index_spin.valueChanged.connect(self._on_task_index_changed)
        wheel_only_when_focused(self.task_index_spin)
        # Each label stays with its field when the row wraps.
        row = FlowLayout()
        row.addWidget(_labelled("This TF_CONFIG is for task:", self.task_type_combo))
        row.addWidget(_labelled("index", self.task_index_spin))
        return row

    def _build_localhost_row(self) -> QHBoxLayout:
        self.localhost_button = QPushButton("Add localhost tasks")
        self.localhost_button.setToolTip(
            "Add the tasks the strategy needs at least (2 workers; parameter_server also a "
            "chief and a ps), on free-looking localhost ports from 12345."
        )
        self.localhost_button.clicked.connect(self.add_localhost_tasks)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.localhost_button)
        return row

    def _build_preview_header(self) -> QHBoxLayout:
        self.pretty_checkbox = QCheckBox("Pretty")
        self.pretty_checkbox.setToolTip(
            "Indent the preview; Copy still gives the one-line environment variable value."
        )
        self.pretty_checkbox.toggled.connect(self._update_preview)
        self.copy_button = QToolButton()
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip("Copy the exact TF_CONFIG environment variable value.")
        self.copy_button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        self.copy_button.clicked.connect(self.copy_env)
        menu = QMenu(self.copy_button)
        menu.addAction("Copy as environment value", self.copy_env)
        menu.addAction("Copy pretty JSON", self.copy_pretty)
        menu.addAction("Copy as shell export", self.copy_shell_export)
        self.copy_button.setMenu(menu)
        row = QHBoxLayout()
        title = QLabel("<b>TF_CONFIG</b> (value of the environment variable)")
        # Wrapped: on one line this row was the form's widest, wider than the forms' dock
        # at 1024x700 (a horizontal scrollbar covered the last row).
        title.setWordWrap(True)
        row.addWidget(title, 1)
        row.addWidget(self.pretty_checkbox)
        row.addWidget(self.copy_button)
        return row

    # --- copying -------------------------------------------------------------------------

    def env_string(self) -> str:
        """The one-line value for the TF_CONFIG variable, formatted as ``TFConfig.to_env``."""
        data = self.tf_config_data()
        return "" if data is None else json.dumps(data, separators=(",", ":"))

    def copy_env(self) -> None:
        """Puts the environment variable value on the clipboard."""
        QGuiApplication.clipboard().setText(self.env_string())

    def copy_pretty(self) -> None:
        """Puts the indented JSON on the clipboard, for config files and documentation."""
        data = self.tf_config_data()
        QGuiApplication.clipboard().setText("" if data is None else json.dumps(data, indent=2))

    def copy_shell_export(self) -> None:
        """Puts ``export TF_CONFIG='...'`` on the clipboard, quoted for a POSIX shell."""
        QGuiApplication.clipboard().setText(f"export TF_CONFIG={shlex.quote(self.env_string())}")

    # --- convenience -----------------------------------------------------------------------

    def add_localhost_tasks(self) -> None:
        """Adds the rows missing from the strategy's cluster on this machine, on localhost."""
        shape = LOCAL_CLUSTERS.get(
            self._strategy_kind or "", LOCAL_CLUSTERS["multi_worker_mirrored"]
        )
        self.use_checkbox.setChecked(True)
        for job, count in shape.items():
            table = self.tables[job]
            for _ in range(count - len(table.addresses())):
                table.append_address(self._suggest_address())

    def _suggest_address(self) -> str:
        """``localhost`` on the first port from 12345 that no task of the cluster uses."""
        used = set()
        for table in self.tables.values():
            for address in table.addresses():
                try:
                    used.add(parse_address(address)[1])
                except ValueError:
                    continue
        port = _FIRST_LOCAL_PORT
        while port in used:
            port += 1
        return f"localhost:{port}"

    # --- state ---------------------------------------------------------------------------

    def _import(self, cluster: dict[str, list[str]], task: TaskSpec) -> None:
        self._load(cluster, task)
        self._on_edited()

    def _import_data(self, data: dict[str, Any], source: str) -> bool:
        """Imports JSON data that failed validation, if the tables can hold it."""
        try:
            config = TFConfig.model_validate(data)
        except ValidationError as exc:
            problems = problems_from_validation_error(exc)
            rules_only = all(err["type"] == RULE_ERROR_TYPE for err in exc.errors())
        else:
            self._import(config.cluster, config.task)
            return True
        if rules_only:
            cluster: dict[str, list[str]] = data["cluster"]
            task = TaskSpec.model_validate(data["task"])
            if set(cluster) <= set(JOB_TYPES) and task.index <= _MAX_TASK_INDEX:
                if not self.ask_import_with_problems(source, problems):
                    return False
                self._import(cluster, task)
                return True
        self.report_import_problems(source, problems)
        return False

    def _load(self, cluster: dict[str, list[str]], task: TaskSpec) -> None:
        for job, table in self.tables.items():
            table.set_addresses(cluster.get(job, []))
        self._task_type = task.type
        self._task_index = task.index
        self._set_used(True)

    def _set_used(self, used: bool) -> None:
        self.use_checkbox.blockSignals(True)
        self.use_checkbox.setChecked(used)
        self.use_checkbox.blockSignals(False)
        self.body.setEnabled(used)

    def _on_use_toggled(self, used: bool) -> None:
        self.body.setEnabled(used)
        self._on_edited()

    def _on_edited(self) -> None:
        """Every user edit: problems pushed for the old content no longer apply."""
        self._external = []
        self._refresh()
        self.changed.emit()

    def _on_task_type_changed(self, job: str) -> None:
        if job and job != self._task_type:
            self._task_type = job
            self._task_index = 0
            self._on_edited()

    def _on_task_index_changed(self, index: int) -> None:
        if index != self._task_index:
            self._task_index = index
            self._on_edited()

    def _refresh(self) -> None:
        self._update_task_selector()
        self._check()
        self._show_problems()
        self._update_preview()

    def _update_task_selector(self) -> None:
        """Offers the jobs present (plus the current one, which may be missing: a problem).

        The index range follows the job's size but never clamps the current index, so
        an index left behind by a removed row stays visible and marked instead of
        silently changing which task this is.
        """
        present = [job for job in JOB_TYPES if self.tables[job].addresses()]
        choices = present if self._task_type in present else [*present, self._task_type]
        self.task_type_combo.blockSignals(True)
        self.task_type_combo.clear()
        self.task_type_combo.addItems(choices)
        self.task_type_combo.setCurrentText(self._task_type)
        self.task_type_combo.blockSignals(False)
        size = len(self.tables[self._task_type].addresses()) if self._task_type in JOB_TYPES else 0
        self.task_index_spin.blockSignals(True)
        self.task_index_spin.setRange(0, max(size - 1, self._task_index, 0))
        self.task_index_spin.setValue(self._task_index)
        self.task_index_spin.blockSignals(False)

    def _check(self) -> None:
        """Recomputes problems and the validated model, through engine.tf_config only."""
        data = self.tf_config_data()
        kind = self._strategy_kind
        if data is None:
            self._config = None
            self._problems = strategy_problems(None, kind) if kind else []
            return
        try:
            self._config = TFConfig.model_validate(data)
            problems: list[Problem] = []
        except ValidationError as exc:
            self._config = None
            problems = problems_from_validation_error(exc, ("tf_config",))
        if kind:
            unchecked = TFConfig.model_construct(
                cluster=data["cluster"], task=TaskSpec.model_construct(**data["task"])
            )
            problems += strategy_problems(self._config or unchecked, kind)
        self._problems = problems

    def _show_problems(self) -> None:
        shown = list(dict.fromkeys([*self._problems, *self._external]))
        job_messages: dict[str, list[str]] = {job: [] for job in JOB_TYPES}
        row_messages: dict[str, dict[int, list[str]]] = {job: {} for job in JOB_TYPES}
        base_tooltips = self._base_tooltips()
        widget_messages: dict[QWidget, list[str]] = {widget: [] for widget in base_tooltips}
        for problem in shown:
            loc = problem.loc[1:]
            job = loc[1] if len(loc) > 1 and loc[0] == "cluster" else None
            if job in JOB_TYPES and len(loc) == 3 and isinstance(loc[2], int):
                row_messages[job].setdefault(loc[2], []).append(problem.message)
            elif job in JOB_TYPES:
                job_messages[job].append(problem.message)
            else:
                for widget in self._widgets_for(loc):
                    widget_messages[widget].append(problem.message)
        for job, table in self.tables.items():
            table.mark(job_messages[job], row_messages[job])
        for widget, messages in widget_messages.items():
            mark_widget(widget, messages, base_tooltips[widget])

        self.problem_list.clear()
        for problem in shown:
            text = f"{problem.path}: {problem.message}"
            item = QListWidgetItem(text)
            item.setToolTip(text)
            item.setData(Qt.ItemDataRole.UserRole, problem.loc)
            self.problem_list.addItem(item)
        self.problem_list.setVisible(bool(shown))
        self.problem_list.fit_height()
        checked_with = (
            f" <span style='color:gray'>(checked with strategy {self._strategy_kind})</span>"
            if self._strategy_kind
            else ""
        )
        if shown:
            self.problems_label.setText(
                f"<span style='color:#c62828'><b>{len(shown)} problem(s)</b></span>"
                f" — click one to go to it{checked_with}"
            )
        elif self.use_checkbox.isChecked():
            self.problems_label.setText(
                f"<span style='color:#2e7d32'>✓ No problems</span>{checked_with}"
            )
        else:
            self.problems_label.setText(
                f"TF_CONFIG is off: the run uses this machine only.{checked_with}"
            )

    def _base_tooltips(self) -> dict[QWidget, str]:
        return {
            self.use_checkbox: _USE_TOOLTIP,
            self.cluster_frame: "",
            self.task_type_combo: _TYPE_TOOLTIP,
            self.task_index_spin: _INDEX_TOOLTIP,
        }

    def _widgets_for(self, loc: Loc) -> list[QWidget]:
        """Where a problem outside the job tables shows (loc without its ``tf_config``)."""
        if not loc:
            return [self.use_checkbox]
        if loc[0] == "cluster":
            return [self.cluster_frame]
        if loc == ("task", "type"):
            return [self.task_type_combo]
        if loc == ("task", "index"):
            return [self.task_index_spin]
        if loc[0] == "task":
            return [self.task_type_combo, self.task_index_spin]
        return []

    def _update_preview(self) -> None:
        data = self.tf_config_data()
        for button in (self.copy_button, self.pretty_checkbox):
            button.setEnabled(data is not None)
        if data is None:
            self.preview.setPlainText("")
            self.preview.setPlaceholderText("TF_CONFIG is off.")
        elif self.pretty_checkbox.isChecked():
            self.preview.setPlainText(json.dumps(data, indent=2))
        else:
            self.preview.setPlainText(self.env_string())

    def _on_problem_activated(self, item: QListWidgetItem) -> None:
        loc: Loc = tuple(item.data(Qt.ItemDataRole.UserRole))[1:]
        job = loc[1] if len(loc) > 1 and loc[0] == "cluster" else None
        if job in self.tables:
            row = loc[2] if len(loc) > 2 and isinstance(loc[2], int) else None
            self.tables[job].focus_row(row)
            return
        for widget in self._widgets_for(loc)[:1]:
            widget.setFocus(Qt.FocusReason.OtherFocusReason)

    # --- import slots ------------------------------------------------------------------

    def _on_paste(self) -> None:
        dialog = PasteDialog(self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()

    def _on_import_file(self) -> None:
        path = self.choose_import_file()
        if path:
            self.import_file(path)

    def _on_import_environment(self) -> None:
        self.import_environment()
