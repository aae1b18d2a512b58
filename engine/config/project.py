"""The project file: every setting of a training run, validated by pydantic.

A project is JSON with ``"schema_version": 1`` and the top-level keys
``strategy``, ``tf_config``, ``model``, ``optimizer``, ``loss``, ``data`` and
``training``, plus the optional ``custom_code`` and ``evaluation``. These names
are a public contract (other tools read and write project files), so fields are
only ever added, never renamed.

The models are the single source of truth for what is valid: field rules live on
the fields, rules that join several fields live in :meth:`Project._cross_field`,
and the CLI and GUI both show :func:`load_project`'s problems unchanged.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from .model_shapes import ModelShapes, model_shapes
from .problems import (
    Problem,
    ProblemsError,
    parse_json_text,
    problems_from_validation_error,
    raise_problems,
    register_union_tags,
)
from .tf_config import TFConfig, strategy_problems

SCHEMA_VERSION = 1
MAX_STEPS = 1_000_000_000
"""The longest run, in steps: far past any real run, and inside a 32-bit progress counter."""
MAX_SEED = 2**31 - 1


class _Strict(BaseModel):
    """The project file's rules for every value, in one place.

    Unknown keys are errors, so a typo is not silently ignored. Numbers are strict
    (``true`` is not 1, ``"0.5"`` is not 0.5, though 1 is a float) and must be
    finite: NaN or Infinity in a setting only fails later, inside TensorFlow.
    """

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, strict=True, allow_inf_nan=False
    )


# --- strategy --------------------------------------------------------------------------

StrategyKind = Literal[
    "default", "one_device", "mirrored", "multi_worker_mirrored", "parameter_server", "tpu"
]
STRATEGY_KINDS: tuple[str, ...] = StrategyKind.__args__  # type: ignore[attr-defined]


class StrategyConfig(_Strict):
    """Which ``tf.distribute`` strategy runs the loop, and on which devices."""

    kind: StrategyKind = "mirrored"
    devices: list[str] | None = Field(
        None,
        description="Devices to mirror over, e.g. ['/gpu:0', '/gpu:1']; all GPUs (or the CPU) "
        "when omitted.",
    )
    cpu_replicas: int = Field(
        1,
        ge=1,
        le=64,
        description="Split the CPU into this many logical devices and mirror over them, so a "
        "machine without GPUs runs real multi-replica training.",
    )
    cross_device_ops: Literal["auto", "nccl", "hierarchical_copy", "reduce_to_one_device"] = "auto"
    communication: Literal["auto", "ring", "nccl"] = "auto"
    communication_timeout_s: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="Multi-worker collectives give up after this long, so a stalled worker "
        "fails the run instead of hanging it.",
    )
    tpu: str | None = Field(None, description="TPU name or grpc:// address for TPUStrategy.")

    def replica_count_hint(self) -> int | None:
        """Replicas known before TensorFlow starts; None when only the devices found can tell."""
        if self.kind in ("default", "one_device"):
            return 1
        if self.kind == "mirrored":
            if self.devices:
                return len(self.devices)
            if self.cpu_replicas > 1:
                return self.cpu_replicas
        return None

    def problems(self) -> list[Problem]:
        problems = []
        if self.cpu_replicas > 1 and self.kind != "mirrored":
            problems.append(
                Problem(
                    ("cpu_replicas",), f"cpu_replicas applies only to mirrored, not {self.kind}"
                )
            )
        if self.cpu_replicas > 1 and self.devices:
            problems.append(Problem(("devices",), "give either devices or cpu_replicas, not both"))
        if self.devices is not None:
            canonical = []
            for i, device in enumerate(self.devices):
                try:
                    canonical.append(canonical_device(device))
                except ValueError as exc:
                    problems.append(Problem(("devices", i), str(exc)))
            if self.kind not in ("mirrored", "one_device"):
                problems.append(
                    Problem(
                        ("devices",), f"devices apply to mirrored and one_device, not {self.kind}"
                    )
                )
            elif self.kind == "one_device" and len(self.devices) != 1:
                problems.append(Problem(("devices",), "one_device takes exactly one device"))
            elif not self.devices:
                problems.append(Problem(("devices",), "the list is empty; omit it to use all"))
            if len(set(canonical)) != len(canonical):
                problems.append(Problem(("devices",), "a device is listed twice"))
        if self.cross_device_ops != "auto" and self.kind != "mirrored":
            problems.append(
                Problem(("cross_device_ops",), f"applies only to mirrored, not {self.kind}")
            )
        if self.communication != "auto" and self.kind != "multi_worker_mirrored":
            problems.append(Problem(("communication",), "applies only to multi_worker_mirrored"))
        if self.kind == "tpu" and not self.tpu:
            problems.append(Problem(("tpu",), "tpu needs the TPU's name or address"))
        if self.tpu and self.kind != "tpu":
            problems.append(
                Problem(("tpu",), f"a TPU address is only used by tpu, not {self.kind}")
            )
        return [Problem(("strategy", *p.loc), p.message) for p in problems]


_DEVICE_TYPES = ("CPU", "GPU", "TPU")
_JOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_INDEX = re.compile(r"0|[1-9][0-9]{0,8}")


def canonical_device(text: str) -> str:
    """A device name as TensorFlow parses it (``/gpu:0``, ``GPU:0``, ``/device:GPU:0``,
    ``/job:worker/replica:0/task:1/device:CPU:0``), in its canonical spelling.

    The rules are ``tf.DeviceSpec``'s, read without TensorFlow, and stricter where
    TensorFlow parses a name it then cannot place: the device type must be CPU, GPU
    or TPU and every index a plain number. Whether the device exists is only known
    on the machine that runs the project.
    """
    hint = "write e.g. /gpu:0, /cpu:0 or /job:worker/task:1/device:GPU:0"
    if not isinstance(text, str) or not text.strip() or text != text.strip():
        raise ValueError(f"{text!r} is not a TensorFlow device; {hint}")
    found: dict[str, str] = {}
    for part in filter(None, text.split("/")):
        fields = part.split(":")
        if len(fields) == 2 and fields[0] in ("job", "replica", "task"):
            key, value = fields
            pattern = _JOB_NAME if key == "job" else _INDEX
            if not pattern.fullmatch(value):
                raise ValueError(f"{text!r}: {value!r} is not a valid {key} in a device name")
        elif len(fields) in (1, 2) and fields[0].upper() in _DEVICE_TYPES:
            key, value = "device", ":".join([fields[0].upper(), *fields[1:]])
        elif len(fields) == 3 and fields[0] == "device" and fields[1].upper() in _DEVICE_TYPES:
            key, value = "device", f"{fields[1].upper()}:{fields[2]}"
        else:
            raise ValueError(f"{text!r} is not a TensorFlow device; {hint}")
        if key in found:
            raise ValueError(f"{text!r} names its {key} twice; a device name has one of each")
        found[key] = value
    if "device" not in found:
        raise ValueError(f"{text!r} names no device type (CPU, GPU or TPU); {hint}")
    device_type, _, index = found["device"].partition(":")
    index = index or "0"
    if not _INDEX.fullmatch(index):
        raise ValueError(f"{text!r}: device index {index!r} is not a plain number")
    prefix = "".join(f"/{key}:{found[key]}" for key in ("job", "replica", "task") if key in found)
    return f"{prefix}/device:{device_type}:{index}"


# --- model -----------------------------------------------------------------------------


class Initializer(_Strict):
    """A Keras kernel initializer; seeded from ``training.seed`` so runs repeat exactly."""

    kind: Literal["glorot_uniform", "he_normal", "random_normal", "zeros", "ones", "constant"] = (
        "glorot_uniform"
    )
    value: float | None = Field(None, description="The value of a constant initializer.")
    stddev: float | None = Field(None, gt=0, description="Standard deviation of random_normal.")

    @model_validator(mode="after")
    def _check(self) -> Initializer:
        problems = []
        if self.kind == "constant" and self.value is None:
            problems.append(Problem(("value",), "a constant initializer needs a value"))
        if self.kind != "constant" and self.value is not None:
            problems.append(Problem(("value",), f"value applies only to constant, not {self.kind}"))
        if self.stddev is not None and self.kind != "random_normal":
            problems.append(Problem(("stddev",), "stddev applies only to random_normal"))
        raise_problems("Initializer", problems)
        return self


class Regularizer(_Strict):
    """L1/L2 penalties; their loss is added through ``scale_regularization_loss``."""

    l1: float = Field(0.0, ge=0)
    l2: float = Field(0.0, ge=0)


Activation = Literal[
    "linear", "relu", "sigmoid", "tanh", "softmax", "gelu", "elu", "selu", "softplus", "swish"
]
ACTIVATIONS: tuple[str, ...] = Activation.__args__  # type: ignore[attr-defined]


Padding = Literal["valid", "same"]


class DenseLayer(_Strict):
    kind: Literal["dense"] = "dense"
    units: int = Field(ge=1, le=1_000_000)
    activation: Activation = "linear"
    use_bias: bool = True
    kernel_initializer: Initializer = Field(default_factory=Initializer)
    kernel_regularizer: Regularizer | None = None


class DropoutLayer(_Strict):
    kind: Literal["dropout"] = "dropout"
    rate: float = Field(0.5, ge=0, lt=1)


class _ConvLayer(_Strict):
    filters: int = Field(ge=1, le=100_000)
    kernel_size: int = Field(3, ge=1, le=10_000, description="Width (and height) of the window.")
    strides: int = Field(1, ge=1, le=10_000)
    padding: Padding = Field(
        "valid", description="valid: windows inside the input only; same: keeps the size."
    )
    activation: Activation = "linear"
    use_bias: bool = True
    kernel_initializer: Initializer = Field(default_factory=Initializer)
    kernel_regularizer: Regularizer | None = None


class Conv1DLayer(_ConvLayer):
    kind: Literal["conv1d"] = "conv1d"


class Conv2DLayer(_ConvLayer):
    kind: Literal["conv2d"] = "conv2d"


class _PoolingLayer(_Strict):
    pool_size: int = Field(2, ge=1, le=10_000)
    strides: int | None = Field(
        None, ge=1, le=10_000, description="Step between windows; pool_size when omitted."
    )
    padding: Padding = "valid"


class MaxPooling1DLayer(_PoolingLayer):
    kind: Literal["max_pooling1d"] = "max_pooling1d"


class MaxPooling2DLayer(_PoolingLayer):
    kind: Literal["max_pooling2d"] = "max_pooling2d"


class AveragePooling1DLayer(_PoolingLayer):
    kind: Literal["average_pooling1d"] = "average_pooling1d"


class AveragePooling2DLayer(_PoolingLayer):
    kind: Literal["average_pooling2d"] = "average_pooling2d"


class GlobalAveragePooling1DLayer(_Strict):
    kind: Literal["global_average_pooling1d"] = "global_average_pooling1d"


class GlobalAveragePooling2DLayer(_Strict):
    kind: Literal["global_average_pooling2d"] = "global_average_pooling2d"


class GlobalMaxPooling1DLayer(_Strict):
    kind: Literal["global_max_pooling1d"] = "global_max_pooling1d"


class GlobalMaxPooling2DLayer(_Strict):
    kind: Literal["global_max_pooling2d"] = "global_max_pooling2d"


class FlattenLayer(_Strict):
    kind: Literal["flatten"] = "flatten"


class BatchNormalizationLayer(_Strict):
    kind: Literal["batch_normalization"] = "batch_normalization"
    momentum: float = Field(0.99, ge=0, lt=1)
    epsilon: float = Field(0.001, gt=0, le=1)
    synchronized: bool = Field(
        False,
        description="Under a multi-replica strategy, normalize with the whole global batch's "
        "statistics instead of each replica's share (Keras 3's synchronized=True).",
    )


class LayerNormalizationLayer(_Strict):
    kind: Literal["layer_normalization"] = "layer_normalization"
    epsilon: float = Field(0.001, gt=0, le=1)


class EmbeddingLayer(_Strict):
    kind: Literal["embedding"] = "embedding"
    input_dim: int = Field(
        ge=1, le=10_000_000, description="Vocabulary size: token ids run from 0 to this - 1."
    )
    output_dim: int = Field(ge=1, le=100_000, description="Length of each token's vector.")


class _RecurrentLayer(_Strict):
    units: int = Field(ge=1, le=100_000)
    return_sequences: bool = Field(
        False, description="Output every step (for another recurrent layer), not only the last."
    )
    kernel_initializer: Initializer = Field(default_factory=Initializer)


class LSTMLayer(_RecurrentLayer):
    kind: Literal["lstm"] = "lstm"


class GRULayer(_RecurrentLayer):
    kind: Literal["gru"] = "gru"


class RescalingLayer(_Strict):
    kind: Literal["rescaling"] = "rescaling"
    scale: float = Field(1 / 255, description="Inputs are multiplied by this, e.g. 1/255 ...")
    offset: float = Field(0.0, description="... and this is added, e.g. -1 for [-1, 1].")


Layer = Annotated[
    DenseLayer
    | DropoutLayer
    | Conv1DLayer
    | Conv2DLayer
    | MaxPooling1DLayer
    | MaxPooling2DLayer
    | AveragePooling1DLayer
    | AveragePooling2DLayer
    | GlobalAveragePooling1DLayer
    | GlobalAveragePooling2DLayer
    | GlobalMaxPooling1DLayer
    | GlobalMaxPooling2DLayer
    | FlattenLayer
    | BatchNormalizationLayer
    | LayerNormalizationLayer
    | EmbeddingLayer
    | LSTMLayer
    | GRULayer
    | RescalingLayer,
    Field(discriminator="kind"),
]
LAYER_KINDS: tuple[str, ...] = tuple(
    member.model_fields["kind"].default
    for member in Layer.__origin__.__args__  # type: ignore[attr-defined]
)
LAYER_TYPES: dict[str, type[_Strict]] = {
    member.model_fields["kind"].default: member
    for member in Layer.__origin__.__args__  # type: ignore[attr-defined]
}

MAX_DIMENSION = 1_000_000

ModelKind = Literal["layers", "backbone", "keras_file"]
MODEL_KINDS: tuple[str, ...] = ModelKind.__args__  # type: ignore[attr-defined]
BackboneName = Literal["mobilenet_v2", "resnet50", "efficientnet_b0"]


class ModelConfig(_Strict):
    """The model: layers in order on an input shape, a ``keras.applications`` backbone
    with layers on top as its head, or a saved ``.keras`` file.

    ``kind`` defaults to ``layers``, so the project files of earlier versions (which
    have no ``kind``) mean what they meant.
    """

    kind: ModelKind = Field(
        "layers",
        description="layers: the layers below; backbone: a keras.applications model with "
        "the layers below as its head; keras_file: a saved .keras model.",
    )
    input_shape: list[Annotated[int, Field(ge=1, le=MAX_DIMENSION)]] = Field(
        min_length=1, max_length=4
    )
    layers: list[Layer] = Field(default_factory=list, max_length=1000)
    backbone: BackboneName | None = Field(
        None, description="The keras.applications model; global average pooling follows it."
    )
    weights: str | None = Field(
        None,
        min_length=1,
        description="A local weights file for the backbone (e.g. the ImageNet .h5 saved "
        "without its top); null starts from random weights. Nothing is downloaded.",
    )
    path: str | None = Field(
        None,
        min_length=1,
        description="The .keras model file; a relative path is relative to the project file.",
    )

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        problems = []
        if self.kind != "backbone":
            for name in ("backbone", "weights"):
                if getattr(self, name) is not None:
                    problems.append(Problem((name,), "applies only to kind backbone"))
        elif self.backbone is None:
            problems.append(Problem(("backbone",), "choose the backbone model"))
        if self.kind != "keras_file" and self.path is not None:
            problems.append(Problem(("path",), "applies only to kind keras_file"))
        if self.kind == "keras_file":
            if self.path is None:
                problems.append(Problem(("path",), "give the .keras model file"))
            elif not self.path.endswith(".keras"):
                problems.append(Problem(("path",), "must name a .keras model file"))
            if self.layers:
                problems.append(
                    Problem(("layers",), "a .keras file brings its own layers; remove these")
                )
        elif not any(isinstance(layer, DenseLayer) for layer in self.layers):
            problems.append(Problem(("layers",), "the model needs at least one dense layer"))
        if not problems:
            problems = self.shapes().problems
        raise_problems("ModelConfig", problems)
        return self

    def shapes(self) -> ModelShapes:
        """Every layer's output shape and parameters; empty for a .keras file (unread)."""
        layers = [] if self.kind == "keras_file" else self.layers
        return model_shapes(self.input_shape, layers, self.backbone)

    @property
    def input_size(self) -> int:
        return math.prod(self.input_shape)

    @property
    def output_units(self) -> int | None:
        """Units of the last dense layer: the width of one prediction (None for a .keras
        file, which tells it only when the engine loads it)."""
        if self.kind == "keras_file":
            return None
        dense = [layer for layer in self.layers if isinstance(layer, DenseLayer)]
        return dense[-1].units if dense else self.input_size

    def parameter_count(self) -> int | None:
        """Trainable parameters, computed without TensorFlow (``engine.model_shapes``);
        None for a .keras file, whose weights only loading it counts."""
        if self.kind == "keras_file":
            return None
        return self.shapes().trainable


