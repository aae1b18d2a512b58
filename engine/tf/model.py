"""Builds the Keras model, optimizer and per-example loss of a project (imports TensorFlow).

Call :func:`build_model` and :func:`build_optimizer` inside ``strategy.scope()`` so
their variables are mirrored. Both are built eagerly (an ``Input`` and
``optimizer.build``): with two or more local replicas, Keras 3 fails when
variables are first created inside the replicated step.
"""

from __future__ import annotations

import tensorflow as tf

from ..config import (
    AdagradConfig,
    AdamConfig,
    DenseLayer,
    DropoutLayer,
    Initializer,
    LossConfig,
    ModelConfig,
    OptimizerConfig,
    RMSpropConfig,
    SGDConfig,
)


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


def build_model(config: ModelConfig, seed: int) -> tf.keras.Model:
    """A Sequential model; each layer's seed derives from the run seed, so runs repeat."""
    layers: list[tf.keras.layers.Layer] = [tf.keras.Input(tuple(config.input_shape))]
    for i, layer in enumerate(config.layers):
        layer_seed = seed * 1000 + i
        if isinstance(layer, DenseLayer):
            reg = layer.kernel_regularizer
            layers.append(
                tf.keras.layers.Dense(
                    layer.units,
                    activation=None if layer.activation == "linear" else layer.activation,
                    use_bias=layer.use_bias,
                    kernel_initializer=_initializer(layer.kernel_initializer, layer_seed),
                    kernel_regularizer=(
                        tf.keras.regularizers.L1L2(l1=reg.l1, l2=reg.l2)
                        if reg and (reg.l1 or reg.l2)
                        else None
                    ),
                )
            )
        elif isinstance(layer, DropoutLayer):
            layers.append(tf.keras.layers.Dropout(layer.rate, seed=layer_seed))
    if len(config.input_shape) > 1:
        layers.insert(1, tf.keras.layers.Flatten())
    return tf.keras.Sequential(layers)


def build_optimizer(
    config: OptimizerConfig, variables: list[tf.Variable]
) -> tf.keras.optimizers.Optimizer:
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
