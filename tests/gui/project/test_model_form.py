"""The layer list: add, remove, reorder, and the parameter count that follows."""

from __future__ import annotations

import zipfile

import pytest
from distloop.engine.config import DenseLayer, DropoutLayer, ModelConfig, TrainingConfig
from distloop.engine.examples import load_example
from distloop.engine.validation import validate
from distloop.gui.project.model_form import ModelForm
from distloop.gui.project.training_form import TrainingForm


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


def test_cards_show_output_shapes_and_the_problem_on_the_layer_that_has_it(form) -> None:
    form.input_shape.set_value([28, 28, 1])
    form.cards[0].remove_button.click()
    for kind in ("conv2d", "max_pooling2d", "flatten", "dense"):
        form.add_kind.set_value(kind)
        form.add_button.click()
    form.cards[0].forms["conv2d"].editors["filters"].set_value(32)
    assert [card.shape.text() for card in form.cards] == [
        "output (None, 26, 26, 32) · 320 params",
        "output (None, 13, 13, 32) · 0 params",
        "output (None, 5408) · 0 params",
        "output (None, 16) · 86,544 params",
    ]
    assert form.parameters.text() == "86,864"
    form.cards[1].forms["max_pooling2d"].editors["pool_size"].set_value(30)
    assert form.cards[1].shape.text().startswith("its pool_size 30 is larger than its input's 26")
    assert form.cards[2].shape.text() == "output unknown until the layers above are fixed"
    assert form.parameter_count() is None
    form.cards[1].kind.set_value("global_average_pooling2d")
    assert form.cards[2].shape.text() == "output (None, 32) · 0 params"
    model = ModelConfig.model_validate(form.value())
    assert [layer.kind for layer in model.layers] == [
        "conv2d",
        "global_average_pooling2d",
        "flatten",
        "dense",
    ]


def test_a_layer_kind_shows_its_own_settings(form) -> None:
    card = form.cards[0]
    card.kind.set_value("lstm")
    assert card.initializer.isVisibleTo(card) and not card.regularizer.isVisibleTo(card)
    card.forms["lstm"].editors["return_sequences"].set_value(True)
    assert card.value() == {
        "kind": "lstm",
        "units": 16,
        "return_sequences": True,
        "kernel_initializer": {"kind": "glorot_uniform", "value": None, "stddev": None},
    }
    card.kind.set_value("batch_normalization")
    assert not card.initializer.isVisibleTo(card)
    assert card.value() == {
        "kind": "batch_normalization",
        "momentum": 0.99,
        "epsilon": 0.001,
        "synchronized": False,
    }
    targets = form.targets()
    assert (
        targets[("model", "layers", 0, "synchronized")]
        is (card.forms["batch_normalization"].editors["synchronized"])
    )


def test_backbone_and_keras_file_models(form, tmp_path) -> None:
    form.kind.set_value("backbone")
    form.backbone.set_value("mobilenet_v2")
    form.input_shape.set_value([28, 28, 3])
    form._on_edited()
    assert form.backbone_shape.text().startswith("MobileNetV2 needs images of at least 32x32")
    form.input_shape.set_value([96, 96, 3])
    form._on_edited()
    assert form.backbone_shape.text() == (
        "output (None, 1280) · 2,257,984 params, with global average pooling"
    )
    assert form.cards[0].shape.text() == "output (None, 1) · 1,281 params"
    model = ModelConfig.model_validate(form.value())
    assert (model.kind, model.backbone, model.weights) == ("backbone", "mobilenet_v2", None)

    saved = tmp_path / "m.keras"
    with zipfile.ZipFile(saved, "w") as archive:
        archive.writestr(
            "config.json",
            '{"class_name": "Sequential", "build_config": {"input_shape": [null, 12, 4]}}',
        )
    form.kind.set_value("keras_file")
    assert not form.layers_box.isVisibleTo(form)
    form.path.set_value(str(saved))
    assert form.input_shape.value() == [12, 4]
    assert form.file_note.text() == "a Sequential model taking [12, 4]"
    assert form.parameters.text() == "counted when the engine loads the file"
    model = ModelConfig.model_validate(form.value())
    assert (model.kind, model.path, model.layers) == ("keras_file", str(saved), [])
    form.path.set_value(str(tmp_path / "none.keras"))
    assert form.file_note.text().endswith("none.keras does not exist")


def test_training_form_shows_mixed_precision_and_memory_growth(qtbot) -> None:
    training = TrainingForm()
    qtbot.addWidget(training)
    training.rest.editors["mixed_precision"].set_value("mixed_bfloat16")
    training.rest.editors["gpu_memory_growth"].set_value(False)
    value = TrainingConfig.model_validate(training.value())
    assert (value.mixed_precision, value.gpu_memory_growth) == ("mixed_bfloat16", False)


def test_the_window_checks_model_files_before_a_run(tmp_path) -> None:
    (tmp_path / "model.keras").write_text("not a zip")
    data = load_example("classification").model_dump(mode="json")
    data["model"] = {"kind": "keras_file", "path": "model.keras", "input_shape": [20]}
    found = validate(data, tmp_path)
    assert found.project is not None and not found.valid
    assert [(p.path, p.message) for p in found.problems] == [
        (
            "model.path",
            f"{tmp_path / 'model.keras'} is not a .keras model file "
            "(save one with model.save('name.keras'))",
        )
    ]