# --- optimizer -------------------------------------------------------------------------


class _OptimizerBase(_Strict):
    learning_rate: float = Field(0.01, gt=0, le=100)


class SGDConfig(_OptimizerBase):
    kind: Literal["sgd"] = "sgd"
    momentum: float = Field(0.0, ge=0, lt=1)
    nesterov: bool = False


class AdamConfig(_OptimizerBase):
    kind: Literal["adam"] = "adam"
    learning_rate: float = Field(0.001, gt=0, le=100)
    beta_1: float = Field(0.9, ge=0, lt=1)
    beta_2: float = Field(0.999, ge=0, lt=1)
    epsilon: float = Field(1e-7, gt=0)
    amsgrad: bool = False


class RMSpropConfig(_OptimizerBase):
    kind: Literal["rmsprop"] = "rmsprop"
    learning_rate: float = Field(0.001, gt=0, le=100)
    rho: float = Field(0.9, ge=0, lt=1)
    momentum: float = Field(0.0, ge=0, lt=1)
    epsilon: float = Field(1e-7, gt=0)
    centered: bool = False


class AdagradConfig(_OptimizerBase):
    kind: Literal["adagrad"] = "adagrad"
    learning_rate: float = Field(0.001, gt=0, le=100)
    initial_accumulator_value: float = Field(0.1, ge=0)
    epsilon: float = Field(1e-7, gt=0)


