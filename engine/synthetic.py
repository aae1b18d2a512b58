"""Arrays for the data sources that are not TensorFlow datasets yet (numpy only).

Synthetic data is generated here, with numpy's seeded generator, so the same
project gives the same examples on every machine and in every replica layout;
files are read here so their errors name the file and the field, not a TF op.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from engine.config import (
    CsvData,
    LossConfig,
    ModelConfig,
    NumpyData,
    SyntheticClassification,
    SyntheticRegression,
)


class DataError(ValueError):
    """The data cannot feed this model; the message says which file and field."""


def classification_arrays(
    data: SyntheticClassification, model: ModelConfig, loss: LossConfig
) -> tuple[np.ndarray, np.ndarray]:
    return make_classification(
        data.examples, model.input_shape, data.num_classes, data.noise, data.seed, loss.kind
    )


def regression_arrays(
    data: SyntheticRegression, model: ModelConfig
) -> tuple[np.ndarray, np.ndarray]:
    return make_regression(
        data.examples, model.input_shape, model.output_units, data.noise, data.seed
    )


# The two generators below take plain values and use numpy only, so that "Export as
# script" can copy their source into a standalone script: same code, same examples.


def make_classification(
    examples: int,
    input_shape: list[int],
    num_classes: int,
    noise: float,
    seed: int,
    loss_kind: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Random inputs labelled by a random linear teacher, labels shaped for the loss."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((examples, *input_shape)).astype(np.float32)
    flat = x.reshape(examples, -1)
    teacher = rng.standard_normal((flat.shape[1], num_classes)).astype(np.float32)
    classes = np.argmax(flat @ teacher, axis=1)
    if noise:
        x = x + (noise * rng.standard_normal(x.shape)).astype(np.float32)
    if loss_kind == "sparse_categorical_crossentropy":
        return x, classes.astype(np.int32)
    if loss_kind == "binary_crossentropy" and num_classes == 2:
        return x, classes.astype(np.float32).reshape(-1, 1)
    return x, np.eye(num_classes, dtype=np.float32)[classes]


def make_regression(
    examples: int, input_shape: list[int], outputs: int, noise: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Random inputs with targets from a random linear map plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((examples, *input_shape)).astype(np.float32)
    flat = x.reshape(examples, -1)
    teacher = rng.standard_normal((flat.shape[1], outputs)).astype(np.float32)
    teacher /= np.sqrt(flat.shape[1])
    y = flat @ teacher + noise * rng.standard_normal((examples, outputs))
    return x, y.astype(np.float32)


def numpy_arrays(data: NumpyData, model: ModelConfig) -> tuple[np.ndarray, np.ndarray]:
    path = Path(data.path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in (data.features_key, data.labels_key) if k not in archive.files]
            if missing:
                raise DataError(
                    f"data.path: {path} has no array named {', '.join(missing)} "
                    f"(it has {', '.join(archive.files) or 'none'})"
                )
            x = archive[data.features_key]
            y = archive[data.labels_key]
    except (OSError, ValueError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"data.path: cannot read {path} as .npz: {exc}") from None
    return _fit_to_model(x, y, model, str(path))


def csv_arrays(data: CsvData, model: ModelConfig) -> tuple[np.ndarray, np.ndarray]:
    path = Path(data.path)
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"data.path: cannot read {path}: {exc}") from None
    if not rows:
        raise DataError(f"data.path: {path} is empty")
    header, body = rows[0], [row for row in rows[1:] if row]
    if data.label_column not in header:
        raise DataError(
            f"data.label_column: {path} has no column {data.label_column!r} "
            f"(columns: {', '.join(header)})"
        )
    label_at = header.index(data.label_column)
    try:
        table = np.array([[float(v) for v in row] for row in body], dtype=np.float32)
    except ValueError as exc:
        raise DataError(f"data.path: {path} holds a value that is not a number: {exc}") from None
    if table.ndim != 2 or table.shape[1] != len(header):
        raise DataError(f"data.path: every row of {path} needs {len(header)} values")
    x = np.delete(table, label_at, axis=1)
    y = table[:, label_at : label_at + 1]
    return _fit_to_model(x, y, model, str(path))


def _fit_to_model(
    x: np.ndarray, y: np.ndarray, model: ModelConfig, origin: str
) -> tuple[np.ndarray, np.ndarray]:
    if len(x) != len(y):
        raise DataError(f"data: {origin} has {len(x)} feature rows but {len(y)} labels")
    if len(x) == 0:
        raise DataError(f"data: {origin} holds no examples")
    if int(np.prod(x.shape[1:])) != model.input_size:
        raise DataError(
            f"data: examples in {origin} have shape {list(x.shape[1:])}, "
            f"but model.input_shape is {model.input_shape}"
        )
    x = x.reshape(len(x), *model.input_shape).astype(np.float32)
    if y.dtype.kind in "iu":
        return x, y.astype(np.int32)
    return x, y.astype(np.float32)
