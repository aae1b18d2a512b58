"""Output shapes and parameter counts of a project's model, computed without TensorFlow.

The GUI shows them on every layer card while the user builds (as ``model.summary()``
would), the memory estimate weighs them, and validation refuses a layer that cannot
take the shape before it, naming the layer (``model.layers.2``), instead of leaving
it to a Keras error inside the engine. The rules are Keras 3's (channels last);
``tests/engine/tf/test_models_tf.py`` compares them with real Keras models.

One rule is Distloop's own: a dense layer that receives a multi-dimensional input
gets it flattened. The implicit ``Flatten`` goes before the dropout layers directly
ahead of that dense layer (dropout keeps any shape), which for the dense and dropout
models of earlier versions is right after the ``Input``, where it always was: their
runs repeat exactly.
"""

from __future__ import annotations

import json
import math
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .fileio import NotRegularFileError, open_regular
from .problems import Problem

Shape = tuple[int, ...]
"""One example's shape: the batch dimension left out."""


@dataclass(frozen=True)
class Backbone:
    """What a ``keras.applications`` backbone does to an image, for the shape arithmetic.

    Counts are Keras 3's for ``include_top=False`` on 3 channels; the first
    convolution (and EfficientNet's input normalization) grows with the channels.
    """

    title: str
    application: str
    """The constructor's name in ``keras.applications``."""
    params: int
    trainable: int
    params_per_channel: int
    trainable_per_channel: int
    features: int
    """Channels of the last feature map, which global average pooling turns into a vector."""
    min_size: int = 32
    reduction: int = 32


BACKBONES: dict[str, Backbone] = {
    "mobilenet_v2": Backbone("MobileNetV2", "MobileNetV2", 2_257_984, 2_223_872, 288, 288, 1280),
    "resnet50": Backbone("ResNet50", "ResNet50", 23_587_712, 23_534_592, 3136, 3136, 2048),
    "efficientnet_b0": Backbone(
        "EfficientNetB0", "EfficientNetB0", 4_049_571, 4_007_548, 290, 288, 1280
    ),
}


@dataclass(frozen=True)
class LayerShape:
    """One layer's output and weights, as a row of ``model.summary()``."""

    output: Shape
    params: int
    """All weights, as ``model.summary()`` counts them (moving statistics included)."""
    trainable: int
    flattened: bool = False
    """An implicit ``Flatten`` runs before this layer (see the module's docstring)."""

    def describe(self) -> str:
        dims = ", ".join(["None", *map(str, self.output)])
        return f"output ({dims}) · {self.params:,} params"


@dataclass
class ModelShapes:
    """The model's shapes layer by layer, up to the first layer that cannot run."""

    input: Shape
    layers: list[LayerShape] = field(default_factory=list)
    """One per project layer, up to (not including) the first with a problem."""
    backbone: LayerShape | None = None
    """The backbone with its global average pooling: its output is the head's input."""
    problems: list[Problem] = field(default_factory=list)
    flatten_before: int | None = None
    """Index of the project layer the implicit ``Flatten`` precedes, if any."""

    @property
    def params(self) -> int:
        return sum(s.params for s in self._rows())

    @property
    def trainable(self) -> int:
        return sum(s.trainable for s in self._rows())

    @property
    def output(self) -> Shape:
        rows = self._rows()
        return rows[-1].output if rows else self.input

    def activation_sizes(self) -> list[int]:
        """Values per example the forward pass keeps: the input and every layer's output."""
        return [math.prod(self.input), *(math.prod(s.output) for s in self._rows())]

    def _rows(self) -> list[LayerShape]:
        return ([self.backbone] if self.backbone else []) + self.layers


class _Refused(Exception):
    """The layer cannot take its input; the message says why, for the user."""


def model_shapes(
    input_shape: Sequence[int],
    layers: Sequence[Any],
    backbone: str | None = None,
    loc: tuple[str, ...] = (),
) -> ModelShapes:
    """Shapes of a model of ``layers`` (project layer configs) on ``input_shape``.

    ``backbone`` names an entry of :data:`BACKBONES` that comes first. Problems are
    located under ``loc`` (``()`` for the model section's own validation, whose
    locations pydantic prefixes with ``model``).
    """
    shapes = ModelShapes(input=tuple(input_shape))
    shape = shapes.input
    if backbone is not None:
        try:
            shapes.backbone = _backbone(BACKBONES[backbone], shape)
        except _Refused as exc:
            shapes.problems.append(Problem((*loc, "input_shape"), str(exc)))
            return shapes
        shape = shapes.backbone.output
    dropout_run: int | None = None  # where the dropouts right before this layer start
    for index, layer in enumerate(layers):
        flatten = layer.kind == "dense" and len(shape) > 1
        if flatten:
            shapes.flatten_before = index if dropout_run is None else dropout_run
            shape = (math.prod(shape),)
            for earlier in range(shapes.flatten_before, index):
                shapes.layers[earlier] = LayerShape(shape, 0, 0, earlier == shapes.flatten_before)
        try:
            if layer.kind == "embedding" and (index > 0 or backbone is not None):
                raise _Refused("an embedding must be the first layer: it reads token ids")
            output, params, trainable = _layer(layer, shape)
        except _Refused as exc:
            shapes.problems.append(Problem((*loc, "layers", index), str(exc)))
            break
        shapes.layers.append(
            LayerShape(output, params, trainable, flatten and shapes.flatten_before == index)
        )
        shape = output
        if layer.kind == "dropout":
            dropout_run = index if dropout_run is None else dropout_run
        else:
            dropout_run = None
    return shapes


