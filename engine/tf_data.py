"""Builds the project's ``tf.data`` pipeline, batched by the global batch size (imports TF).

The dataset yields *global* batches; ``strategy.experimental_distribute_dataset``
then splits each one across the replicas, as the guide does.
"""

from __future__ import annotations

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


def _examples(project: Project) -> tf.data.Dataset:
    data, model, loss = project.data, project.model, project.loss
    if isinstance(data, ConstantData):
        features = np.asarray(data.features, np.float32).reshape(model.input_shape)
        label_type = np.int32 if loss.kind == "sparse_categorical_crossentropy" else np.float32
        labels = np.asarray(data.labels, label_type)
        return tf.data.Dataset.from_tensors((features, labels)).repeat(data.examples)
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
    return tf.data.Dataset.from_tensor_slices(arrays)


def build_dataset(project: Project) -> tf.data.Dataset:
    """One pass over the data in global batches (``training.steps`` repeats it)."""
    data = project.data
    dataset = _examples(project)
    if data.shuffle_buffer:
        dataset = dataset.shuffle(
            data.shuffle_buffer, seed=project.training.seed, reshuffle_each_iteration=True
        )
    dataset = dataset.batch(data.global_batch_size, drop_remainder=data.drop_remainder)
    if project.training.steps is not None:
        dataset = dataset.repeat()
    return dataset.prefetch(tf.data.AUTOTUNE)
