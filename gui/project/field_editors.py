"""One editor widget per project field, built from the pydantic field it edits.

Ranges, choices, length limits and tooltips come from the field's own metadata
(``ge``/``gt``/``le``/``lt``, ``Literal`` values, ``max_length``, ``description``),
so the GUI never restates a rule the engine already states. A number's arrows
stay inside its range; a number typed outside it stays as typed, and the model
reports it on the field and in the problems list like any wrong text (clamping
it turned "-64" into 64 and put "0" back without a word). Every editor has the
same small interface: ``value()``, ``set_value(v)`` and an ``edited`` signal.

Numbers and choices take the mouse wheel only once they have the focus: scrolling a
form over them changed a conv layer's filters and an initializer without a word.
"""

from __future__ import annotations

import math
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

from annotated_types import Ge, Gt, Le, Lt, MaxLen
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from PySide6.QtCore import QEvent, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLineEdit,
    QSpinBox,
    QToolButton,
    QToolTip,
    QWidget,
)

from ..files import file_dialogs

INT_MIN, INT_MAX = -(2**31), 2**31 - 1  # what a QSpinBox holds
DECIMALS = 12
# A float spin box's own range: any finite number typed stays, for the model to judge.
FLOAT_TYPED_LIMIT = math.inf
FLOAT_STEP = 10.0**-DECIMALS
FLOAT_LIMIT = 1e12  # bound for floats the model leaves open; far beyond any sensible setting
REFUSAL = "distloopRefusal"  # the property holding why the last refused key was refused
_PARTIAL_FLOAT = re.compile(r"^[+-]?(\d*\.?\d*)?([eE][+-]?\d*)?$")


def _bounds(info: FieldInfo) -> tuple[float | None, float | None, bool, bool]:
    """The field's (low, high, low_exclusive, high_exclusive) constraints."""
    low = high = None
    low_open = high_open = False
    for item in info.metadata:
        if isinstance(item, Ge):
            low = item.ge
        elif isinstance(item, Gt):
            low, low_open = item.gt, True
        elif isinstance(item, Le):
            high = item.le
        elif isinstance(item, Lt):
            high, high_open = item.lt, True
    return low, high, low_open, high_open


def describe_bounds(info: FieldInfo) -> str:
    """The constraints in words for a tooltip: ``at least 1, at most 64``."""
    low, high, low_open, high_open = _bounds(info)
    parts = []
    if low is not None:
        parts.append(f"{'above' if low_open else 'at least'} {low:g}")
    if high is not None:
        parts.append(f"{'below' if high_open else 'at most'} {high:g}")
    return ", ".join(parts)


def int_range(info: FieldInfo) -> tuple[int, int]:
    low, high, low_open, high_open = _bounds(info)
    minimum = INT_MIN if low is None else int(low) + (1 if low_open else 0)
    maximum = INT_MAX if high is None else int(high) - (1 if high_open else 0)
    return max(minimum, INT_MIN), min(maximum, INT_MAX)


def least_float_step(info: FieldInfo) -> float:
    """The smallest arrow step of a float field, from its bounds.

    A field that must be above 0 (a learning rate, an epsilon) spans magnitudes: its step
    follows the value alone (:func:`float_step`). Any other field is a quantity that 0 may
    switch off (rotation, crop, momentum, noise): from 0 the value's own step would be
    ``1e-12``, so it steps by at least a tenth of its range's order of magnitude (rotation,
    0 to 45: 1; crop, below 0.5: 0.01; momentum, below 1: 0.1), and by a tenth of 1 when
    the range is open.
    """
    low, high, low_open, _ = _bounds(info)
    if low_open and low == 0:
        return FLOAT_STEP
    span = float(high) - float(low) if low is not None and high is not None else 1.0
    return 10.0 ** (math.floor(math.log10(span)) - 1)


def float_step(value: float, steps: int, least: float) -> float:
    """One arrow step from ``value``: a tenth of its leading digit's place (0.05 steps by
    0.001; 1.0 up by 0.1, down by 0.01: Qt's adaptive decimal step), never below ``least``."""
    size = abs(value)
    if size < least:
        return least
    exponent = math.floor(math.log10(size))
    leaving_power_of_ten = size == 10.0**exponent and (steps < 0) == (value > 0)
    if leaving_power_of_ten:
        exponent -= 1  # 1.0 down goes to 0.99, as 0.99 up goes to 1.0
    return max(10.0 ** (exponent - 1), least)


def float_range(info: FieldInfo) -> tuple[float, float]:
    """Closed spin-box bounds inside the model's (possibly open) interval."""
    low, high, low_open, high_open = _bounds(info)
    minimum = -FLOAT_LIMIT if low is None else float(low) + (FLOAT_STEP if low_open else 0.0)
    maximum = FLOAT_LIMIT if high is None else float(high) - (FLOAT_STEP if high_open else 0.0)
    return minimum, maximum