def _backbone(backbone: Backbone, shape: Shape) -> LayerShape:
    if len(shape) != 3:
        raise _Refused(
            f"{backbone.title} takes images (height, width, channels), not input_shape "
            f"{list(shape)}"
        )
    height, width, channels = shape
    if min(height, width) < backbone.min_size:
        raise _Refused(
            f"{backbone.title} needs images of at least {backbone.min_size}x{backbone.min_size}, "
            f"not {height}x{width}; resize the images or choose a smaller model"
        )
    extra = channels - 3
    return LayerShape(
        (backbone.features,),
        backbone.params + extra * backbone.params_per_channel,
        backbone.trainable + extra * backbone.trainable_per_channel,
    )


def _need_dims(layer: Any, shape: Shape, dims: int, what: str) -> None:
    if len(shape) != dims:
        raise _Refused(
            f"{layer.kind} takes {what} ({dims}-D examples), but its input is "
            f"{_text(shape)}; reshape the input or add a layer that makes {dims}-D"
        )


def _text(shape: Shape) -> str:
    return "(" + ", ".join(["None", *map(str, shape)]) + ")"


def _window(size: int, kernel: int, stride: int, padding: str, what: str) -> int:
    if padding == "same":
        return -(-size // stride)
    if size < kernel:
        raise _Refused(
            f"its {what} {kernel} is larger than its input's {size}; use a smaller {what} "
            "or padding 'same'"
        )
    return (size - kernel) // stride + 1


def _layer(layer: Any, shape: Shape) -> tuple[Shape, int, int]:
    """(output shape, params, trainable params) of one layer on ``shape``."""
    kind = layer.kind
    if kind in ("dropout", "rescaling"):
        return shape, 0, 0
    if kind == "dense":
        params = shape[0] * layer.units + (layer.units if layer.use_bias else 0)
        return (layer.units,), params, params
    if kind == "flatten":
        return (math.prod(shape),), 0, 0
    if kind in ("conv1d", "conv2d"):
        dims = 2 if kind == "conv1d" else 3
        _need_dims(layer, shape, dims, "sequences (steps, channels)" if dims == 2 else "images")
        *space, channels = shape
        size = [
            _window(s, layer.kernel_size, layer.strides, layer.padding, "kernel_size")
            for s in space
        ]
        params = layer.kernel_size ** len(space) * channels * layer.filters + (
            layer.filters if layer.use_bias else 0
        )
        return (*size, layer.filters), params, params
    if kind.startswith(("max_pooling", "average_pooling")):
        dims = 2 if kind.endswith("1d") else 3
        _need_dims(layer, shape, dims, "sequences (steps, channels)" if dims == 2 else "images")
        *space, channels = shape
        stride = layer.strides or layer.pool_size
        size = [_window(s, layer.pool_size, stride, layer.padding, "pool_size") for s in space]
        return (*size, channels), 0, 0
    if kind.startswith("global_"):
        dims = 2 if kind.endswith("1d") else 3
        _need_dims(layer, shape, dims, "sequences (steps, channels)" if dims == 2 else "images")
        return (shape[-1],), 0, 0
    if kind == "batch_normalization":
        return shape, 4 * shape[-1], 2 * shape[-1]
    if kind == "layer_normalization":
        return shape, 2 * shape[-1], 2 * shape[-1]
    if kind == "embedding":
        _need_dims(layer, shape, 1, "token ids (steps,)")
        params = layer.input_dim * layer.output_dim
        return (shape[0], layer.output_dim), params, params
    if kind in ("lstm", "gru"):
        _need_dims(layer, shape, 2, "sequences (steps, features)")
        steps, features = shape
        units = layer.units
        # Keras 3's GRU has reset_after=True: two bias vectors per gate.
        gates, biases = (4, 1) if kind == "lstm" else (3, 2)
        params = gates * (features * units + units * units + biases * units)
        output = (steps, units) if layer.return_sequences else (units,)
        return output, params, params
    raise ValueError(f"no shape rule for layer kind {kind!r}")


@dataclass(frozen=True)
class KerasFileInfo:
    """What a ``.keras`` file says about its model without loading it (no TensorFlow)."""

    input_shape: list[int]
    class_name: str


class ModelFileError(ValueError):
    """A model or weights file that cannot be used; the message says why, in one line."""


MAX_KERAS_CONFIG_BYTES = 64 << 20
"""The most of a ``.keras`` file's ``config.json`` read: a model's config is kilobytes to
a few megabytes (every layer's settings, not its weights)."""
MAX_COMPRESSION_RATIO = 100
"""More than this many bytes out per byte stored is a zip bomb, not a model: Keras stores
``config.json`` uncompressed, and recompressed JSON shrinks about ten-fold."""
_RATIO_FLOOR_BYTES = 1 << 20


def read_keras_file(path: str) -> KerasFileInfo:
    """The input shape stored in a ``.keras`` file (a zip holding ``config.json``).

    The GUI fills ``model.input_shape`` from it when the user picks a file; the
    engine still loads the file itself and checks the two agree. Only a regular file
    is opened, and ``config.json``'s declared sizes are checked before it is read: a
    FIFO would block, and a small file can declare gigabytes of JSON.
    """
    try:
        with open_regular(path) as handle, zipfile.ZipFile(handle) as archive:
            config = json.loads(_config_bytes(archive, path))
    except ModelFileError:
        raise
    except FileNotFoundError:
        raise ModelFileError(f"{path} does not exist") from None
    except NotRegularFileError as exc:
        raise ModelFileError(str(exc)) from None
    except OSError as exc:
        raise ModelFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except zipfile.BadZipFile:
        raise ModelFileError(
            f"{path} is not a .keras model file (save one with model.save('name.keras'))"
        ) from None
    except RecursionError:
        raise ModelFileError(
            f"{path}'s config.json is nested too deeply to be a model's config"
        ) from None
    except (KeyError, ValueError, EOFError, zlib.error, NotImplementedError):
        raise ModelFileError(f"{path} holds no readable config.json; save it again") from None
    shape = _stored_input_shape(config)
    if shape is None:
        raise ModelFileError(
            f"{path} does not record its input shape; build the model with an Input and save it"
        )
    return KerasFileInfo(shape, str(config.get("class_name", "")))


def _config_bytes(archive: zipfile.ZipFile, path: str) -> bytes:
    """``config.json``'s bytes, refused unread when its sizes are no model's."""
    info = archive.getinfo("config.json")
    if info.file_size > MAX_KERAS_CONFIG_BYTES:
        raise ModelFileError(
            f"{path}'s config.json declares {info.file_size / (1 << 20):.0f} MiB; a model's "
            f"config is far smaller (at most {MAX_KERAS_CONFIG_BYTES >> 20} MiB read)"
        )
    if info.file_size > max(_RATIO_FLOOR_BYTES, MAX_COMPRESSION_RATIO * info.compress_size):
        raise ModelFileError(
            f"{path}'s config.json expands {info.file_size // max(info.compress_size, 1)}-fold "
            "from what is stored: a zip bomb, not a saved model"
        )
    with archive.open(info) as member:
        return member.read(MAX_KERAS_CONFIG_BYTES + 1)


def model_file_problems(model: Any) -> list[Problem]:
    """The model's files (paths already absolute), checked as far as reading allows.

    Like the data folders' check, not a validation rule: it reads the disk, and a
    project names its files relative to itself. ``distloop validate`` and the
    window ask it; the engine loads the files and reports what only loading shows.
    """
    if model.kind == "keras_file":
        try:
            info = read_keras_file(model.path)
        except ModelFileError as exc:
            return [Problem(("model", "path"), str(exc))]
        if info.input_shape != list(model.input_shape):
            return [
                Problem(
                    ("model", "input_shape"),
                    f"{list(model.input_shape)} does not match {model.path}'s input "
                    f"{info.input_shape}; set it to that",
                )
            ]
    if model.kind == "backbone" and model.weights is not None:
        try:
            with open_regular(model.weights) as handle:
                start = handle.read(8)
        except NotRegularFileError as exc:
            return [Problem(("model", "weights"), str(exc))]
        except OSError as exc:
            return [Problem(("model", "weights"), f"cannot read {model.weights}: {exc.strerror}")]
        if start != b"\x89HDF\r\n\x1a\n":
            return [
                Problem(
                    ("model", "weights"),
                    f"{model.weights} is not a Keras weights file (HDF5, .h5); give the "
                    "weights saved without the top, e.g. ..._notop.h5",
                )
            ]
    return []


def _stored_input_shape(config: Any) -> list[int] | None:
    if not isinstance(config, dict):
        return None
    build = config.get("build_config") or {}
    shape = build.get("input_shape") if isinstance(build, dict) else None
    if shape is None:  # a functional model: the InputLayer's batch_shape
        for layer in (config.get("config") or {}).get("layers") or []:
            if isinstance(layer, dict) and layer.get("class_name") == "InputLayer":
                shape = (layer.get("config") or {}).get("batch_shape")
                break
    if not isinstance(shape, list) or len(shape) < 2:
        return None
    dims = shape[1:]
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims):
        return None
    return dims
