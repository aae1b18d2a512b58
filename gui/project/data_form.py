"""The input pipeline: a source (each with its own settings) and the batching all share."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel
from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from ...engine.config import DATA_MODELS, DATA_SOURCES, ConstantData
from ...engine.config.data import FeatureSpec
from ...engine.data_sources import source_named
from ...engine.problems import Loc
from ..widgets.flow_layout import FlowLayout
from .auto_form import AutoForm, align_labels, show_page, wrapping_form
from .field_editors import ChoiceEdit, PathEdit

FOLDER_SHUFFLE_BUFFER = 10_000
"""A folder source's shuffle buffer in the window: it holds file names (decoded examples
only with ``cache``), so 10,000 costs little and mixes the classes of most folders fully."""
# The fields every source shares (batching), in the models' order.
BATCHING_FIELDS = [
    name
    for name in ConstantData.model_fields
    if name != "source" and all(name in model.model_fields for model in DATA_MODELS.values())
]


class FeatureSpecEdit(QLineEdit):
    """A TFRecord feature spec typed as ``name dtype shape`` entries, comma-separated:
    ``image float32 28x28, label int64`` (no shape: one value; no dtype: float32).

    What does not read as a number goes to the model as typed, so the model reports it
    under the entry's own path (``data.features.1.shape.0``).
    """

    edited = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setPlaceholderText("image float32 28x28, label int64")
        self.setToolTip(
            "The records' features: name, dtype (float32 or int64) and shape (e.g. 28x28; "
            "none for one value), comma-separated"
        )
        self.textChanged.connect(self.edited)

    def value(self) -> list[dict[str, Any]]:
        specs = []
        for entry in self.text().split(","):
            parts = entry.split()
            if not parts:
                continue
            spec: dict[str, Any] = {"name": parts[0]}
            if len(parts) > 1:
                spec["dtype"] = parts[1]
            if len(parts) > 2:
                spec["shape"] = [
                    int(n) if n.isascii() and n.isdigit() else n for n in parts[2].split("x")
                ]
            specs.append(spec)
        return specs

    def set_value(self, value: list[Any]) -> None:
        entries = []
        for spec in value or []:
            spec = spec.model_dump() if isinstance(spec, BaseModel) else spec
            shape = "x".join(str(n) for n in spec.get("shape") or [])
            entries.append(" ".join(filter(None, (spec["name"], spec.get("dtype", ""), shape))))
        self.setText(", ".join(entries))


def _source_page(source: str) -> AutoForm:
    """The settings only ``source`` has (file sources get a Browse button)."""
    model = DATA_MODELS[source]
    custom: dict[str, QWidget] = {}
    if "path" in model.model_fields:
        custom["path"] = _path_edit(source)
    features = model.model_fields.get("features")
    if features is not None and get_args(features.annotation) == (FeatureSpec,):
        custom["features"] = FeatureSpecEdit()
    return AutoForm(
        model,
        [name for name in model.model_fields if name != "source" and name not in BATCHING_FIELDS],
        custom=custom,
    )


def _path_edit(source: str) -> PathEdit:
    file_types = source_named(source).file_types
    if file_types is not None:
        return PathEdit(file_types)
    return PathEdit(folder=True)


class DataForm(QWidget):
    """Edits a data section: the source combo switches the page; batching is shared by all.

    ``prefix`` is the section's location: ``("data",)``, or ``("evaluation", "source")``
    for separate validation data.
    """

    edited = Signal()
    preview_requested = Signal(dict)
    """The data section as the form shows it, to preview (the window's Dataset tab)."""

    def __init__(self, prefix: Loc = ("data",)) -> None:
        super().__init__()
        self.prefix = prefix
        self.source = ChoiceEdit(DATA_SOURCES)
        self.source.setToolTip(
            "constant: the guide's from_tensors(...).repeat(examples); synthetic: seeded random "
            "data; numpy: an .npz file; csv: a CSV file with a header row; image_folder / "
            "text_folder: a folder with one subfolder of images / .txt files per class; "
            "tfrecord: TFRecord files of tf.train.Example records"
        )
        self.pages = {source: _source_page(source) for source in DATA_SOURCES}
        for page in self.pages.values():
            page.edited.connect(self.edited)
        self.pages["constant"].editors["features"].setToolTip(
            "One example's features, comma-separated; as many as the input shape holds"
        )
        self.pages["constant"].editors["labels"].setToolTip(
            "One example's labels, comma-separated; as many as the model predicts"
        )
        self.stack = QStackedWidget()
        for source in DATA_SOURCES:
            self.stack.addWidget(self.pages[source])
        self.batching = AutoForm(ConstantData, BATCHING_FIELDS)
        self.batching.edited.connect(self.edited)

        self.preview = QPushButton("Preview…")
        self.preview.setToolTip("Show the data's images and classes, or a CSV file's first rows")
        self.preview.clicked.connect(lambda: self.preview_requested.emit(self.value()))
        # Preview… goes under the source in a narrow dock; beside it, the source takes the rest.
        self.source.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        source_row = FlowLayout()
        source_row.addWidget(self.source)
        source_row.addWidget(self.preview)
        source_form = wrapping_form()
        source_label = QLabel("Source:")
        source_form.addRow(source_label, source_row)
        align_labels(*self.pages.values(), self.batching, others=[source_label])
        source_box = QGroupBox("Source")
        source_layout = QVBoxLayout(source_box)
        source_layout.addLayout(source_form)
        source_layout.addWidget(self.stack)
        batching_box = QGroupBox("Batching and pipeline")
        QVBoxLayout(batching_box).addWidget(self.batching)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)  # the page around it has margins
        layout.addWidget(source_box)
        layout.addWidget(batching_box)
        layout.addStretch(1)
        self.source.edited.connect(self._suit_source)
        self.source.edited.connect(self._show_page)
        self.source.edited.connect(self.edited)
        self._reset_pages()
        self._show_page()

    def value(self) -> dict[str, Any]:
        source = self.source.value()
        return {"source": source, **self.pages[source].value(), **self.batching.value()}

    def set_value(self, data: Any) -> None:
        """Shows ``data``; the other sources' pages go back to their starting values."""
        with QSignalBlocker(self):
            self._reset_pages()
            self.source.set_value(data.source)
            self.pages[data.source].set_value(data)
            self.batching.set_value(data)
        self._show_page()

    def targets(self) -> dict[Loc, QWidget]:
        targets: dict[Loc, QWidget] = {(*self.prefix, "source"): self.source}
        for name, editor in self.pages[self.source.value()].editors.items():
            targets[(*self.prefix, name)] = editor
        for name, editor in self.batching.editors.items():
            targets[(*self.prefix, name)] = editor
        return targets

    def _suit_source(self) -> None:
        """A folder source picked with no shuffle gets :data:`FOLDER_SHUFFLE_BUFFER`: its
        files are read class by class, so unshuffled every batch holds one class."""
        shuffle = self.batching.editors["shuffle_buffer"]
        folders = source_named(self.source.value()).class_folders
        if folders is not None and shuffle.value() == 0:
            shuffle.set_value(FOLDER_SHUFFLE_BUFFER)

    def _reset_pages(self) -> None:
        for source, page in self.pages.items():
            page.reset()
            page.set_value(source_named(source).form_start())

    def _show_page(self) -> None:
        show_page(self.stack, self.pages[self.source.value()])
