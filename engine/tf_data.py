"""Builds the project's ``tf.data`` pipeline, batched by the global batch size (imports TF).

The dataset yields *global* batches; ``strategy.experimental_distribute_dataset``
then splits each one across the replicas, as the guide does. Every epoch is in
the one dataset (``repeat``), so the stream of batches is a single deterministic
sequence: a resumed run skips the batches it already trained on and sees exactly
what the uninterrupted run would have seen next. (TensorFlow cannot checkpoint a
distributed iterator: ``DistributedIterator`` is not trackable.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from engine.config import (
    ConstantData,
    CsvData,
    NumpyData,
    Project,
    SyntheticClassification,
    SyntheticRegression,
)
from engine.synthetic import classification_arrays, csv_arrays, numpy_arrays, regression_arrays


@dataclass(frozen=True)
class TrainingData:
    dataset: tf.data.Dataset
    examples: int
    total_steps: int


def _examples(project: Project) -> tuple[tf.data.Dataset, int]:
    data, model, loss = project.data, project.model, project.loss
    if isinstance(data, ConstantData):
        features = np.asarray(data.features, np.float32).reshape(model.input_shape)
        label_type = np.int32 if loss.kind == "sparse_categorical_crossentropy" else np.float32
        labels = np.asarray(data.labels, label_type)
        return tf.data.Dataset.from_tensors((features, labels)).repeat(data.examples), data.examples
    if isinstance(data, SyntheticClassification):
        arrays = classification_arrays(data, model, loss)
    elif isinstance(data, SyntheticRegression):
        arrays = regression_arrays(data, model)
    elif isinstance(data, NumpyData):
        arrays = numpy_arrays(data, model)
    elif isinstance(data, CsvData):
        arrays = csv_arrays(data, model)
    else:
        raise ValueError(f"unknown data source {data!r}")
    return tf.data.Dataset.from_tensor_slices(arrays), len(arrays[0])


def build_training_data(project: Project, skip_steps: int = 0) -> TrainingData:
    """All the run's batches in order, less the first ``skip_steps`` (already trained)."""
    data, training = project.data, project.training
    dataset, examples = _examples(project)
    if data.shuffle_buffer:
        dataset = dataset.shuffle(
            data.shuffle_buffer, seed=training.seed, reshuffle_each_iteration=True
        )
    dataset = dataset.batch(data.global_batch_size, drop_remainder=data.drop_remainder)
    full, rest = divmod(examples, data.global_batch_size)
    per_epoch = full if data.drop_remainder or not rest else full + 1
    if training.steps is not None:
        total = training.steps
        dataset = dataset.repeat()
    else:
        total = per_epoch * (training.epochs or 1)
        dataset = dataset.repeat(training.epochs or 1)
    if per_epoch == 0:
        raise ValueError(
            f"data: {examples} example(s) make no full batch of {data.global_batch_size} "
            "and drop_remainder is set: no step can run"
        )
    if skip_steps:
        dataset = dataset.skip(skip_steps)
    options = tf.data.Options()
    options.deterministic = True
    # A multi-worker strategy splits every global batch into per-replica batches and
    # gives each worker its replicas' share, element by element (DATA sharding): the
    # workers together train on exactly the batches of a single process. AUTO would
    # first try to shard by input file, giving each worker whole files.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = dataset.with_options(options).prefetch(tf.data.AUTOTUNE)
    return TrainingData(dataset, examples, total)
