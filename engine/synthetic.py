"""Arrays for the data sources that are not TensorFlow datasets yet (numpy only).

Synthetic data is generated here, with numpy's seeded generator, so the same
project gives the same examples on every machine and in every replica layout;
files are read here so their errors name the file and the field, not a TF op.
"""

from __future__ import annotations

import csv
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from .config import (
    CsvData,
    LossConfig,
    ModelConfig,
    NumpyData,
    SyntheticClassification,
    SyntheticRegression,
    split_counts,
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


# numpy and split_counts only, for the same reason: an exported script holds out the
# examples the engine holds out.
def held_out(examples: int, split: float, seed: int) -> np.ndarray:
    """Which of ``examples`` an evaluation split holds out: a seeded random choice, so the
    same project holds out the same examples in every run."""
    _, held_count = split_counts(examples, split)
    held = np.zeros(examples, dtype=bool)
    held[np.random.default_rng(seed).permutation(examples)[:held_count]] = True
    return held


def numpy_arrays(
    data: NumpyData,
    model: ModelConfig,
    loss: LossConfig,
    where: str = "data",
    classes: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``.npz`` file's features and labels, checked here so no TF op fails on them.

    ``where`` is the field the data came from (``data`` or ``evaluation.source``);
    ``classes`` is the model's output count when the project's model is the one trained.
    """
    path = Path(data.path)
    field = f"{where}.path"
    try:
        with path.open("rb") as handle:
            head = handle.read(len(_NPY_MAGIC))
            handle.seek(0)
            is_zip = zipfile.is_zipfile(handle)
    except OSError as exc:
        raise DataError(f"{field}: cannot read {path}: {exc.strerror or exc}") from None
    if not is_zip:
        what = ", but a single .npy array" if head == _NPY_MAGIC else ""
        raise DataError(
            f"{field}: {path} is not an .npz file (a zip archive of arrays){what}; save the "
            f"features and labels with numpy.savez({path.name!r}, "
            f"{data.features_key}=..., {data.labels_key}=...)"
        )
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in (data.features_key, data.labels_key) if k not in archive.files]
            if missing:
                raise DataError(
                    f"{field}: {path} has no array named {', '.join(missing)} "
                    f"(it has {', '.join(archive.files) or 'none'})"
                )
            arrays = [archive[data.features_key], archive[data.labels_key]]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{field}: cannot read {path} as .npz: {exc}") from None
    for key, array in zip((data.features_key, data.labels_key), arrays, strict=True):
        _check_array(array, f"{field}: array {key!r} in {path}")
    x, y = arrays
    return _fit_to_model(x, y, model, loss, field, field, str(path), classes)


_NPY_MAGIC = b"\x93NUMPY"
_CSV_BLOCK_ROWS = 4096
_NUMBER_KINDS = "biuf"
_KIND_NAMES = {"c": "complex numbers", "U": "strings", "S": "bytes", "O": "Python objects"}


def _check_array(array: object, what: str, first: int = 0) -> None:
    """Refuses what ``astype(np.float32)`` would coerce silently or fail on.

    ``first``: the number of the array's first example in its file (a streamed chunk's).
    """
    if not isinstance(array, np.ndarray):  # a zip member numpy did not write: raw bytes
        raise DataError(f"{what} is not a numpy array; write the file with numpy.savez")
    if array.ndim == 0:
        raise DataError(f"{what} is a single value; it needs one entry per example (first axis)")
    if array.dtype.kind not in _NUMBER_KINDS:
        kind = _KIND_NAMES.get(array.dtype.kind, f"{array.dtype} values")
        raise DataError(f"{what} holds {kind} (dtype {array.dtype}); it needs real numbers")
    if array.dtype.kind == "f":
        bad = ~np.isfinite(array.reshape(len(array), -1)).all(axis=1)
        if bad.any():
            raise DataError(
                f"{what} holds NaN or infinity (example {first + int(np.argmax(bad))}, counting "
                "from 0); "
                "fill or remove those values"
            )


def csv_arrays(
    data: CsvData,
    model: ModelConfig,
    loss: LossConfig,
    where: str = "data",
    classes: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The CSV file's label column and the other columns as features, every cell a number.

    Each row goes straight into a float32 table as it is read: holding the rows as
    Python strings first took about 80 bytes a cell (10-20 times the file) where the
    table takes 4. The first cell that is not a finite number stops the reading, named
    by its line and column. ``where`` and ``classes`` as for :func:`numpy_arrays`.
    """
    path = Path(data.path)
    field = f"{where}.path"
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle)
            try:
                header = next((row for row in reader if row), None)
                if header is None:
                    raise DataError(f"{field}: {path} is empty")
                _check_header(header, data, where, path)
                table = _read_rows(reader, header, field, path)
            except csv.Error as exc:
                raise DataError(
                    f"{field}: {path} line {reader.line_num} is not valid CSV ({exc}); "
                    "every cell must hold one number"
                ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{field}: cannot read {path}: {exc}") from None
    if not len(table):
        raise DataError(f"{field}: {path} has a header but no rows of data")
    label_at = header.index(data.label_column)
    x = np.delete(table, label_at, axis=1)
    y = table[:, label_at : label_at + 1]
    return _fit_to_model(x, y, model, loss, field, f"{where}.label_column", str(path), classes)


def _check_header(header: list[str], data: CsvData, where: str, path: Path) -> None:
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise DataError(
            f"{where}.path: {path} names the column(s) {', '.join(map(repr, repeated))} more "
            "than once; give every column its own name"
        )
    if data.label_column not in header:
        raise DataError(
            f"{where}.label_column: {path} has no column {data.label_column!r} "
            f"(columns: {', '.join(header)})"
        )


def _read_rows(reader: Any, header: list[str], field: str, path: Path) -> np.ndarray:
    """The rows after the header as float32, filled a block of rows at a time (``reader``
    is a ``csv.reader``: its ``line_num`` names the line, quoted line breaks included)."""
    blocks: list[np.ndarray] = []
    block = np.empty((_CSV_BLOCK_ROWS, len(header)), dtype=np.float32)
    count = 0
    with np.errstate(over="ignore"):  # beyond float32's range becomes inf, refused below
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise DataError(
                    f"{field}: {path} line {reader.line_num} has {len(row)} value(s), but the "
                    f"header names {len(header)} columns"
                )
            numbers = block[count]
            for column, value in enumerate(row):
                try:
                    numbers[column] = float(value)
                except ValueError:
                    numbers[column] = np.nan
            if not np.isfinite(numbers).all():
                column = int(np.argmin(np.isfinite(numbers)))
                raise DataError(
                    f"{field}: {path} line {reader.line_num}, column {header[column]!r}: "
                    f"{row[column]!r} is not a finite number; fill or remove that row"
                )
            count += 1
            if count == _CSV_BLOCK_ROWS:
                blocks.append(block)
                block = np.empty_like(block)
                count = 0
    blocks.append(block[:count])
    return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)