class _WheelOnlyWhenFocused(QObject):
    """Passes a wheel turn over an unfocused editor on to its parents (the form scrolls)."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() is QEvent.Type.Wheel and not typing.cast(QWidget, watched).hasFocus():
            event.ignore()  # ignored, so Qt offers it to the parents: the scroll area scrolls
            return True
        return False


def wheel_only_when_focused(widget: QAbstractSpinBox | QComboBox) -> None:
    """The wheel neither changes nor focuses ``widget`` until a click or Tab has focused it."""
    widget.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
    widget.installEventFilter(_WheelOnlyWhenFocused(widget))


def _steps_within(
    spin: QAbstractSpinBox, value: float, low: float, high: float
) -> QAbstractSpinBox.StepEnabledFlag:
    """The arrows that stay inside [low, high]; one leads back in from a typed value outside."""
    flags = QAbstractSpinBox.StepEnabledFlag.StepNone
    if spin.isReadOnly():
        return flags
    if value < high:
        flags |= QAbstractSpinBox.StepEnabledFlag.StepUpEnabled
    if value > low:
        flags |= QAbstractSpinBox.StepEnabledFlag.StepDownEnabled
    return flags


def say_refused(spin: QAbstractSpinBox, text: str) -> None:
    """Shows why a key did not reach ``spin``, under it, where the user types.

    A spin box drops a key it cannot hold without a word: "999999999999999" in Steps
    kept "999999999" (a QSpinBox holds 32 bits) and letters vanished. ``refusal`` keeps
    the last such text, until the next key that is taken.
    """
    spin.setProperty(REFUSAL, text)
    QToolTip.showText(spin.mapToGlobal(QPoint(0, spin.height())), text, spin)


def refusal(spin: QAbstractSpinBox) -> str:
    """What :func:`say_refused` last said about ``spin`` ("" after a key it took)."""
    return str(spin.property(REFUSAL) or "")


def _whole_number_refusal(text: str, low: int, high: int) -> str:
    digits = text.strip().lstrip("+-")
    if digits.isdigit():
        typed = int(text.strip())
        if typed > high:
            return f"At most {high:,}: {typed:,} is more."
        if typed < low:
            return f"At least {low:,}: {typed:,} is less."
    return f"A whole number from {low:,} to {high:,}: only digits are taken."


def _number_refusal(low: float, high: float) -> str:
    limits = [f"at least {low:g}" if low > -FLOAT_LIMIT else "", f"at most {high:g}"]
    limits[1] = limits[1] if high < FLOAT_LIMIT else ""
    within = ", ".join(limit for limit in limits if limit)
    return (
        f"A number{f' ({within})' if within else ''}, like 0.25 or 1e-7: "
        "only digits, a point, a sign and e are taken."
    )


class IntEdit(QSpinBox):
    """An integer field: arrows stay in the model's range, typed integers stay as typed;
    a key it cannot take (a letter, a digit past what it holds) is refused with a word."""

    edited = Signal()

    def __init__(self, minimum: int = INT_MIN, maximum: int = INT_MAX) -> None:
        super().__init__()
        self.bounds = (minimum, maximum)
        self.setRange(INT_MIN, INT_MAX)
        self.setAccelerated(True)
        wheel_only_when_focused(self)
        self.valueChanged.connect(self.edited)

    def stepEnabled(self) -> QAbstractSpinBox.StepEnabledFlag:
        return _steps_within(self, self.value(), *self.bounds)

    def stepBy(self, steps: int) -> None:
        low, high = self.bounds
        self.setValue(min(max(self.value() + steps * self.singleStep(), low), high))

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:
        state, text, pos = super().validate(text, pos)
        if state is QValidator.State.Invalid:
            say_refused(self, _whole_number_refusal(text, *self.bounds))
        else:
            self.setProperty(REFUSAL, "")
        return state, text, pos

    def set_value(self, value: int) -> None:
        self.setValue(int(value))


class FloatEdit(QDoubleSpinBox):
    """A float field that shows values like ``1e-07`` exactly; arrows stay in the model's range.

    QDoubleSpinBox's fixed-decimals text would show a learning rate of 1e-7 as
    0.00; here the text is Python's shortest repr, and steps adapt to the
    magnitude (0.01 steps by 0.001), never below ``least_step`` (from the field's
    range: :func:`least_float_step`; Rotation stepped by 1e-12 from 0). Any finite
    number typed stays as typed.
    """

    edited = Signal()

    def __init__(
        self,
        minimum: float = -FLOAT_LIMIT,
        maximum: float = FLOAT_LIMIT,
        least_step: float = FLOAT_STEP,
    ) -> None:
        super().__init__()
        self.bounds = (minimum, maximum)
        self.least_step = least_step
        self.setDecimals(DECIMALS)
        self.setRange(-FLOAT_TYPED_LIMIT, FLOAT_TYPED_LIMIT)
        self.setAccelerated(True)
        wheel_only_when_focused(self)
        self.valueChanged.connect(self.edited)

    def stepEnabled(self) -> QAbstractSpinBox.StepEnabledFlag:
        return _steps_within(self, self.value(), *self.bounds)

    def stepBy(self, steps: int) -> None:
        """:func:`float_step` ``steps`` times, inside the model's range.

        From a typed value outside the range, a step first goes to the range's edge.
        """
        low, high = self.bounds
        value = self.value()
        if low <= value <= high:
            step = float_step(value, steps, self.least_step)
            value = round(value + steps * step, DECIMALS)  # 0.1 + 0.2 shows 0.3
        self.setValue(min(max(value, low), high))

    def textFromValue(self, value: float) -> str:
        return repr(float(value))

    def valueFromText(self, text: str) -> float:
        try:
            return float(text.strip())
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:
        stripped = text.strip()
        try:
            value = float(stripped)
        except ValueError:
            if not _PARTIAL_FLOAT.match(stripped):
                say_refused(self, _number_refusal(*self.bounds))
                return QValidator.State.Invalid, text, pos
            self.setProperty(REFUSAL, "")
            return QValidator.State.Intermediate, text, pos
        self.setProperty(REFUSAL, "")
        finite = math.isfinite(value)  # "1e999" parses as inf: not a setting, keep typing
        return (QValidator.State.Acceptable if finite else QValidator.State.Intermediate), text, pos

    def set_value(self, value: float) -> None:
        self.setValue(float(value))


class _OptionalEdit(QWidget):
    """A number the model allows to be left out (None): a checkbox turns it on."""

    edited = Signal()

    def __init__(self, spin: FloatEdit | IntEdit, initial: float, tooltip: str) -> None:
        super().__init__()
        self.checkbox = QCheckBox()
        self.checkbox.setToolTip(tooltip)
        self.spin = spin
        self.spin.set_value(initial)
        self.spin.setEnabled(False)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.checkbox)
        layout.addWidget(self.spin, 1)
        self.checkbox.toggled.connect(self.spin.setEnabled)
        self.checkbox.toggled.connect(self.edited)
        self.spin.edited.connect(self.edited)

    @property
    def mark_target(self) -> QWidget:
        return self.spin

    def value(self) -> float | None:
        return self.spin.value() if self.checkbox.isChecked() else None

    def set_value(self, value: float | None) -> None:
        if value is not None:
            self.spin.set_value(value)
        self.checkbox.setChecked(value is not None)


class OptionalFloatEdit(_OptionalEdit):
    def __init__(self, minimum: float, maximum: float, initial: float, least_step: float) -> None:
        super().__init__(
            FloatEdit(minimum, maximum, least_step),
            initial,
            "Unchecked: leave it out and use the default",
        )


class OptionalIntEdit(_OptionalEdit):
    def __init__(self, minimum: int, maximum: int, initial: int) -> None:
        super().__init__(IntEdit(minimum, maximum), initial, "Unchecked: leave it out")


class BoolEdit(QCheckBox):
    edited = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.toggled.connect(self.edited)

    def value(self) -> bool:
        return self.isChecked()

    def set_value(self, value: bool) -> None:
        self.setChecked(bool(value))


class ChoiceEdit(QComboBox):
    """One of a fixed set of words; shows them as the project file spells them."""

    edited = Signal()

    def __init__(self, choices: typing.Sequence[str]) -> None:
        super().__init__()
        self.addItems(list(choices))
        wheel_only_when_focused(self)
        self.currentIndexChanged.connect(self.edited)

    def value(self) -> str:
        return self.currentText()

    def set_value(self, value: str) -> None:
        index = self.findText(value)
        if index < 0:
            raise ValueError(f"{value!r} is not one of the choices")
        self.setCurrentIndex(index)


class TextEdit(QLineEdit):
    """Text; ``optional`` turns an empty box into None (the model's "not given")."""

    edited = Signal()

    def __init__(self, optional: bool = False, max_length: int | None = None) -> None:
        super().__init__()
        self._optional = optional
        if max_length is not None:
            self.setMaxLength(max_length)
        if optional:
            self.setPlaceholderText("(none)")
        self.textChanged.connect(self.edited)

    def value(self) -> str | None:
        text = self.text()
        return None if self._optional and not text.strip() else text

    def set_value(self, value: str | None) -> None:
        self.setText(value or "")


class ListEdit(QLineEdit):
    """A list typed as comma-separated items, e.g. ``28, 28`` or ``/gpu:0, /gpu:1``.

    Items that read as an ``item_type`` number go to the model as that number; any
    other item goes as typed text, so the model (whose numbers are strict) reports
    it under that item's own path (``data.features.2``), in its own words.
    """

    edited = Signal()

    def __init__(self, optional: bool = False, item_type: type = str) -> None:
        super().__init__()
        self._optional = optional
        self._item_type = item_type
        self.textChanged.connect(self.edited)

    def value(self) -> list[str | int | float] | None:
        text = self.text().strip()
        if not text:
            return None if self._optional else []
        return [self._item(item.strip()) for item in text.split(",")]

    def _item(self, text: str) -> str | int | float:
        if self._item_type is int and re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII):
            return int(text)
        if self._item_type is float and re.fullmatch(r"[^_]+", text):
            try:
                return float(text)
            except ValueError:
                return text
        return text

    def set_value(self, value: typing.Sequence[Any] | None) -> None:
        self.setText(", ".join(str(item) for item in value or []))


