"""Editors take their ranges from the model fields, so a form cannot hold a rejected value."""

from __future__ import annotations

import pytest
from distloop.engine.config import (
    AdamConfig,
    ConstantData,
    DropoutLayer,
    LossConfig,
    SGDConfig,
    StrategyConfig,
    TrainingConfig,
)
from distloop.gui.project.field_editors import (
    DECIMALS,
    BoolEdit,
    ChoiceEdit,
    FloatEdit,
    IntEdit,
    ListEdit,
    OptionalFloatEdit,
    TextEdit,
    editor_for,
    label_for,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractSpinBox


def test_int_ranges_come_from_the_model(qtbot) -> None:
    replicas = editor_for(StrategyConfig, "cpu_replicas")
    batch = editor_for(ConstantData, "global_batch_size")
    assert isinstance(replicas, IntEdit)
    assert replicas.bounds == (1, 64)
    assert batch.bounds == (1, 10_000_000)
    batch.set_value(0)
    assert batch.value() == 0  # kept, for the model to report; never clamped behind the back
    assert batch.stepEnabled() == QAbstractSpinBox.StepEnabledFlag.StepUpEnabled
    batch.stepBy(1)
    assert batch.value() == 1  # the arrow leads back into the range
    replicas.set_value(63)
    replicas.stepBy(10)  # Page Up
    assert replicas.value() == 64
    assert replicas.stepEnabled() == QAbstractSpinBox.StepEnabledFlag.StepDownEnabled


def test_open_float_bounds_stay_inside(qtbot) -> None:
    rate = editor_for(DropoutLayer, "rate")
    learning_rate = editor_for(SGDConfig, "learning_rate")
    assert isinstance(rate, FloatEdit)
    assert rate.bounds[0] == 0.0 and rate.bounds[1] < 1.0
    assert 0.0 < learning_rate.bounds[0] < 1e-9 and learning_rate.bounds[1] == 100.0
    rate.set_value(0.95)
    rate.stepBy(10)
    DropoutLayer(rate=rate.value())  # the arrows stop at a value the model accepts
    assert rate.value() == rate.bounds[1]
    rate.set_value(1.5)
    assert rate.value() == 1.5  # typed beyond the range: kept for the model to report
    rate.stepBy(-1)
    assert rate.value() == rate.bounds[1]
    learning_rate.set_value(0.05)
    learning_rate.stepBy(1)
    assert learning_rate.value() == 0.051  # Qt's adaptive step still applies inside it


def test_defaults_and_descriptions(qtbot) -> None:
    adam = editor_for(AdamConfig, "learning_rate")
    assert adam.value() == 0.001
    batch = editor_for(ConstantData, "global_batch_size")
    assert "compute_average_loss" in batch.toolTip() and "at least 1" in batch.toolTip()


def test_float_text_is_exact_for_small_values(qtbot) -> None:
    epsilon = editor_for(AdamConfig, "epsilon")
    assert epsilon.value() == 1e-7
    assert epsilon.text() == "1e-07"
    epsilon.lineEdit().setText("2.5e-8")
    epsilon.interpretText()
    assert epsilon.value() == 2.5e-8


# Each example builds its own editor; the shared fixtures (QApplication, settings) hold no state.
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.floats(min_value=1e-6, max_value=100.0))
def test_float_edit_keeps_values_to_twelve_decimals(qtbot, value: float) -> None:
    editor = editor_for(SGDConfig, "learning_rate")
    editor.set_value(value)
    assert abs(editor.value() - value) <= 10.0**-DECIMALS


def test_optional_float_is_none_until_checked(qtbot) -> None:
    delta = editor_for(LossConfig, "delta")
    assert isinstance(delta, OptionalFloatEdit)
    assert delta.value() is None
    delta.set_value(2.5)
    assert delta.value() == 2.5 and delta.checkbox.isChecked()
    delta.set_value(None)
    assert delta.value() is None and not delta.spin.isEnabled()


def test_choice_text_and_list_editors(qtbot) -> None:
    kind = editor_for(StrategyConfig, "kind")
    assert isinstance(kind, ChoiceEdit)
    assert [kind.itemText(i) for i in range(kind.count())][:3] == [
        "default",
        "one_device",
        "mirrored",
    ]
    with pytest.raises(ValueError):
        kind.set_value("nonsense")
    tpu = editor_for(StrategyConfig, "tpu")
    assert isinstance(tpu, TextEdit) and tpu.value() is None
    devices = editor_for(StrategyConfig, "devices")
    assert isinstance(devices, ListEdit) and devices.value() is None
    devices.setText(" /gpu:0 ,/gpu:1")
    assert devices.value() == ["/gpu:0", "/gpu:1"]
    features = editor_for(ConstantData, "features")
    features.set_value([1.0, -2.5])
    assert features.value() == [1.0, -2.5]  # numbers: the model's floats are strict
    features.setText("1, x, 1e3")
    assert features.value() == [1.0, "x", 1000.0]  # "x" stays text, for the model to refuse
    features.setText("")
    assert features.value() == []
    assert isinstance(editor_for(TrainingConfig, "stop_on_nan"), BoolEdit)


