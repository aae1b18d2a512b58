"""Builds the Keras model, optimizer and per-example loss of a project (imports TensorFlow).

Call :func:`build_model` and :func:`build_optimizer` inside ``strategy.scope()`` so
their variables are mirrored. Both are built eagerly (an ``Input`` and
``optimizer.build``): with two or more local replicas, Keras 3 fails when
variables are first created inside the replicated step.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from ..config import (
    AdagradConfig,
    AdamConfig,
    BatchNormalizationLayer,
    Conv1DLayer,
    Conv2DLayer,
    DenseLayer,
    DropoutLayer,
    EmbeddingLayer,
    FlattenLayer,
    GRULayer,
    Initializer,
    Layer,
    LayerNormalizationLayer,
    LossConfig,
    LSTMLayer,
    MixedPrecision,
    ModelConfig,
    OptimizerConfig,
    Regularizer,
    RescalingLayer,
    RMSpropConfig,
    SGDConfig,
)
from ..model_shapes import BACKBONES, ModelFileError, read_keras_file


def _initializer(config: Initializer, seed: int) -> tf.keras.initializers.Initializer:
    init = tf.keras.initializers
    match config.kind:
        case "glorot_uniform":
            return init.GlorotUniform(seed=seed)
        case "he_normal":
            return init.HeNormal(seed=seed)
        case "random_normal":
            return init.RandomNormal(stddev=config.stddev or 0.05, seed=seed)
        case "zeros":
            return init.Zeros()
        case "ones":
            return init.Ones()
        case "constant":
            return init.Constant(config.value)
    raise ValueError(f"unknown initializer {config.kind!r}")


def set_precision(mixed_precision: MixedPrecision) -> None:
    """Sets Keras's global dtype policy; it must come before the model is built."""
    policy = "float32" if mixed_precision == "none" else mixed_precision
    tf.keras.mixed_precision.set_global_policy(policy)


def build_model(config: ModelConfig, seed: int) -> tf.keras.Model:
    """A Sequential model; each layer's seed derives from the run seed, so runs repeat.

    Under a mixed precision policy (:func:`set_precision`) it ends with a float32
    cast, so the loss and the loss scaling stay in float32 whatever the layers use.
    """
    float32_output = tf.keras.mixed_precision.global_policy().compute_dtype != "float32"
    if config.kind == "keras_file":
        layers = [tf.keras.Input(tuple(config.input_shape)), load_keras_file(config)]
    else:
        layers = [tf.keras.Input(tuple(config.input_shape))]
        if config.backbone is not None:
            layers += [_backbone(config), tf.keras.layers.GlobalAveragePooling2D()]
        flatten_before = config.shapes().flatten_before
        for i, layer in enumerate(config.layers):
            if i == flatten_before:
                layers.append(tf.keras.layers.Flatten(name="implicit_flatten"))
            layers.append(_layer(layer, seed * 1000 + i))
    if float32_output:
        layers.append(tf.keras.layers.Activation("linear", dtype="float32"))
    return tf.keras.Sequential(layers)


def _activation(name: str) -> str | None:
    return None if name == "linear" else name


def _regularizer(config: Regularizer | None) -> tf.keras.regularizers.Regularizer | None:
    if config is None or not (config.l1 or config.l2):
        return None
    return tf.keras.regularizers.L1L2(l1=config.l1, l2=config.l2)


