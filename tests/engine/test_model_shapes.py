"""Shapes and parameters per layer without TensorFlow, and the models' bad-input problems.

tests/engine/tf/test_models_tf.py checks the same arithmetic against real Keras models.
"""

from __future__ import annotations

import json
import zipfile

import pytest
from distloop.engine.config import ModelConfig
from distloop.engine.memory_estimate import memory_estimate
from distloop.engine.model_shapes import ModelFileError, read_keras_file
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project_data
from support.distloop_testing import REPO, distloop, example_data


def shapes(input_shape: list[int], *layers: dict) -> list[str]:
    model = ModelConfig.model_validate({"input_shape": input_shape, "layers": list(layers)})
    return [row.describe() for row in model.shapes().layers]


def problems(model: dict) -> list[str]:
    data = example_data("classification")
    data["model"] = model
    with pytest.raises(ProblemsError) as caught:
        load_project_data(data)
    return [str(p) for p in caught.value.problems]


DENSE = {"kind": "dense", "units": 10}


def test_conv_and_pooling_shapes_as_model_summary() -> None:
    assert shapes(
        [28, 28, 1],
        {"kind": "conv2d", "filters": 32},
        {"kind": "max_pooling2d"},
        {"kind": "conv2d", "filters": 8, "kernel_size": 5, "strides": 2, "padding": "same"},
        {"kind": "average_pooling2d", "pool_size": 3, "strides": 1},
        {"kind": "batch_normalization"},
        {"kind": "flatten"},
        DENSE,
    ) == [
        "output (None, 26, 26, 32) · 320 params",
        "output (None, 13, 13, 32) · 0 params",
        "output (None, 7, 7, 8) · 6,408 params",
        "output (None, 5, 5, 8) · 0 params",
        "output (None, 5, 5, 8) · 32 params",
        "output (None, 200) · 0 params",
        "output (None, 10) · 2,010 params",
    ]


def test_sequence_layers() -> None:
    assert shapes(
        [20],
        {"kind": "embedding", "input_dim": 1000, "output_dim": 16},
        {"kind": "conv1d", "filters": 4, "kernel_size": 5, "use_bias": False},
        {"kind": "max_pooling1d", "pool_size": 3, "padding": "same"},
        {"kind": "lstm", "units": 8, "return_sequences": True},
        {"kind": "gru", "units": 6},
        {"kind": "layer_normalization"},
        DENSE,
    ) == [
        "output (None, 20, 16) · 16,000 params",
        "output (None, 16, 4) · 320 params",
        "output (None, 6, 4) · 0 params",
        "output (None, 6, 8) · 416 params",  # 4 * (4*8 + 8*8 + 8)
        "output (None, 6) · 288 params",  # 3 * (8*6 + 6*6 + 2*6): reset_after biases
        "output (None, 6) · 12 params",
        "output (None, 10) · 70 params",
    ]
    assert shapes([9, 3], {"kind": "global_average_pooling1d"}, {"kind": "rescaling"}, DENSE) == [
        "output (None, 3) · 0 params",
        "output (None, 3) · 0 params",
        "output (None, 10) · 40 params",
    ]


def test_dense_on_a_multi_dimensional_input_is_flattened_as_before() -> None:
    """Old projects: the Flatten right after the Input, ahead of leading dropout layers."""
    model = ModelConfig.model_validate(
        {"input_shape": [4, 3], "layers": [{"kind": "dropout"}, {"kind": "dropout"}, DENSE]}
    )
    rows = model.shapes()
    assert rows.flatten_before == 0
    assert [(r.output, r.flattened) for r in rows.layers] == [
        ((12,), True),
        ((12,), False),
        ((10,), False),
    ]
    assert model.parameter_count() == 12 * 10 + 10
    conv = ModelConfig.model_validate(
        {
            "input_shape": [6, 6, 1],
            "layers": [{"kind": "conv2d", "filters": 2}, {"kind": "dropout"}, DENSE],
        }
    )
    assert conv.shapes().flatten_before == 1  # after the conv, before its dropout
    assert conv.shapes().layers[2].describe() == "output (None, 10) · 330 params"


def test_batch_normalization_counts_moving_statistics_but_does_not_train_them() -> None:
    model = ModelConfig.model_validate(
        {"input_shape": [5], "layers": [{"kind": "batch_normalization"}, DENSE]}
    )
    assert model.shapes().params == 20 + 60
    assert model.parameter_count() == 10 + 60


