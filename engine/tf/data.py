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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from ..config import (
    ConstantData,
    CsvData,
    DataConfig,
    ImageFolderData,
    NumpyData,
    Project,
    SyntheticClassification,
    SyntheticRegression,
    TextFolderData,
    TFRecordData,
    split_counts,
)
from ..datasets import project_folder_problems
from ..run_folder import write_classes, write_vocabulary
from ..synthetic import (
    DataError,
    classification_arrays,
    csv_arrays,
    held_out,
    numpy_arrays,
    regression_arrays,
)
from .image_data import FolderFiles, augment_batch, image_decoder, image_files
from .stream_data import csv_examples, npz_batches
from .text_data import saved_vectorizer, text_decoder, text_files, text_vectorizer
from .tfrecord_data import tfrecord_examples

Arrays = tuple[np.ndarray, np.ndarray]
Decode = Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]


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


@dataclass(frozen=True)
class _Examples:
    """One pass of examples; file sources give file names that ``decode`` makes examples of."""

    dataset: tf.data.Dataset
    count: int
    decode: Decode | None = None
    classes: tuple[str, ...] | None = None
    warnings: list[str] = field(default_factory=list)
    batch_map: Callable[..., tuple[tf.Tensor, tf.Tensor]] | None = None
    """What makes each batch what the step takes: memory-mapped arrays' elements are
    example numbers, read a batch at a time; image folders' uint8 pixels are scaled a
    batch at a time."""

    def batched(self, size: int) -> tf.data.Dataset:
        """One pass in batches of ``size`` (the last may be short), read as they are needed."""
        dataset = self.decoded().batch(size)
        if self.batch_map is None:
            return dataset
        return dataset.map(self.batch_map, num_parallel_calls=tf.data.AUTOTUNE)

    def part(self, keep: np.ndarray) -> _Examples:
        """The examples whose ``keep`` is true, streamed (for an evaluation split)."""
        mask = tf.constant(keep)
        dataset = (
            self.dataset.enumerate()
            .filter(lambda number, _: tf.gather(mask, number))
            .map(lambda _, element: element)
        )
        count = int(keep.sum())
        return _Examples(dataset, count, self.decode, self.classes, self.warnings, self.batch_map)

    def decoded(self) -> tf.data.Dataset:
        if self.decode is None:
            return self.dataset
        return self.dataset.map(self.decode, num_parallel_calls=tf.data.AUTOTUNE)


def _folder_files(data: ImageFolderData | TextFolderData, where: str) -> FolderFiles:
    if isinstance(data, ImageFolderData):
        return image_files(data, where)
    return text_files(data, where)


def _folder_split(project: Project) -> tuple[FolderFiles, FolderFiles | None]:
    """(training, held-out or None) files of a folder, split by seed as arrays are."""
    data = project.data
    assert isinstance(data, ImageFolderData | TextFolderData)
    files = _folder_files(data, "data")
    if project.evaluation is None or project.evaluation.split is None:
        return files, None
    held = _held_out(len(files.paths), project)
    return files.subset(~held), files.subset(held)


def _folder_examples(
    files: FolderFiles,
    data: ImageFolderData | TextFolderData,
    project: Project,
    where: str,
    training_files: FolderFiles | None = None,
) -> _Examples:
    """File names and labels; the decoder reads them. Text is read with the vocabulary of
    ``training_files`` (the training data's files when not given)."""
    decode: Decode
    batch_map: Callable[..., tuple[tf.Tensor, tf.Tensor]] | None = None
    if isinstance(data, ImageFolderData):
        decode, batch_map = image_decoder(data, project, files)
    else:
        training = project.data
        if not isinstance(training, TextFolderData):
            raise DataError(f"{where}: text data is evaluated only when data is a text_folder too")
        if training_files is None:
            training_files = _folder_split(project)[0]
        decode = text_decoder(training, project, training_files.paths)
    warning = files.skip_warning(f"{where}.path")
    return _Examples(
        tf.data.Dataset.from_tensor_slices((list(files.paths), files.labels)),
        len(files.paths),
        decode,
        files.classes,
        [warning] if warning else [],
        batch_map,
    )


def _streamed(data: DataConfig, project: Project, where: str) -> _Examples | None:
    """TFRecord files, or a CSV or .npz file with ``stream``: read as batches form; else None."""
    if isinstance(data, CsvData) and data.stream:
        return _Examples(*csv_examples(data, project, where))
    if isinstance(data, TFRecordData):
        return _Examples(*tfrecord_examples(data, project, where))
    if isinstance(data, NumpyData) and data.stream:
        numbers, count, read_batch = npz_batches(data, project, where)
        return _Examples(numbers, count, batch_map=read_batch)
    return None


def _source_examples(data: DataConfig, project: Project, where: str) -> _Examples:
    """The examples of ``data`` (``where``: the training data or an evaluation source)."""
    if isinstance(data, ImageFolderData | TextFolderData):
        return _folder_examples(_folder_files(data, where), data, project, where)
    streamed = _streamed(data, project, where)
    if streamed is not None:
        return streamed
    return _Examples(*_dataset_of(data, project, where))


def _dataset_of(data: DataConfig, project: Project, where: str) -> tuple[tf.data.Dataset, int]:
    """The in-memory examples of ``data``."""
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
    x, y = _arrays(project.data, project)
    held = _held_out(len(x), project)
    return (x[~held], y[~held]), (x[held], y[held])


