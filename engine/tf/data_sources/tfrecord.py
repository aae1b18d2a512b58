"""TFRecord files parsed by the project's feature spec, read as batches form.

Every record is parsed once before the run starts (which also counts them), so a feature
a record lacks, or one of another type or length, is one line naming the spec entry and
the record, not a parse error inside the training step.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf
from google.protobuf.message import DecodeError

from ...config import Project, TFRecordData
from ...data_sources import DataError
from ...tfrecord_files import oversized_record_problem, unreadable_file
from .base import Examples, TFDataSource


class TFRecordTFSource(TFDataSource[TFRecordData]):
    def examples(self, data: TFRecordData, project: Project, where: str) -> Examples:
        return Examples(*tfrecord_examples(data, project, where))


SOURCE = TFRecordTFSource()

_KINDS = {"float32": "float_list", "int64": "int64_list"}


def tfrecord_examples(
    data: TFRecordData, project: Project, where: str = "data"
) -> tuple[tf.data.Dataset, int]:
    """(features, label) examples of the files, and how many there are (one counting pass)."""
    field = f"{where}.path"
    files = sorted(tf.io.gfile.glob(data.path))
    if not files:
        raise DataError(f"{field}: no file matches {data.path}")
    for file in files:  # TensorFlow allocates what a record declares: 2^60 bytes is SIGSEGV
        oversized = oversized_record_problem(file, data.compression, where)
        if oversized is not None:
            raise DataError(f"{field}: {oversized}")
    compression = "" if data.compression == "none" else data.compression
    records = tf.data.TFRecordDataset(files, compression_type=compression)
    parse = _parser(data, project)
    try:  # every record parsed once before the run: a mismatch is named here, not in a step
        count = int(
            records.map(parse, num_parallel_calls=tf.data.AUTOTUNE).reduce(
                tf.constant(0, tf.int64), lambda total, *_: total + 1
            )
        )
    except tf.errors.OpError as exc:
        raise DataError(_first_bad_record(data, files, compression, where, exc)) from None
    if count == 0:
        raise DataError(f"{field}: {', '.join(files[:3])} hold no records")
    return records.map(parse, num_parallel_calls=tf.data.AUTOTUNE), count


def _first_bad_record(
    data: TFRecordData, files: list[str], compression: str, where: str, error: tf.errors.OpError
) -> str:
    """The first record that does not fit the spec, by reading the files again one record at
    a time (only after the parser failed: its message names no file or record)."""
    for file in files:
        number = 0
        try:
            for record in tf.data.TFRecordDataset(
                file, compression_type=compression
            ).as_numpy_iterator():
                _check_record(data, tf.train.Example.FromString(record), file, number, where)
                number += 1
        except tf.errors.OpError:
            return f"{where}.path: {unreadable_file(file, number, compression, where)}"
        except DecodeError:
            return f"{where}.path: record {number} of {file} is not a tf.train.Example"
    return f"{where}.path: cannot read {data.path} as TFRecord files: {error.message}"


def _check_record(
    data: TFRecordData, example: tf.train.Example, file: str, number: int, where: str
) -> None:
    """Raises DataError naming the spec entry that record ``number`` of ``file`` breaks."""
    found = example.features.feature
    record = "the first record" if number == 0 else f"record {number}"
    for index, spec in enumerate(data.features):
        loc = f"{where}.features.{index}"
        if spec.name not in found:
            raise DataError(
                f"{loc}.name: {record} of {file} has no feature {spec.name!r} "
                f"(it has {', '.join(sorted(found)) or 'none'})"
            )
        kind = found[spec.name].WhichOneof("kind")
        if kind != _KINDS[spec.dtype]:
            held = {"float_list": "float32", "int64_list": "int64", "bytes_list": "bytes"}
            raise DataError(
                f"{loc}.dtype: {spec.name!r} holds {held.get(kind, kind)} values in {record} "
                f"of {file}, not {spec.dtype}"
            )
        values = len(getattr(found[spec.name], kind).value)
        if values != spec.size:
            raise DataError(
                f"{loc}.shape: {spec.shape} takes {spec.size} value(s), but {spec.name!r} has "
                f"{values} in {record} of {file}"
            )


def _parser(
    data: TFRecordData, project: Project
) -> Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    spec = {
        feature.name: tf.io.FixedLenFeature(feature.shape, tf.as_dtype(feature.dtype))
        for feature in data.features
    }
    inputs = [feature.name for feature in data.features if feature.name != data.label]
    shape = project.model.input_shape
    sparse = project.loss.kind == "sparse_categorical_crossentropy"
    return lambda record: parse_record(record, spec, inputs, data.label, shape, sparse)


def parse_record(
    record: tf.Tensor,
    spec: dict[str, tf.io.FixedLenFeature],
    inputs: list[str],
    label: str,
    shape: list[int],
    sparse_labels: bool,
) -> tuple[tf.Tensor, tf.Tensor]:
    """One ``tf.train.Example`` as (features, label): the ``inputs`` features flattened and
    joined in their order, shaped as the model's input; the label an int32 class number
    for sparse crossentropy, else float32."""
    parsed = tf.io.parse_single_example(record, spec)
    flat = [tf.reshape(tf.cast(parsed[name], tf.float32), (-1,)) for name in inputs]
    features = tf.reshape(tf.concat(flat, axis=0), shape)
    value = parsed[label]
    return features, tf.cast(value, tf.int32 if sparse_labels else tf.float32)
