"""What every data source's TensorFlow part gives the pipeline (:class:`TFDataSource`), and
the examples it gives (:class:`Examples`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import tensorflow as tf

from ...config import DataConfig, Project, split_counts
from ...data_sources import DataError
from ...data_sources.split import held_out

D = TypeVar("D", bound=DataConfig)
Decode = Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]
BatchMap = Callable[..., tuple[tf.Tensor, tf.Tensor]]
Augment = Callable[[tf.Tensor, Any], tuple[tf.Tensor, tf.Tensor]]


@dataclass(frozen=True)
class Examples:
    """One pass of examples; file sources give file names that ``decode`` makes examples of."""

    dataset: tf.data.Dataset
    count: int
    decode: Decode | None = None
    classes: tuple[str, ...] | None = None
    warnings: list[str] = field(default_factory=list)
    batch_map: BatchMap | None = None
    """What makes each batch what the step takes: memory-mapped arrays' elements are
    example numbers, read a batch at a time; image folders' uint8 pixels are scaled a
    batch at a time."""
    file_names: bool = False
    """Its elements are file names listed class by class (image and text folders): the
    pipeline shuffles the whole list, not a buffer of it, since a buffer smaller than a
    class gave batches of that class alone, and names cost a few bytes each."""

    def batched(self, size: int) -> tf.data.Dataset:
        """One pass in batches of ``size`` (the last may be short), read as they are needed."""
        dataset = self.decoded().batch(size)
        if self.batch_map is None:
            return dataset
        return dataset.map(self.batch_map, num_parallel_calls=tf.data.AUTOTUNE)

    def part(self, keep: np.ndarray) -> Examples:
        """The examples whose ``keep`` is true, streamed (for an evaluation split)."""
        mask = tf.constant(keep)
        dataset = (
            self.dataset.enumerate()
            .filter(lambda number, _: tf.gather(mask, number))
            .map(lambda _, element: element)
        )
        return replace(self, dataset=dataset, count=int(keep.sum()))

    def decoded(self) -> tf.data.Dataset:
        if self.decode is None:
            return self.dataset
        return self.dataset.map(self.decode, num_parallel_calls=tf.data.AUTOTUNE)


class TFDataSource(ABC, Generic[D]):
    """The TensorFlow part of one data source: ``SOURCE`` in
    ``engine/tf/data_sources/<source>.py``. The defaults fit a source that needs nothing
    but its examples."""

    takes_text = False
    """A model trained on it predicts texts (:meth:`text_example`)."""
    takes_images = False
    """A model trained on it predicts image files (:meth:`image_example`)."""

    @abstractmethod
    def examples(self, data: D, project: Project, where: str) -> Examples:
        """All of ``data``'s examples (``where``: ``data``, or ``evaluation.source``, the
        field its messages name)."""

    def split_examples(self, data: D, project: Project) -> tuple[Examples, Examples]:
        """(training, held-out) examples of the training data under an evaluation split:
        the examples :func:`held_out_of` chooses, streamed; training keeps its order."""
        whole = self.examples(data, project, "data")
        held = held_out_of(whole.count, project)
        return whole.part(~held), whole.part(held)

    def augment(self, data: D, seed: int) -> Augment | None:
        """The map function that augments global batch number ``step`` in training, if any."""
        return None

    def write_prediction_files(self, data: D, project: Project, run_dir: Path) -> None:
        """What prediction needs besides the model and the class names to read inputs as
        training did (a text folder's vocabulary)."""

    def text_example(
        self, data: D, project: Project, text: str, vocabulary: Sequence[str] | None
    ) -> np.ndarray:
        """One text as the model trained on ``data`` takes it (for prediction)."""
        raise DataError(f"data: the project trains on {data.source} data, not a text folder")

    def image_example(self, data: D, project: Project, image: str | Path | bytes) -> np.ndarray:
        """One image file (or its bytes) as the model trained on ``data`` takes it."""
        raise DataError(f"data: the project trains on {data.source} data, not an image folder")

    def changed_file_error(
        self, data: D, where: str, project: Project, error: tf.errors.OpError
    ) -> DataError | None:
        """The file of ``data`` that explains a run's failure mid-run (removed or replaced
        since the check before the run), as one line; None when none does."""
        return None


def held_out_of(examples: int, project: Project) -> np.ndarray:
    """Which of ``examples`` an evaluation split holds out: a seeded random choice."""
    assert project.evaluation is not None and project.evaluation.split is not None
    train_count, held_count = split_counts(examples, project.evaluation.split)
    if train_count < 1:
        raise DataError(
            f"evaluation.split: holding out {held_count} of {examples} example(s) leaves none "
            "to train on"
        )
    return held_out(examples, project.evaluation.split, project.training.seed)


def labels_dtype(project: Project) -> tf.DType:
    """How labels are typed for the loss: class numbers for sparse crossentropy."""
    return tf.int32 if project.loss.kind == "sparse_categorical_crossentropy" else tf.float32
