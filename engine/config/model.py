"""The ``model`` section: layers, initializers, regularizers, a backbone or a ``.keras``
file. Each layer kind is one model class, so the GUI's layer cards are generated from them."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, model_validator

from ..model_shapes import ModelShapes, model_shapes
from ..problems import Problem, raise_problems
from ._strict import _Strict


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