def test_backbone_shapes_and_head() -> None:
    model = ModelConfig.model_validate(
        {
            "kind": "backbone",
            "backbone": "mobilenet_v2",
            "input_shape": [64, 64, 3],
            "layers": [DENSE],
        }
    )
    rows = model.shapes()
    assert rows.backbone is not None
    assert rows.backbone.describe() == "output (None, 1280) · 2,257,984 params"
    assert model.parameter_count() == 2_223_872 + 12_810


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (
            {"input_shape": [8], "layers": [{"kind": "conv2d", "filters": 4}, DENSE]},
            "model.layers.0: conv2d takes images (3-D examples), but its input is (None, 8)",
        ),
        (
            {
                "input_shape": [4, 4, 1],
                "layers": [{"kind": "max_pooling2d", "pool_size": 5}, DENSE],
            },
            "model.layers.0: its pool_size 5 is larger than its input's 4",
        ),
        (
            {
                "input_shape": [8],
                "layers": [DENSE, {"kind": "embedding", "input_dim": 9, "output_dim": 2}],
            },
            "model.layers.1: an embedding must be the first layer",
        ),
        (
            {
                "input_shape": [5, 5],
                "layers": [{"kind": "flatten"}, {"kind": "lstm", "units": 2}, DENSE],
            },
            "model.layers.1: lstm takes sequences (steps, features) (2-D examples)",
        ),
        (
            {
                "kind": "backbone",
                "backbone": "mobilenet_v2",
                "input_shape": [28, 28, 1],
                "layers": [DENSE],
            },
            "model.input_shape: MobileNetV2 needs images of at least 32x32, not 28x28",
        ),
        (
            {"kind": "backbone", "backbone": "resnet50", "input_shape": [64], "layers": [DENSE]},
            "model.input_shape: ResNet50 takes images (height, width, channels)",
        ),
        (
            {"kind": "backbone", "input_shape": [32, 32, 3], "layers": [DENSE]},
            "model.backbone: choose the backbone model",
        ),
        (
            {"kind": "keras_file", "path": "m.h5", "input_shape": [8]},
            "model.path: must name a .keras model file",
        ),
        (
            {"kind": "keras_file", "path": "m.keras", "input_shape": [8], "layers": [DENSE]},
            "model.layers: a .keras file brings its own layers",
        ),
        (
            {"input_shape": [8], "layers": [DENSE], "weights": "w.h5"},
            "model.weights: applies only to kind backbone",
        ),
    ],
)
def test_a_layer_that_cannot_take_its_input_is_one_problem_at_its_path(
    model: dict, expected: str
) -> None:
    found = problems(model)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_old_projects_stay_valid_and_weigh_the_same() -> None:
    project = load_project_data(example_data("classification"))
    assert project.model.kind == "layers"
    # Dense widths only, as before: input, each dense layer, and the kept widths of dropouts.
    widths = [project.model.input_size, *(r.output[0] for r in project.model.shapes().layers)]
    estimate = memory_estimate(project)
    assert estimate.activations == project.data.global_batch_size * sum(widths) * 4 * 2


def test_a_keras_file_project_skips_unit_checks_until_loaded() -> None:
    data = example_data("classification")
    data["model"] = {"kind": "keras_file", "path": "model.keras", "input_shape": [20]}
    project = load_project_data(data)
    assert project.model.output_units is None and project.model.parameter_count() is None
    assert project.model.shapes().layers == []


def test_reading_a_keras_files_input_shape_without_tensorflow(tmp_path) -> None:
    good = tmp_path / "good.keras"
    with zipfile.ZipFile(good, "w") as archive:
        archive.writestr(
            "config.json",
            '{"class_name": "Sequential", "config": {}, '
            '"build_config": {"input_shape": [null, 8, 8, 1]}}',
        )
    assert read_keras_file(str(good)).input_shape == [8, 8, 1]
    (tmp_path / "text.keras").write_text("not a zip")
    with pytest.raises(ModelFileError, match=r"is not a \.keras model file"):
        read_keras_file(str(tmp_path / "text.keras"))
    with pytest.raises(ModelFileError, match="does not exist"):
        read_keras_file(str(tmp_path / "missing.keras"))
    empty = tmp_path / "empty.keras"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("model.weights.h5", b"")
    with pytest.raises(ModelFileError, match=r"no readable config\.json"):
        read_keras_file(str(empty))


def test_validate_names_model_files_that_cannot_load_relative_to_the_project(tmp_path) -> None:
    (tmp_path / "model.keras").write_text("saved from a text editor")
    data = example_data("classification")
    data["model"] = {"kind": "keras_file", "path": "model.keras", "input_shape": [20]}
    project = tmp_path / "p.json"
    project.write_text(json.dumps(data))
    (tmp_path / "weights.h5").write_text("not HDF5")
    backbone = tmp_path / "b.json"
    data["model"] = {
        "kind": "backbone",
        "backbone": "efficientnet_b0",
        "weights": "weights.h5",
        "input_shape": [32, 32, 3],
        "layers": [{"kind": "dense", "units": 4}],
    }
    backbone.write_text(json.dumps(data))
    result = distloop("validate", str(project), cwd=REPO)
    assert result.returncode == 1
    assert f"model.path: {tmp_path / 'model.keras'} is not a .keras model file" in result.stderr
    assert "Traceback" not in result.stderr
    result = distloop("validate", str(backbone), cwd=REPO)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"model.weights: {tmp_path / 'weights.h5'} is not a Keras weights file" in (
        result.stderr
    )
    assert json.loads(project.read_text())["model"]["path"] == "model.keras"  # left as written


def test_an_embedding_on_real_valued_data_is_a_problem_at_the_layer() -> None:
    embedding = {"kind": "embedding", "input_dim": 50, "output_dim": 4}
    found = problems({"input_shape": [20], "layers": [embedding, {"kind": "dense", "units": 4}]})
    assert found == [
        "model.layers.0: an embedding reads token ids, but synthetic_classification data are "
        "real numbers; use text_folder data, or numpy/csv data holding ids from 0 to "
        "input_dim - 1"
    ]
