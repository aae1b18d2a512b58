"""The optimizer: its kind switches a page of that optimizer's own settings."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import QPushButton, QStackedWidget, QVBoxLayout, QWidget

from ...engine.config import OPTIMIZER_KINDS, AdagradConfig, AdamConfig, RMSpropConfig, SGDConfig
from ...engine.problems import Loc
from .auto_form import AutoForm, show_page, wrapping_form
from .field_editors import ChoiceEdit

OPTIMIZER_MODELS = {
    "sgd": SGDConfig,
    "adam": AdamConfig,
    "rmsprop": RMSpropConfig,
    "adagrad": AdagradConfig,
}


class OptimizerForm(QWidget):
    """Edits ``optimizer``; each kind keeps its own values while another is shown."""

    edited = Signal()
    find_rate_requested = Signal()
    """Find Learning Rate... was clicked: the window runs the range test (``gui.run``)."""

    def __init__(self) -> None:
        super().__init__()
        self.find_rate = QPushButton("Find Learning Rate...")
        self.find_rate.setToolTip(
            "A short run of this project on its own strategy that raises the rate step by "
            "step and suggests one (distloop lr-find)"
        )
        self.find_rate.clicked.connect(self.find_rate_requested)
        self.kind = ChoiceEdit(OPTIMIZER_KINDS)
        self.kind.setToolTip("The Keras optimizer, created inside the strategy's scope")
        self.pages = {
            kind: AutoForm(model, [name for name in model.model_fields if name != "kind"])
            for kind, model in OPTIMIZER_MODELS.items()
        }
        self.stack = QStackedWidget()
        for kind in OPTIMIZER_KINDS:
            self.stack.addWidget(self.pages[kind])
            self.pages[kind].edited.connect(self.edited)
        form = wrapping_form()
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Kind:", self.kind)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(form)
        layout.addWidget(self.stack)
        layout.addWidget(self.find_rate)
        self.kind.edited.connect(self._show_page)
        self.kind.edited.connect(self.edited)
        self._show_page()

    def value(self) -> dict[str, Any]:
        kind = self.kind.value()
        return {"kind": kind, **self.pages[kind].value()}

    def set_value(self, optimizer: Any) -> None:
        """Shows ``optimizer``; the other kinds' pages go back to their defaults."""
        with QSignalBlocker(self):
            for page in self.pages.values():
                page.reset()
            self.kind.set_value(optimizer.kind)
            self.pages[optimizer.kind].set_value(optimizer)
        self._show_page()

    def set_learning_rate(self, rate: float) -> None:
        """Writes ``rate`` into the shown optimizer's learning rate, as if typed there."""
        self.pages[self.kind.value()].editors["learning_rate"].set_value(rate)

    def targets(self) -> dict[Loc, QWidget]:
        targets: dict[Loc, QWidget] = {("optimizer", "kind"): self.kind}
        for name, editor in self.pages[self.kind.value()].editors.items():
            targets[("optimizer", name)] = editor
        return targets

    def _show_page(self) -> None:
        show_page(self.stack, self.pages[self.kind.value()])
