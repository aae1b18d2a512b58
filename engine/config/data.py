"""The ``data`` section (and an evaluation source, which has the same shape): one model per
source, chosen by ``source``, and the batching, shuffling and caching they share.

The ``DataConfig`` union is the registry of data sources: a model's ``source`` names the
modules of its two parts, ``engine/data_sources/<source>.py`` (TensorFlow-free) and
``engine/tf/data_sources/<source>.py``, so a new source is its model here, in the union,
and those two modules (``docs/ARCHITECTURE.md``, "Data sources")."""

from __future__ import annotations

import math
from typing import Annotated, Literal, get_args

from pydantic import Field

from ._strict import MAX_SEED, MAX_STEPS, _Strict
from .model import MAX_DIMENSION


class _DataBase(_Strict):
    global_batch_size: int = Field(
        10,
        ge=1,
        le=10_000_000,
        description="Examples per step across all replicas; compute_average_loss divides by it.",
    )
    shuffle_buffer: int = Field(0, ge=0, le=MAX_STEPS, description="0 keeps the data in order.")
    drop_remainder: bool = Field(
        False, description="Drop a short last batch instead of training on it."
    )
    cache: bool = Field(
        False,
        description="Keep the data in memory after its first pass, so later passes skip "
        "loading and batching (the unshuffled batches, or the examples before shuffling).",
    )
    prefetch: int | None = Field(
        None,
        ge=0,
        le=10_000,
        description="Batches prepared ahead of the step; left out, tf.data tunes it "
        "(AUTOTUNE); 0 prepares none.",
    )

    def example_count(self) -> int | None:
        """Examples in one pass, when known without reading files."""
        return None


class ConstantData(_DataBase):
    """The guide's data: ``from_tensors((features, labels)).repeat(examples)``."""

    source: Literal["constant"] = "constant"
    features: list[float] = Field(min_length=1)
    labels: list[float] = Field(min_length=1)
    examples: int = Field(
        1000,
        ge=1,
        le=MAX_STEPS,
        description="How often the one example repeats; tf.data counts it in 64 bits, "
        "progress in 32.",
    )

    def example_count(self) -> int:
        return self.examples


class SyntheticClassification(_DataBase):
    """Seeded random inputs labelled by a random linear teacher: every example differs."""

    source: Literal["synthetic_classification"] = "synthetic_classification"
    examples: int = Field(1000, ge=1, le=50_000_000)
    num_classes: int = Field(2, ge=2, le=10_000)
    noise: float = Field(0.0, ge=0, description="Standard deviation added to the inputs.")
    seed: int = Field(0, ge=0, le=MAX_SEED)

    def example_count(self) -> int:
        return self.examples


class SyntheticRegression(_DataBase):
    """Seeded random inputs with targets from a random linear map plus noise."""

    source: Literal["synthetic_regression"] = "synthetic_regression"
    examples: int = Field(1000, ge=1, le=50_000_000)
    noise: float = Field(0.1, ge=0)
    seed: int = Field(0, ge=0, le=MAX_SEED)

    def example_count(self) -> int:
        return self.examples


class NumpyData(_DataBase):
    """An ``.npz`` file; loaded with ``Dataset.from_tensor_slices`` (the guide's numpy path)."""

    source: Literal["numpy"] = "numpy"
    path: str = Field(min_length=1)
    features_key: str = "x"
    labels_key: str = "y"
    stream: bool = Field(
        False,
        description="Memory-map the arrays and read each batch from the file, never the "
        "whole file into memory (an .npz written by numpy.savez, not savez_compressed).",
    )


class CsvData(_DataBase):
    """A CSV file with a header row; one column holds the label, the others are features."""

    source: Literal["csv"] = "csv"
    path: str = Field(min_length=1)
    label_column: str = Field(min_length=1)
    stream: bool = Field(
        False,
        description="Read blocks of lines as batches form (tf.io.decode_csv), never the whole "
        "file into memory; every cell is checked before the run. Lines must end in LF or CR LF.",
    )


