"""Builds the project's ``tf.data`` pipeline, batched by the global batch size (imports TF).

The dataset yields *global* batches; ``engine.tf.input_pipeline`` then splits each one
across the replicas (with ``strategy.experimental_distribute_dataset``, as the
guide does, or on the host). Every epoch is in
the one dataset (``repeat``), so the stream of batches is a single deterministic
sequence: a resumed run skips the batches it already trained on and sees exactly
what the uninterrupted run would have seen next. (TensorFlow cannot checkpoint a
distributed iterator: ``DistributedIterator`` is not trackable.)

Evaluation data (``project.evaluation``) is a pipeline of its own, one pass in
order, so evaluating never moves the training stream or its shuffling. An
evaluation ``split`` holds out a seeded random choice (``training.seed``) of the
data's examples; the rest train, in their original order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from ..config import (
    ConstantData,
    CsvData,
    DataConfig,
    NumpyData,
    Project,
    SyntheticClassification,
    SyntheticRegression,
    split_counts,
)
from ..synthetic import (
    DataError,
    classification_arrays,
    csv_arrays,
    numpy_arrays,
    regression_arrays,
)

Arrays = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class TrainingData:
    dataset: tf.data.Dataset
    examples: int
    total_steps: int


def _dataset_of(data: DataConfig, project: Project, where: str) -> tuple[tf.data.Dataset, int]:
    """The examples of ``data`` (``where``: the training data or an evaluation source)."""
    if isinstance(data, ConstantData):
        model, loss = project.model, project.loss
        features = np.asarray(data.features, np.float32).reshape(model.input_shape)
        label_type = np.int32 if loss.kind == "sparse_categorical_crossentropy" else np.float32
        labels = np.asarray(data.labels, label_type)
        return tf.data.Dataset.from_tensors((features, labels)).repeat(data.examples), data.examples
    arrays = _arrays(data, project, where)
    return tf.data.Dataset.from_tensor_slices(arrays), len(arrays[0])


def _arrays(data: DataConfig, project: Project, where: str = "data") -> Arrays:
    """``where`` names the data's field in messages (``data`` or ``evaluation.source``)."""
    model, loss = project.model, project.loss
    # Custom code may build models of its own: then the project's model says nothing
    # about how many classes there are.
    classes = model.output_units if project.custom_code is None else None
    if isinstance(data, SyntheticClassification):
        return classification_arrays(data, model, loss)
    if isinstance(data, SyntheticRegression):
        return regression_arrays(data, model)
    if isinstance(data, NumpyData):
        return numpy_arrays(data, model, loss, where, classes)
    if isinstance(data, CsvData):
        return csv_arrays(data, model, loss, where, classes)
    raise ValueError(f"no arrays for data source {data!r}")


def _split(project: Project) -> tuple[Arrays, Arrays]:
    """(training, held-out) arrays of an evaluation split; training keeps its order."""
    assert project.evaluation is not None and project.evaluation.split is not None
    x, y = _arrays(project.data, project)
    train_count, held_count = split_counts(len(x), project.evaluation.split)
    if train_count < 1:
        raise DataError(
            f"evaluation.split: holding out {held_count} of {len(x)} example(s) leaves none "
            "to train on"
        )
    held = np.zeros(len(x), dtype=bool)
    held[np.random.default_rng(project.training.seed).permutation(len(x))[:held_count]] = True
    return (x[~held], y[~held]), (x[held], y[held])


def _examples(project: Project) -> tuple[tf.data.Dataset, int]:
    """The training examples: the data's, less what an evaluation split holds out."""
    evaluation = project.evaluation
    if evaluation is None or evaluation.split is None:
        return _dataset_of(project.data, project, "data")
    (x, y), _ = _split(project)
    return tf.data.Dataset.from_tensor_slices((x, y)), len(x)


def build_training_data(project: Project, skip_steps: int = 0) -> TrainingData:
    """All the run's batches in order, less the first ``skip_steps`` (already trained)."""
    data, training = project.data, project.training
    dataset, examples = _examples(project)
    if data.shuffle_buffer:
        # Cached before shuffling: a cache after it would replay the first epoch's order.
        dataset = dataset.cache() if data.cache else dataset
        dataset = dataset.shuffle(
            data.shuffle_buffer, seed=training.seed, reshuffle_each_iteration=True
        )
    dataset = dataset.batch(data.global_batch_size, drop_remainder=data.drop_remainder)
    if data.cache and not data.shuffle_buffer:
        dataset = dataset.cache()
    full, rest = divmod(examples, data.global_batch_size)
    per_epoch = full if data.drop_remainder or not rest else full + 1
    return _training_pipeline(dataset, examples, per_epoch, project, skip_steps)


def custom_training_data(
    batches: tf.data.Dataset, project: Project, skip_steps: int = 0
) -> TrainingData:
    """Custom code's dataset of global batches, repeated and finished like the project's."""
    per_epoch = int(batches.cardinality())
    if project.training.epochs is not None and per_epoch < 0:
        raise DataError(
            "build_dataset returned a dataset of "
            f"{'infinite' if per_epoch == tf.data.INFINITE_CARDINALITY else 'unknown'} length; "
            "training.epochs needs a finite one of known length (or give training.steps)"
        )
    examples = max(per_epoch, 0) * project.data.global_batch_size
    if project.data.cache:
        batches = batches.cache()
    return _training_pipeline(batches, examples, per_epoch, project, skip_steps)


def _training_pipeline(
    dataset: tf.data.Dataset, examples: int, per_epoch: int, project: Project, skip_steps: int
) -> TrainingData:
    """Repeats the batches for the run's length, skips trained ones, and fixes the options."""
    data, training = project.data, project.training
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
    return TrainingData(_finished(dataset, data), examples, total)


def build_eval_data(project: Project) -> tuple[tf.data.Dataset, int]:
    """One pass over the evaluation data in global batches, and its example count.

    A separate source is batched by its own ``global_batch_size``; a split by the
    training data's. Short last batches are kept: every example is evaluated.
    """
    evaluation = project.evaluation
    assert evaluation is not None
    if evaluation.source is not None:
        dataset, examples = _dataset_of(evaluation.source, project, "evaluation.source")
        source = evaluation.source
    else:
        _, (x, y) = _split(project)
        dataset, examples = tf.data.Dataset.from_tensor_slices((x, y)), len(x)
        source = project.data
    dataset = dataset.batch(source.global_batch_size)
    if source.cache:  # every evaluation reads the same batches again
        dataset = dataset.cache()
    return _finished(dataset, source), examples


def _finished(dataset: tf.data.Dataset, data: DataConfig) -> tf.data.Dataset:
    """The pipeline's options, and the batches prepared ahead of the step."""
    dataset = dataset.with_options(_options())
    if data.prefetch == 0:
        return dataset
    return dataset.prefetch(tf.data.AUTOTUNE if data.prefetch is None else data.prefetch)


def _options() -> tf.data.Options:
    options = tf.data.Options()
    options.deterministic = True
    # A multi-worker strategy splits every global batch into per-replica batches and
    # gives each worker its replicas' share, element by element (DATA sharding): the
    # workers together train on exactly the batches of a single process. AUTO would
    # first try to shard by input file, giving each worker whole files.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return options
