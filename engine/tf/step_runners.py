"""The guide's training step, as the loop runs it (imports TensorFlow).

As in TensorFlow's Orbit, the *step* (what one batch does to the model,
:class:`StepRunner`) is kept apart from the *loop* (how many steps, when to
report, checkpoint or stop: ``engine.loop``), so the same step runs in every
loop form: the guide's ``for dist_inputs in dist_dataset``, its explicit
``next(iterator)``, and fused executions of K steps in one ``tf.function`` call.

:class:`ReplicaStepRunner` runs any per-replica step that way; the guide's step
(:class:`StepRunner`) and custom step code (``engine.tf.user_code``) are both
run by it, so user code gets exactly the distribution the built-in step gets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import tensorflow as tf

from ..messages import PRIMARY_LOSS


class ReplicaStepRunner:
    """The guide's ``distributed_train_step`` around any per-replica step, plus a fused form.

    ``train_step(inputs)`` runs on every replica (``strategy.run``) on what
    ``to_replicas`` makes of the loop's element (``engine.tf.input_pipeline``) and returns a
    scalar loss, or a dict of named scalar losses; each is reduced with
    ``strategy.reduce(SUM)`` inside ``tf.function``. With per-replica losses, the
    local replicas' values of the primary loss come back too (the ``"loss"`` entry
    of a dict, else the sum of its entries, as ``engine.reporting`` reports).
    """

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        train_step: Callable[[Any], Any],
        *,
        per_replica_losses: bool,
        to_replicas: Callable[[Any], Any],
        single_loss: bool = False,
        time_input: bool = False,
    ) -> None:
        """``single_loss`` says the step returns one tensor, so its output needs no trace.
        ``time_input``: fused steps time their input wait in the graph, which TensorFlow
        refuses under op determinism (``training.deterministic``)."""
        self._strategy = strategy
        self._per_replica = per_replica_losses
        self._structure_known = single_loss
        self._names: list[str] | None = None
        sum_op = tf.distribute.ReduceOp.SUM

        def local_primary(per_replica: Any) -> tf.Tensor:
            if not isinstance(per_replica, dict):
                return tf.stack(strategy.experimental_local_results(per_replica))
            if PRIMARY_LOSS in per_replica:
                return tf.stack(strategy.experimental_local_results(per_replica[PRIMARY_LOSS]))
            return tf.add_n(
                [tf.stack(strategy.experimental_local_results(v)) for v in per_replica.values()]
            )

        def distributed_step(element: Any) -> tuple[Any, tf.Tensor]:
            per_replica = strategy.run(train_step, args=(to_replicas(element),))
            # Runs while tracing: what the step returns is known from its first trace on.
            self._structure_known = True
            # (No annotations in here: AutoGraph cannot convert annotated assignments.)
            if isinstance(per_replica, dict):
                self._names = list(per_replica)
                reduced = {
                    name: strategy.reduce(sum_op, value, axis=None)
                    for name, value in per_replica.items()
                }
            else:
                reduced = strategy.reduce(sum_op, per_replica, axis=None)
            if per_replica_losses:
                return reduced, local_primary(per_replica)
            return reduced, tf.zeros([0])

        # Until bind_input fixes the signature (and where nothing does: a parameter-server
        # step runs inside the coordinator's function), a short last batch retraces once
        # into a shape-generic function, never once per epoch.
        self._one = tf.function(distributed_step, reduce_retracing=True)
        self._call_one: Callable[[Any], tuple[Any, tf.Tensor]] = self._one

        @tf.function
        def fused_steps(iterator: Any, count: tf.Tensor) -> tuple[Any, tf.Tensor, tf.Tensor]:
            names = self._names  # None for a single loss, else one TensorArray per name
            losses = tuple(tf.TensorArray(tf.float32, size=count) for _ in names or [None])
            replicas = tf.TensorArray(tf.float32, size=count, infer_shape=False)
            waited = tf.constant(0.0, tf.float64)
            # The input wait, timed in the graph around each element's fetch: the host never
            # sees a fused execution's elements, and a fetch per step would wait.
            for i in tf.range(count):
                if time_input:
                    asked = tf.timestamp()
                    with tf.control_dependencies([asked]):
                        element = next(iterator)
                    fetched = tf.nest.flatten(element, expand_composites=True)
                    with tf.control_dependencies(fetched):
                        waited += tf.timestamp() - asked
                else:
                    element = next(iterator)
                loss, local = distributed_step(element)
                values = [loss[name] for name in names] if names else [loss]
                losses = tuple(
                    array.write(i, value) for array, value in zip(losses, values, strict=True)
                )
                replicas = replicas.write(i, local)
            stacked = [array.stack() for array in losses]
            return (
                (dict(zip(names, stacked, strict=True)) if names else stacked[0]),
                replicas.stack(),
                waited,
            )

        self._fused = fused_steps
        self._timed = time_input
        self._waited: tf.Tensor | None = None

    def bind_input(self, element_spec: Any) -> None:
        """Traces the one-step function once, for the loop's dataset's ``element_spec``.

        The spec is the step's input signature: its batch dimension is unknown unless
        the data drops short batches, so a short last batch runs the same trace.
        Calling that traced (concrete) function also skips ``tf.function``'s per-call
        dispatch, about a fifth of the seed model's step here (benchmarks/RESULTS.md).
        """
        self._call_one = self._one.get_concrete_function(element_spec)

    def loss_names(self, element_spec: Any) -> list[str] | None:
        """The step's named losses in the order it returns them; None for a single loss.

        Traces the one-step function for ``element_spec`` (the loop's dataset's) when
        no trace has told yet; the loop's first call reuses it.
        """
        if not self._structure_known:
            self._one.get_concrete_function(element_spec)
        return self._names

    def traces(self) -> int:
        """How often the step functions were traced (retracing costs seconds, not micro)."""
        return self._one.experimental_get_tracing_count() + (
            self._fused.experimental_get_tracing_count()
        )

    def run_one(self, element: Any) -> tuple[Any, tf.Tensor | None]:
        """One step: the reduced loss(es), and the local replicas' losses when asked for."""
        loss, replicas = self._call_one(element)
        return loss, replicas if self._per_replica else None

    def run_many(self, iterator: Any, count: int) -> tuple[Any, tf.Tensor | None]:
        """``count`` steps in one call (a ``tf.range`` loop); every step's loss comes back."""
        # The fused loop keeps one TensorArray per named loss: it must know the names.
        self.loss_names(iterator.element_spec)
        losses, replicas, self._waited = self._fused(iterator, tf.constant(count, tf.int32))
        return losses, replicas if self._per_replica else None

    def input_wait(self) -> tf.Tensor | None:
        """The last fused call's seconds waiting for its elements, not fetched; None when
        op determinism kept them from being timed."""
        return self._waited if self._timed else None

    def finish(self) -> Iterable[tuple[Any, tf.Tensor | None]]:
        """Nothing: a synchronous step has ended when its call returns."""
        return ()


class StepRunner(ReplicaStepRunner):
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
        to_replicas: Callable[[Any], Any],
        jit_compile: bool = False,
        time_input: bool = False,
    ) -> None:
        # A LossScaleOptimizer unscales the gradients itself in apply_gradients.
        scaled = isinstance(optimizer, tf.keras.optimizers.LossScaleOptimizer)

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
                if scaled:  # float16: small gradients would underflow unscaled
                    scaled_loss = optimizer.scale_loss(loss)
            if scaled:
                return loss, tape.gradient(scaled_loss, model.trainable_variables)
            return loss, tape.gradient(loss, model.trainable_variables)

        # XLA compiles the arithmetic only: apply_gradients does the cross-replica sum
        # (a merge_call), which cannot live inside a compiled cluster.
        if jit_compile:
            loss_and_gradients = tf.function(loss_and_gradients, jit_compile=True)

        def train_step(inputs: Any) -> tf.Tensor:
            loss, gradients = loss_and_gradients(inputs)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
            return loss

        super().__init__(
            strategy,
            train_step,
            per_replica_losses=per_replica_losses,
            to_replicas=to_replicas,
            single_loss=True,
            time_input=time_input,
        )