OptimizerConfig = Annotated[
    SGDConfig | AdamConfig | RMSpropConfig | AdagradConfig, Field(discriminator="kind")
]
OPTIMIZER_KINDS: tuple[str, ...] = ("sgd", "adam", "rmsprop", "adagrad")

# --- loss ------------------------------------------------------------------------------

LossKind = Literal[
    "binary_crossentropy",
    "categorical_crossentropy",
    "sparse_categorical_crossentropy",
    "mean_squared_error",
    "mean_absolute_error",
    "huber",
]
LOSS_KINDS: tuple[str, ...] = LossKind.__args__  # type: ignore[attr-defined]
CROSSENTROPY_LOSSES = (
    "binary_crossentropy",
    "categorical_crossentropy",
    "sparse_categorical_crossentropy",
)


class LossConfig(_Strict):
    """The per-example loss; always built with ``reduction=None`` (see engine.model)."""

    kind: LossKind = "binary_crossentropy"
    from_logits: bool = False
    delta: float | None = Field(None, gt=0, description="Huber's delta (1.0 when omitted).")

    @model_validator(mode="after")
    def _check(self) -> LossConfig:
        problems = []
        if self.from_logits and self.kind not in CROSSENTROPY_LOSSES:
            problems.append(
                Problem(
                    ("from_logits",), f"from_logits applies to crossentropy losses, not {self.kind}"
                )
            )
        if self.delta is not None and self.kind != "huber":
            problems.append(Problem(("delta",), "delta applies only to huber"))
        raise_problems("LossConfig", problems)
        return self

    @property
    def is_classification(self) -> bool:
        return self.kind in CROSSENTROPY_LOSSES


# --- data ------------------------------------------------------------------------------


class _DataBase(_Strict):
    global_batch_size: int = Field(
        10,
        ge=1,
        le=10_000_000,
        description="Examples per step across all replicas; compute_average_loss divides by it.",
    )
    shuffle_buffer: int = Field(0, ge=0, le=MAX_STEPS, description="0 keeps the data in order.")
    drop_remainder: bool = Field(
        False, description="Drop a short last batch instead of training on it."
    )
    cache: bool = Field(
        False,
        description="Keep the data in memory after its first pass, so later passes skip "
        "loading and batching (the unshuffled batches, or the examples before shuffling).",
    )
    prefetch: int | None = Field(
        None,
        ge=0,
        le=10_000,
        description="Batches prepared ahead of the step; left out, tf.data tunes it "
        "(AUTOTUNE); 0 prepares none.",
    )

    def example_count(self) -> int | None:
        """Examples in one pass, when known without reading files."""
        return None