def _layer(layer: Layer, seed: int) -> tf.keras.layers.Layer:
    """The Keras layer of one project layer; every random initializer takes ``seed``."""
    k = tf.keras.layers
    if isinstance(layer, DenseLayer):
        return k.Dense(
            layer.units,
            activation=_activation(layer.activation),
            use_bias=layer.use_bias,
            kernel_initializer=_initializer(layer.kernel_initializer, seed),
            kernel_regularizer=_regularizer(layer.kernel_regularizer),
        )
    if isinstance(layer, DropoutLayer):
        return k.Dropout(layer.rate, seed=seed)
    if isinstance(layer, Conv1DLayer | Conv2DLayer):
        conv = k.Conv1D if isinstance(layer, Conv1DLayer) else k.Conv2D
        return conv(
            layer.filters,
            layer.kernel_size,
            strides=layer.strides,
            padding=layer.padding,
            activation=_activation(layer.activation),
            use_bias=layer.use_bias,
            kernel_initializer=_initializer(layer.kernel_initializer, seed),
            kernel_regularizer=_regularizer(layer.kernel_regularizer),
        )
    pooling = _POOLING.get(layer.kind)
    if pooling is not None:
        return pooling(layer.pool_size, strides=layer.strides, padding=layer.padding)
    global_pooling = _GLOBAL_POOLING.get(layer.kind)
    if global_pooling is not None:
        return global_pooling()
    if isinstance(layer, FlattenLayer):
        return k.Flatten()
    if isinstance(layer, BatchNormalizationLayer):
        return k.BatchNormalization(
            momentum=layer.momentum, epsilon=layer.epsilon, synchronized=layer.synchronized
        )
    if isinstance(layer, LayerNormalizationLayer):
        return k.LayerNormalization(epsilon=layer.epsilon)
    if isinstance(layer, EmbeddingLayer):
        return k.Embedding(
            layer.input_dim,
            layer.output_dim,
            embeddings_initializer=tf.keras.initializers.RandomUniform(-0.05, 0.05, seed=seed),
        )
    if isinstance(layer, LSTMLayer | GRULayer):
        recurrent = k.LSTM if isinstance(layer, LSTMLayer) else k.GRU
        return recurrent(
            layer.units,
            return_sequences=layer.return_sequences,
            kernel_initializer=_initializer(layer.kernel_initializer, seed),
            recurrent_initializer=tf.keras.initializers.Orthogonal(seed=seed),
        )
    if isinstance(layer, RescalingLayer):
        return k.Rescaling(layer.scale, offset=layer.offset)
    raise ValueError(f"unknown layer {layer!r}")


_POOLING = {
    "max_pooling1d": tf.keras.layers.MaxPooling1D,
    "max_pooling2d": tf.keras.layers.MaxPooling2D,
    "average_pooling1d": tf.keras.layers.AveragePooling1D,
    "average_pooling2d": tf.keras.layers.AveragePooling2D,
}
_GLOBAL_POOLING = {
    "global_average_pooling1d": tf.keras.layers.GlobalAveragePooling1D,
    "global_average_pooling2d": tf.keras.layers.GlobalAveragePooling2D,
    "global_max_pooling1d": tf.keras.layers.GlobalMaxPooling1D,
    "global_max_pooling2d": tf.keras.layers.GlobalMaxPooling2D,
}


def _backbone(config: ModelConfig) -> tf.keras.Model:
    """The ``keras.applications`` model without its top, on random or local weights.

    Nothing is downloaded: ``weights`` is a file path or None, never ``"imagenet"``.
    """
    assert config.backbone is not None
    application = getattr(tf.keras.applications, BACKBONES[config.backbone].application)
    model = application(include_top=False, weights=None, input_shape=tuple(config.input_shape))
    if config.weights is not None:
        path = Path(config.weights)
        if not path.is_file():
            raise ModelFileError(f"model.weights: {path} does not exist; give a weights file")
        try:
            model.load_weights(str(path))
        except Exception as exc:  # Keras raises many kinds; the user needs the reason
            raise ModelFileError(
                f"model.weights: cannot load {path} into {BACKBONES[config.backbone].title} "
                f"without its top: {_first_line(exc)}"
            ) from None
    return model


