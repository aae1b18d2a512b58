"""Checks of the model builder against real Keras, run as one process (one TensorFlow start).

``python tests/support/model_checks.py OUT_DIR`` prints one JSON object: per model, Keras's
per-layer output shapes and parameter counts next to ``engine.model_shapes``'s;
the moving variance synchronized and unsynchronized BatchNormalization keep on two
replicas whose halves of the batch differ; a float16 step with loss scaling on the
CPU. It also saves ``OUT_DIR/conv.keras``, a small conv model saved under the
mixed_bfloat16 policy, for an engine run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

from distloop.engine.config import LossConfig, ModelConfig, SGDConfig  # noqa: E402
from distloop.engine.model_shapes import ModelFileError  # noqa: E402
from distloop.engine.tf.model import (  # noqa: E402
    build_loss,
    build_model,
    build_optimizer,
    set_precision,
)
from distloop.engine.tf.step_runners import StepRunner  # noqa: E402

MODELS: dict[str, dict[str, Any]] = {
    "images": {
        "input_shape": [20, 18, 3],
        "layers": [
            {"kind": "rescaling"},
            {"kind": "conv2d", "filters": 8, "padding": "same", "activation": "relu"},
            {"kind": "batch_normalization"},
            {"kind": "max_pooling2d"},
            {"kind": "conv2d", "filters": 4, "kernel_size": 3, "strides": 2, "use_bias": False},
            {"kind": "average_pooling2d", "pool_size": 2, "strides": 1, "padding": "same"},
            {"kind": "layer_normalization"},
            {"kind": "dropout", "rate": 0.1},
            {"kind": "dense", "units": 5},
        ],
    },
    "global_pooling": {
        "input_shape": [9, 7, 2],
        "layers": [
            {"kind": "conv2d", "filters": 3, "kernel_size": 2},
            {"kind": "global_max_pooling2d"},
            {"kind": "dense", "units": 2},
        ],
    },
    "text": {
        "input_shape": [12],
        "layers": [
            {"kind": "embedding", "input_dim": 50, "output_dim": 8},
            {"kind": "conv1d", "filters": 6, "kernel_size": 3},
            {"kind": "max_pooling1d", "pool_size": 2},
            {"kind": "lstm", "units": 5, "return_sequences": True},
            {"kind": "gru", "units": 4},
            {"kind": "dense", "units": 3},
        ],
    },
    "sequences": {
        "input_shape": [10, 4],
        "layers": [
            {"kind": "conv1d", "filters": 3, "kernel_size": 4, "strides": 2, "padding": "same"},
            {"kind": "average_pooling1d", "pool_size": 3, "strides": 1},
            {"kind": "global_average_pooling1d"},
            {"kind": "dense", "units": 2},
        ],
    },
    "recurrent": {
        "input_shape": [10, 4],
        "layers": [
            {"kind": "gru", "units": 3, "return_sequences": True},
            {"kind": "global_max_pooling1d"},
            {"kind": "dense", "units": 2},
        ],
    },
    "flatten": {
        "input_shape": [6, 5],
        "layers": [
            {"kind": "flatten"},
            {"kind": "batch_normalization"},
            {"kind": "dense", "units": 2},
        ],
    },
    "mobilenet_v2": {
        "kind": "backbone",
        "backbone": "mobilenet_v2",
        "input_shape": [33, 47, 1],
        "layers": [{"kind": "dense", "units": 3}],
    },
    "efficientnet_b0": {
        "kind": "backbone",
        "backbone": "efficientnet_b0",
        "input_shape": [32, 40, 3],
        "layers": [{"kind": "dense", "units": 4}],
    },
    "resnet50": {
        "kind": "backbone",
        "backbone": "resnet50",
        "input_shape": [70, 35, 2],
        "layers": [{"kind": "dropout"}, {"kind": "dense", "units": 2}],
    },
}


def compare_shapes() -> dict[str, Any]:
    """Per model: [output shape, params, trainable] per layer, from Keras and predicted.

    The implicit Flatten is left out of Keras's rows (it has no project layer), and a
    backbone's two Keras layers (the application, its pooling) make one row.
    """
    results = {}
    for name, data in MODELS.items():
        config = ModelConfig.model_validate(data)
        model = build_model(config, seed=1)
        layers = [layer for layer in model.layers if layer.name != "implicit_flatten"]
        keras_rows = [
            [list(layer.output.shape[1:]), layer.count_params(), _trainable(layer)]
            for layer in layers
        ]
        if config.backbone is not None:
            backbone, pooling = keras_rows[:2]
            keras_rows[:2] = [[pooling[0], backbone[1], backbone[2]]]
        shapes = config.shapes()
        rows = ([shapes.backbone] if shapes.backbone else []) + shapes.layers
        results[name] = {
            "keras": keras_rows,
            "predicted": [[list(r.output), r.params, r.trainable] for r in rows],
            "keras_trainable": _trainable(model),
            "trainable": config.parameter_count(),
        }
    return results


def _trainable(layer: Any) -> int:
    return sum(int(tf.size(v)) for v in layer.trainable_weights)


def batch_norm_variance(strategy: tf.distribute.Strategy, synchronized: bool) -> float:
    """The moving variance after one step on 2 replicas; momentum 0 keeps the batch's own.

    Replica 0 sees 0 and 2, replica 1 sees 10 and 12: each share's variance is 1,
    the global batch's is 26.
    """
    config = ModelConfig.model_validate(
        {
            "input_shape": [1],
            "layers": [
                {"kind": "batch_normalization", "momentum": 0.0, "synchronized": synchronized},
                {"kind": "dense", "units": 1},
            ],
        }
    )
    with strategy.scope():
        model = build_model(config, seed=0)
        optimizer = build_optimizer(SGDConfig(), model.trainable_variables)
    features = tf.constant([[0.0], [2.0], [10.0], [12.0]])
    dataset = tf.data.Dataset.from_tensors((features, tf.zeros([4, 1])))
    runner = StepRunner(
        strategy,
        model,
        optimizer,
        build_loss(_mse()),
        4,
        per_replica_losses=False,
        to_replicas=lambda element: element,
    )
    runner.run_one(next(iter(strategy.experimental_distribute_dataset(dataset))))
    return float(model.layers[0].moving_variance.numpy()[0])


def _mse() -> LossConfig:
    return LossConfig(kind="mean_squared_error")


def float16_step() -> dict[str, Any]:
    """One conv step in mixed_float16 on the CPU: finite loss, weights moved, scale kept."""
    set_precision("mixed_float16")
    try:
        config = ModelConfig.model_validate(
            {
                "input_shape": [8, 8, 1],
                "layers": [
                    {"kind": "conv2d", "filters": 4, "activation": "relu"},
                    {"kind": "dense", "units": 2},
                ],
            }
        )
        strategy = tf.distribute.get_strategy()
        model = build_model(config, seed=0)
        optimizer = build_optimizer(SGDConfig(), model.trainable_variables, loss_scale=True)
        before = model.layers[0].kernel.numpy().copy()
        runner = StepRunner(
            strategy,
            model,
            optimizer,
            build_loss(_mse()),
            4,
            per_replica_losses=False,
            to_replicas=lambda element: element,
        )
        element = (tf.random.stateless_normal([4, 8, 8, 1], [1, 2]), tf.ones([4, 2]))
        loss, _ = runner.run_one(element)
        # Fused steps too: the loss scale's cond and merge_call inside the tf.range loop.
        fused, _ = runner.run_many(iter(tf.data.Dataset.from_tensors(element).repeat()), 3)
        return {
            "loss": float(loss),
            "loss_dtype": loss.dtype.name,
            "compute_dtype": model.layers[0].compute_dtype,
            "kernel_dtype": str(model.layers[0].kernel.dtype),
            "output_dtype": str(model.outputs[0].dtype),
            "moved": bool((model.layers[0].kernel.numpy() != before).any()),
            "scale": float(optimizer.dynamic_scale.numpy()),
            "fused_losses": [float(value) for value in fused.numpy()],
        }
    finally:
        set_precision("none")


def save_conv_model(path: Path, policy: str) -> None:
    """A small synchronized-BN conv model, saved as the engine's keras_file test input."""
    set_precision(policy)
    config = ModelConfig.model_validate(
        {
            "input_shape": [8, 8, 1],
            "layers": [
                {"kind": "conv2d", "filters": 4, "activation": "relu"},
                {"kind": "batch_normalization", "synchronized": True},
                {"kind": "max_pooling2d"},
                {"kind": "dense", "units": 3},
            ],
        }
    )
    try:
        build_model(config, seed=2).save(path)
    finally:
        set_precision("none")


