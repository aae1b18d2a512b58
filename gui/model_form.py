"""The model: its input shape and an ordered, editable list of layers, with a parameter count."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..engine.config import DenseLayer, DropoutLayer, ModelConfig
from ..engine.problems import Loc
from .field_editors import ListEdit
from .layer_card import LayerCard, new_layer


class ModelForm(QWidget):
    """Edits ``model``; the parameter count follows every edit (computed without TensorFlow)."""

    edited = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.input_shape = ListEdit(item_type=int)
        self.input_shape.setPlaceholderText("e.g. 8, or 28, 28")
        self.input_shape.setToolTip(
            "Dimensions of one example, comma-separated (1 to 4 of them, each at least 1)"
        )
        self.input_shape.edited.connect(self._on_edited)
        self.parameters = QLabel()
        self.parameters.setToolTip("Trainable parameters of the dense layers")

        form = QFormLayout()
        form.addRow("Input shape:", self.input_shape)
        form.addRow("Parameters:", self.parameters)

        self.layers_box = QGroupBox("Layers (in order)")
        self._cards_layout = QVBoxLayout()
        self._cards_layout.setSpacing(6)
        self.add_dense_button = QPushButton("Add dense layer")
        self.add_dropout_button = QPushButton("Add dropout layer")
        self.add_dense_button.clicked.connect(lambda: self.add_layer(new_layer("dense")))
        self.add_dropout_button.clicked.connect(lambda: self.add_layer(new_layer("dropout")))
        buttons = QHBoxLayout()
        buttons.addWidget(self.add_dense_button)
        buttons.addWidget(self.add_dropout_button)
        buttons.addStretch(1)
        box_layout = QVBoxLayout(self.layers_box)
        box_layout.addLayout(self._cards_layout)
        box_layout.addLayout(buttons)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.layers_box)
        layout.addStretch(1)
        self.cards: list[LayerCard] = []

    # --- the model ------------------------------------------------------------------------

    def value(self) -> dict[str, Any]:
        return {
            "input_shape": self.input_shape.value(),
            "layers": [card.value() for card in self.cards],
        }

    def set_value(self, model: ModelConfig) -> None:
        with QSignalBlocker(self):
            self.input_shape.set_value(model.input_shape)
            for card in self.cards:
                self._discard(card)
            self.cards = []
            for layer in model.layers:
                self._append_card(layer)
        self._relayout()

    def parameter_count(self) -> int | None:
        """The live count, or None while the model itself is invalid."""
        try:
            return ModelConfig.model_validate(self.value()).parameter_count()
        except ValidationError:
            return None

    def targets(self) -> dict[Loc, QWidget]:
        targets: dict[Loc, QWidget] = {
            ("model",): self.layers_box,
            ("model", "input_shape"): self.input_shape,
            ("model", "layers"): self.layers_box,
        }
        for index, card in enumerate(self.cards):
            targets.update(card.targets(("model", "layers", index)))
        return targets

    # --- the layer list -------------------------------------------------------------------

    def add_layer(self, layer: DenseLayer | DropoutLayer) -> None:
        self._append_card(layer)
        self._relayout()
        self._on_edited()

    def remove_layer(self, index: int) -> None:
        self._discard(self.cards.pop(index))
        self._relayout()
        self._on_edited()

    def move_layer(self, index: int, offset: int) -> None:
        target = index + offset
        if not 0 <= target < len(self.cards):
            return
        self.cards[index], self.cards[target] = self.cards[target], self.cards[index]
        self._relayout()
        self._on_edited()

    def _append_card(self, layer: DenseLayer | DropoutLayer) -> None:
        card = LayerCard(layer)
        card.edited.connect(self._on_edited)
        card.move_requested.connect(lambda c, offset: self.move_layer(self.cards.index(c), offset))
        card.remove_requested.connect(lambda c: self.remove_layer(self.cards.index(c)))
        self.cards.append(card)

    def _discard(self, card: LayerCard) -> None:
        self._cards_layout.removeWidget(card)
        card.hide()
        card.deleteLater()

    def _relayout(self) -> None:
        """Puts the cards in list order and numbers them."""
        for card in self.cards:
            self._cards_layout.removeWidget(card)
        for index, card in enumerate(self.cards):
            self._cards_layout.addWidget(card)
            card.set_position(index, len(self.cards))
        self._update_count()

    def _update_count(self) -> None:
        count = self.parameter_count()
        self.parameters.setText("— (the model has problems)" if count is None else f"{count:,}")

    def _on_edited(self) -> None:
        self._update_count()
        self.edited.emit()
