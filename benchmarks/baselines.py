"""The baselines the engine is measured against, each run in a fresh process.

``plain``: the guide's loop written by hand (no app, no reporting, no run folder)
on the seed example's model, timing steps after a warm-up, as a user's own
script would run it. ``fit``: Keras ``model.fit`` on the MLP workload with the
same strategy and ``steps_per_execution``. ``cnn_loop``: row 9's CNN in the guide's loop
written by hand, K steps fused in a ``tf.range`` loop: what any custom loop gets, to tell
the engine's own share of its lead over ``fit`` from the custom loop's.

Usage: python -m benchmarks.baselines plain STEPS WARMUP
       python -m benchmarks.baselines fit STEPS WARMUP STEPS_PER_EXECUTION
       python -m benchmarks.baselines cnn_fit STEPS WARMUP STEPS_PER_EXECUTION [DETERMINISTIC]
       python -m benchmarks.baselines cnn_loop STEPS WARMUP STEPS_PER_EXECUTION [DETERMINISTIC]
Prints one number: steps per second (plain) or examples per second (fit, cnn_loop).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

CNN_BATCH = 128


def plain(steps: int, warmup: int) -> float:
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    strategy = tf.distribute.MirroredStrategy()
    batch = 10
    with strategy.scope():
        model = tf.keras.Sequential(
            [tf.keras.Input((1,)), tf.keras.layers.Dense(1, kernel_regularizer="l2")]
        )
        optimizer = tf.keras.optimizers.SGD()
        optimizer.build(model.trainable_variables)
    dataset = tf.data.Dataset.from_tensors(([1.0], [1.0])).repeat().batch(batch)
    dist_dataset = strategy.experimental_distribute_dataset(dataset)
    loss_object = tf.keras.losses.BinaryCrossentropy(from_logits=True, reduction=None)

    def train_step(inputs):
        features, labels = inputs
        with tf.GradientTape() as tape:
            predictions = model(features, training=True)
            loss = tf.nn.compute_average_loss(loss_object(labels, predictions))
            loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def distributed_train_step(dist_inputs):
        per_replica = strategy.run(train_step, args=(dist_inputs,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    iterator = iter(dist_dataset)
    losses = []
    for _ in range(warmup):
        losses.append(distributed_train_step(next(iterator)))
    float(losses[-1])
    start = time.perf_counter()
    for _ in range(steps - warmup):
        losses.append(distributed_train_step(next(iterator)))
    float(losses[-1])
    return (steps - warmup) / (time.perf_counter() - start)


def fit(steps: int, warmup: int, steps_per_execution: int) -> float:
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    strategy = tf.distribute.MirroredStrategy()
    batch = 256
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch * 64, 784)).astype(np.float32)
    y = rng.integers(0, 10, batch * 64).astype(np.int32)
    layers = [
        tf.keras.Input((784,)),
        tf.keras.layers.Dense(512, activation="relu"),
        tf.keras.layers.Dense(512, activation="relu"),
        tf.keras.layers.Dense(10),
    ]
    return _fit_rate(strategy, layers, x, y, batch, steps, warmup, steps_per_execution)


def cnn_fit(steps: int, warmup: int, steps_per_execution: int, deterministic: int = 1) -> float:
    """Row 9's baseline: engine_bench's small CNN on 32x32x3 images under ``model.fit``.

    ``deterministic`` (1 or 0) matches the engine's ``training.deterministic``, so the ratio
    compares like with like: op determinism is what makes the engine's runs repeat exactly.
    """
    strategy, x, y, layers = _cnn_workload(deterministic)
    return _fit_rate(strategy, layers, x, y, CNN_BATCH, steps, warmup, steps_per_execution)


def cnn_loop(steps: int, warmup: int, steps_per_execution: int, deterministic: int = 1) -> float:
    """Row 9's CNN in the guide's custom loop without Distloop, K steps per call."""
    import tensorflow as tf

    strategy, x, y, layers = _cnn_workload(deterministic)
    dataset = _repeated_batches(x, y, CNN_BATCH)
    with strategy.scope():
        model = tf.keras.Sequential(layers)
        optimizer = tf.keras.optimizers.Adam(1e-3)
        optimizer.build(model.trainable_variables)
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def train_step(inputs: Any) -> Any:
        features, labels = inputs
        with tf.GradientTape() as tape:
            predictions = model(features, training=True)
            loss = tf.nn.compute_average_loss(loss_object(labels, predictions))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def fused_steps(iterator: Any) -> Any:
        losses = tf.TensorArray(tf.float32, size=steps_per_execution)
        for i in tf.range(steps_per_execution):
            per_replica = strategy.run(train_step, args=(next(iterator),))
            losses = losses.write(i, strategy.reduce("SUM", per_replica, axis=None))
        return losses.stack()

    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    for _ in range(warmup // steps_per_execution):
        fused_steps(iterator).numpy()
    calls = (steps - warmup) // steps_per_execution
    start = time.perf_counter()
    for _ in range(calls):
        fused_steps(iterator).numpy()
    return calls * steps_per_execution * CNN_BATCH / (time.perf_counter() - start)


def _cnn_workload(deterministic: int) -> tuple[Any, np.ndarray, np.ndarray, list[Any]]:
    """Row 9's strategy, synthetic 32x32x3 images, labels and layers, seeded (and op
    determinism on or off) as the engine's run is: fit and the hand loop share them."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    if deterministic:
        tf.config.experimental.enable_op_determinism()
    strategy = tf.distribute.MirroredStrategy()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((CNN_BATCH * 16, 32, 32, 3)).astype(np.float32)
    y = rng.integers(0, 10, CNN_BATCH * 16).astype(np.int32)
    layers = [
        tf.keras.Input((32, 32, 3)),
        tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(10),
    ]
    return strategy, x, y, layers


def _repeated_batches(x: np.ndarray, y: np.ndarray, batch: int) -> Any:
    """The in-memory examples as whole batches, repeated, prefetched."""
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True)
    return dataset.repeat().prefetch(tf.data.AUTOTUNE)


def _fit_rate(
    strategy: Any,
    layers: list[Any],
    x: np.ndarray,
    y: np.ndarray,
    batch: int,
    steps: int,
    warmup: int,
    steps_per_execution: int,
) -> float:
    """Examples/s of ``model.fit`` on repeated in-memory batches, after ``warmup`` steps."""
    import tensorflow as tf

    dataset = _repeated_batches(x, y, batch)
    with strategy.scope():
        model = tf.keras.Sequential(layers)
        model.compile(
            optimizer=tf.keras.optimizers.Adam(1e-3),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            steps_per_execution=steps_per_execution,
        )
    model.fit(dataset, steps_per_epoch=warmup, epochs=1, verbose=0)
    start = time.perf_counter()
    model.fit(dataset, steps_per_epoch=steps - warmup, epochs=1, verbose=0)
    return (steps - warmup) * batch / (time.perf_counter() - start)


if __name__ == "__main__":
    kind, *numbers = sys.argv[1:]
    values = [int(n) for n in numbers]
    print({"plain": plain, "fit": fit, "cnn_fit": cnn_fit, "cnn_loop": cnn_loop}[kind](*values))
