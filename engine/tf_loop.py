"""The guide's training step and the loop that drives it (imports TensorFlow).

As in TensorFlow's Orbit, the *step* (what one batch does to the model,
:class:`StepRunner`) is kept apart from the *loop* (how many steps, when to
report, checkpoint or stop, :func:`run_loop`), so the same step runs in every
loop form: the guide's ``for dist_inputs in dist_dataset``, its explicit
``next(iterator)``, and fused executions of K steps in one ``tf.function`` call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from engine.reporting import StepReporter


class StepRunner:
    """The guide's ``train_step`` / ``distributed_train_step``, plus a fused K-step form."""

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        model: tf.keras.Model,
        optimizer: tf.keras.optimizers.Optimizer,
        loss_object: tf.keras.losses.Loss,
        global_batch_size: int,
        *,
        per_replica_losses: bool,
        jit_compile: bool = False,
    ) -> None:
        self._strategy = strategy
        self._per_replica = per_replica_losses

        def loss_and_gradients(inputs: Any) -> tuple[tf.Tensor, list[tf.Tensor]]:
            features, labels = inputs
            with tf.GradientTape() as tape:
                predictions = model(features, training=True)
                per_example_loss = loss_object(labels, predictions)
                # The global batch size is given explicitly: with uneven splits across
                # replicas the default (local batch x replicas) would weight them wrongly.
                loss = tf.nn.compute_average_loss(
                    per_example_loss, global_batch_size=global_batch_size
                )
                if model.losses:
                    loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
            return loss, tape.gradient(loss, model.trainable_variables)

        # XLA compiles the arithmetic only: apply_gradients does the cross-replica sum
        # (a merge_call), which cannot live inside a compiled cluster.
        if jit_compile:
            loss_and_gradients = tf.function(loss_and_gradients, jit_compile=True)

        def train_step(inputs: Any) -> tf.Tensor:
            loss, gradients = loss_and_gradients(inputs)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
            return loss

        def distributed_step(dist_inputs: Any) -> tuple[tf.Tensor, tf.Tensor]:
            per_replica = strategy.run(train_step, args=(dist_inputs,))
            reduced = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
            if per_replica_losses:
                return reduced, tf.stack(strategy.experimental_local_results(per_replica))
            return reduced, tf.zeros([0])

        # reduce_retracing: a short last batch retraces once into a shape-generic
        # function, never once per epoch. (An input_signature does the same but made
        # every call of a small model ~40% slower: measured, see benchmarks/RESULTS.md.)
        self._one = tf.function(distributed_step, reduce_retracing=True)

        @tf.function
        def fused_steps(iterator: Any, count: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            losses = tf.TensorArray(tf.float32, size=count)
            replicas = tf.TensorArray(tf.float32, size=count, infer_shape=False)
            for i in tf.range(count):
                loss, local = distributed_step(next(iterator))
                losses = losses.write(i, loss)
                replicas = replicas.write(i, local)
            return losses.stack(), replicas.stack()

        self._fused = fused_steps

    def traces(self) -> int:
        """How often the step functions were traced (retracing costs seconds, not micro)."""
        return self._one.experimental_get_tracing_count() + (
            self._fused.experimental_get_tracing_count()
        )

    def run_one(self, dist_inputs: Any) -> tuple[tf.Tensor, tf.Tensor | None]:
        """One step: the reduced loss, and the local replicas' losses when asked for."""
        loss, replicas = self._one(dist_inputs)
        return loss, replicas if self._per_replica else None

    def run_many(self, iterator: Any, count: int) -> tuple[tf.Tensor, tf.Tensor | None]:
        """``count`` steps in one call (a ``tf.range`` loop); every step's loss comes back."""
        losses, replicas = self._fused(iterator, tf.constant(count, tf.int32))
        return losses, replicas if self._per_replica else None


@dataclass(frozen=True)
class LoopPlan:
    first_step: int
    last_step: int
    steps_per_execution: int = 1
    epoch_form: bool = False
    """Iterate ``for dist_inputs in dist_dataset`` (the guide's first form) when K is 1."""
    elapsed_offset_s: float = 0.0
    """Seconds already trained before a resume, so elapsed time keeps counting up."""


def run_loop(
    runner: StepRunner,
    dist_dataset: Any,
    plan: LoopPlan,
    reporter: StepReporter,
    should_stop: Callable[[], bool],
    after_steps: Callable[[int], None] = lambda step: None,
    steps_until_pause: Callable[[int], int] = lambda step: 1 << 30,
) -> bool:
    """Runs the planned steps; returns True when a stop request ended it early.

    Stop requests are honoured between executions only, so a stopped run's model,
    optimizer and metrics always describe whole steps. ``after_steps(step)`` runs
    after each execution (checkpointing); ``steps_until_pause(step)`` caps a fused
    execution so it ends exactly on a checkpoint step.
    """
    start = time.perf_counter() - plan.elapsed_offset_s
    step = plan.first_step
    try:
        if plan.steps_per_execution == 1 and plan.epoch_form:
            for dist_inputs in dist_dataset:
                if step > plan.last_step:
                    break
                if should_stop():
                    return True
                loss, replicas = runner.run_one(dist_inputs)
                reporter.record(step, loss, replicas, time.perf_counter() - start)
                after_steps(step)
                step += 1
            return False
        iterator = iter(dist_dataset)
        while step <= plan.last_step:
            if should_stop():
                return True
            count = min(plan.steps_per_execution, plan.last_step - step + 1)
            count = max(1, min(count, steps_until_pause(step)))
            if count == 1 and plan.steps_per_execution == 1:
                loss, replicas = runner.run_one(next(iterator))
                reporter.record(step, loss, replicas, time.perf_counter() - start)
            else:
                losses, replicas = runner.run_many(iterator, count)
                reporter.record_many(step, count, losses, replicas, time.perf_counter() - start)
            step += count
            after_steps(step - 1)
        return False
    finally:
        reporter.flush()
