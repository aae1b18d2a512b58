"""The per-example loss (always built with ``reduction=None``; the loop averages it)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from ...engine.config import LossConfig
from ...engine.config.applicability import applicable_fields
from ...engine.problems import Loc
from .auto_form import AutoForm


class LossForm(QWidget):
    """Edits ``loss``; from_logits and delta are greyed out where the kind ignores them."""

    edited = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.fields = AutoForm(
            LossConfig,
            list(LossConfig.model_fields),
            labels={"from_logits": "From logits:"},
        )
        self.fields.editors["from_logits"].setToolTip(
            "The model outputs logits (no sigmoid/softmax on the last layer)"
        )
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.fields)
        self.fields.edited.connect(self._refresh)
        self.fields.edited.connect(self.edited)
        self._refresh()

    def value(self) -> dict[str, Any]:
        return self.fields.value()

    def set_value(self, loss: LossConfig) -> None:
        with QSignalBlocker(self):
            self.fields.set_value(loss)
        self._refresh()

    def targets(self) -> dict[Loc, QWidget]:
        return {("loss", name): editor for name, editor in self.fields.editors.items()}

    def _refresh(self) -> None:
        kind = self.fields.editors["kind"].value()
        self.fields.enable_applicable(applicable_fields(LossConfig, kind))