class ConstantData(_DataBase):
    """The guide's data: ``from_tensors((features, labels)).repeat(examples)``."""

    source: Literal["constant"] = "constant"
    features: list[float] = Field(min_length=1)
    labels: list[float] = Field(min_length=1)
    examples: int = Field(
        1000,
        ge=1,
        le=MAX_STEPS,
        description="How often the one example repeats; tf.data counts it in 64 bits, "
        "progress in 32.",
    )

    def example_count(self) -> int:
        return self.examples


class SyntheticClassification(_DataBase):
    """Seeded random inputs labelled by a random linear teacher: every example differs."""

    source: Literal["synthetic_classification"] = "synthetic_classification"
    examples: int = Field(1000, ge=1, le=50_000_000)
    num_classes: int = Field(2, ge=2, le=10_000)
    noise: float = Field(0.0, ge=0, description="Standard deviation added to the inputs.")
    seed: int = Field(0, ge=0, le=MAX_SEED)

    def example_count(self) -> int:
        return self.examples


class SyntheticRegression(_DataBase):
    """Seeded random inputs with targets from a random linear map plus noise."""

    source: Literal["synthetic_regression"] = "synthetic_regression"
    examples: int = Field(1000, ge=1, le=50_000_000)
    noise: float = Field(0.1, ge=0)
    seed: int = Field(0, ge=0, le=MAX_SEED)

    def example_count(self) -> int:
        return self.examples


class NumpyData(_DataBase):
    """An ``.npz`` file; loaded with ``Dataset.from_tensor_slices`` (the guide's numpy path)."""

    source: Literal["numpy"] = "numpy"
    path: str = Field(min_length=1)
    features_key: str = "x"
    labels_key: str = "y"
    stream: bool = Field(
        False,
        description="Memory-map the arrays and read each batch from the file, never the "
        "whole file into memory (an .npz written by numpy.savez, not savez_compressed).",
    )


class CsvData(_DataBase):
    """A CSV file with a header row; one column holds the label, the others are features."""

    source: Literal["csv"] = "csv"
    path: str = Field(min_length=1)
    label_column: str = Field(min_length=1)
    stream: bool = Field(
        False,
        description="Read rows as batches form (tf.data's CsvDataset), never the whole file "
        "into memory; a cell that is no number fails the run when its batch is read.",
    )


class ImageFolderData(_DataBase):
    """A folder with one subfolder of images per class (``image_dataset_from_directory``'s
    layout), streamed from disk: each image is decoded, resized to the model's input
    ``[height, width, channels]`` and scaled to [0, 1] as its batch is prepared."""

    source: Literal["image_folder"] = "image_folder"
    path: str = Field(
        min_length=1, description="A folder holding one subfolder of images per class."
    )
    color_mode: Literal["auto", "grayscale", "rgb"] = Field(
        "auto",
        description="auto follows the model's input channels (1: grayscale, 3: rgb).",
    )
    on_bad_file: Literal["fail", "skip"] = Field(
        "fail",
        description="An unreadable image fails the run (naming it) or is skipped and counted.",
    )
    flip: bool = Field(False, description="Training only: mirror images left-right at random.")
    rotation: float = Field(
        0.0,
        ge=0,
        le=45,
        description="Training only: rotate by up to this many degrees either way, at random.",
    )
    crop: float = Field(
        0.0,
        ge=0,
        lt=0.5,
        description="Training only: crop away up to this fraction of each side, at random, "
        "and resize back.",
    )

    @property
    def augments(self) -> bool:
        return self.flip or self.rotation > 0 or self.crop > 0


class TextFolderData(_DataBase):
    """A folder with one subfolder of ``.txt`` files per class (``text_dataset_from_directory``'s
    layout): each file is one example, turned into ``sequence_length`` word numbers by a
    TextVectorization layer whose vocabulary is learned from the training examples only."""

    source: Literal["text_folder"] = "text_folder"
    path: str = Field(
        min_length=1, description="A folder holding one subfolder of .txt files per class."
    )
    vocabulary_size: int = Field(
        10_000,
        ge=3,
        le=1_000_000,
        description="Word numbers 0..N-1: 0 pads, 1 is any word outside the N-2 most frequent "
        "words of the training texts.",
    )
    sequence_length: int = Field(
        64,
        ge=1,
        le=100_000,
        description="Words per example: longer texts are cut, shorter ones padded with 0; "
        "the model's input_shape is [sequence_length].",
    )


class FeatureSpec(_Strict):
    """One feature of the records: its name, value type and shape ([] for one value)."""

    name: str = Field(min_length=1, max_length=200)
    dtype: Literal["float32", "int64"] = "float32"
    shape: list[Annotated[int, Field(ge=1, le=MAX_DIMENSION)]] = Field(
        default_factory=list, max_length=4
    )

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class TFRecordData(_DataBase):
    """TFRecord files of ``tf.train.Example`` records, parsed by a feature spec: the label
    feature is the label, the others (flattened, in the spec's order) the model's input."""

    source: Literal["tfrecord"] = "tfrecord"
    path: str = Field(
        min_length=1,
        description="A .tfrecord file, or a pattern such as train-*.tfrecord (files in "
        "sorted order).",
    )
    features: list[FeatureSpec] = Field(min_length=2, max_length=1000)
    label: str = Field(min_length=1, description="The name of the feature that holds the label.")
    compression: Literal["none", "GZIP", "ZLIB"] = "none"


DataConfig = Annotated[
    ConstantData
    | SyntheticClassification
    | SyntheticRegression
    | NumpyData
    | CsvData
    | ImageFolderData
    | TextFolderData
    | TFRecordData,
    Field(discriminator="source"),
]
DATA_SOURCES: tuple[str, ...] = (
    "constant",
    "synthetic_classification",
    "synthetic_regression",
    "numpy",
    "csv",
    "image_folder",
    "text_folder",
    "tfrecord",
)
FOLDER_SOURCES = ("image_folder", "text_folder")
"""Sources whose classes are subfolder names: their labels are class numbers."""

# --- training --------------------------------------------------------------------------

InputDistribution = Literal["auto", "split_on_host", "distributed_dataset"]


MixedPrecision = Literal["none", "mixed_float16", "mixed_bfloat16"]