def load_keras_file(config: ModelConfig) -> tf.keras.Model:
    """The saved model, without its compile state (the loop brings its own optimizer).

    Called inside ``strategy.scope()``, so its variables are created as the strategy's.
    """
    assert config.path is not None
    path = Path(config.path)
    try:  # Keras calls a file that is no zip "not found": say what is wrong with it
        read_keras_file(str(path))
    except ModelFileError as exc:
        raise ModelFileError(f"model.path: {exc}") from None
    try:
        model = tf.keras.models.load_model(path, compile=False)
    except Exception as exc:  # a bad zip, a missing custom layer, a newer Keras format
        raise ModelFileError(f"model.path: cannot load {path}: {_first_line(exc)}") from None
    stored = list(model.input_shape[1:]) if not isinstance(model.input_shape, list) else None
    if stored != list(config.input_shape):
        raise ModelFileError(
            f"model.input_shape: {config.input_shape} does not match the input "
            f"{stored if stored is not None else model.input_shape} of {path}; set it to that"
        )
    policy = tf.keras.mixed_precision.global_policy().name
    saved = {layer.dtype_policy.name for layer in model.layers}
    # A loaded layer keeps the dtype policy it was saved with, whatever the global one;
    # a mixed model may end in a float32 layer (as the engine's own models do).
    fits = saved == {"float32"} if policy == "float32" else policy in saved
    if not fits:
        raise ModelFileError(
            f"training.mixed_precision: the layers of {path} were saved to compute in "
            f"{' and '.join(sorted(saved))}, not {policy}; save the model under the policy "
            "you train with, or set mixed_precision to match it"
        )
    return model


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def build_optimizer(
    config: OptimizerConfig, variables: list[tf.Variable], *, loss_scale: bool = False
) -> tf.keras.optimizers.Optimizer:
    """The optimizer, built for ``variables``; with ``loss_scale`` wrapped in Keras 3's
    ``LossScaleOptimizer``, which float16 needs: the step scales the loss before taking
    gradients (``scale_loss``) and ``apply_gradients`` unscales them, skipping a step
    whose gradients overflowed and lowering the scale."""
    opt = tf.keras.optimizers
    if isinstance(config, SGDConfig):
        optimizer = opt.SGD(
            config.learning_rate, momentum=config.momentum, nesterov=config.nesterov
        )
    elif isinstance(config, AdamConfig):
        optimizer = opt.Adam(
            config.learning_rate,
            beta_1=config.beta_1,
            beta_2=config.beta_2,
            epsilon=config.epsilon,
            amsgrad=config.amsgrad,
        )
    elif isinstance(config, RMSpropConfig):
        optimizer = opt.RMSprop(
            config.learning_rate,
            rho=config.rho,
            momentum=config.momentum,
            epsilon=config.epsilon,
            centered=config.centered,
        )
    elif isinstance(config, AdagradConfig):
        optimizer = opt.Adagrad(
            config.learning_rate,
            initial_accumulator_value=config.initial_accumulator_value,
            epsilon=config.epsilon,
        )
    else:
        raise ValueError(f"unknown optimizer {config!r}")
    if loss_scale:
        optimizer = opt.LossScaleOptimizer(optimizer)
    optimizer.build(variables)
    return optimizer


def build_loss(config: LossConfig) -> tf.keras.losses.Loss:
    """A per-example loss: ``reduction=None``, because compute_average_loss does the reducing.

    A loss's default reduction would average over the *local* batch first, and
    the cross-replica sum would then count every replica's mean: wrong by the
    replica count.
    """
    losses = tf.keras.losses
    match config.kind:
        case "binary_crossentropy":
            return losses.BinaryCrossentropy(from_logits=config.from_logits, reduction=None)
        case "categorical_crossentropy":
            return losses.CategoricalCrossentropy(from_logits=config.from_logits, reduction=None)
        case "sparse_categorical_crossentropy":
            return losses.SparseCategoricalCrossentropy(
                from_logits=config.from_logits, reduction=None
            )
        case "mean_squared_error":
            return losses.MeanSquaredError(reduction=None)
        case "mean_absolute_error":
            return losses.MeanAbsoluteError(reduction=None)
        case "huber":
            return losses.Huber(delta=config.delta or 1.0, reduction=None)
    raise ValueError(f"unknown loss {config.kind!r}")
