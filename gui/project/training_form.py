"""How long and how to train: epochs or steps, the seed, and what the loop reports."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import QRadioButton, QVBoxLayout, QWidget

from ...engine.config import TrainingConfig
from ...engine.problems import Loc
from .auto_form import AutoForm, wrapping_form
from .field_editors import IntEdit, int_range

DEFAULT_EPOCHS, DEFAULT_STEPS = 1, 100


class TrainingForm(QWidget):
    """Edits ``training``; the radio buttons make "exactly one of epochs or steps" a given."""

    edited = Signal()

    def __init__(self) -> None:
        super().__init__()
        fields = TrainingConfig.model_fields
        self.epochs_radio = QRadioButton("Epochs:")
        self.steps_radio = QRadioButton("Steps:")
        self.epochs_radio.setToolTip("Passes over the data (needs a known example count for ETA)")
        self.steps_radio.setToolTip("Exactly this many steps, repeating the data as needed")
        self.epochs = IntEdit(*int_range(fields["epochs"]))
        self.steps = IntEdit(*int_range(fields["steps"]))
        for spin, radio in ((self.epochs, self.epochs_radio), (self.steps, self.steps_radio)):
            low, high = spin.bounds
            spin.setToolTip(f"{radio.toolTip()}: from {low:,} to {high:,}")
        self.epochs.setValue(DEFAULT_EPOCHS)
        self.steps.setValue(DEFAULT_STEPS)
        self.epochs_radio.setChecked(True)
        self.rest = AutoForm(
            TrainingConfig,
            [name for name in fields if name not in ("epochs", "steps")],
            labels={
                "per_replica_losses": "Per-replica losses:",
                "stop_on_nan": "Stop on NaN:",
                "jit_compile": "XLA (jit_compile):",
                "gpu_memory_growth": "GPU memory growth:",
            },
            initial={"checkpoint_every": 1000},
        )
        self.rest.editors["seed"].setToolTip(
            "Seeds initializers, shuffling and dropout so a run repeats exactly"
        )
        length = wrapping_form()
        length.setContentsMargins(0, 0, 0, 0)
        length.addRow(self.epochs_radio, self.epochs)
        length.addRow(self.steps_radio, self.steps)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(length)
        layout.addWidget(self.rest)
        for signal in (self.epochs.edited, self.steps.edited, self.rest.edited):
            signal.connect(self.edited)
        self.epochs_radio.toggled.connect(self._refresh)
        self.epochs_radio.toggled.connect(self.edited)
        self._refresh()

    def value(self) -> dict[str, Any]:
        by_epochs = self.epochs_radio.isChecked()
        return {
            "epochs": self.epochs.value() if by_epochs else None,
            "steps": None if by_epochs else self.steps.value(),
            **self.rest.value(),
        }

    def set_value(self, training: TrainingConfig) -> None:
        with QSignalBlocker(self):
            self.epochs.setValue(training.epochs or DEFAULT_EPOCHS)
            self.steps.setValue(training.steps or DEFAULT_STEPS)
            (self.epochs_radio if training.epochs is not None else self.steps_radio).setChecked(
                True
            )
            self.rest.set_value(training)
        self._refresh()

    def targets(self) -> dict[Loc, QWidget]:
        targets: dict[Loc, QWidget] = {
            ("training", "epochs"): self.epochs,
            ("training", "steps"): self.steps,
        }
        for name, editor in self.rest.editors.items():
            targets[("training", name)] = editor
        return targets

    def _refresh(self) -> None:
        by_epochs = self.epochs_radio.isChecked()
        self.epochs.setEnabled(by_epochs)
        self.steps.setEnabled(not by_epochs)