class TrainingConfig(_Strict):
    """How long to train: ``epochs`` passes over the data, or exactly ``steps`` steps."""

    epochs: int | None = Field(None, ge=1, le=1_000_000)
    steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    seed: int = Field(0, ge=0, le=MAX_SEED)
    per_replica_losses: bool = Field(
        False, description="Also report each replica's loss (experimental_local_results)."
    )
    stop_on_nan: bool = Field(True, description="Stop when the loss becomes NaN or infinite.")
    steps_per_execution: int = Field(
        1,
        ge=1,
        le=100_000,
        description="Run this many steps inside one tf.function call (fewer Python round "
        "trips); every step's loss is still reported.",
    )
    checkpoint_every: int | None = Field(
        None,
        ge=1,
        le=MAX_STEPS,
        description="Save a checkpoint every this many steps; one is also saved on Stop and "
        "at the end of the run.",
    )
    jit_compile: bool = Field(False, description="Compile the training step with XLA.")
    deterministic: bool = Field(
        True,
        description="Deterministic ops (enable_op_determinism), so a run with the same seed "
        "repeats exactly; off, TensorFlow may pick faster kernels and runs can differ in the "
        "last bits. Parameter-server runs are never bit-exact.",
    )
    input_distribution: InputDistribution = Field(
        "auto",
        description="How each global batch reaches the replicas: split_on_host (one host "
        "pipeline, sliced in the step; fastest on CPUs), distributed_dataset (the guide's "
        "experimental_distribute_dataset, prefetching to GPUs and TPUs), or auto (split_on_host "
        "when every replica is a CPU).",
    )
    export_saved_model: bool = Field(
        False,
        description="Also export the trained model as a SavedModel (saved_model/ in the run "
        "folder) for TF Serving; model.keras is always saved.",
    )

    mixed_precision: MixedPrecision = Field(
        "none",
        description="Compute in 16-bit floats, keep weights in float32: mixed_float16 (GPUs; "
        "the loss is scaled so small gradients survive) or mixed_bfloat16 (TPUs, recent CPUs "
        "and GPUs; no scaling needed).",
    )
    gpu_memory_growth: bool = Field(
        True,
        description="GPUs take memory as the run needs it, so several processes can share "
        "one; off, TensorFlow takes nearly all of each GPU's memory at start.",
    )

    @model_validator(mode="after")
    def _check(self) -> TrainingConfig:
        if (self.epochs is None) == (self.steps is None):
            raise_problems(
                "TrainingConfig", [Problem(("steps",), "give exactly one of epochs or steps")]
            )
        return self


# --- custom step code and evaluation ----------------------------------------------------


class CustomCode(_Strict):
    """A user Python file with the run's step (and optionally models and data).

    Only the engine process loads it, and only to run: opening or validating a
    project never executes it. ``engine.user_code`` documents what it may define.
    """

    path: str = Field(
        min_length=1,
        description="The .py file; a relative path is relative to the project file.",
    )


SPLIT_SOURCES = (
    "synthetic_classification",
    "synthetic_regression",
    "numpy",
    "csv",
    "tfrecord",
    *FOLDER_SOURCES,
)


class EvaluationConfig(_Strict):
    """Validation data, evaluated under the strategy every ``every`` steps.

    ``split`` holds out a fraction of the training examples (which changes which
    examples train); ``source`` is separate data, shaped like ``data``, that
    leaves training exactly as it is without evaluation.
    """

    every: int = Field(100, ge=1, le=MAX_STEPS, description="Evaluate after every N steps.")
    split: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Hold out this fraction of the training examples (array-based sources).",
    )
    source: DataConfig | None = Field(
        None, description="Separate validation data; its global_batch_size batches evaluation."
    )

    @model_validator(mode="after")
    def _check(self) -> EvaluationConfig:
        if (self.split is None) == (self.source is None):
            raise_problems(
                "EvaluationConfig", [Problem(("split",), "give exactly one of split or source")]
            )
        return self


# --- the project -----------------------------------------------------------------------


class Project(_Strict):
    """One training run, as the user describes it."""

    schema_version: Literal[1] = SCHEMA_VERSION
    name: str = Field("Untitled", max_length=200)
    description: str = ""
    strategy: StrategyConfig = Field(default_factory=StrategyConfig)
    tf_config: TFConfig | None = None
    model: ModelConfig
    optimizer: OptimizerConfig = Field(default_factory=SGDConfig)
    loss: LossConfig = Field(default_factory=LossConfig)
    data: DataConfig
    training: TrainingConfig
    custom_code: CustomCode | None = Field(
        None, description="A Python file with the training step; null runs the guide's step."
    )
    evaluation: EvaluationConfig | None = Field(
        None, description="Validation data evaluated every N steps; null evaluates nothing."
    )

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    @model_validator(mode="after")
    def _cross_field(self) -> Project:
        raise_problems("Project", cross_field_problems(self))
        return self

    def training_example_count(self) -> int | None:
        """Examples that train in one pass: the data's, less those an evaluation split holds out."""
        examples = self.data.example_count()
        if examples is None or self.evaluation is None or self.evaluation.split is None:
            return examples
        return split_counts(examples, self.evaluation.split)[0]

    def steps_per_epoch(self) -> int | None:
        """Steps in one pass over the data, when the example count is known up front."""
        examples = self.training_example_count()
        if examples is None:
            return None
        full, rest = divmod(examples, self.data.global_batch_size)
        return full if self.data.drop_remainder or not rest else full + 1

    def total_steps(self) -> int | None:
        """Run length for progress bars; None when it depends on a file's length."""
        if self.training.steps is not None:
            return self.training.steps
        per_epoch = self.steps_per_epoch()
        return None if per_epoch is None else per_epoch * (self.training.epochs or 0)

    def resolve_paths(self, base_dir: Path) -> Project:
        """A copy whose file paths are absolute, as the engine and run folders need.

        Relative paths in a project file (data files, the evaluation source's file,
        the custom code) are relative to the file, not to the directory the user
        happened to start Distloop from.
        """
        update: dict[str, object] = {}
        data = _with_absolute_path(self.data, base_dir)
        if data is not self.data:
            update["data"] = data
        if self.evaluation is not None and self.evaluation.source is not None:
            source = _with_absolute_path(self.evaluation.source, base_dir)
            if source is not self.evaluation.source:
                update["evaluation"] = self.evaluation.model_copy(update={"source": source})
        if self.custom_code is not None:
            code = _with_absolute_path(self.custom_code, base_dir)
            if code is not self.custom_code:
                update["custom_code"] = code
        model = _with_absolute_path(self.model, base_dir)
        model = _with_absolute_path(model, base_dir, "weights")
        if model is not self.model:
            update["model"] = model
        return self.model_copy(update=update) if update else self

    def to_json(self) -> str:
        """The project file's text: strict JSON, so a NaN that got past validation raises here
        instead of writing a ``NaN`` token other JSON readers refuse."""
        data = self.model_dump(mode="json", exclude_none=False)
        return json.dumps(data, indent=2, allow_nan=False) + "\n"


_PathT = TypeVar("_PathT", bound=BaseModel)


def _with_absolute_path(section: _PathT, base_dir: Path, name: str = "path") -> _PathT:
    """``section`` itself, or a copy whose relative ``name`` (a path) is made absolute."""
    path_text = getattr(section, name, None)
    if path_text is None:
        return section
    path = Path(path_text).expanduser()
    if path.is_absolute():
        return section
    return section.model_copy(update={name: str((base_dir / path).resolve())})


