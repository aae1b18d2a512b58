"""The model: layers on an input shape, a backbone with head layers, or a .keras file.

Every layer card shows its output shape and parameters as the user edits (computed
without TensorFlow by ``engine.model_shapes``), and the first layer that cannot take
the shape before it says why on its own card.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ...engine.config import LAYER_KINDS, MAX_DIMENSION, MODEL_KINDS, Layer, ModelConfig
from ...engine.model_shapes import BACKBONES, ModelFileError, model_shapes, read_keras_file
from ...engine.problems import Loc
from ..widgets.flow_layout import FlowLayout
from .auto_form import wrapping_form
from .field_editors import ChoiceEdit, ListEdit, PathEdit
from .layer_card import LayerCard, new_layer

_LAYER = TypeAdapter(Layer)
_KIND_TIPS = (
    "layers: the layers below on the input shape; backbone: a keras.applications model "
    "(random or local weights) with the layers below as its head; keras_file: a saved "
    ".keras model, trained further"
)


class ModelForm(QWidget):
    """Edits ``model``; the parameter count follows every edit (computed without TensorFlow)."""

    edited = Signal()

    def __init__(self) -> None:
        super().__init__()
        fields = ModelConfig.model_fields
        self.kind = ChoiceEdit(MODEL_KINDS)
        self.kind.setToolTip(_KIND_TIPS)
        self.kind.edited.connect(self._on_kind)
        self.input_shape = ListEdit(item_type=int)
        self.input_shape.setPlaceholderText("e.g. 8, or 28, 28, 1")
        self.input_shape.setToolTip(
            "Dimensions of one example, comma-separated (1 to 4 of them, each at least 1)"
        )
        self.input_shape.edited.connect(self._on_edited)
        self.backbone = ChoiceEdit(list(BACKBONES))
        self.backbone.setToolTip(fields["backbone"].description or "")
        self.weights = PathEdit("Keras weights (*.h5);;All files (*)")
        self.weights.line.setPlaceholderText("none: random weights (nothing is downloaded)")
        self.weights.setToolTip(fields["weights"].description or "")
        self.path = PathEdit("Keras models (*.keras)")
        self.path.setToolTip(fields["path"].description or "")
        self.path.edited.connect(self._on_path)
        self.file_note = QLabel()
        self.file_note.setWordWrap(True)
        self.backbone_shape = QLabel()
        self.backbone_shape.setWordWrap(True)  # unwrapped, it widened the dock
        for editor in (self.backbone, self.weights, self.path):
            editor.edited.connect(self._on_edited)
        self.parameters = QLabel()
        self.parameters.setToolTip("Trainable parameters (moving statistics are not trained)")

        self.form = wrapping_form()
        self.form.addRow("Model:", self.kind)
        self.form.addRow("Input shape:", self.input_shape)
        self.form.addRow("Backbone:", self.backbone)
        self.form.addRow("", self.backbone_shape)
        self.form.addRow("Weights file:", self.weights)
        self.form.addRow("Model file:", self.path)
        self.form.addRow("", self.file_note)
        self.form.addRow("Parameters:", self.parameters)

        self.layers_box = QGroupBox("Layers (in order)")
        self._cards_layout = QVBoxLayout()
        self._cards_layout.setSpacing(6)
        self.add_dense_button = QPushButton("Add dense layer")
        self.add_dropout_button = QPushButton("Add dropout layer")
        self.add_kind = ChoiceEdit(LAYER_KINDS)
        self.add_kind.set_value("conv2d")
        self.add_kind.setToolTip("The kind of layer Add puts at the end")
        self.add_button = QPushButton("Add")
        self.add_dense_button.clicked.connect(lambda: self.add_layer(new_layer("dense")))
        self.add_dropout_button.clicked.connect(lambda: self.add_layer(new_layer("dropout")))
        self.add_button.clicked.connect(lambda: self.add_layer(new_layer(self.add_kind.value())))
        buttons = FlowLayout()
        buttons.addWidget(self.add_dense_button)
        buttons.addWidget(self.add_dropout_button)
        # A row of its own: beside the two buttons it would widen the dock past its default.
        # Both rows wrap in a narrow dock; the kind takes the width its row leaves.
        self.add_kind.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        other = FlowLayout()
        other.addWidget(QLabel("Other layer:"))
        other.addWidget(self.add_kind)
        other.addWidget(self.add_button)
        box_layout = QVBoxLayout(self.layers_box)
        box_layout.addLayout(self._cards_layout)
        box_layout.addLayout(buttons)
        box_layout.addLayout(other)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)  # the page around it has margins
        layout.addLayout(self.form)
        layout.addWidget(self.layers_box)
        layout.addStretch(1)
        self.cards: list[LayerCard] = []
        self._show_kind()

    # --- the model ------------------------------------------------------------------------

    def value(self) -> dict[str, Any]:
        kind = self.kind.value()
        return {
            "kind": kind,
            "input_shape": self.input_shape.value(),
            "layers": [] if kind == "keras_file" else [card.value() for card in self.cards],
            "backbone": self.backbone.value() if kind == "backbone" else None,
            "weights": (self.weights.value() or None) if kind == "backbone" else None,
            "path": self.path.value() if kind == "keras_file" else None,
        }

    def set_value(self, model: ModelConfig) -> None:
        with QSignalBlocker(self):
            self.kind.set_value(model.kind)
            self.input_shape.set_value(model.input_shape)
            self.backbone.set_value(model.backbone or next(iter(BACKBONES)))
            self.weights.set_value(model.weights or "")
            self.path.set_value(model.path or "")
            for card in self.cards:
                self._discard(card)
            self.cards = []
            for layer in model.layers:
                self._append_card(layer)
        self.file_note.setText("")
        self._show_kind()
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
            ("model", "kind"): self.kind,
            ("model", "input_shape"): self.input_shape,
            ("model", "layers"): self.layers_box,
            ("model", "backbone"): self.backbone,
            ("model", "weights"): self.weights,
            ("model", "path"): self.path,
        }
        for index, card in enumerate(self.cards):
            targets.update(card.targets(("model", "layers", index)))
        return targets

    # --- the layer list -------------------------------------------------------------------

    def add_layer(self, layer: BaseModel) -> None:
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

    def _append_card(self, layer: BaseModel) -> None:
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
        if count is not None:
            self.parameters.setText(f"{count:,}")
        elif self.kind.value() == "keras_file":
            self.parameters.setText("counted when the engine loads the file")
        else:
            self.parameters.setText("— (the model has problems)")
        self._update_shapes()

    def _update_shapes(self) -> None:
        """Each card's output and parameters, up to the first layer that cannot run."""
        try:
            shape = ModelConfig.model_fields["input_shape"].annotation
            dims = TypeAdapter(shape).validate_python(self.input_shape.value())
        except ValidationError:
            dims = None
        if dims is not None and not (1 <= len(dims) <= 4 and max(dims) <= MAX_DIMENSION):
            dims = None
        layers = []
        for card in self.cards:
            try:
                layers.append(_LAYER.validate_python(card.value()))
            except ValidationError:
                break
        backbone = self.backbone.value() if self.kind.value() == "backbone" else None
        shapes = model_shapes(dims, layers, backbone) if dims is not None else None
        problem = shapes.problems[0] if shapes is not None and shapes.problems else None
        self.backbone_shape.setText("")
        if shapes is not None and shapes.backbone is not None:
            self.backbone_shape.setText(
                f"{shapes.backbone.describe()}, with global average pooling"
            )
        elif problem is not None and problem.loc == ("input_shape",):
            self.backbone_shape.setText(problem.message)
        for index, card in enumerate(self.cards):
            if shapes is not None and index < len(shapes.layers):
                card.set_shape(shapes.layers[index].describe())
            elif problem is not None and problem.loc == ("layers", index):
                card.set_shape(None, problem.message)
            elif shapes is not None and index == len(layers) and index < len(self.cards):
                card.set_shape(None, "fix this layer's settings to see its output")
            else:
                card.set_shape(None)

    def _show_kind(self) -> None:
        kind = self.kind.value()
        for widget, shown in (
            (self.backbone, kind == "backbone"),
            (self.backbone_shape, kind == "backbone"),
            (self.weights, kind == "backbone"),
            (self.path, kind == "keras_file"),
            (self.file_note, kind == "keras_file"),
        ):
            self.form.setRowVisible(widget, shown)
        self.layers_box.setVisible(kind != "keras_file")
        self.layers_box.setTitle(
            "Head layers (after global average pooling)"
            if kind == "backbone"
            else "Layers (in order)"
        )

    def _on_kind(self) -> None:
        self._show_kind()
        self._on_edited()

    def _on_path(self) -> None:
        """A picked .keras file sets the input shape it was saved with."""
        path = self.path.value()
        if not path:
            self.file_note.setText("")
            return
        try:
            info = read_keras_file(path)
        except ModelFileError as exc:
            self.file_note.setText(str(exc))
            return
        self.file_note.setText(f"a {info.class_name or 'Keras'} model taking {info.input_shape}")
        if self.input_shape.value() != info.input_shape:
            self.input_shape.set_value(info.input_shape)
            self._on_edited()

    def _on_edited(self) -> None:
        self._update_count()
        self.edited.emit()
