"""The guide's training step and the loop that drives it (imports TensorFlow).

As in TensorFlow's Orbit, the *step* (what one batch does to the model) is kept
apart from the *loop* (how many steps, when to report, when to stop), so the same
step runs in every loop form the guide shows.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import tensorflow as tf

from engine.reporting import StepReporter

StepFn = Callable[[Any], tuple[tf.Tensor, tf.Tensor | None]]


def make_distributed_train_step(
    strategy: tf.distribute.Strategy,
    model: tf.keras.Model,
    optimizer: tf.keras.optimizers.Optimizer,
    loss_object: tf.keras.losses.Loss,
    global_batch_size: int,
    element_spec: Any,
    per_replica_losses: bool,
) -> StepFn:
    """The guide's ``train_step`` and ``distributed_train_step``, exactly.

    ``global_batch_size`` is passed to ``compute_average_loss`` explicitly: with
    uneven splits across replicas, the default (local batch times replicas)
    would weight replicas wrongly. The ``input_signature`` keeps a short last
    batch from retracing the function.
    """

    def train_step(inputs: Any) -> tf.Tensor:
        features, labels = inputs
        with tf.GradientTape() as tape:
            predictions = model(features, training=True)
            per_example_loss = loss_object(labels, predictions)
            loss = tf.nn.compute_average_loss(per_example_loss, global_batch_size=global_batch_size)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    @tf.function(input_signature=[element_spec])
    def distributed_train_step(dist_inputs: Any) -> tuple[tf.Tensor, tf.Tensor]:
        per_replica = strategy.run(train_step, args=(dist_inputs,))
        reduced = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        if per_replica_losses:
            return reduced, tf.stack(strategy.experimental_local_results(per_replica))
        return reduced, tf.zeros([0])

    def step(dist_inputs: Any) -> tuple[tf.Tensor, tf.Tensor | None]:
        loss, replicas = distributed_train_step(dist_inputs)
        return loss, replicas if per_replica_losses else None

    return step


def batches_for_epochs(dist_dataset: Iterable[Any], epochs: int) -> Iterator[Any]:
    """The guide's first form: ``for dist_inputs in dist_dataset``, once per epoch."""
    for _ in range(epochs):
        yield from dist_dataset


def batches_for_steps(dist_dataset: Iterable[Any], steps: int) -> Iterator[Any]:
    """The guide's second form: an explicit iterator and ``next(iterator)`` per step."""
    iterator = iter(dist_dataset)
    for _ in range(steps):
        yield next(iterator)


def run_loop(
    step_fn: StepFn,
    batches: Iterator[Any],
    reporter: StepReporter,
    should_stop: Callable[[], bool],
    first_step: int = 1,
) -> bool:
    """Runs steps until the batches end or a stop is requested; True when stopped early.

    The stop request is honoured between steps only, so a stopped run's model,
    optimizer and metrics always describe whole steps.
    """
    start = time.perf_counter()
    try:
        for step in itertools.count(first_step):
            if should_stop():
                return True
            try:
                dist_inputs = next(batches)
            except StopIteration:
                return False
            loss, replica_losses = step_fn(dist_inputs)
            reporter.record(step, loss, replica_losses, time.perf_counter() - start)
    finally:
        reporter.flush()
    return False
