"""Text folders as tf.data pipelines: one ``.txt`` file per example, turned into word numbers.

The vocabulary is learned (``TextVectorization.adapt``) from the training examples only,
never from held-out ones, so an evaluation split measures words the model has not been
told about. Files are read as batches form, like images; before the run, every file is
read once to check that it is UTF-8 text, and the adapt pass reads the training texts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import tensorflow as tf

from ..config import Project, TextFolderData
from ..datasets import TEXT_EXTENSIONS, FolderError, folder_problems, scan_folder
from ..synthetic import DataError
from .image_data import FolderFiles, label_encoder

ADAPT_BATCH = 256


def text_files(data: TextFolderData, where: str = "data") -> FolderFiles:
    """The folder's text files in label order."""
    field = f"{where}.path"
    try:
        scan = scan_folder(data.path, TEXT_EXTENSIONS)
    except FolderError as exc:
        raise DataError(f"{field}: {exc}") from None
    problems = folder_problems(scan.summary(), field, "text files")
    if problems:
        raise DataError(problems[0])
    for path, _ in scan.files:  # TextVectorization would fail on it with a Python traceback
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