class ImageFolderData(_DataBase):
    """A folder with one subfolder of images per class (``image_dataset_from_directory``'s
    layout), streamed from disk: each image is decoded, resized to the model's input
    ``[height, width, channels]`` and scaled to [0, 1] as its batch is prepared."""

    source: Literal["image_folder"] = "image_folder"
    path: str = Field(
        min_length=1, description="A folder holding one subfolder of images per class."
    )
    color_mode: Literal["auto", "grayscale", "rgb"] = Field(
        "auto",
        description="auto follows the model's input channels (1: grayscale, 3: rgb).",
    )
    on_bad_file: Literal["fail", "skip"] = Field(
        "fail",
        description="An unreadable image fails the run (naming it) or is skipped and counted.",
    )
    flip: bool = Field(False, description="Training only: mirror images left-right at random.")
    rotation: float = Field(
        0.0,
        ge=0,
        le=45,
        description="Training only: rotate by up to this many degrees either way, at random.",
    )
    crop: float = Field(
        0.0,
        ge=0,
        lt=0.5,
        description="Training only: crop away up to this fraction of each side, at random, "
        "and resize back.",
    )

    @property
    def augments(self) -> bool:
        return self.flip or self.rotation > 0 or self.crop > 0


class TextFolderData(_DataBase):
    """A folder with one subfolder of ``.txt`` files per class (``text_dataset_from_directory``'s
    layout): each file is one example, turned into ``sequence_length`` word numbers by a
    TextVectorization layer whose vocabulary is learned from the training examples only."""

    source: Literal["text_folder"] = "text_folder"
    path: str = Field(
        min_length=1, description="A folder holding one subfolder of .txt files per class."
    )
    vocabulary_size: int = Field(
        10_000,
        ge=3,
        le=1_000_000,
        description="Word numbers 0..N-1: 0 pads, 1 is any word outside the N-2 most frequent "
        "words of the training texts.",
    )
    sequence_length: int = Field(
        64,
        ge=1,
        le=100_000,
        description="Words per example: longer texts are cut, shorter ones padded with 0; "
        "the model's input_shape is [sequence_length].",
    )


class FeatureSpec(_Strict):
    """One feature of the records: its name, value type and shape ([] for one value)."""

    name: str = Field(min_length=1, max_length=200)
    dtype: Literal["float32", "int64"] = "float32"
    shape: list[Annotated[int, Field(ge=1, le=MAX_DIMENSION)]] = Field(
        default_factory=list, max_length=4
    )

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class TFRecordData(_DataBase):
    """TFRecord files of ``tf.train.Example`` records, parsed by a feature spec: the label
    feature is the label, the others (flattened, in the spec's order) the model's input."""

    source: Literal["tfrecord"] = "tfrecord"
    path: str = Field(
        min_length=1,
        description="A .tfrecord file, or a pattern such as train-*.tfrecord (files in "
        "sorted order).",
    )
    features: list[FeatureSpec] = Field(min_length=2, max_length=1000)
    label: str = Field(min_length=1, description="The name of the feature that holds the label.")
    compression: Literal["none", "GZIP", "ZLIB"] = "none"


DataConfig = Annotated[
    ConstantData
    | SyntheticClassification
    | SyntheticRegression
    | NumpyData
    | CsvData
    | ImageFolderData
    | TextFolderData
    | TFRecordData,
    Field(discriminator="source"),
]
DATA_MODELS: dict[str, type[_DataBase]] = {
    model.model_fields["source"].default: model for model in get_args(get_args(DataConfig)[0])
}
"""Each source's settings model by the source's name, in the union's order: the name is
its ``source`` and the module of each of its parts (``engine/data_sources/<name>.py``,
``engine/tf/data_sources/<name>.py``)."""
DATA_SOURCES: tuple[str, ...] = tuple(DATA_MODELS)