def _fit_to_model(
    x: np.ndarray,
    y: np.ndarray,
    model: ModelConfig,
    loss: LossConfig,
    field: str,
    label_field: str,
    origin: str,
    classes: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Features shaped for the model; labels typed for the loss (class ids for sparse)."""
    if len(x) != len(y):
        raise DataError(f"{field}: {origin} has {len(x)} feature rows but {len(y)} labels")
    if len(x) == 0:
        raise DataError(f"{field}: {origin} holds no examples")
    if int(np.prod(x.shape[1:])) != model.input_size:
        raise DataError(
            f"{field}: examples in {origin} have shape {list(x.shape[1:])}, "
            f"but model.input_shape is {model.input_shape}"
        )
    # No copy when already float32: a loaded file's features are most of a run's memory.
    x = x.reshape(len(x), *model.input_shape).astype(np.float32, copy=False)
    if loss.kind == "sparse_categorical_crossentropy":
        return x, _class_ids(y, label_field, origin, classes)
    return x, y.astype(np.float32, copy=False)


def _class_ids(
    y: np.ndarray, field: str, origin: str, classes: int | None, first: int = 0
) -> np.ndarray:
    """Sparse crossentropy's labels: one whole class number per example, in the model's range.

    TensorFlow would truncate 1.5 to class 1 without a word, and fail inside the
    step (or, on a GPU, return garbage) for a class the model has no output for.
    """
    if int(np.prod(y.shape[1:])) != 1:
        raise DataError(
            f"{field}: labels in {origin} have shape {list(y.shape[1:])} per example; "
            "sparse_categorical_crossentropy takes one class number per example "
            "(categorical_crossentropy takes one-hot rows)"
        )
    flat = y.reshape(len(y))
    wrong = flat != np.round(flat) if flat.dtype.kind == "f" else np.zeros(len(flat), bool)
    top = "" if classes is None else f"..{classes - 1}"
    if wrong.any():
        at = int(np.argmax(wrong))
        raise DataError(
            f"{field}: label {flat[at]} in {origin} (example {first + at}, counting from 0) is "
            "not a "
            f"whole number; sparse_categorical_crossentropy takes class numbers 0{top}"
        )
    outside = (flat < 0) | (flat >= classes if classes is not None else False)
    if outside.any():
        at = int(np.argmax(outside))
        units = "" if classes is None else f": the model's last layer has {classes} units"
        raise DataError(
            f"{field}: label {flat[at]:g} in {origin} (example {first + at}, counting from 0) is "
            "not a "
            f"class number 0{top}{units}, one per class"
        )
    return y.astype(np.int32)
