"""CSV and .npz data read as batches form, for files larger than memory (``stream: true``).

A CSV file's lines are parsed a block at a time by ``tf.io.decode_csv`` and split into
rows again (``CsvDataset``, one row at a time, read 4-7 MB/s of wide rows). An .npz
file written by ``numpy.savez`` stores each array uncompressed inside the zip, so its
bytes can be memory-mapped where they lie: the pipeline shuffles and batches example
*numbers*, and each batch reads its rows from the map. Either way the examples and their
order are those of the in-memory path (a shuffle's order depends only on the seed and
the sizes), so turning ``stream`` on changes memory, not the run.
"""

from __future__ import annotations

import csv
import math
import struct
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
import tensorflow as tf

from ..config import CsvData, NumpyData, Project
from ..synthetic import DataError, _check_array, _class_ids

_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
"""A zip member's local file header (its name and extra field follow it)."""

Examples = tuple[tf.data.Dataset, int]


def _label_type(project: Project) -> tf.DType:
    return tf.int32 if project.loss.kind == "sparse_categorical_crossentropy" else tf.float32


CSV_CELLS = 2**19
"""About how many cells one parsed block of CSV lines holds (2,048 float32 columns: 256
lines, 2 MiB parsed): whole blocks go through TensorFlow's CSV op at once, where a row at a
time spent its time between rows, and a block stays small next to a streamed file."""


def csv_examples(data: CsvData, project: Project, where: str = "data") -> Examples:
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
    classes = project.model.output_units if project.custom_code is None else None

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
        labels = _LabelCheck(f"{where}.label_column", str(path), label_at, classes, sparse)
        raise DataError(f"{field}: {path} {_first_bad_row(path, header, labels)}")
    if rows == 0:
        raise DataError(f"{field}: {path} has a header but no rows of data")
    shape, label_type = project.model.input_shape, _label_type(project)

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
class _LabelCheck:
    """A row's label checked as loading checks it (same message): for sparse crossentropy."""

    field: str
    origin: str
    column: int
    classes: int | None
    sparse: bool

    def __call__(self, row: list[str], example: int) -> None:
        if self.sparse:
            label = np.array([[float(row[self.column])]])
            _class_ids(label, self.field, self.origin, self.classes, example)


def _first_bad_row(path: Path, header: list[str], check_label: _LabelCheck) -> str:
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


def npz_memmaps(data: NumpyData, where: str = "data") -> tuple[MappedArray, MappedArray]:
    """Where the features and labels arrays of an uncompressed .npz lie in the file."""
    path, field = Path(data.path), f"{where}.path"
    try:
        with zipfile.ZipFile(path) as archive, path.open("rb") as handle:
            return tuple(  # type: ignore[return-value]
                _member_map(archive, handle, path, key, field)
                for key in (data.features_key, data.labels_key)
            )
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{field}: cannot read {path} as .npz: {exc}") from None


def _member_map(
    archive: zipfile.ZipFile, handle: object, path: Path, key: str, field: str
) -> MappedArray:
    try:
        info = archive.getinfo(f"{key}.npy")
    except KeyError:
        names = ", ".join(name.removesuffix(".npy") for name in archive.namelist())
        raise DataError(f"{field}: {path} has no array named {key} (it has {names})") from None
    if info.compress_type != zipfile.ZIP_STORED:
        raise DataError(
            f"{field}: array {key!r} in {path} is compressed (numpy.savez_compressed); "
            "streaming reads arrays in place, so save them with numpy.savez or set "
            "stream to false"
        )
    handle.seek(info.header_offset)  # type: ignore[attr-defined]
    fields = _LOCAL_HEADER.unpack(handle.read(_LOCAL_HEADER.size))  # type: ignore[attr-defined]
    name_length, extra_length = fields[-2], fields[-1]
    start = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
    handle.seek(start)  # type: ignore[attr-defined]
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
    if dtype.hasobject or dtype.kind not in "biuf" or not shape:
        raise DataError(
            f"{field}: array {key!r} in {path} holds {dtype} values of shape {list(shape)}; "
            "streaming needs real numbers with one entry per example"
        )
    offset = handle.tell()  # type: ignore[attr-defined]
    return MappedArray(path, dtype, offset, tuple(shape), "F" if fortran else "C")


@dataclass(frozen=True)
class MappedArray:
    """Where an array lies in a file. Each read maps it and unmaps it again, so the pages a
    batch touched leave this process's resident memory with the batch (they stay in the
    page cache, which the kernel frees when it needs to)."""

    path: Path
    dtype: np.dtype
    offset: int
    shape: tuple[int, ...]
    order: str

    def __len__(self) -> int:
        return self.shape[0]

    def rows(self, numbers: np.ndarray) -> np.ndarray:
        mapped = np.memmap(
            self.path,
            dtype=self.dtype,
            mode="r",
            offset=self.offset,
            shape=self.shape,
            order=self.order,  # type: ignore[arg-type]
        )
        rows = np.array(mapped[numbers])
        del mapped  # its last reference: unmapped here, not at some later collection
        return rows


def npz_batches(
    data: NumpyData, project: Project, where: str = "data"
) -> tuple[tf.data.Dataset, int, Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]]:
    """Example numbers of the memory-mapped arrays, their count, and the map function that
    reads a batch of numbers as (features, labels), typed as the in-memory path types them."""
    x, y = npz_memmaps(data, where)
    field = f"{where}.path"
    if len(x) != len(y):
        raise DataError(f"{field}: {data.path} has {len(x)} feature rows but {len(y)} labels")
    if int(np.prod(x.shape[1:])) != project.model.input_size:
        raise DataError(
            f"{field}: examples in {data.path} have shape {list(x.shape[1:])}, "
            f"but model.input_shape is {project.model.input_shape}"
        )
    _check_npz(x, y, data, project, field)
    shape = project.model.input_shape
    label_type = _label_type(project)
    label_shape = list(y.shape[1:])

    def read(numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        features = x.rows(numbers).astype(np.float32, copy=False).reshape(len(numbers), *shape)
        return features, y.rows(numbers).astype(label_type.as_numpy_dtype, copy=False)

    def batch(numbers: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        features, labels = tf.numpy_function(read, [numbers], [tf.float32, label_type])
        features.set_shape([None, *shape])
        labels.set_shape([None, *label_shape])
        return features, labels

    return tf.data.Dataset.range(len(x)), len(x), batch


CHECK_ROWS = 65_536
CHECK_BYTES = 16 * 2**20
"""A check part's rows are at most this many bytes: wide rows would otherwise make a part
larger than the memory streaming is for (65,536 rows of 4,096 float32 are 1 GiB)."""


def _check_npz(
    x: MappedArray, y: MappedArray, data: NumpyData, project: Project, field: str
) -> None:
    """What loading checks, a part of the rows at a time: finite features, and labels the
    loss can take (whole class numbers in the model's range for sparse crossentropy)."""
    origin = str(data.path)
    row_bytes = sum(array.dtype.itemsize * math.prod(array.shape[1:]) for array in (x, y))
    part = max(1, min(CHECK_ROWS, CHECK_BYTES // max(1, row_bytes)))
    for start in range(0, len(x), part):
        numbers = np.arange(start, min(start + part, len(x)))
        for key, array in ((data.features_key, x), (data.labels_key, y)):
            _check_array(array.rows(numbers), f"{field}: array {key!r} in {origin}", start)
        if project.loss.kind == "sparse_categorical_crossentropy":
            classes = project.model.output_units if project.custom_code is None else None
            _class_ids(y.rows(numbers), f"{field}", origin, classes, start)
