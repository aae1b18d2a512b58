"""A CSV file: loaded whole and checked cell by cell (``engine.data_sources.csv``), or, with
``stream``, read as batches form, for files larger than memory.

Streamed, the file's lines are parsed a block at a time by ``tf.io.decode_csv`` and split
into rows again (``CsvDataset``, one row at a time, read 4-7 MB/s of wide rows). The
examples and their order are those of the loaded file (a shuffle's order depends only on
the seed and the sizes), so turning ``stream`` on changes memory, not the run.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
import tensorflow as tf

from ...config import CsvData, Project
from ...data_sources import DataError
from ...data_sources.arrays import class_ids
from ...data_sources.csv import csv_arrays
from .arrays import Arrays, ArraySource, model_classes
from .base import Examples, TFDataSource, labels_dtype


class CsvTFSource(ArraySource[CsvData]):
    def arrays(self, data: CsvData, project: Project, where: str) -> Arrays:
        return csv_arrays(data, project.model, project.loss, where, model_classes(project))

    def examples(self, data: CsvData, project: Project, where: str) -> Examples:
        if data.stream:
            return Examples(*csv_examples(data, project, where))
        return super().examples(data, project, where)

    def split_examples(self, data: CsvData, project: Project) -> tuple[Examples, Examples]:
        if data.stream:  # the rows as they are read, not the table
            return TFDataSource.split_examples(self, data, project)
        return super().split_examples(data, project)


SOURCE = CsvTFSource()


CSV_CELLS = 2**19
"""About how many cells one parsed block of CSV lines holds (2,048 float32 columns: 256
lines, 2 MiB parsed): whole blocks go through TensorFlow's CSV op at once, where a row at a
time spent its time between rows, and a block stays small next to a streamed file."""


def csv_examples(
    data: CsvData, project: Project, where: str = "data"
) -> tuple[tf.data.Dataset, int]:
    """(features, label) rows of the CSV file, read as they are needed, and their count.

    The lines are parsed a block at a time and then split into rows again, so the rows
    reach the shuffle buffer, the batches and an evaluation split one by one, in the file's
    order, with the values ``CsvDataset`` (the row-at-a-time parser used before) gives.
    """
    path, field = Path(data.path), f"{where}.path"
    header, header_lines = _csv_header(path, field)
    if data.label_column not in header:
        raise DataError(
            f"{where}.label_column: {path} has no column {data.label_column!r} "
            f"(columns: {', '.join(header)})"
        )
    if len(header) - 1 != project.model.input_size:
        raise DataError(
            f"{field}: examples in {path} have {len(header) - 1} feature column(s), but "
            f"model.input_shape {project.model.input_shape} takes {project.model.input_size}"
        )
    label_at = header.index(data.label_column)
    blocks = csv_blocks(path, len(header), header_lines, label_at)
    sparse = project.loss.kind == "sparse_categorical_crossentropy"
    classes = model_classes(project)

    def sound(features: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """The block's rows, and whether every cell is finite and, for sparse crossentropy,
        every label a class number in range."""
        ok = tf.reduce_all(tf.math.is_finite(features)) & tf.reduce_all(tf.math.is_finite(labels))
        if sparse:
            whole = tf.equal(labels, tf.round(labels)) & (labels >= 0)
            whole = whole if classes is None else whole & (labels < classes)
            ok = ok & tf.reduce_all(whole)
        return tf.shape(labels, out_type=tf.int64)[0], ok

    finite = blocks.map(sound, num_parallel_calls=tf.data.AUTOTUNE)
    try:  # one pass in TensorFlow's parser: counts the rows and finds a bad one up front
        rows, all_finite = finite.reduce(
            (tf.constant(0, tf.int64), tf.constant(True)),
            lambda state, block: (state[0] + block[0], tf.logical_and(state[1], block[1])),
        )
        rows, all_finite = int(rows), bool(all_finite)
    except tf.errors.OpError:
        all_finite = False
    if not all_finite:
        labels = LabelCheck(f"{where}.label_column", str(path), label_at, classes, sparse)
        raise DataError(f"{field}: {path} {first_bad_row(path, header, labels)}")
    if rows == 0:
        raise DataError(f"{field}: {path} has a header but no rows of data")
    shape, label_type = project.model.input_shape, labels_dtype(project)

    def examples(features: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.reshape(features, [-1, *shape]), tf.reshape(tf.cast(labels, label_type), (-1, 1))

    return blocks.map(examples, num_parallel_calls=tf.data.AUTOTUNE).unbatch(), rows


def csv_blocks(path: Path, columns: int, header_lines: int, label_at: int) -> tf.data.Dataset:
    """The CSV file's rows after its header in blocks of up to ``CSV_CELLS`` cells, each a
    float32 table of the features (the columns but ``label_at``, in order) and the labels.

    ``tf.io.decode_csv`` parses numbers as ``CsvDataset`` does (quoted cells too), and
    ``TextLineDataset`` drops the carriage return of Windows line ends. Blank lines are no
    rows, as when the file is loaded (``CsvDataset`` refused them: a file ending in an
    empty line failed only when streamed).
    """
    required = [tf.constant([], tf.float32)] * columns

    def parse(lines: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        lines = tf.boolean_mask(lines, tf.strings.length(lines) > 0)  # a block's, at once
        cells = tf.io.decode_csv(lines, required)
        labels = cells.pop(label_at)
        return tf.stack(cells, axis=1), labels

    lines = tf.data.TextLineDataset(str(path), buffer_size=2**20).skip(header_lines)
    block = max(1, min(4096, CSV_CELLS // columns))
    return lines.batch(block).map(parse, num_parallel_calls=tf.data.AUTOTUNE)


def _csv_header(path: Path, field: str) -> tuple[list[str], int]:
    """The header's names, and how many of ``TextLineDataset``'s lines it takes (a quoted
    name may hold a line break). Lines that end in a carriage return alone are refused:
    ``TextLineDataset`` splits at line feeds only, so it would see one long line."""
    read: list[str] = []

    def recorded(handle: TextIO) -> Iterator[str]:
        for line in handle:
            read.append(line)
            yield line

    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            header = next(csv.reader(recorded(handle)), [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{field}: cannot read {path}: {exc}") from None
    text = "".join(read)
    if text.endswith("\r"):
        raise DataError(
            f"{field}: {path} ends its lines with a carriage return alone (classic Mac OS), "
            "which streaming cannot split; save it with Unix (LF) or Windows (CR LF) line "
            "ends, or set stream to false"
        )
    return header, text.count("\n") + (0 if not text or text.endswith("\n") else 1)


@dataclass(frozen=True)
class LabelCheck:
    """A row's label checked as loading checks it (same message): for sparse crossentropy."""

    field: str
    origin: str
    column: int
    classes: int | None
    sparse: bool

    def __call__(self, row: list[str], example: int) -> None:
        if self.sparse:
            label = np.array([[float(row[self.column])]])
            class_ids(label, self.field, self.origin, self.classes, example)


