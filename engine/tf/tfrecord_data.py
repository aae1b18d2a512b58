"""TFRecord files parsed by the project's feature spec, read as batches form.

The first record is checked against the spec before the run starts, so a feature the
files lack, or one of another type or length, is one line naming the spec entry, not
a parse error inside the training step.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from ..config import Project, TFRecordData
from ..synthetic import DataError

_KINDS = {"float32": "float_list", "int64": "int64_list"}


def tfrecord_examples(
    data: TFRecordData, project: Project, where: str = "data"
) -> tuple[tf.data.Dataset, int]:
    """(features, label) examples of the files, and how many there are (one counting pass)."""
    field = f"{where}.path"
    files = sorted(tf.io.gfile.glob(data.path))
    if not files:
        raise DataError(f"{field}: no file matches {data.path}")
    compression = "" if data.compression == "none" else data.compression
    records = tf.data.TFRecordDataset(files, compression_type=compression)
    try:
        first = next(iter(records.take(1)), None)
        if first is None:
            raise DataError(f"{field}: {', '.join(files[:3])} hold no records")
        _check_first(data, tf.train.Example.FromString(first.numpy()), files[0], where)
        count = int(records.reduce(tf.constant(0, tf.int64), lambda total, _: total + 1))
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError, tf.errors.OpError) as exc:
        raise DataError(
            f"{field}: cannot read {data.path} as TFRecord files: {exc.message}"
        ) from None
    return records.map(_parser(data, project), num_parallel_calls=tf.data.AUTOTUNE), count


def _check_first(data: TFRecordData, example: tf.train.Example, file: str, where: str) -> None:
    found = example.features.feature
    for index, spec in enumerate(data.features):
        loc = f"{where}.features.{index}"
        if spec.name not in found:
            raise DataError(
                f"{loc}.name: {file}'s first record has no feature {spec.name!r} "
                f"(it has {', '.join(sorted(found)) or 'none'})"
            )
        kind = found[spec.name].WhichOneof("kind")
        if kind != _KINDS[spec.dtype]:
            held = {"float_list": "float32", "int64_list": "int64", "bytes_list": "bytes"}
            raise DataError(
                f"{loc}.dtype: {spec.name!r} holds {held.get(kind, kind)} values in {file}, "
                f"not {spec.dtype}"
            )
        values = len(getattr(found[spec.name], kind).value)
        if values != spec.size:
            raise DataError(
                f"{loc}.shape: {spec.shape} takes {spec.size} value(s), but {spec.name!r} has "
                f"{values} in {file}'s first record"
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

    def parse(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        parsed = tf.io.parse_single_example(record, spec)
        flat = [tf.reshape(tf.cast(parsed[name], tf.float32), (-1,)) for name in inputs]
        features = tf.reshape(tf.concat(flat, axis=0), shape)
        label = parsed[data.label]
        label = tf.cast(label, tf.int32) if sparse else tf.cast(label, tf.float32)
        return features, label

    return parse
