"""One layer of the model as a card: its kind, its settings, its output shape and parameters,
and move/remove buttons.

Each kind's settings are generated from its config model (``engine.config``), so a
layer kind or setting added there appears here without GUI code; only the nested
kernel initializer and regularizer, shared by the kinds that have weights, have
editors of their own.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStackedWidget,
    QStyle,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...engine.config import LAYER_KINDS, LAYER_TYPES, Initializer, Regularizer
from ...engine.config.applicability import applicable_fields
from ...engine.problems import Loc
from ..widgets.flow_layout import FlowLayout
from .auto_form import AutoForm, align_labels, show_page, wrapping_form
from .field_editors import ChoiceEdit, editor_for

NO_REGULARIZER, L1_L2 = "none", "l1_l2"
NESTED = ("kind", "kernel_initializer", "kernel_regularizer")
"""Fields with editors of their own below the kind's generated ones."""

NEW_DENSE_UNITS = 16
# What "Add" (and a change of kind) fills in for the settings a kind has no default for,
# and where a practitioner would not take Keras's: a convolution is followed by relu.
_NEW_REQUIRED: dict[str, dict[str, int | str]] = {
    "dense": {"units": NEW_DENSE_UNITS},
    "conv1d": {"filters": 16, "activation": "relu"},
    "conv2d": {"filters": 16, "activation": "relu"},
    "embedding": {"input_dim": 1000, "output_dim": 16},
    "lstm": {"units": 16},
    "gru": {"units": 16},
}
_LABELS = {
    "use_bias": "Use bias:",
    "rate": "Dropout rate:",
    "return_sequences": "Return sequences:",
    "input_dim": "Vocabulary size:",
    "output_dim": "Vector length:",
}
KIND_TIPS = (
    "dense: fully connected; dropout: drops inputs while training; conv1d/conv2d: "
    "convolutions over sequences/images; pooling: the max or mean of each window, or of "
    "everything (global); flatten: one vector; batch/layer normalization; embedding: token "
    "ids to vectors (first layer only); lstm/gru: recurrent; rescaling: x * scale + offset"
)


def new_layer(kind: str) -> BaseModel:
    """The layer "Add" creates: the kind's defaults, small sizes where it has none."""
    return LAYER_TYPES[kind](**_NEW_REQUIRED.get(kind, {}))


def _plain_fields(kind: str) -> list[str]:
    return [name for name in LAYER_TYPES[kind].model_fields if name not in NESTED]


