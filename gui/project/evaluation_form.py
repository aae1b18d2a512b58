"""Validation during training: how often, and on what (a held-out split or separate data)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QGroupBox,
    QLabel,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from ...engine.config import ConstantData, EvaluationConfig
from ...engine.problems import Loc
from .auto_form import wrapping_form
from .data_form import DataForm
from .field_editors import FloatEdit, editor_for, float_range, least_float_step

DEFAULT_SPLIT = 0.1


class EvaluationForm(QWidget):
    """Edits ``evaluation`` (None when off): every N steps, on a split or on separate data."""

    edited = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.enabled = QCheckBox("Evaluate during training")
        self.enabled.setToolTip(
            "Evaluate the model on validation data under the strategy; the plot shows val_loss"
        )
        self.every = editor_for(EvaluationConfig, "every")
        self.split_radio = QRadioButton("Hold out a fraction of the training data:")
        self.source_radio = QRadioButton("Separate validation data:")
        choice = QButtonGroup(self)
        choice.addButton(self.split_radio)
        choice.addButton(self.source_radio)
        self.split_radio.setChecked(True)
        split_info = EvaluationConfig.model_fields["split"]
        # The radio says whether it is used.
        self.split = FloatEdit(*float_range(split_info), least_float_step(split_info))
        self.split.setToolTip(split_info.description or "")
        self.source = DataForm(prefix=("evaluation", "source"))
        self.source_box = QGroupBox()
        QVBoxLayout(self.source_box).addWidget(self.source)
        note = QLabel(
            "A split changes which examples train; separate data leaves training exactly as "
            "it is without evaluation."
        )
        note.setWordWrap(True)
        note.setStyleSheet("color: #555555;")

        self.body = QWidget()
        form = wrapping_form(self.body)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Every (steps):", self.every)
        form.addRow(self.split_radio, self.split)
        form.addRow(self.source_radio)
        form.addRow(self.source_box)
        form.addRow(note)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.enabled)
        layout.addWidget(self.body)

        self.enabled.toggled.connect(self._refresh)
        self.split_radio.toggled.connect(self._refresh)
        for signal in (
            self.enabled.toggled,
            self.split_radio.toggled,
            self.every.edited,
            self.split.edited,
            self.source.edited,
        ):
            signal.connect(self.edited)
        self._reset()

    def value(self) -> dict[str, Any] | None:
        if not self.enabled.isChecked():
            return None
        by_split = self.split_radio.isChecked()
        return {
            "every": self.every.value(),
            "split": self.split.value() if by_split else None,
            "source": None if by_split else self.source.value(),
        }

    def set_value(self, evaluation: EvaluationConfig | None) -> None:
        with QSignalBlocker(self):
            self._reset()
            if evaluation is not None:
                self.enabled.setChecked(True)
                self.every.set_value(evaluation.every)
                if evaluation.split is not None:
                    self.split.set_value(evaluation.split)
                if evaluation.source is not None:
                    self.source_radio.setChecked(True)
                    self.source.set_value(evaluation.source)
        self._refresh()

    def targets(self) -> dict[Loc, QWidget]:
        targets: dict[Loc, QWidget] = {
            ("evaluation",): self.enabled,
            ("evaluation", "every"): self.every,
            ("evaluation", "split"): self.split,
            ("evaluation", "source"): self.source_box,
        }
        targets.update(self.source.targets())
        return targets

    def _reset(self) -> None:
        """Off, with the model's defaults and a small constant source to start from."""
        self.enabled.setChecked(False)
        self.every.set_value(EvaluationConfig.model_fields["every"].default)
        self.split.set_value(DEFAULT_SPLIT)
        self.split_radio.setChecked(True)
        self.source.set_value(ConstantData(features=[1.0], labels=[1.0], examples=100))

    def _refresh(self) -> None:
        self.body.setEnabled(self.enabled.isChecked())
        by_split = self.split_radio.isChecked()
        self.split.setEnabled(by_split)
        self.source_box.setEnabled(not by_split)