def test_every_edit_emits_edited(qtbot) -> None:
    units = editor_for(StrategyConfig, "cpu_replicas")
    with qtbot.waitSignal(units.edited, timeout=1000):
        units.setValue(3)


def test_labels() -> None:
    assert label_for("communication_timeout_s") == "Communication timeout (s):"
    assert label_for("global_batch_size") == "Global batch size:"


def _float_fields() -> list[tuple[type, str]]:
    """Every float field of the project's models (issue 34: each steps by its range)."""
    import importlib
    import inspect
    import pkgutil

    import distloop.engine.config as config
    from distloop.gui.project.field_editors import _unwrap_optional
    from pydantic import BaseModel

    found: dict[tuple[type, str], None] = {}
    for module_info in pkgutil.iter_modules(config.__path__):
        module = importlib.import_module(f"{config.__name__}.{module_info.name}")
        for model in vars(module).values():
            if inspect.isclass(model) and issubclass(model, BaseModel):
                for name, info in model.model_fields.items():
                    if _unwrap_optional(info.annotation)[0] is float:
                        found[(model, name)] = None
    return list(found)


def test_every_float_field_steps_by_its_range_from_zero(qtbot) -> None:
    """Rotation and Crop stepped by 1e-12 from 0 ("2e-12" after two clicks)."""
    from distloop.gui.project.field_editors import _bounds

    checked = []
    for model, name in _float_fields():
        low, high, low_open, _ = _bounds(model.model_fields[name])
        if low_open:
            continue  # above 0: spans magnitudes, steps by the value (below)
        editor = editor_for(model, name)
        spin = getattr(editor, "spin", editor)
        spin.setEnabled(True)
        spin.set_value(0.0)
        spin.stepBy(2)
        span = high - low if low is not None and high is not None else 1.0
        assert span / 100 <= spin.value() <= span / 2, (model.__name__, name, spin.text())
        checked.append(name)
    assert {"rotation", "crop", "momentum", "noise", "l1"} <= set(checked)


def test_rotation_and_crop_arrow_keys(qtbot) -> None:
    from distloop.engine.config.data import ImageFolderData
    from PySide6.QtCore import Qt

    rotation = editor_for(ImageFolderData, "rotation")
    crop = editor_for(ImageFolderData, "crop")
    qtbot.addWidget(rotation)
    qtbot.addWidget(crop)
    for _ in range(2):
        qtbot.keyClick(rotation, Qt.Key.Key_Up)
        qtbot.keyClick(crop, Qt.Key.Key_Up)
    assert (rotation.text(), crop.text()) == ("2.0", "0.02")
    qtbot.keyClick(crop, Qt.Key.Key_Down)
    assert crop.text() == "0.01"


def test_magnitude_fields_step_by_their_value(qtbot) -> None:
    epsilon = editor_for(AdamConfig, "epsilon")
    epsilon.stepBy(1)
    assert epsilon.value() == pytest.approx(1.1e-7)
    learning_rate = editor_for(SGDConfig, "learning_rate")
    learning_rate.set_value(1.0)
    learning_rate.stepBy(-1)
    assert learning_rate.text() == "0.99"


def test_a_refused_key_says_the_limit_where_the_user_types(qtbot) -> None:
    """Steps kept "999999999" of "999999999999999" without a word, and letters vanished."""
    from distloop.gui.project.field_editors import refusal
    from distloop.gui.project.training_form import TrainingForm
    from PySide6.QtWidgets import QToolTip

    form = TrainingForm()
    qtbot.addWidget(form)
    form.show()
    form.steps_radio.setChecked(True)
    steps = form.steps
    steps.lineEdit().selectAll()
    qtbot.keyClicks(steps, "999999999999999")
    assert steps.value() == 999_999_999  # a QSpinBox holds 32 bits; the model judges the rest
    assert refusal(steps) == "At most 1,000,000,000: 9,999,999,999 is more."
    assert QToolTip.isVisible() and QToolTip.text() == refusal(steps)
    assert "1,000,000,000" in steps.toolTip()
    qtbot.keyClick(steps, Qt.Key.Key_Backspace)
    assert refusal(steps) == ""  # a key it took: the word is gone
    qtbot.keyClicks(steps, "x")
    assert refusal(steps) == "A whole number from 1 to 1,000,000,000: only digits are taken."

    rate = editor_for(SGDConfig, "learning_rate")
    qtbot.addWidget(rate)
    rate.lineEdit().selectAll()
    qtbot.keyClicks(rate, "0.1x")
    assert rate.text() == "0.1"
    assert "at most 100" in refusal(rate) and "1e-7" in refusal(rate)
