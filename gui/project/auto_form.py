"""A form for some fields of one pydantic model: a label and an editor per field.

The optimizer pages, the data source pages, the loss and the training settings are
all plain field lists, so they are generated from their models instead of being
laid out by hand; a new optimizer field appears in the GUI without GUI code.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from pydantic import BaseModel
from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import QFormLayout, QSizePolicy, QStackedWidget, QWidget

from .field_editors import editor_for, label_for


def wrapping_form(parent: QWidget | None = None) -> QFormLayout:
    """A form layout that puts a field under its label when both do not fit side by side.

    Side by side only (Fusion's default), a form was as wide as its widest label plus
    its widest field: in the forms' dock of a 1024x700 window (a 294 px viewport) the
    pages needed 324 to 452 px and scrolled sideways, the scrollbar over their last row.
    """
    form = QFormLayout(parent)
    form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
    return form


class AutoForm(QWidget):
    """Edits ``fields`` of ``model``; ``edited`` fires on user edits, not on ``set_value``."""

    edited = Signal()

    def __init__(
        self,
        model: type[BaseModel],
        fields: Iterable[str],
        *,
        custom: Mapping[str, QWidget] | None = None,
        labels: Mapping[str, str] | None = None,
        initial: Mapping[str, float] | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        self.editors: dict[str, Any] = {}
        self._layout = wrapping_form(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        for name in fields:
            if custom and name in custom:
                editor = custom[name]
            else:
                editor = editor_for(model, name, initial=(initial or {}).get(name, 1.0))
            editor.edited.connect(self.edited)
            self._layout.addRow((labels or {}).get(name) or label_for(name), editor)
            self.editors[name] = editor

    def value(self) -> dict[str, Any]:
        return {name: editor.value() for name, editor in self.editors.items()}

    def set_value(self, data: BaseModel | Mapping[str, Any]) -> None:
        """Shows ``data``'s values for this form's fields (others are ignored)."""
        values = data.model_dump() if isinstance(data, BaseModel) else data
        with QSignalBlocker(self):
            for name, editor in self.editors.items():
                if name in values:
                    editor.set_value(values[name])

    def reset(self) -> None:
        """Back to the model's defaults (fields without one keep their value)."""
        defaults = {
            name: info.get_default(call_default_factory=True)
            for name, info in self.model.model_fields.items()
            if not info.is_required()
        }
        self.set_value(defaults)

    def labels(self) -> list[QWidget]:
        """The fields' labels, in order."""
        found = (self._layout.labelForField(editor) for editor in self.editors.values())
        return [label for label in found if label is not None]

    def enable_applicable(self, applicable: Collection[str]) -> None:
        """Greys out fields that do not apply, unless they hold a value to take back.

        A field that does not apply but was set stays editable: the model reports
        it, and the user must be able to clear it.
        """
        for name, editor in self.editors.items():
            info = self.model.model_fields[name]
            default = None if info.is_required() else info.get_default(call_default_factory=True)
            enabled = name in applicable or editor.value() != default
            editor.setEnabled(enabled)
            label = self._layout.labelForField(editor)
            if label is not None:
                label.setEnabled(enabled)


def align_labels(*forms: AutoForm, others: Iterable[QWidget] = ()) -> None:
    """Gives the forms' label columns (and ``others``, labels of forms beside them) the
    widest label's width, so fields start at the same place on every page of a stacked
    form: a data source's or a layer kind's fields moved sideways as the kind changed."""
    labels = [*others]
    for form in forms:
        labels += form.labels()
    width = max((label.sizeHint().width() for label in labels), default=0)
    for label in labels:
        label.setMinimumWidth(width)


def show_page(stack: QStackedWidget, page: QWidget) -> None:
    """Shows ``page`` and sizes the stack to it, not to its tallest page.

    The stack's layout sizes it again (``updateGeometry``): ``adjustSize`` set it to its
    own size hint, so after File ▸ Examples the Data form's source fields came back
    narrower than the batching fields under them, until the dock was resized.
    """
    for index in range(stack.count()):
        other = stack.widget(index)
        vertical = QSizePolicy.Policy.Preferred if other is page else QSizePolicy.Policy.Ignored
        other.setSizePolicy(QSizePolicy.Policy.Preferred, vertical)
    stack.setCurrentWidget(page)
    stack.updateGeometry()
