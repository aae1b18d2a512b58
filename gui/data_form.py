"""The input pipeline: a source (each with its own settings) and the batching all share."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import QFormLayout, QGroupBox, QStackedWidget, QVBoxLayout, QWidget

from engine.config import (
    DATA_SOURCES,
    ConstantData,
    CsvData,
    NumpyData,
    SyntheticClassification,
    SyntheticRegression,
)
from engine.problems import Loc
from gui.auto_form import AutoForm, show_page
from gui.field_editors import ChoiceEdit, PathEdit

# What a source's page shows before the user fills it in (fields without a model default).
_REQUIRED_STARTS: dict[str, dict[str, Any]] = {
    "constant": {"features": [1.0], "labels": [1.0]},
    "numpy": {"path": ""},
    "csv": {"path": "", "label_column": ""},
}


def _source_pages() -> dict[str, AutoForm]:
    return {
        "constant": AutoForm(
            ConstantData,
            ["features", "labels", "examples"],
            labels={"features": "Features:", "labels": "Labels:"},
        ),
        "synthetic_classification": AutoForm(
            SyntheticClassification, ["examples", "num_classes", "noise", "seed"]
        ),
        "synthetic_regression": AutoForm(SyntheticRegression, ["examples", "noise", "seed"]),
        "numpy": AutoForm(
            NumpyData,
            ["path", "features_key", "labels_key"],
            custom={"path": PathEdit("NumPy archives (*.npz);;All files (*)")},
        ),
        "csv": AutoForm(
            CsvData,
            ["path", "label_column"],
            custom={"path": PathEdit("CSV files (*.csv);;All files (*)")},
        ),
    }


class DataForm(QWidget):
    """Edits ``data``: the source combo switches the page; batching is shared by all."""

    edited = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.source = ChoiceEdit(DATA_SOURCES)
        self.source.setToolTip(
            "constant: the guide's from_tensors(...).repeat(examples); synthetic: seeded random "
            "data; numpy: an .npz file; csv: a CSV file with a header row"
        )
        self.pages = _source_pages()
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
        self.batching = AutoForm(
            ConstantData, ["global_batch_size", "shuffle_buffer", "drop_remainder"]
        )
        self.batching.edited.connect(self.edited)

        source_form = QFormLayout()
        source_form.addRow("Source:", self.source)
        source_box = QGroupBox("Source")
        source_layout = QVBoxLayout(source_box)
        source_layout.addLayout(source_form)
        source_layout.addWidget(self.stack)
        batching_box = QGroupBox("Batching")
        QVBoxLayout(batching_box).addWidget(self.batching)

        layout = QVBoxLayout(self)
        layout.addWidget(source_box)
        layout.addWidget(batching_box)
        layout.addStretch(1)
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
        targets: dict[Loc, QWidget] = {("data", "source"): self.source}
        for name, editor in self.pages[self.source.value()].editors.items():
            targets[("data", name)] = editor
        for name, editor in self.batching.editors.items():
            targets[("data", name)] = editor
        return targets

    def _reset_pages(self) -> None:
        for source, page in self.pages.items():
            page.reset()
            page.set_value(_REQUIRED_STARTS.get(source, {}))

    def _show_page(self) -> None:
        show_page(self.stack, self.pages[self.source.value()])