class LayerCard(QFrame):
    """Edits one layer; the model form owns the order and listens to the buttons."""

    edited = Signal()
    move_requested = Signal(object, int)  # (card, -1 up / +1 down)
    remove_requested = Signal(object)

    def __init__(self, layer: BaseModel) -> None:
        super().__init__()
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel()
        self.title.setStyleSheet("font-weight: bold;")
        self.kind = ChoiceEdit(LAYER_KINDS)
        self.kind.setToolTip(KIND_TIPS)
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

        # The buttons keep to the right; in a narrow dock they, then the kind, wrap below.
        buttons = QWidget()
        buttons.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        buttons_row = QHBoxLayout(buttons)
        buttons_row.setContentsMargins(0, 0, 0, 0)
        buttons_row.addStretch(1)
        for button in (self.up_button, self.down_button, self.remove_button):
            buttons_row.addWidget(button)
        header = FlowLayout()
        header.addWidget(self.title)
        header.addWidget(self.kind)
        header.addWidget(buttons)
        self.shape = QLabel()
        self.shape.setToolTip(
            "What this layer outputs for one batch (None: the batch size) and its weights, "
            "as model.summary() shows them; computed as you edit"
        )
        self.shape.setWordWrap(True)

        self.forms: dict[str, QWidget] = {}
        self.pages = QStackedWidget()
        for kind in LAYER_KINDS:
            fields = _plain_fields(kind)
            if fields:
                form = AutoForm(LAYER_TYPES[kind], fields, labels=_LABELS)
                form.edited.connect(self.edited)
                page: QWidget = form
                self.forms[kind] = form
            else:
                page = QLabel("No settings: it has no weights and no options.")
                page.setWordWrap(True)
                page.setEnabled(False)
            self.pages.addWidget(page)
        self.dense = self.forms["dense"]
        self.dropout = self.forms["dropout"]

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
        self.regularizer = QWidget()
        regularizer_form = wrapping_form(self.regularizer)
        regularizer_form.setContentsMargins(0, 0, 0, 0)
        regularizer_label = QLabel("Regularizer:")
        regularizer_form.addRow(regularizer_label, regularizer_row)
        align_labels(*self.forms.values(), self.initializer, others=[regularizer_label])

        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 8)
        layout.addLayout(header)
        layout.addWidget(self.shape)
        layout.addWidget(self.pages)
        layout.addWidget(self.initializer)
        layout.addWidget(self.regularizer)

        for editor in (self.initializer, self.regularizer_kind, self.l1, self.l2):
            editor.edited.connect(self.edited)
        self.kind.edited.connect(self._start_kind_afresh)
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

    def set_layer(self, layer: BaseModel) -> None:
        """Shows ``layer``; the other kinds' pages start from what "Add" would create."""
        kind = layer.kind  # type: ignore[attr-defined]
        with QSignalBlocker(self):
            self.kind.set_value(kind)
            for name, form in self.forms.items():
                form.set_value(layer if name == kind else new_layer(name))
            self.initializer.set_value(getattr(layer, "kernel_initializer", None) or Initializer())
            regularizer = getattr(layer, "kernel_regularizer", None)
            self.regularizer_kind.set_value(L1_L2 if regularizer else NO_REGULARIZER)
            if regularizer is not None:
                self.l1.set_value(regularizer.l1)
                self.l2.set_value(regularizer.l2)
        self._on_kind()

    def value(self) -> dict[str, Any]:
        kind = self.kind.value()
        fields = LAYER_TYPES[kind].model_fields
        value: dict[str, Any] = {"kind": kind}
        if kind in self.forms:
            value.update(self.forms[kind].value())
        if "kernel_initializer" in fields:
            value["kernel_initializer"] = self.initializer.value()
        if "kernel_regularizer" in fields:
            value["kernel_regularizer"] = (
                {"l1": self.l1.value(), "l2": self.l2.value()}
                if self.regularizer_kind.value() == L1_L2
                else None
            )
        return value

    def set_position(self, index: int, count: int) -> None:
        self.title.setText(f"Layer {index + 1}")
        self.up_button.setEnabled(index > 0)
        self.down_button.setEnabled(index < count - 1)

    def set_shape(self, text: str | None, problem: str | None = None) -> None:
        """Shows the layer's output and parameters, or why it cannot take its input.

        ``text`` None with no problem: unknown, because a layer before this one has one.
        """
        if problem is not None:
            self.shape.setText(problem)
            self.shape.setStyleSheet("color: #b00020;")
        else:
            self.shape.setText(text or "output unknown until the layers above are fixed")
            self.shape.setStyleSheet("color: #555;" if text else "color: #888;")

    def targets(self, prefix: Loc) -> dict[Loc, QWidget]:
        """Owners of this layer's locations, ``prefix`` being ``("model", "layers", i)``."""
        targets: dict[Loc, QWidget] = {prefix: self, (*prefix, "kind"): self.kind}
        current = self.kind.value()
        # The shown kind's editors last: a name several kinds share is marked where it shows.
        for kind in [*(k for k in self.forms if k != current), current]:
            for name, editor in getattr(self.forms.get(kind), "editors", {}).items():
                targets[(*prefix, name)] = editor
        targets[(*prefix, "kernel_initializer")] = self.initializer.editors["kind"]
        for name in ("value", "stddev"):
            targets[(*prefix, "kernel_initializer", name)] = self.initializer.editors[name]
        targets[(*prefix, "kernel_regularizer")] = self.regularizer_kind
        targets[(*prefix, "kernel_regularizer", "l1")] = self.l1
        targets[(*prefix, "kernel_regularizer", "l2")] = self.l2
        return targets

    def _start_kind_afresh(self) -> None:
        """A kind the user picks starts from what "Add" gives it: a dense layer's
        initializer and regularizer were kept for a conv2d it became, which suit it no
        more than its activation (the kind's own page is already fresh)."""
        kind = self.kind.value()
        fresh = new_layer(kind)
        with QSignalBlocker(self):
            if kind in self.forms:
                self.forms[kind].set_value(fresh)
            self.initializer.set_value(getattr(fresh, "kernel_initializer", None) or Initializer())
            self.regularizer_kind.set_value(NO_REGULARIZER)

    def _on_kind(self) -> None:
        kind = self.kind.value()
        show_page(self.pages, self.pages.widget(LAYER_KINDS.index(kind)))
        fields = LAYER_TYPES[kind].model_fields
        self.initializer.setVisible("kernel_initializer" in fields)
        self.regularizer.setVisible("kernel_regularizer" in fields)
        self._refresh()

    def _refresh(self) -> None:
        kind = self.initializer.editors["kind"].value()
        self.initializer.enable_applicable(applicable_fields(Initializer, kind))
        with_regularizer = self.regularizer_kind.value() == L1_L2
        self.l1.setEnabled(with_regularizer)
        self.l2.setEnabled(with_regularizer)
