"""Text folders as tf.data pipelines: one ``.txt`` file per example, turned into word numbers.

The vocabulary is learned (``TextVectorization.adapt``) from the training examples only,
never from held-out ones, so an evaluation split measures words the model has not been
told about. Files are read as batches form, like images; before the run, every file is
read once to check that it is UTF-8 text, and the adapt pass reads the training texts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import numpy as np
import tensorflow as tf

from ... import phases
from ...config import Project, TextFolderData
from ...data_sources import DataError
from ...data_sources.folders import TEXT_EXTENSIONS, FolderError, folder_problems, scan_folder
from ...run_folder import write_vocabulary
from .base import BatchMap, Decode
from .class_folders import ClassFolderSource, FolderFiles, label_encoder, training_files

ADAPT_BATCH = 256


class TextFolderTFSource(ClassFolderSource[TextFolderData]):
    takes_text = True

    def files(self, data: TextFolderData, where: str) -> FolderFiles:
        return text_files(data, where)

    def decoder(
        self,
        data: TextFolderData,
        project: Project,
        files: FolderFiles,
        training: FolderFiles | None,
        where: str,
    ) -> tuple[Decode, BatchMap | None]:
        """Text is read with the vocabulary of ``training`` (the training data's training
        split when not given)."""
        trained_on = project.data
        if trained_on.source != data.source:
            raise DataError(f"{where}: text data is evaluated only when data is a text_folder too")
        if training is None:
            training = training_files(project, lambda: text_files(trained_on, "data"))
        return text_decoder(trained_on, project, training.paths), None

    def write_prediction_files(self, data: TextFolderData, project: Project, run_dir: Path) -> None:
        write_vocabulary(run_dir, text_vocabulary(project))

    def text_example(
        self,
        data: TextFolderData,
        project: Project,
        text: str,
        vocabulary: Sequence[str] | None,
    ) -> np.ndarray:
        """One text as training turned it into word numbers (float32 ``[sequence_length]``):
        for prediction on a text_folder model, with the ``vocabulary`` the run saved. A run
        saved before runs kept theirs (None) learns it again from the training split, which
        gives the same words only while the folder is unchanged."""
        if vocabulary is None:
            vocabulary = text_vocabulary(project)
        vectorize = saved_vectorizer(data, vocabulary)
        return tf.cast(vectorize(tf.constant([text]))[0], tf.float32).numpy()


SOURCE = TextFolderTFSource()


def text_vocabulary(project: Project) -> list[str]:
    """The words the run's training split numbers, in number order (``vocabulary.json``)."""
    data = cast(TextFolderData, project.data)
    files = training_files(project, lambda: text_files(data, "data"))
    return text_vectorizer(data, files.paths).get_vocabulary()


def text_files(data: TextFolderData, where: str = "data") -> FolderFiles:
    """The folder's text files in label order."""
    field = f"{where}.path"
    phases.begin(f"listing {where}.path's texts")
    try:
        scan = scan_folder(
            data.path, TEXT_EXTENSIONS, progress=lambda _, found: phases.progress(found)
        )
    except FolderError as exc:
        raise DataError(f"{field}: {exc}") from None
    problems = folder_problems(scan.summary(), field, "text files")
    if problems:
        raise DataError(problems[0])
    phases.begin(f"checking {len(scan.files):,} texts", total=len(scan.files))
    for index, (path, _) in enumerate(scan.files):  # TextVectorization would fail on it
        phases.progress(index)
        try:
            path.read_bytes().decode("utf-8")
        except OSError as exc:
            raise DataError(f"{field}: cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise DataError(
                f"{field}: {path} is not UTF-8 text (byte {exc.start} is "
                f"{exc.object[exc.start]:#04x}); save it as UTF-8"
            ) from None
    return FolderFiles.of(scan, [])


def text_vectorizer(data: TextFolderData, training_paths: tuple[str, ...]) -> tf.keras.layers.Layer:
    """A TextVectorization layer adapted on the training files (lowercased, punctuation
    stripped, split on whitespace; 0 pads, 1 is an unknown word)."""
    return _adapted(training_paths, data.vocabulary_size, data.sequence_length)


@functools.lru_cache(maxsize=4)
def _adapted(
    paths: tuple[str, ...], vocabulary_size: int, sequence_length: int
) -> tf.keras.layers.Layer:
    """Adapted once per run: the training and the evaluation pipelines share it."""
    return adapt_vectorizer(paths, vocabulary_size, sequence_length)


def adapt_vectorizer(
    paths: tuple[str, ...], vocabulary_size: int, sequence_length: int
) -> tf.keras.layers.Layer:
    """A TextVectorization layer whose vocabulary is the most frequent words of the files."""
    layer = tf.keras.layers.TextVectorization(
        max_tokens=vocabulary_size, output_sequence_length=sequence_length
    )
    texts = tf.data.Dataset.from_tensor_slices(list(paths)).map(tf.io.read_file)
    layer.adapt(texts.batch(ADAPT_BATCH))
    return layer


def saved_vectorizer(data: TextFolderData, vocabulary: Sequence[str]) -> tf.keras.layers.Layer:
    """A TextVectorization layer numbering words as a finished run did (its
    ``vocabulary.json``, pad and unknown first, as ``get_vocabulary`` lists them)."""
    return tf.keras.layers.TextVectorization(
        max_tokens=data.vocabulary_size,
        output_sequence_length=data.sequence_length,
        vocabulary=list(vocabulary),
    )


def text_decoder(
    data: TextFolderData, project: Project, training_paths: tuple[str, ...]
) -> Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    """The map function from (file name, label) to (word numbers as float32, label)."""
    vectorize = text_vectorizer(data, training_paths)
    encode = label_encoder(project)

    def decode(path: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return read_words(vectorize, path, data.sequence_length), encode(label)

    return decode


def read_words(
    vectorize: tf.keras.layers.Layer, path: tf.Tensor, sequence_length: int
) -> tf.Tensor:
    """One text file as its ``sequence_length`` word numbers, float32 like every other
    source's features: exact below 2**24, and an Embedding layer casts them back to whole
    numbers."""
    words = tf.cast(vectorize(tf.io.read_file(path)), tf.float32)
    words.set_shape((sequence_length,))
    return words
