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

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tensorflow as tf

from ..config import DataConfig, Project
from ..data_sources import DataError
from ..data_sources.checks import project_folder_problems
from ..data_sources.label_order import label_order_notes
from ..run_folder import write_classes
from .data_sources import tf_source_of
from .data_sources.base import Augment, Examples


@dataclass(frozen=True)
class TrainingData:
    dataset: tf.data.Dataset
    examples: int
    total_steps: int
    classes: tuple[str, ...] | None = None
    """The class names, in label order, of data whose classes have names (image and text
    folders)."""
    warnings: list[str] = field(default_factory=list)
    """What the run should say about its data (unreadable files it skipped)."""


def _examples(project: Project) -> Examples:
    """The training examples: the data's, less what an evaluation split holds out."""
    evaluation, data = project.evaluation, project.data
    source = tf_source_of(data)
    if evaluation is None or evaluation.split is None:
        return source.examples(data, project, "data")
    return source.split_examples(data, project)[0]


def write_prediction_files(run_dir: Path, project: Project, data: TrainingData) -> None:
    """What prediction reads to take inputs and name outputs as training did: the class
    names (``classes.json``) and what the source needs (a text folder's vocabulary)."""
    if data.classes is not None:
        write_classes(run_dir, data.classes)
    tf_source_of(project.data).write_prediction_files(project.data, project, run_dir)


def load_text_for_model(
    text: str, project: Project, vocabulary: Sequence[str] | None
) -> np.ndarray:
    """One text as training turned it into word numbers: for prediction on a model trained
    on text, with the ``vocabulary`` the run saved (None: a run saved before runs kept it)."""
    return tf_source_of(project.data).text_example(project.data, project, text, vocabulary)


def load_image_for_model(image: str | Path | bytes, project: Project) -> np.ndarray:
    """One image file (or its bytes) preprocessed exactly as the project's training data
    is, without augmentation: float32 ``model.input_shape``, no batch axis. Raises
    DataError naming the file when it is no readable image."""
    return tf_source_of(project.data).image_example(project.data, project, image)


def changed_file_error(project: Project, error: tf.errors.OpError) -> DataError | None:
    """The data file a run failed on mid-run (removed, or replaced since the check before the
    run), as one line naming it; None when no file explains ``error``."""
    for where, data in project.data_sources():
        found = tf_source_of(data).changed_file_error(data, where, project, error)
        if found is not None:
            return found
    return None


def build_training_data(project: Project, skip_steps: int = 0) -> TrainingData:
    """All the run's batches in order, less the first ``skip_steps`` (already trained).

    File sources shuffle file names and decode after the shuffle, so the shuffle holds
    names, not images: all of them, every epoch, seeded by the run's seed (a folder lists
    its files class by class, and a buffer smaller than a class gave batches of that
    class alone). With ``cache`` they shuffle the names once, decode, and the shuffle
    buffer then mixes the cached examples every epoch.
    """
    data, training = project.data, project.training
    problems = project_folder_problems(project)
    if problems:  # a project file run without the CLI's or the window's check
        raise DataError(str(problems[0]))
    examples = _examples(project)
    per_epoch = _steps_per_epoch(examples.count, data)
    cache, notes = _useful_cache(project, per_epoch)
    dataset = examples.dataset
    whole = examples.file_names and data.shuffle_buffer > 0
    if whole:
        dataset = dataset.shuffle(
            examples.count, seed=training.seed, reshuffle_each_iteration=not data.cache
        )
    if data.cache and examples.decode is not None:
        dataset = dataset.map(examples.decode, num_parallel_calls=tf.data.AUTOTUNE)
    if data.shuffle_buffer and (data.cache or not whole):
        # Cached before shuffling: a cache after it would replay the first epoch's order.
        dataset = dataset.cache() if cache else dataset
        dataset = dataset.shuffle(
            data.shuffle_buffer, seed=training.seed, reshuffle_each_iteration=True
        )
    if examples.decode is not None and not data.cache:
        dataset = dataset.map(examples.decode, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.batch(data.global_batch_size, drop_remainder=data.drop_remainder)
    if examples.batch_map is not None:
        dataset = dataset.map(examples.batch_map, num_parallel_calls=tf.data.AUTOTUNE)
    if cache and not data.shuffle_buffer:
        dataset = dataset.cache()
    augment = tf_source_of(data).augment(data, training.seed)
    trained = _training_pipeline(dataset, examples.count, per_epoch, project, skip_steps, augment)
    return TrainingData(
        trained.dataset,
        trained.examples,
        trained.total_steps,
        examples.classes,
        examples.warnings + notes + label_order_notes(project),
    )


def _steps_per_epoch(examples: int, data: DataConfig) -> int:
    """Batches in one pass over ``examples``: a short last one counts unless dropped."""
    full, rest = divmod(examples, data.global_batch_size)
    return full if data.drop_remainder or not rest else full + 1


def _useful_cache(project: Project, per_epoch: int) -> tuple[bool, list[str]]:
    """Whether the run reads its cache again, and what to say when ``data.cache`` is set on
    a run of one epoch or less: no example is read twice, so caching would only fill
    memory, and TensorFlow would warn that its iterator "did not fully read the dataset
    being cached" in words that tell the user nothing. (The order of the examples stays
    the one ``cache`` gives, so a longer run of the same project sees the same batches.)"""
    data, training = project.data, project.training
    steps = training.steps if training.steps is not None else per_epoch * (training.epochs or 1)
    if not data.cache or per_epoch <= 0 or steps > per_epoch:
        return data.cache, []
    return False, [
        f"data.cache is on, but this run trains {steps} step(s), no more than one epoch "
        f"({per_epoch} steps): no example is read twice, so nothing is cached (the cache "
        "serves the second epoch on)"
    ]


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
    cache, notes = _useful_cache(project, per_epoch)
    if cache:
        batches = batches.cache()
    trained = _training_pipeline(batches, examples, per_epoch, project, skip_steps)
    return TrainingData(trained.dataset, trained.examples, trained.total_steps, None, notes)


def _training_pipeline(
    dataset: tf.data.Dataset,
    examples: int,
    per_epoch: int,
    project: Project,
    skip_steps: int,
    augment: Augment | None = None,
) -> TrainingData:
    """Repeats the batches for the run's length, skips trained ones, and fixes the options.

    ``augment`` gets each global batch with its number, counted from the run's first
    step before skipping, so a resumed run augments its steps as the first run would.
    """
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
    if augment is not None:
        dataset = dataset.enumerate().map(augment, num_parallel_calls=tf.data.AUTOTUNE)
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
    source: DataConfig
    if evaluation.source is not None:
        source = evaluation.source
        held = tf_source_of(source).examples(source, project, "evaluation.source")
    else:
        source = project.data
        held = tf_source_of(source).split_examples(source, project)[1]
    dataset, examples = held.batched(source.global_batch_size), held.count
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
