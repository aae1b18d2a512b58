"""Add Sweep…: an Optuna study over the open project, the same one ``distloop sweep`` runs.

The form gathers what a space file and the command's options say: fields of the
project by their path, each a range (log or not), choices or grid values, and the
sampler, pruner, objective, number of trials, seed and warm-up steps. It decides
nothing itself: each field is checked as it is typed by the engine's own space
checks (:func:`engine.study.space.space_from_data`: a path the project lacks, an
empty range, one choice, a value the field refuses), its problem in one line
under it, and the whole by :meth:`engine.study.runner.StudyPlan.problems` (a
sampler and pruner Optuna refuses together, an objective the project cannot
report), in one line above the buttons, which stay disabled until nothing is
wrong. The study folder is new among the runs, or an empty one; a study folder
of the same project is continued (its own fields and settings), one of another
project is refused, so no trial is ever mixed into a study it does not belong to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...engine.config import MAX_SEED, Project
from ...engine.problems import ProblemsError
from ...engine.study.folders import is_study_folder, read_entry
from ...engine.study.objective import OBJECTIVES, direction
from ...engine.study.runner import StudyPlan, StudySettings
from ...engine.study.space import MAX_AXES, SearchSpace, field_value, space_from_data
from ..files import file_dialogs

SAMPLERS = {
    "tpe": "TPE: learns from the trials so far",
    "random": "Random",
    "grid": "Grid: every combination of choices and values",
    "cmaes": "CMA-ES: number ranges only",
}
PRUNERS = {
    "median": "Median: stop a trial worse than the median at its step",
    "asha": "ASHA: successive halving",
    "hyperband": "Hyperband",
    "none": "None: every trial runs to its end",
}
KINDS = {
    "range": "Range",
    "log": "Log range",
    "choices": "Choices",
    "values": "Grid values",
}
SKIPPED_FIELDS = {"schema_version", "name", "description"}
PROBLEM_STYLE = "color: #c62828"


@dataclass(frozen=True)
class StudyRequest:
    """What the dialog asks for: a new study (``resume`` False) or one to continue."""

    plan: StudyPlan
    folder: Path | None
    """None: a new folder among the runs."""
    resume: bool = False


def field_paths(project: Project) -> list[str]:
    """Every setting of ``project`` a space can name: its numbers, flags and words
    (``optimizer.learning_rate``, ``model.layers.0.units``, ``optimizer.kind``)."""
    paths: list[str] = []

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if not prefix and key in SKIPPED_FIELDS:
                    continue
                walk(value, f"{prefix}{key}.")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{prefix}{index}.")
        elif isinstance(node, bool | int | float | str):
            paths.append(prefix[:-1])

    walk(project.model_dump(mode="json"), "")
    return paths


def parse_values(text: str) -> list[object]:
    """``adam, sgd`` or ``16, 32, 64`` or ``true, false``: JSON where a value reads as
    JSON (numbers, true, false, null, "quoted"), else the word as it is."""
    values: list[object] = []
    for part in text.split(","):
        word = part.strip()
        if not word:
            continue
        try:
            values.append(json.loads(word))
        except ValueError:
            values.append(word)
    return values


def _number(text: str) -> int | float | str:
    """An end of a range as typed: an int when it reads as one (an int field's range)."""
    word = text.strip()
    try:
        return int(word)
    except ValueError:
        try:
            return float(word)
        except ValueError:
            return word


class AxisRow(QWidget):
    """One field of the space: its path, how it is searched, and its problem, if any."""

    changed = Signal()
    removed = Signal(object)  # AxisRow

    def __init__(self, paths: list[str], project: Project) -> None:
        super().__init__()
        self._project = project
        self.path = QComboBox()
        self.path.setEditable(True)
        self.path.addItems(paths)
        self.path.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.path.setMinimumContentsLength(24)
        self.path.setCurrentIndex(-1)  # a new field is named by the user, not the list's first
        self.path.lineEdit().setPlaceholderText("a field's path, e.g. model.layers.0.units")
        self.kind = QComboBox()
        for key, text in KINDS.items():
            self.kind.addItem(text, key)
        self.low = QLineEdit()
        self.low.setPlaceholderText("low")
        self.high = QLineEdit()
        self.high.setPlaceholderText("high")
        self.to = QLabel("to")
        self.values = QLineEdit()
        self.values.setPlaceholderText("e.g. adam, sgd  or  16, 32, 64")
        self.remove = QToolButton()
        self.remove.setText("✕")
        self.remove.setToolTip("Search this field no more")
        self.problem = QLabel()
        self.problem.setStyleSheet(PROBLEM_STYLE)
        self.problem.setWordWrap(False)
        self.problem.hide()

        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(6)
        grid.setVerticalSpacing(1)
        grid.addWidget(self.path, 0, 0)
        grid.addWidget(self.kind, 0, 1)
        grid.addWidget(self.low, 0, 2)
        grid.addWidget(self.to, 0, 3)
        grid.addWidget(self.high, 0, 4)
        grid.addWidget(self.values, 0, 2, 1, 3)
        grid.addWidget(self.remove, 0, 5)
        grid.addWidget(self.problem, 1, 0, 1, 6)
        grid.setColumnStretch(0, 3)
        grid.setColumnStretch(2, 1)
        grid.setColumnStretch(4, 1)

        self.path.currentTextChanged.connect(self._on_path)
        self.kind.currentIndexChanged.connect(self._on_kind)
        for edit in (self.low, self.high, self.values):
            edit.textChanged.connect(self.changed)
        self.remove.clicked.connect(lambda: self.removed.emit(self))
        self._on_kind()

    def set_axis(self, path: str, kind: str, low: str = "", high: str = "", values: str = ""):
        self.path.setCurrentText(path)
        self.kind.setCurrentIndex(self.kind.findData(kind))
        self.low.setText(low)
        self.high.setText(high)
        self.values.setText(values)

    def field_path(self) -> str:
        return self.path.currentText().strip()

    def missing(self) -> str:
        """What is still to be typed in, in words; empty when nothing is."""
        path = self.field_path()
        if not path:
            return "name a field of the project: pick one or type its path"
        try:
            field_value(self._project.model_dump(mode="json"), path)
        except ValueError as exc:  # the path first: its ends mean nothing without it
            return f"{path}: {exc}"
        if self.kind.currentData() in ("range", "log"):
            if not self.low.text().strip() or not self.high.text().strip():
                return "give the range's low and high ends"
        elif not self.values.text().strip():
            return "give the values to try, separated by commas"
        return ""

    def spec(self) -> dict[str, object]:
        """The field's entry of a space file, as typed."""
        kind = self.kind.currentData()
        if kind in ("range", "log"):
            return {
                "low": _number(self.low.text()),
                "high": _number(self.high.text()),
                "log": kind == "log",
            }
        return {kind: parse_values(self.values.text())}

    def show_problem(self, text: str) -> None:
        self.problem.setText(text)
        self.problem.setToolTip(text)
        self.problem.setVisible(bool(text))

    def _on_kind(self) -> None:
        ranged = self.kind.currentData() in ("range", "log")
        for widget in (self.low, self.to, self.high):
            widget.setVisible(ranged)
        self.values.setVisible(not ranged)
        self.changed.emit()

    def _on_path(self) -> None:
        """A word field (``optimizer.kind``) is searched by choices; a number by a range."""
        try:
            current = field_value(self._project.model_dump(mode="json"), self.field_path())
        except ValueError:
            current = None
        if isinstance(current, str | bool) and self.kind.currentData() in ("range", "log"):
            self.kind.setCurrentIndex(self.kind.findData("choices"))
        self.values.setPlaceholderText(
            f"now {json.dumps(current)}; e.g. adam, sgd  or  16, 32, 64"
            if current is not None
            else "e.g. adam, sgd  or  16, 32, 64"
        )
        self.changed.emit()


class StudyDialog(QDialog):
    """Asks for a study over ``base``; :meth:`request` is what to run once accepted."""

    def __init__(self, base: Project, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add Sweep: an Optuna study")
        self._base = base
        self._paths = field_paths(base)
        self._request: StudyRequest | None = None
        self.rows: list[AxisRow] = []

        self.rows_box = QWidget()
        self.rows_layout = QVBoxLayout(self.rows_box)
        self.rows_layout.setContentsMargins(0, 0, 0, 0)
        self.rows_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.rows_box)
        scroll.setMinimumHeight(self.fontMetrics().height() * 9)
        self.add_field = QPushButton("Add Field")
        self.add_field.setToolTip("Search another setting of the project")
        self.add_field.clicked.connect(lambda: self.add_row())

        self.sampler = QComboBox()
        for key, text in SAMPLERS.items():
            self.sampler.addItem(text, key)
        self.pruner = QComboBox()
        for key, text in PRUNERS.items():
            self.pruner.addItem(text, key)
        self.objective = QComboBox()
        for name in OBJECTIVES:
            self.objective.addItem(name, name)
        self.objective.setCurrentIndex(
            self.objective.findData("val_loss" if base.evaluation is not None else "loss")
        )
        defaults = StudySettings()
        self.trials = QSpinBox()
        self.trials.setRange(1, 10_000)
        self.trials.setValue(defaults.trials)
        self.seed = QSpinBox()
        self.seed.setRange(0, MAX_SEED)
        self.warmup = QSpinBox()
        self.warmup.setRange(0, 10**9)
        self.warmup.setToolTip("Steps before the pruner may stop a trial")
        self.folder = QLineEdit()
        self.folder.setPlaceholderText("a new folder among the runs")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.folder, 1)
        folder_row.addWidget(browse)

        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)

        settings = QFormLayout()
        settings.addRow("Sampler", self.sampler)
        settings.addRow("Pruner", self.pruner)
        settings.addRow("Objective", self.objective)
        numbers = QHBoxLayout()
        spins = (("Trials", self.trials), ("Seed", self.seed), ("Warm-up steps", self.warmup))
        for label, box in spins:
            numbers.addWidget(QLabel(label))
            numbers.addWidget(box)
            numbers.addSpacing(8)
        numbers.addStretch(1)
        settings.addRow(numbers)
        settings.addRow("Study folder", folder_row)
        header = QHBoxLayout()
        header.addWidget(QLabel("<b>Fields to search</b> (by their path in the project)"), 1)
        header.addWidget(self.add_field)
        layout = QVBoxLayout(self)
        intro = QLabel(f"Trials of <b>{base.name}</b>, each a run of its own, pruned as it trains")
        intro.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(intro)
        layout.addLayout(header)
        layout.addWidget(scroll, 1)
        layout.addLayout(settings)
        layout.addWidget(self.problem)
        layout.addWidget(self.buttons)

        for box in (self.sampler, self.pruner, self.objective):
            box.currentIndexChanged.connect(self.refresh)
        for spin in (self.trials, self.seed, self.warmup):
            spin.valueChanged.connect(self.refresh)
        self.folder.textChanged.connect(self.refresh)
        first = self.add_row()
        rate = base.optimizer.learning_rate
        first.set_axis("optimizer.learning_rate", "log", f"{rate / 10:g}", f"{min(rate * 10, 1):g}")
        self.resize(760, 560)
        self.refresh()

    def add_row(self) -> AxisRow:
        row = AxisRow(self._paths, self._base)
        row.changed.connect(self.refresh)
        row.removed.connect(self._remove_row)
        self.rows.append(row)
        self.rows_layout.insertWidget(self.rows_layout.count() - 1, row)
        self.add_field.setEnabled(len(self.rows) < MAX_AXES)
        self.refresh()
        return row

    def _remove_row(self, row: AxisRow) -> None:
        self.rows.remove(row)
        row.deleteLater()
        self.add_field.setEnabled(len(self.rows) < MAX_AXES)
        self.refresh()

    def request(self) -> StudyRequest | None:
        """What to run; None while anything is wrong."""
        return self._request

    def settings(self) -> StudySettings:
        return StudySettings(
            trials=self.trials.value(),
            sampler=self.sampler.currentData(),
            pruner=self.pruner.currentData(),
            objective=self.objective.currentData(),
            seed=self.seed.value(),
            warmup_steps=self.warmup.value(),
        )

    def refresh(self) -> None:
        """Checks everything again, as the engine will; the first problem is shown."""
        self._request = None
        folder_text = self.folder.text().strip()
        folder = Path(folder_text).expanduser() if folder_text else None
        continued = self._continued(folder) if folder is not None else None
        for widget in (*self.rows, self.add_field, self.sampler, self.pruner, self.objective):
            widget.setEnabled(continued is None)
        for spin in (self.trials, self.seed, self.warmup):
            spin.setEnabled(continued is None)
        if isinstance(continued, str):
            self._say(continued)
            return
        if continued is not None:
            done = read_entry(folder).ended if folder is not None else 0
            self._request = StudyRequest(continued, folder, resume=True)
            self._say(
                f"Continues this study: {done} of {continued.planned_trials()} trials done; "
                "its fields and settings stay the study's.",
                ok="Continue Study",
            )
            return
        space = self._space()
        if space is None:
            self._say("Fix the fields marked above first." if self.rows else "Add a field.")
            return
        plan = StudyPlan(self._base, space, self.settings())
        problems = plan.problems()
        if problems:
            first = problems[0]
            self._say(f"{'.'.join(map(str, first.loc)) or 'study'}: {first.message}")
            return
        self._request = StudyRequest(plan, folder)
        grid = f" ({space.grid_size()} combinations)" if space.is_grid() else ""
        self._say(
            f"Ready: {plan.planned_trials()} trials over {len(space.axes)} "
            f"field{'s' if len(space.axes) != 1 else ''}{grid}, "
            f"{plan.settings.objective} {direction(plan.settings.objective)}d.",
            ok="Start Study",
        )

    def _space(self) -> SearchSpace | None:
        """The space of the rows, each row's own problem shown on it; None if any has one."""
        if not self.rows:
            return None
        data: dict[str, object] = {}
        good = True
        for row in self.rows:
            path = row.field_path()
            problem = row.missing()
            if not problem and path in data:
                problem = f"{path} is searched twice: remove one"
            elif not problem:
                try:
                    space_from_data({path: row.spec()}, self._base)
                except ProblemsError as exc:
                    first = exc.problems[0]
                    problem = f"{first.message}" if first.loc else str(exc)
                    problem = f"{path}: {problem}"
            row.show_problem(problem)
            if problem:
                good = False
            else:
                data[path] = row.spec()
        if not good:
            return None
        return space_from_data(data, self._base)

    def _continued(self, folder: Path) -> StudyPlan | str | None:
        """The plan of the study ``folder`` holds for this project; a line saying why the
        folder cannot take a study; None for an empty or new folder."""
        if not folder.exists():
            return None
        if not folder.is_dir():
            return f"{folder} is a file, not a folder"
        if is_study_folder(folder):
            entry = read_entry(folder)
            if entry.plan is None:
                return f"{folder}: {entry.error}"
            if entry.plan.project.model_dump() != self._base.model_dump():
                return (
                    f"{folder} holds a study of another project ({entry.plan.project.name}): "
                    "choose an empty folder, or continue it from the Studies tab"
                )
            if entry.held:
                return f"{folder}: the study is being run by another process"
            return entry.plan
        if any(folder.iterdir()):
            return f"{folder} is not empty and holds no study: choose an empty folder"
        return None

    def _say(self, text: str, ok: str | None = None) -> None:
        self.problem.setText(text)
        self.problem.setStyleSheet("" if ok else PROBLEM_STYLE)
        self.ok.setEnabled(ok is not None)
        self.ok.setText(ok or "Start Study")

    def _browse(self) -> None:
        chosen = file_dialogs.choose_folder(self, "Study folder", file_dialogs.Purpose.PROJECTS)
        if chosen is not None:
            self.folder.setText(str(chosen))


def ask_study(parent: QWidget, base: Project) -> StudyRequest | None:
    """The study to run, or None when the user cancelled."""
    dialog = StudyDialog(base, parent)
    return dialog.request() if dialog.exec() == QDialog.DialogCode.Accepted else None