def load_failures(folder: Path) -> list[str]:
    """The one-line messages of model files that do not load (built one after the other)."""
    (folder / "broken.keras").write_bytes(b"PK\x03\x04 cut short")
    (folder / "random.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(200))
    models = [
        {"kind": "keras_file", "path": str(folder / "broken.keras"), "input_shape": [8, 8, 1]},
        {"kind": "keras_file", "path": str(folder / "float32.keras"), "input_shape": [8, 8, 3]},
        {
            "kind": "backbone",
            "backbone": "mobilenet_v2",
            "input_shape": [32, 32, 3],
            "weights": str(folder / "random.h5"),
            "layers": [{"kind": "dense", "units": 2}],
        },
    ]
    messages = []
    for data in models:
        try:
            build_model(ModelConfig.model_validate(data), seed=0)
        except ModelFileError as exc:
            messages.append(str(exc))
    set_precision("mixed_bfloat16")
    try:
        model = {"kind": "keras_file", "path": str(folder / "float32.keras")}
        build_model(ModelConfig.model_validate({**model, "input_shape": [8, 8, 1]}), seed=0)
    except ModelFileError as exc:
        messages.append(str(exc))
    finally:
        set_precision("none")
    return messages


if __name__ == "__main__":
    out = Path(sys.argv[1])
    save_conv_model(out / "conv.keras", "mixed_bfloat16")
    save_conv_model(out / "float32.keras", "none")
    # One strategy for both runs: a second MirroredStrategy's collectives clash with the first's.
    mirrored = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices()])
    report = {
        "shapes": compare_shapes(),
        "synchronized_variance": batch_norm_variance(mirrored, synchronized=True),
        "replica_variance": batch_norm_variance(mirrored, synchronized=False),
        "float16": float16_step(),
        "load_failures": load_failures(out),
    }
    print(json.dumps(report))