def first_bad_row(path: Path, header: list[str], check_label: LabelCheck) -> str:
    """Where the parser stopped, or the first row a check refused, found by reading the
    file again a row at a time (this runs only after a failure: TensorFlow's message
    names no line). A label is refused by raising DataError with loading's message."""
    with path.open(encoding="utf-8-sig", newline="", errors="replace") as handle:
        reader = csv.reader(handle)
        next(reader, None)
        for example, row in enumerate(row for row in reader if row):  # blank lines: no rows
            if len(row) != len(header):
                return (
                    f"line {reader.line_num} has {len(row)} value(s), but the header names "
                    f"{len(header)} columns"
                )
            for name, value in zip(header, row, strict=True):
                if "\n" in value or "\r" in value:
                    return (
                        f"line {reader.line_num}, column {name!r}: {value!r} holds a line "
                        "break, which streaming cannot read; remove it, or set stream to false"
                    )
                try:
                    with np.errstate(over="ignore"):  # parsed as float32: 1e39 is inf
                        finite = bool(np.isfinite(np.float32(float(value))))
                except ValueError:
                    finite = False
                if not finite:
                    return (
                        f"line {reader.line_num}, column {name!r}: {value!r} is not a finite "
                        "number; fill or remove that row"
                    )
            check_label(row, example)
    return "cannot be read as CSV numbers"