def split_counts(examples: int, split: float) -> tuple[int, int]:
    """(training, held-out) examples of an evaluation split: at least one held out."""
    held_out = max(1, round(examples * split))
    return examples - held_out, held_out


def cross_field_problems(project: Project, usable: Collection[str] | None = None) -> list[Problem]:
    """Rules that join sections: shapes must fit, strategy and TF_CONFIG must agree.

    With ``usable``, only the rules whose sections are all in it run: the others
    would judge a section that did not validate (see :func:`load_project_data`).
    """
    problems = []
    for sections, rule in _CROSS_RULES:
        if usable is None or sections <= set(usable):
            problems += rule(project)
    return problems


def _strategy_problems(project: Project) -> list[Problem]:
    return project.strategy.problems()


def _tf_config_problems(project: Project) -> list[Problem]:
    return strategy_problems(project.tf_config, project.strategy.kind)


def _training_data_problems(project: Project) -> list[Problem]:
    return _data_shape_problems(project.data, project, ("data",))


REAL_VALUED_SOURCES = ("constant", "synthetic_classification", "synthetic_regression")


def _token_id_problems(project: Project) -> list[Problem]:
    """An embedding reads token ids: random real numbers would index outside its table."""
    layers = project.model.layers if project.model.kind == "layers" else []
    if project.custom_code is not None or not layers or layers[0].kind != "embedding":
        return []
    if project.data.source not in REAL_VALUED_SOURCES:
        return []
    return [
        Problem(
            ("model", "layers", 0),
            f"an embedding reads token ids, but {project.data.source} data are real numbers; "
            "use text_folder data, or numpy/csv data holding ids from 0 to input_dim - 1",
        )
    ]


def _length_problems(project: Project) -> list[Problem]:
    epochs, per_epoch = project.training.epochs, project.steps_per_epoch()
    if epochs is None or per_epoch is None or epochs * per_epoch <= MAX_STEPS:
        return []
    return [
        Problem(
            ("training", "epochs"),
            f"{epochs:,} epochs of {per_epoch:,} steps make {epochs * per_epoch:,} steps, "
            f"more than the {MAX_STEPS:,} a run can have",
        )
    ]


def _size_problems(project: Project) -> list[Problem]:
    estimate = memory_estimate(project)
    if estimate.total <= MAX_PROJECT_BYTES:
        return []
    return [
        Problem(
            estimate.loc,
            f"needs about {bytes_text(estimate.total)} of memory, more than the "
            f"{MAX_PROJECT_BYTES // 2**50} PiB any machine has",
        )
    ]


def _batch_problems(project: Project) -> list[Problem]:
    problems = []
    replicas = project.strategy.replica_count_hint()
    if project.steps_per_epoch() == 0 and project.training_example_count():
        problems.append(
            Problem(
                ("data", "drop_remainder"),
                f"the data has fewer examples than one batch of {project.data.global_batch_size}, "
                "and drop_remainder drops it: no step would run",
            )
        )
    if replicas and project.data.global_batch_size < replicas:
        problems.append(
            Problem(
                ("data", "global_batch_size"),
                f"must be at least the number of replicas ({replicas}) so each gets an example",
            )
        )
    return problems


def _custom_code_problems(project: Project) -> list[Problem]:
    if project.custom_code is None:
        return []
    problems = []
    if not project.custom_code.path.endswith(".py"):
        problems.append(Problem(("custom_code", "path"), "must name a Python file (.py)"))
    if project.strategy.kind == "parameter_server":
        problems.append(
            Problem(
                ("custom_code",),
                "parameter_server runs the built-in step only; custom step code runs with "
                "the synchronous strategies",
            )
        )
    return problems


def _evaluation_problems(project: Project) -> list[Problem]:
    evaluation = project.evaluation
    if evaluation is None:
        return []
    problems = []
    if project.strategy.kind == "parameter_server":
        problems.append(
            Problem(("evaluation",), "parameter_server runs do not evaluate; set it to null")
        )
    if evaluation.split is not None:
        if project.data.source not in SPLIT_SOURCES:
            problems.append(
                Problem(
                    ("evaluation", "split"),
                    f"a split holds out examples of {', '.join(SPLIT_SOURCES)} data, not "
                    f"{project.data.source}; give a separate evaluation source instead",
                )
            )
        examples = project.data.example_count()
        if examples is not None and split_counts(examples, evaluation.split)[0] < 1:
            problems.append(
                Problem(
                    ("evaluation", "split"),
                    f"holds out all {examples} example(s); none would be left to train on",
                )
            )
    if evaluation.source is not None:
        loc = ("evaluation", "source")
        for problem in _data_shape_problems(evaluation.source, project, loc):
            if problem.loc[: len(loc)] == loc:
                problems.append(problem)
            else:  # a rule joining data, model and loss: the source is what does not fit
                problems.append(Problem(loc, f"does not fit {problem.path}: {problem.message}"))
    return problems


def _data_shape_problems(data: DataConfig, project: Project, loc: tuple[str, ...]) -> list[Problem]:
    """Whether ``data`` (the training data, or the evaluation source at ``loc``) fits."""
    model, loss = project.model, project.loss
    problems = []
    if isinstance(data, ConstantData):
        if len(data.features) != model.input_size:
            problems.append(
                Problem(
                    (*loc, "features"),
                    f"has {len(data.features)} value(s) but the model's input_shape "
                    f"{model.input_shape} takes {model.input_size}",
                )
            )
        expected = 1 if loss.kind == "sparse_categorical_crossentropy" else model.output_units
        if expected is not None and len(data.labels) != expected:
            problems.append(
                Problem(
                    (*loc, "labels"),
                    f"has {len(data.labels)} value(s) but the model predicts {expected} "
                    f"per example with {loss.kind}",
                )
            )
    elif isinstance(data, SyntheticClassification):
        if not loss.is_classification:
            problems.append(
                Problem(
                    ("loss", "kind"),
                    f"{loss.kind} is a regression loss; classification data "
                    "needs a crossentropy loss",
                )
            )
        elif loss.kind == "binary_crossentropy":
            if data.num_classes != 2:
                problems.append(
                    Problem((*loc, "num_classes"), "binary_crossentropy needs num_classes 2")
                )
            if model.output_units not in (1, None):
                problems.append(
                    Problem(
                        ("model", "layers"),
                        "binary_crossentropy needs a last dense layer of "
                        f"1 unit, not {model.output_units}",
                    )
                )
        elif model.output_units not in (data.num_classes, None):
            problems.append(
                Problem(
                    ("model", "layers"),
                    f"{loss.kind} needs a last dense layer of "
                    f"{data.num_classes} units (num_classes), not {model.output_units}",
                )
            )
    elif isinstance(data, SyntheticRegression) and loss.kind in (
        "categorical_crossentropy",
        "sparse_categorical_crossentropy",
    ):
        problems.append(
            Problem(
                ("loss", "kind"),
                f"{loss.kind} needs class labels; regression data has real-valued targets",
            )
        )
    elif isinstance(data, SyntheticRegression) and model.output_units is None:
        problems.append(
            Problem(
                (*loc, "source"),
                "synthetic regression targets are as wide as the model's output, which a "
                ".keras file tells only when loaded; use numpy or csv data with it",
            )
        )
    elif isinstance(data, ImageFolderData):
        problems += _image_shape_problems(data, project, loc)
    elif isinstance(data, TextFolderData):
        problems += _text_shape_problems(data, project, loc)
    elif isinstance(data, TFRecordData):
        problems += _tfrecord_shape_problems(data, project, loc)
    return problems


