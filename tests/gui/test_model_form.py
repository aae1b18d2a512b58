"""The layer list: add, remove, reorder, and the parameter count that follows."""

from __future__ import annotations

import pytest
from distloop.engine.config import DenseLayer, DropoutLayer, ModelConfig
from distloop.engine.examples import load_example
from distloop.gui.model_form import ModelForm


@pytest.fixture
def form(qtbot) -> ModelForm:
    form = ModelForm()
    qtbot.addWidget(form)
    form.set_value(load_example("seed").model)
    return form


def _kinds(form: ModelForm) -> list[tuple[str, int | float]]:
    return [
        (layer["kind"], layer.get("units", layer.get("rate"))) for layer in form.value()["layers"]
    ]


def test_add_layers_and_count_parameters(qtbot, form: ModelForm) -> None:
    assert form.parameter_count() == 2
    assert form.parameters.text() == "2"
    with qtbot.waitSignal(form.edited):
        form.add_dense_button.click()
    assert _kinds(form) == [("dense", 1), ("dense", 16)]
    assert form.parameter_count() == (1 * 1 + 1) + (1 * 16 + 16)
    form.add_dropout_button.click()
    assert _kinds(form) == [("dense", 1), ("dense", 16), ("dropout", 0.5)]
    assert form.parameter_count() == 34
    assert form.parameters.text() == "34"
    assert [card.title.text() for card in form.cards] == ["Layer 1", "Layer 2", "Layer 3"]


def test_reorder_with_the_card_buttons(form: ModelForm) -> None:
    form.add_layer(DenseLayer(units=4, activation="relu"))
    form.add_layer(DropoutLayer(rate=0.2))
    first, second, third = form.cards
    assert not first.up_button.isEnabled() and not third.down_button.isEnabled()
    third.up_button.click()
    assert _kinds(form) == [("dense", 1), ("dropout", 0.2), ("dense", 4)]
    assert form.cards == [first, third, second]
    third.up_button.click()
    assert _kinds(form) == [("dropout", 0.2), ("dense", 1), ("dense", 4)]
    assert not third.up_button.isEnabled() and third.title.text() == "Layer 1"
    # Dense widths now chain 1 -> 1 -> 4: input 1, dense(1), dense(4).
    assert form.parameter_count() == (1 + 1) + (1 * 4 + 4)
    second.down_button.click()  # already last: nothing moves
    assert form.cards[-1] is second


def test_remove_and_the_model_rule_for_no_dense_layer(form: ModelForm) -> None:
    form.add_layer(DropoutLayer())
    form.cards[0].remove_button.click()
    assert _kinds(form) == [("dropout", 0.5)]
    assert form.parameter_count() is None  # the model needs a dense layer
    assert form.parameters.text().startswith("—")
    form.cards[0].kind.set_value("dense")
    assert form.parameter_count() == 16 * 1 + 16


def test_layer_settings_read_back(form: ModelForm) -> None:
    card = form.cards[0]
    card.dense.editors["units"].set_value(3)
    card.dense.editors["activation"].set_value("tanh")
    card.regularizer_kind.set_value("none")
    assert not card.l1.isEnabled()
    model = ModelConfig.model_validate(form.value())
    layer = model.layers[0]
    assert isinstance(layer, DenseLayer)
    assert (layer.units, layer.activation, layer.kernel_regularizer) == (3, "tanh", None)


def test_targets_follow_the_order(form: ModelForm) -> None:
    form.add_layer(DenseLayer(units=2))
    form.move_layer(1, -1)
    targets = form.targets()
    assert targets[("model", "layers", 0, "units")] is form.cards[0].dense.editors["units"]
    assert targets[("model", "layers", 1)] is form.cards[1]
