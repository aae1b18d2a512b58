"""The sweep form: which learning rates, batch sizes and optimizers to try on the current project.

The form only gathers values; :mod:`engine.sweep` decides what they mean and which
combinations are valid, so the preview under the form lists exactly the runs
that will be queued, and each combination the project's rules refuse with the
reason, before anything is added.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ..engine.config import MAX_SEED, OPTIMIZER_KINDS, Project
from ..engine.problems import ProblemsError
from ..engine.sweep import MAX_RUNS, SweepExpansion, expand, load_sweep_spec

PREVIEW_LINES = 12


class SweepDialog(QDialog):
    """Asks for a sweep over ``base``; :meth:`projects` are the runs to queue."""

    def __init__(self, base: Project, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add a sweep to the queue")
        self._base = base
        self._expansion: SweepExpansion | None = None

        self.method = QComboBox()
        self.method.addItem("Grid: every combination", "grid")
        self.method.addItem("Random: draw a number of runs", "random")
        self.learning_rates = QLineEdit()
        self.learning_rates.setPlaceholderText(
            f"e.g. 0.1, 0.01, 0.001 (empty: {base.optimizer.learning_rate:g})"
        )
        self.range_low = QLineEdit()
        self.range_low.setPlaceholderText("low, e.g. 0.0001")
        self.range_high = QLineEdit()
        self.range_high.setPlaceholderText("high, e.g. 0.1")
        self.batch_sizes = QLineEdit()
        self.batch_sizes.setPlaceholderText(
            f"e.g. 16, 32, 64 (empty: {base.data.global_batch_size})"
        )
        self.optimizers = {kind: QCheckBox(kind) for kind in OPTIMIZER_KINDS}
        self.count = QSpinBox()
        self.count.setRange(1, MAX_RUNS)
        self.count.setValue(8)
        self.seed = QSpinBox()
        self.seed.setRange(0, MAX_SEED)
        self.preview = QPlainTextEdit()
        self.preview.setReadOnly(True)
        self.preview.setMinimumHeight(self.fontMetrics().height() * 8)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)

        range_row = QHBoxLayout()
        range_row.addWidget(self.range_low)
        range_row.addWidget(QLabel("to"))
        range_row.addWidget(self.range_high)
        optimizer_row = QHBoxLayout()
        for box in self.optimizers.values():
            optimizer_row.addWidget(box)
        optimizer_row.addStretch(1)
        form = QFormLayout()
        form.addRow("Search", self.method)
        form.addRow("Learning rates", self.learning_rates)
        form.addRow("Learning rate range (log-uniform)", range_row)
        form.addRow("Batch sizes", self.batch_sizes)
        form.addRow(f"Optimizers (none: {base.optimizer.kind})", optimizer_row)
        form.addRow("Runs", self.count)
        form.addRow("Seed", self.seed)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"Base project: <b>{base.name}</b>"))
        layout.addLayout(form)
        layout.addWidget(self.preview, 1)
        layout.addWidget(self.buttons)

        self.method.currentIndexChanged.connect(self._refresh)
        for edit in (self.learning_rates, self.range_low, self.range_high, self.batch_sizes):
            edit.textChanged.connect(self._refresh)
        for box in self.optimizers.values():
            box.toggled.connect(self._refresh)
        self.count.valueChanged.connect(self._refresh)
        self.seed.valueChanged.connect(self._refresh)
        self._refresh()

    def projects(self) -> list[Project]:
        return [] if self._expansion is None else list(self._expansion.projects)

    def spec_data(self) -> dict[str, object]:
        """The form as a sweep spec's JSON; ValueError names a field whose text is no list."""
        random = self.method.currentData() == "random"
        data: dict[str, object] = {"method": self.method.currentData()}
        rates = _numbers(self.learning_rates.text(), float, "learning rates")
        if rates:
            data["learning_rates"] = rates
        sizes = _numbers(self.batch_sizes.text(), int, "batch sizes")
        if sizes:
            data["batch_sizes"] = sizes
        kinds = [kind for kind, box in self.optimizers.items() if box.isChecked()]
        if kinds:
            data["optimizers"] = kinds
        if random:
            bounds = [self.range_low.text(), self.range_high.text()]
            if any(text.strip() for text in bounds):
                data["learning_rate_range"] = [
                    _number(text, float, "learning rate range") for text in bounds
                ]
            data["count"] = self.count.value()
            data["seed"] = self.seed.value()
        return data

    def _refresh(self) -> None:
        random = self.method.currentData() == "random"
        for widget in (self.range_low, self.range_high, self.count, self.seed):
            widget.setEnabled(random)
        self._expansion = None
        try:
            spec = load_sweep_spec(self.spec_data())
        except ValueError as exc:  # ProblemsError included
            problems = exc.problems if isinstance(exc, ProblemsError) else [exc]
            self._show(["Not a sweep yet:", *(f"  {problem}" for problem in problems)])
            return
        self._expansion = expand(self._base, spec)
        runs, rejected = self._expansion.projects, self._expansion.rejected
        lines = [f"{len(runs)} run{'s' if len(runs) != 1 else ''} to queue:"]
        lines += [f"  {project.name}" for project in runs[:PREVIEW_LINES]]
        if len(runs) > PREVIEW_LINES:
            lines.append(f"  … and {len(runs) - PREVIEW_LINES} more")
        if rejected:
            lines.append(f"{len(rejected)} combination(s) left out, the project refuses them:")
            lines += [f"  {reason}" for reason in rejected]
        self._show(lines)

    def _show(self, lines: list[str]) -> None:
        self.preview.setPlainText("\n".join(lines))
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(bool(self.projects()))


def _numbers(text: str, kind: type[float] | type[int], what: str) -> list[float] | list[int]:
    return [_number(part, kind, what) for part in text.replace(";", ",").split(",") if part.strip()]


def _number(text: str, kind: type[float] | type[int], what: str) -> float | int:
    try:
        return kind(text.strip())
    except ValueError:
        expected = "a whole number" if kind is int else "a number"
        raise ValueError(f"{what}: {text.strip()!r} is not {expected}") from None


def ask_sweep(parent: QWidget, base: Project) -> list[Project] | None:
    """The sweep's projects, or None when the user cancelled."""
    dialog = SweepDialog(base, parent)
    return dialog.projects() if dialog.exec() == QDialog.DialogCode.Accepted else None