def _tfrecord_shape_problems(
    data: TFRecordData, project: Project, loc: tuple[str, ...]
) -> list[Problem]:
    """The spec names the label once, and its other features fill the model's input."""
    model, loss = project.model, project.loss
    names = [spec.name for spec in data.features]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        return [Problem((*loc, "features"), f"names {', '.join(repeated)} more than once")]
    if data.label not in names:
        return [
            Problem(
                (*loc, "label"),
                f"{data.label!r} is not one of the features ({', '.join(names)}); name the "
                "feature that holds the label",
            )
        ]
    problems = []
    label = data.features[names.index(data.label)]
    inputs = sum(spec.size for spec in data.features if spec.name != data.label)
    if inputs != model.input_size:
        problems.append(
            Problem(
                (*loc, "features"),
                f"the features other than the label hold {inputs} value(s) per example, but "
                f"model.input_shape {model.input_shape} takes {model.input_size}",
            )
        )
    if loss.kind == "sparse_categorical_crossentropy" and (label.dtype, label.size) != ("int64", 1):
        problems.append(
            Problem(
                (*loc, "features", names.index(data.label)),
                "sparse_categorical_crossentropy takes one class number per example: give the "
                "label feature dtype int64 and shape []",
            )
        )
    elif loss.kind != "sparse_categorical_crossentropy" and label.size != model.output_units:
        problems.append(
            Problem(
                (*loc, "features", names.index(data.label)),
                f"the label feature holds {label.size} value(s) per example but the model "
                f"predicts {model.output_units} with {loss.kind}",
            )
        )
    return problems


def _class_label_problems(project: Project, what: str) -> list[Problem]:
    """A folder's labels are class numbers: the loss must be a crossentropy."""
    model, loss = project.model, project.loss
    if not loss.is_classification:
        return [
            Problem(
                ("loss", "kind"),
                f"{loss.kind} is a regression loss; {what}'s labels are classes "
                "(its subfolders), so it needs a crossentropy loss",
            )
        ]
    if loss.kind == "binary_crossentropy" and model.output_units != 1:
        return [
            Problem(
                ("model", "layers"),
                f"binary_crossentropy needs a last dense layer of 1 unit, not {model.output_units}",
            )
        ]
    return []


def _text_shape_problems(
    data: TextFolderData, project: Project, loc: tuple[str, ...]
) -> list[Problem]:
    """Each text becomes ``sequence_length`` word numbers below ``vocabulary_size``."""
    problems = []
    if project.model.input_shape != [data.sequence_length]:
        problems.append(
            Problem(
                ("model", "input_shape"),
                f"text data gives {data.sequence_length} word numbers per example "
                f"({'.'.join(loc)}.sequence_length); the input_shape must be "
                f"[{data.sequence_length}], not {project.model.input_shape}",
            )
        )
    for index, layer in enumerate(project.model.layers):
        input_dim = getattr(layer, "input_dim", None)
        if getattr(layer, "kind", None) == "embedding" and input_dim < data.vocabulary_size:
            problems.append(
                Problem(
                    ("model", "layers", index, "input_dim"),
                    f"is {input_dim}, but word numbers run up to "
                    f"{data.vocabulary_size - 1} ({'.'.join(loc)}.vocabulary_size "
                    f"{data.vocabulary_size}); make it at least {data.vocabulary_size}",
                )
            )
    return problems + _class_label_problems(project, "a text folder")


IMAGE_CHANNELS = {"grayscale": 1, "rgb": 3}


def image_channels(data: ImageFolderData, model: ModelConfig) -> int:
    """Channels each decoded image has: the color mode's, or the model input's last axis."""
    if data.color_mode != "auto":
        return IMAGE_CHANNELS[data.color_mode]
    return model.input_shape[-1]


def _image_shape_problems(
    data: ImageFolderData, project: Project, loc: tuple[str, ...]
) -> list[Problem]:
    """Images are resized to the model's input, so the input must name a size and a color
    mode; their labels are class numbers, so the loss must be a crossentropy."""
    problems = []
    shape = project.model.input_shape
    if len(shape) != 3 or shape[-1] not in IMAGE_CHANNELS.values():
        problems.append(
            Problem(
                ("model", "input_shape"),
                f"image data needs [height, width, channels] with 1 (grayscale) or 3 (rgb) "
                f"channels, not {shape}",
            )
        )
    elif data.color_mode != "auto" and IMAGE_CHANNELS[data.color_mode] != shape[-1]:
        problems.append(
            Problem(
                (*loc, "color_mode"),
                f"{data.color_mode} images have {IMAGE_CHANNELS[data.color_mode]} channel(s) but "
                f"model.input_shape {shape} takes {shape[-1]}; choose auto or change the shape",
            )
        )
    return problems + _class_label_problems(project, "an image folder")


_CROSS_RULES: tuple[tuple[frozenset[str], Callable[[Project], list[Problem]]], ...] = (
    (frozenset({"strategy"}), _strategy_problems),
    (frozenset({"strategy", "tf_config"}), _tf_config_problems),
    (frozenset({"data", "model", "loss"}), _training_data_problems),
    (frozenset({"data", "model", "custom_code"}), _token_id_problems),
    (frozenset({"custom_code", "strategy"}), _custom_code_problems),
    (
        frozenset({"evaluation", "strategy", "data", "model", "loss"}),
        _evaluation_problems,
    ),
    (frozenset({"data", "evaluation", "strategy"}), _batch_problems),
    (frozenset({"training", "data", "evaluation"}), _length_problems),
    (
        frozenset({"strategy", "model", "optimizer", "loss", "data", "evaluation"}),
        _size_problems,
    ),
)

register_union_tags([*LAYER_KINDS, *OPTIMIZER_KINDS, *DATA_SOURCES])

# --- memory ----------------------------------------------------------------------------