def _held_out(examples: int, project: Project) -> np.ndarray:
    """Which of ``examples`` an evaluation split holds out: a seeded random choice."""
    assert project.evaluation is not None and project.evaluation.split is not None
    train_count, held_count = split_counts(examples, project.evaluation.split)
    if train_count < 1:
        raise DataError(
            f"evaluation.split: holding out {held_count} of {examples} example(s) leaves none "
            "to train on"
        )
    return held_out(examples, project.evaluation.split, project.training.seed)


def _examples(project: Project) -> _Examples:
    """The training examples: the data's, less what an evaluation split holds out."""
    evaluation, data = project.evaluation, project.data
    if isinstance(data, ImageFolderData | TextFolderData):
        files = _folder_split(project)[0]
        return _folder_examples(files, data, project, "data", training_files=files)
    if evaluation is None or evaluation.split is None:
        return _source_examples(data, project, "data")
    streamed = _streamed(data, project, "data")
    if streamed is not None:
        return streamed.part(~_held_out(streamed.count, project))
    (x, y), _ = _split(project)
    return _Examples(tf.data.Dataset.from_tensor_slices((x, y)), len(x))


def text_vocabulary(project: Project) -> list[str]:
    """The words the run's training split numbers, in number order (``vocabulary.json``)."""
    data = project.data
    assert isinstance(data, TextFolderData)
    return text_vectorizer(data, _folder_split(project)[0].paths).get_vocabulary()


def write_prediction_files(run_dir: Path, project: Project, data: TrainingData) -> None:
    """What prediction reads to take inputs and name outputs as training did: the class
    names (``classes.json``) and a text folder's vocabulary (``vocabulary.json``)."""
    if data.classes is not None:
        write_classes(run_dir, data.classes)
    if isinstance(project.data, TextFolderData):
        write_vocabulary(run_dir, text_vocabulary(project))


def load_text_for_model(
    text: str, project: Project, vocabulary: Sequence[str] | None
) -> np.ndarray:
    """One text as training turned it into word numbers (float32 ``[sequence_length]``): for
    prediction on a text_folder model, with the ``vocabulary`` the run saved. A run saved
    before runs kept theirs (None) learns it again from the training split, which gives the
    same words only while the folder is unchanged."""
    data = project.data
    if not isinstance(data, TextFolderData):
        raise DataError(f"data: the project trains on {data.source} data, not a text folder")
    if vocabulary is None:
        vocabulary = text_vocabulary(project)
    vectorize = saved_vectorizer(data, vocabulary)
    return tf.cast(vectorize(tf.constant([text]))[0], tf.float32).numpy()


def build_training_data(project: Project, skip_steps: int = 0) -> TrainingData:
    """All the run's batches in order, less the first ``skip_steps`` (already trained).

    File sources shuffle file names and decode after the shuffle, so the shuffle buffer
    holds names, not images; with ``cache`` they decode first (the cache holds examples).
    """
    data, training = project.data, project.training
    problems = project_folder_problems(project)
    if problems:  # a project file run without the CLI's or the window's check
        raise DataError(str(problems[0]))
    examples = _examples(project)
    dataset = examples.decoded() if data.cache else examples.dataset
    if data.shuffle_buffer:
        # Cached before shuffling: a cache after it would replay the first epoch's order.
        dataset = dataset.cache() if data.cache else dataset
        dataset = dataset.shuffle(
            data.shuffle_buffer, seed=training.seed, reshuffle_each_iteration=True
        )
    if examples.decode is not None and not data.cache:
        dataset = dataset.map(examples.decode, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.batch(data.global_batch_size, drop_remainder=data.drop_remainder)
    if examples.batch_map is not None:
        dataset = dataset.map(examples.batch_map, num_parallel_calls=tf.data.AUTOTUNE)
    if data.cache and not data.shuffle_buffer:
        dataset = dataset.cache()
    full, rest = divmod(examples.count, data.global_batch_size)
    per_epoch = full if data.drop_remainder or not rest else full + 1
    augment = None
    if isinstance(data, ImageFolderData) and data.augments:
        augment = augment_batch(data, training.seed)
    trained = _training_pipeline(dataset, examples.count, per_epoch, project, skip_steps, augment)
    return TrainingData(
        trained.dataset, trained.examples, trained.total_steps, examples.classes, examples.warnings
    )


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
    dataset: tf.data.Dataset,
    examples: int,
    per_epoch: int,
    project: Project,
    skip_steps: int,
    augment: Callable[[tf.Tensor, Any], tuple[tf.Tensor, tf.Tensor]] | None = None,
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
    data = project.data
    held: _Examples
    if evaluation.source is not None:
        held = _source_examples(evaluation.source, project, "evaluation.source")
        source = evaluation.source
    elif isinstance(data, ImageFolderData | TextFolderData):
        training_files, held_files = _folder_split(project)
        assert held_files is not None
        held = _folder_examples(held_files, data, project, "data", training_files)
        source = data
    elif (streamed := _streamed(data, project, "data")) is not None:
        held = streamed.part(_held_out(streamed.count, project))
        source = data
    else:
        _, (x, y) = _split(project)
        held = _Examples(tf.data.Dataset.from_tensor_slices((x, y)), len(x))
        source = data
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