class PathEdit(QWidget):
    """A file path with a Browse button; with ``folder``, a folder's path."""

    edited = Signal()

    def __init__(self, file_filter: str = "", *, folder: bool = False) -> None:
        super().__init__()
        self._filter = file_filter
        self._folder = folder
        self.line = QLineEdit()
        self.line.setPlaceholderText("relative paths start at the project file's folder")
        # "…", not "Browse…": the path keeps the width (a "Browse…" button left it ~200 px
        # of a 290 px field, a path's last folder or two).
        self.button = QToolButton()
        self.button.setText("…")
        self.button.setToolTip("Browse for the folder" if folder else "Browse for the file")
        self.button.clicked.connect(self._browse)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.line, 1)
        layout.addWidget(self.button)
        self.line.textChanged.connect(self.edited)

    @property
    def mark_target(self) -> QWidget:
        return self.line

    def value(self) -> str:
        return self.line.text()

    def set_value(self, value: str) -> None:
        self.line.setText(value)

    def _browse(self) -> None:
        """Starts at the path the field holds, if it names one, else at the last folder."""
        given = Path(self.line.text()).expanduser() if self.line.text().strip() else None
        start = given if given is not None and given.exists() else None
        if self._folder:
            path = file_dialogs.choose_folder(
                self, "Choose a data folder", file_dialogs.Purpose.DATA, start
            )
        else:
            path = file_dialogs.open_file(
                self, "Choose a data file", self._filter, file_dialogs.Purpose.DATA, start
            )
        if path is not None:
            self.line.setText(str(path))


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def editor_for(model: type[BaseModel], name: str, initial: float = 1.0) -> QWidget:
    """The editor for ``model.name``, with the field's range, default and description.

    ``initial`` is what an optional number shows before it is first turned on.
    """
    info = model.model_fields[name]
    annotation, optional = _unwrap_optional(info.annotation)
    origin = typing.get_origin(annotation)
    editor: QWidget
    if annotation is bool:
        editor = BoolEdit()
    elif annotation is int and optional:
        low, high = int_range(info)
        editor = OptionalIntEdit(low, high, initial=max(low, min(high, round(initial))))
    elif annotation is int:
        editor = IntEdit(*int_range(info))
    elif annotation is float and optional:
        low, high = float_range(info)
        editor = OptionalFloatEdit(
            low, high, initial=max(low, min(high, initial)), least_step=least_float_step(info)
        )
    elif annotation is float:
        editor = FloatEdit(*float_range(info), least_float_step(info))
    elif origin is Literal:
        editor = ChoiceEdit([str(arg) for arg in typing.get_args(annotation)])
    elif annotation is str:
        max_length = next((m.max_length for m in info.metadata if isinstance(m, MaxLen)), None)
        editor = TextEdit(optional=optional, max_length=max_length)
    elif origin is list:
        editor = ListEdit(optional=optional, item_type=typing.get_args(annotation)[0])
    else:
        raise TypeError(f"no editor for {model.__name__}.{name}: {info.annotation}")
    if not info.is_required():
        editor.set_value(info.get_default(call_default_factory=True))
    tooltip = " ".join(part for part in (info.description, describe_bounds(info)) if part)
    if tooltip:
        editor.setToolTip(tooltip[0].upper() + tooltip[1:])
    return editor


def label_for(name: str) -> str:
    """``communication_timeout_s`` → ``Communication timeout (s)``."""
    text = name.replace("_", " ")
    if text.endswith(" s"):
        text = text[:-2] + " (s)"
    return text[0].upper() + text[1:] + ":"
