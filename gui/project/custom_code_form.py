"""Custom step code: a Python file with the training step, run only by the engine process."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import QCheckBox, QLabel, QVBoxLayout, QWidget

from ...engine.config import CustomCode
from ...engine.problems import Loc
from .auto_form import wrapping_form
from .field_editors import PathEdit

PYTHON_FILTER = "Python files (*.py);;All files (*)"


class CustomCodeForm(QWidget):
    """Edits ``custom_code`` (None: the guide's built-in step)."""

    edited = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.enabled = QCheckBox("Use custom step code")
        self.enabled.setToolTip(
            "Replace the guide's train_step with your own (e.g. a GAN's alternating steps)"
        )
        self.path = PathEdit(PYTHON_FILTER)
        self.path.setToolTip(CustomCode.model_fields["path"].description or "")
        note = QLabel(
            "Only the engine process loads this file, and only to run: opening or checking a "
            "project never executes it. Named losses it returns get curves of their own."
        )
        note.setWordWrap(True)
        note.setStyleSheet("color: #555555;")
        form = wrapping_form()
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Python file:", self.path)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.enabled)
        layout.addLayout(form)
        layout.addWidget(note)
        self.enabled.toggled.connect(self.path.setEnabled)
        self.enabled.toggled.connect(self.edited)
        self.path.edited.connect(self.edited)
        self.path.setEnabled(False)

    def value(self) -> dict[str, Any] | None:
        return {"path": self.path.value()} if self.enabled.isChecked() else None

    def set_value(self, code: CustomCode | None) -> None:
        with QSignalBlocker(self):
            self.path.set_value(code.path if code else "")
            self.enabled.setChecked(code is not None)
        self.path.setEnabled(code is not None)

    def targets(self) -> dict[Loc, QWidget]:
        return {("custom_code",): self.enabled, ("custom_code", "path"): self.path}
