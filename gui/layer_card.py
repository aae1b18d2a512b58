"""One layer of the model as a card: its kind, its settings and move/remove buttons."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QStackedWidget,
    QStyle,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..engine.config import DenseLayer, DropoutLayer, Initializer, Regularizer
from ..engine.problems import Loc
from .applicability import applicable_fields
from .auto_form import AutoForm, show_page
from .field_editors import ChoiceEdit, editor_for

LAYER_KINDS = ("dense", "dropout")
NO_REGULARIZER, L1_L2 = "none", "l1_l2"
# Dense fields with editors of their own below the plain ones.
DENSE_NESTED = ("kind", "kernel_initializer", "kernel_regularizer")


NEW_DENSE_UNITS = 16


def new_layer(kind: str) -> DenseLayer | DropoutLayer:
    """The layer "Add" creates: a small dense layer, or the model's default dropout."""
    return DenseLayer(units=NEW_DENSE_UNITS) if kind == "dense" else DropoutLayer()


class LayerCard(QFrame):
    """Edits one layer; the model form owns the order and listens to the buttons."""

    edited = Signal()
    move_requested = Signal(object, int)  # (card, -1 up / +1 down)
    remove_requested = Signal(object)

    def __init__(self, layer: DenseLayer | DropoutLayer) -> None:
        super().__init__()
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel()
        self.title.setStyleSheet("font-weight: bold;")
        self.kind = ChoiceEdit(LAYER_KINDS)
        self.kind.setToolTip("dense: a fully connected layer; dropout: drops inputs while training")
        style = self.style()
        self.up_button = self._tool_button(
            style.standardIcon(QStyle.StandardPixmap.SP_ArrowUp), "Move up"
        )
        self.down_button = self._tool_button(
            style.standardIcon(QStyle.StandardPixmap.SP_ArrowDown), "Move down"
        )
        self.remove_button = self._tool_button(
            style.standardIcon(QStyle.StandardPixmap.SP_TitleBarCloseButton), "Remove this layer"
        )
        self.up_button.clicked.connect(lambda: self.move_requested.emit(self, -1))
        self.down_button.clicked.connect(lambda: self.move_requested.emit(self, 1))
        self.remove_button.clicked.connect(lambda: self.remove_requested.emit(self))

        header = QHBoxLayout()
        header.addWidget(self.title)
        header.addWidget(self.kind)
        header.addStretch(1)
        for button in (self.up_button, self.down_button, self.remove_button):
            header.addWidget(button)

        self.dense = AutoForm(
            DenseLayer,
            [name for name in DenseLayer.model_fields if name not in DENSE_NESTED],
            labels={"use_bias": "Use bias:"},
        )
        self.initializer = AutoForm(
            Initializer,
            ["kind", "value", "stddev"],
            labels={"kind": "Initializer:", "value": "Constant value:", "stddev": "Stddev:"},
            initial={"value": 0.0, "stddev": 0.05},
        )
        self.regularizer_kind = ChoiceEdit([NO_REGULARIZER, L1_L2])
        self.regularizer_kind.setToolTip(
            "Kernel regularization; its loss is added through scale_regularization_loss"
        )
        self.l1 = editor_for(Regularizer, "l1")
        self.l2 = editor_for(Regularizer, "l2")
        regularizer_row = QHBoxLayout()
        regularizer_row.addWidget(self.regularizer_kind)
        for text, editor in (("L1", self.l1), ("L2", self.l2)):
            regularizer_row.addWidget(QLabel(text))
            regularizer_row.addWidget(editor, 1)
        dense_page = QWidget()
        dense_layout = QVBoxLayout(dense_page)
        dense_layout.setContentsMargins(0, 0, 0, 0)
        dense_layout.addWidget(self.dense)
        dense_layout.addWidget(self.initializer)
        regularizer_form = QFormLayout()
        regularizer_form.addRow("Regularizer:", regularizer_row)
        dense_layout.addLayout(regularizer_form)

        self.dropout = AutoForm(
            DropoutLayer,
            [name for name in DropoutLayer.model_fields if name != "kind"],
            labels={"rate": "Dropout rate:"},
        )
        self.pages = QStackedWidget()
        self.pages.addWidget(dense_page)
        self.pages.addWidget(self.dropout)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 8)
        layout.addLayout(header)
        layout.addWidget(self.pages)

        for editor in (self.dense, self.initializer, self.regularizer_kind, self.l1, self.l2):
            editor.edited.connect(self.edited)
        self.dropout.edited.connect(self.edited)
        self.kind.edited.connect(self._on_kind)
        self.kind.edited.connect(self.edited)
        self.initializer.edited.connect(self._refresh)
        self.regularizer_kind.edited.connect(self._refresh)
        self.set_layer(layer)

    @staticmethod
    def _tool_button(icon: Any, tip: str) -> QToolButton:
        button = QToolButton()
        button.setIcon(icon)
        button.setToolTip(tip)
        button.setAutoRaise(True)
        return button

    def set_layer(self, layer: DenseLayer | DropoutLayer) -> None:
        """Shows ``layer``; the other kind's page starts from what "Add" would create."""
        dense = layer if isinstance(layer, DenseLayer) else DenseLayer(units=NEW_DENSE_UNITS)
        dropout = layer if isinstance(layer, DropoutLayer) else DropoutLayer()
        with QSignalBlocker(self):
            self.kind.set_value(layer.kind)
            self.dense.set_value(dense)
            self.initializer.set_value(dense.kernel_initializer)
            regularizer = dense.kernel_regularizer
            self.regularizer_kind.set_value(L1_L2 if regularizer else NO_REGULARIZER)
            if regularizer is not None:
                self.l1.set_value(regularizer.l1)
                self.l2.set_value(regularizer.l2)
            self.dropout.set_value(dropout)
        self._on_kind()

    def value(self) -> dict[str, Any]:
        if self.kind.value() == "dropout":
            return {"kind": "dropout", **self.dropout.value()}
        regularizer = (
            {"l1": self.l1.value(), "l2": self.l2.value()}
            if self.regularizer_kind.value() == L1_L2
            else None
        )
        return {
            "kind": "dense",
            **self.dense.value(),
            "kernel_initializer": self.initializer.value(),
            "kernel_regularizer": regularizer,
        }

    def set_position(self, index: int, count: int) -> None:
        self.title.setText(f"Layer {index + 1}")
        self.up_button.setEnabled(index > 0)
        self.down_button.setEnabled(index < count - 1)

    def targets(self, prefix: Loc) -> dict[Loc, QWidget]:
        """Owners of this layer's locations, ``prefix`` being ``("model", "layers", i)``."""
        targets: dict[Loc, QWidget] = {prefix: self, (*prefix, "kind"): self.kind}
        for name, editor in self.dense.editors.items():
            targets[(*prefix, name)] = editor
        targets[(*prefix, "rate")] = self.dropout.editors["rate"]
        targets[(*prefix, "kernel_initializer")] = self.initializer.editors["kind"]
        for name in ("value", "stddev"):
            targets[(*prefix, "kernel_initializer", name)] = self.initializer.editors[name]
        targets[(*prefix, "kernel_regularizer")] = self.regularizer_kind
        targets[(*prefix, "kernel_regularizer", "l1")] = self.l1
        targets[(*prefix, "kernel_regularizer", "l2")] = self.l2
        return targets

    def _on_kind(self) -> None:
        show_page(self.pages, self.pages.widget(LAYER_KINDS.index(self.kind.value())))
        self._refresh()

    def _refresh(self) -> None:
        kind = self.initializer.editors["kind"].value()
        self.initializer.enable_applicable(applicable_fields(Initializer, kind))
        with_regularizer = self.regularizer_kind.value() == L1_L2
        self.l1.setEnabled(with_regularizer)
        self.l2.setEnabled(with_regularizer)