MAX_PROJECT_BYTES = 2**50
"""A project whose estimate passes this fits no machine: refused by validation anywhere."""
_FLOAT32 = 4


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes of host memory a run needs at least, from the project alone (no TensorFlow).

    A lower bound of what matters, not an account of everything: TensorFlow's own
    few hundred MiB and file sources (.npz, CSV, whose size only reading tells) are
    left out; ``engine.memory_check`` adds the files on the machine that runs them.
    """

    parameters: int
    """Weights, their gradients and the optimizer's slots, once per replica on the CPU."""
    inputs: int
    """Data generated or held in memory: synthetic arrays, caches, shuffle buffers."""
    activations: int
    """One global batch through every layer, forward and back."""

    @property
    def total(self) -> int:
        return self.parameters + self.inputs + self.activations

    @property
    def loc(self) -> tuple[str, ...]:
        """The section to change: the model, or the data when the data weighs more."""
        if self.inputs > self.parameters + self.activations:
            return ("data",)
        return ("model", "layers")

    def describe(self) -> str:
        return (
            f"{bytes_text(self.parameters)} for parameters, gradients and optimizer state, "
            f"{bytes_text(self.inputs)} for input data, "
            f"{bytes_text(self.activations)} for activations"
        )


def memory_estimate(project: Project) -> MemoryEstimate:
    """What a run of ``project`` holds in this machine's memory, float32 throughout."""
    model = project.model
    copies = 2 + _optimizer_slots(project.optimizer)  # weights, gradients, slots
    # A .keras file's layers are known only once loaded: its parameters count as none here.
    parameters = (model.parameter_count() or 0) * _FLOAT32 * copies
    parameters *= _host_replicas(project.strategy)
    widths = model.shapes().activation_sizes()
    activations = project.data.global_batch_size * sum(widths) * _FLOAT32 * 2
    inputs = _data_bytes(project.data, project)
    if project.evaluation is not None and project.evaluation.source is not None:
        inputs += _data_bytes(project.evaluation.source, project)
    return MemoryEstimate(parameters=parameters, inputs=inputs, activations=activations)


def _optimizer_slots(optimizer: SGDConfig | AdamConfig | RMSpropConfig | AdagradConfig) -> int:
    """Variables the optimizer keeps per weight (Keras 3's optimizers)."""
    if isinstance(optimizer, SGDConfig):
        return 1 if optimizer.momentum else 0
    if isinstance(optimizer, AdamConfig):
        return 3 if optimizer.amsgrad else 2
    if isinstance(optimizer, RMSpropConfig):
        return 1 + (1 if optimizer.momentum else 0) + (1 if optimizer.centered else 0)
    return 1


def _host_replicas(strategy: StrategyConfig) -> int:
    """Copies of the variables in host memory: one per CPU replica a mirrored strategy makes."""
    if strategy.kind != "mirrored":
        return 1
    if strategy.devices:
        return max(1, sum("CPU" in device.upper() for device in strategy.devices))
    return strategy.cpu_replicas


def _data_bytes(data: DataConfig, project: Project) -> int:
    model, loss = project.model, project.loss
    labels = 1 if loss.kind == "sparse_categorical_crossentropy" else model.output_units or 1
    example = (model.input_size + labels) * _FLOAT32
    count = data.example_count()
    if isinstance(data, ConstantData):
        held = example  # from_tensors keeps one example and repeats it
    elif isinstance(data, SyntheticClassification | SyntheticRegression):
        # numpy draws float64 (a second draw for the noise), casts to float32, and
        # tf.data copies the arrays into tensors.
        draws = 2 if data.noise else 1
        held = data.examples * ((model.input_size + labels) * (8 * draws + _FLOAT32) + example)
    else:
        return 0  # a file's size is known only when it is read, on the machine that runs it
    cached = count * example if data.cache and count is not None else 0
    shuffled = min(data.shuffle_buffer, count or data.shuffle_buffer) * example
    return held + cached + shuffled


def bytes_text(count: int) -> str:
    """A byte count as people read it: ``1.5 GiB``, ``0.25 MiB``."""
    for unit, size in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count / 2**20:.2f} MiB"


def uneven_batch_warnings(project: Project, replicas: int | None = None) -> list[str]:
    """What users should know but that is not an error: how short or uneven batches behave."""
    notes = []
    replicas = replicas or project.strategy.replica_count_hint()
    batch = project.data.global_batch_size
    if replicas and batch % replicas:
        notes.append(
            f"data.global_batch_size {batch} is not divisible by {replicas} replicas: "
            f"tf.distribute gives some replicas one example more; the loss stays exact because "
            f"compute_average_loss divides by the global batch size {batch}"
        )
    examples = project.training_example_count()
    if examples is not None and examples % batch and not project.data.drop_remainder:
        notes.append(
            f"the last batch of each epoch holds {examples % batch} of {batch} examples; its loss "
            f"is still divided by {batch} (set data.drop_remainder to skip it)"
        )
    return notes


def load_project_data(data: object, source: str = "project") -> Project:
    """Validates an already-parsed project; raises ProblemsError listing every problem.

    Every problem means every one: when a section fails, the rules joining the
    sections that did validate still run, so a bad ``training.epochs`` does not
    hide a data shape that does not fit the model.
    """
    if not isinstance(data, dict):
        raise ProblemsError([Problem((), "a project must be a JSON object")], source)
    version = data.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            message = (
                f"schema_version {version} was written by a newer Distloop; this one reads "
                f"version {SCHEMA_VERSION}"
            )
        else:
            message = f"schema_version must be {SCHEMA_VERSION}, not {version!r}"
        raise ProblemsError([Problem(("schema_version",), message)], source)
    try:
        return Project.model_validate(data)
    except ValidationError as exc:
        problems = problems_from_validation_error(exc, model=Project)
    sections = _valid_sections(data)
    if sections is not None:  # the joining rules did not run: run those that can
        partial = Project.model_construct(**sections)
        problems += [p for p in cross_field_problems(partial, sections) if p not in problems]
    raise ProblemsError(problems, source)


def _section_adapter(name: str) -> TypeAdapter[Any]:
    info = Project.model_fields[name]
    annotation = Annotated[info.annotation, info]
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
        return TypeAdapter(annotation)  # the section's model brings its own config
    return TypeAdapter(annotation, config=_Strict.model_config)


_SECTIONS = {name: _section_adapter(name) for name in Project.model_fields}


def _valid_sections(data: dict[str, Any]) -> dict[str, Any] | None:
    """The top-level sections that validate on their own; None when every one does and
    nothing else is there, since then Project's own cross-field rules have run."""
    valid: dict[str, Any] = {}
    for name, adapter in _SECTIONS.items():
        info = Project.model_fields[name]
        if name not in data:
            if not info.is_required():
                valid[name] = info.get_default(call_default_factory=True)
            continue
        try:
            valid[name] = adapter.validate_python(data[name])
        except ValidationError:
            continue
    if len(valid) == len(_SECTIONS) and set(data) <= set(_SECTIONS):
        return None
    return valid


def load_project_text(text: str, source: str = "project") -> Project:
    return load_project_data(parse_json_text(text, source), source)


def load_project(path: str | Path) -> Project:
    """Reads and validates a project file; every failure is a ProblemsError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        message = f"cannot read it: {exc.strerror or exc}"
        raise ProblemsError([Problem((), message)], str(path)) from None
    except UnicodeDecodeError as exc:
        message = f"cannot read it: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#x})"
        raise ProblemsError([Problem((), message)], str(path)) from None
    return load_project_text(text, str(path))
