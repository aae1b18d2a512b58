"""Evaluation on validation data every N steps, under the run's strategy (imports TF).

The eval step is distributed like the training step: ``strategy.run`` computes
each replica's *sums* (loss, correct predictions or absolute errors, and counts)
over its share of a global batch, ``strategy.reduce(SUM)`` adds them across
replicas, and the totals over the whole validation data are divided by the total
counts at the end. Sums rather than per-replica means make the result exact with
uneven splits and independent of the replica count.

Evaluation calls the model with ``training=False`` on a dataset of its own, so it
draws no random numbers (no dropout) and takes no batch from the training stream:
a run's loss trace is the same with evaluation on or off (for a separate source;
a split changes which examples train).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from ..config import LossConfig, Project
from .data import build_eval_data
from .input_pipeline import distribute_input


def metric_names(loss: LossConfig) -> list[str]:
    """``val_loss`` and the metric that fits the loss: accuracy or mean absolute error."""
    return ["val_loss", "val_accuracy" if loss.is_classification else "val_mae"]


def _metric_sums(loss: LossConfig) -> Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    """(sum, count) of the metric over one replica's batch, for the project's loss."""

    def binary_accuracy(labels: tf.Tensor, predictions: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        threshold = 0.0 if loss.from_logits else 0.5  # a logit of 0 is a probability of 0.5
        labels = tf.reshape(tf.cast(labels, predictions.dtype), tf.shape(predictions))
        correct = tf.equal(predictions > threshold, labels > 0.5)
        return tf.reduce_sum(tf.cast(correct, tf.float32)), tf.cast(tf.size(correct), tf.float32)

    def categorical_accuracy(labels: tf.Tensor, predictions: tf.Tensor) -> tuple[Any, Any]:
        correct = tf.equal(tf.argmax(predictions, -1), tf.argmax(labels, -1))
        return tf.reduce_sum(tf.cast(correct, tf.float32)), tf.cast(tf.size(correct), tf.float32)

    def sparse_accuracy(labels: tf.Tensor, predictions: tf.Tensor) -> tuple[Any, Any]:
        classes = tf.reshape(tf.cast(labels, tf.int64), [-1])
        correct = tf.equal(tf.argmax(predictions, -1), classes)
        return tf.reduce_sum(tf.cast(correct, tf.float32)), tf.cast(tf.size(correct), tf.float32)

    def absolute_error(labels: tf.Tensor, predictions: tf.Tensor) -> tuple[Any, Any]:
        labels = tf.reshape(tf.cast(labels, predictions.dtype), tf.shape(predictions))
        errors = tf.abs(predictions - labels)
        return tf.reduce_sum(errors), tf.cast(tf.size(errors), tf.float32)

    return {
        "binary_crossentropy": binary_accuracy,
        "categorical_crossentropy": categorical_accuracy,
        "sparse_categorical_crossentropy": sparse_accuracy,
    }.get(loss.kind, absolute_error)


class Evaluator:
    """Evaluates ``model`` on the validation data (the loop's ``Evaluation`` hook says when)."""

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        model: tf.keras.Model,
        loss_object: tf.keras.losses.Loss,
        project: Project,
    ) -> None:
        assert project.evaluation is not None
        self.every = project.evaluation.every
        self.names = metric_names(project.loss)
        dataset, self.examples = build_eval_data(project)
        replica_input = distribute_input(strategy, dataset, project.training.input_distribution)
        self._dataset = replica_input.dataset
        to_replicas = replica_input.to_replicas
        metric_sums = _metric_sums(project.loss)
        sum_op = tf.distribute.ReduceOp.SUM

        def replica_sums(inputs: Any) -> tuple[tf.Tensor, ...]:
            features, labels = inputs
            predictions = model(features, training=False)
            per_example_loss = loss_object(labels, predictions)
            metric_sum, metric_count = metric_sums(labels, predictions)
            return (
                tf.reduce_sum(per_example_loss),
                tf.cast(tf.size(per_example_loss), tf.float32),
                metric_sum,
                metric_count,
            )

        def eval_step(element: Any) -> tuple[tf.Tensor, ...]:
            per_replica = strategy.run(replica_sums, args=(to_replicas(element),))
            return tuple(strategy.reduce(sum_op, value, axis=None) for value in per_replica)

        # reduce_retracing: the short last batch retraces once, not at every evaluation.
        self._step = tf.function(eval_step, reduce_retracing=True)

    def evaluate(self) -> dict[str, float]:
        """One pass over the validation data; float64 totals of the per-batch sums."""
        totals = np.zeros(4, dtype=np.float64)
        for element in self._dataset:
            totals += np.asarray([float(value) for value in self._step(element)])
        loss_sum, examples, metric_sum, metric_count = totals
        return {
            self.names[0]: loss_sum / examples if examples else float("nan"),
            self.names[1]: metric_sum / metric_count if metric_count else float("nan"),
        }
