"""A CSV file with a header row: one column holds the label, the others are features. Loaded
whole, every cell checked as it is read, or, with ``stream``, read in blocks as batches form
(``engine/tf/data_sources/csv.py``)."""

from __future__ import annotations

import csv
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..config import CsvData, LossConfig, ModelConfig, Project
from ..fileio import file_kind_problem, open_regular
from ..problems import Problem
from .arrays import fit_to_model
from .base import FLOAT32, DataError, DataSource, LabelSample, ScriptData
from .numpy import STREAM_NOTE
from .script_lines import array_dataset_lines

CSV_HEADER_SEARCH = 100
"""Lines read to find a CSV file's header (blank lines before it are skipped, as loading
skips them): a file of nothing but blank lines is the run's to report."""
_BLOCK_ROWS = 4096
_SAMPLE_BYTES = 1 << 20
"""How much of the file's start is read to count its cells per byte."""


class CsvSource(DataSource[CsvData]):
    preview = "table"
    file_types = "CSV files (*.csv);;All files (*)"

    def form_start(self) -> dict[str, object]:
        return {"path": "", "label_column": ""}

    def file_problems(self, data: CsvData) -> list[str]:
        problem = file_kind_problem(data.path)
        return [] if problem is None else [f"{data.path} {problem}"]

    def content_problems(
        self, data: CsvData, project: Project, loc: tuple[str, ...]
    ) -> list[Problem]:
        """The header against the label column and the model's input: the checks a run makes
        first, here from the file's first line so the window and ``validate`` find them."""
        try:
            with open(os.path.expanduser(data.path), encoding="utf-8-sig", newline="") as handle:
                rows = itertools.islice(csv.reader(handle), CSV_HEADER_SEARCH)
                header = next((row for row in rows if row), None)
        except (OSError, UnicodeDecodeError, csv.Error):
            return []  # the run names what is wrong with the file's text
        if header is None:
            return []
        if data.label_column not in header:
            return [
                Problem(
                    (*loc, "label_column"),
                    f"{data.path} has no column {data.label_column!r} "
                    f"(columns: {', '.join(header)})",
                )
            ]
        if project.custom_code is None and len(header) - 1 != project.model.input_size:
            return [
                Problem(
                    (*loc, "path"),
                    f"examples in {data.path} have {len(header) - 1} feature column(s), but "
                    f"model.input_shape {project.model.input_shape} takes "
                    f"{project.model.input_size}",
                )
            ]
        return []

    def loaded_bytes(self, data: CsvData) -> int:
        """The float32 table twice (read in blocks, then joined: :func:`csv_arrays`)."""
        return 0 if data.stream else 2 * FLOAT32 * _csv_cells(Path(data.path))

    def columns(self, data: CsvData) -> tuple[str, list[str] | None]:
        try:
            with Path(data.path).open(encoding="utf-8-sig", newline="") as handle:
                header = next(csv.reader(handle), None)
        except (OSError, UnicodeDecodeError, csv.Error):
            header = None
        return data.label_column, header

    def label_sample(self, data: CsvData, limit: int, max_bytes: int) -> LabelSample | None:
        """The label column of the rows in the file's first ``max_bytes``. Lines without
        quotes are split with ``str.split`` (the csv module parsed 58 MiB of wide rows in
        5 s at load 18, at every run's start); a file with quotes goes through it."""
        try:
            with open_regular(Path(data.path)) as handle:
                head = handle.read(max_bytes + 1)
        except OSError:
            return None
        whole = len(head) <= max_bytes
        text = head[:max_bytes].decode("utf-8-sig", errors="replace")
        if not whole:
            text = text[: text.rfind("\n") + 1]  # the last line is cut short
        lines = text.split("\n")
        split: Iterator[list[str]] = (
            csv.reader(lines) if '"' in text else (line.rstrip("\r").split(",") for line in lines)
        )
        rows = (row for row in split if row and row != [""])
        header = next(rows, None)
        if header is None or data.label_column not in header:
            return None
        at = header.index(data.label_column)
        try:
            labels = [float(row[at]) for row in itertools.islice(rows, limit + 1)]
        except (ValueError, IndexError, csv.Error):
            return None  # the run names what is wrong with the file
        whole = whole and len(labels) <= limit
        return LabelSample(np.array(labels[:limit], dtype=np.float64), whole)

    def script(self, data: CsvData, project: Project) -> ScriptData:
        lines = [STREAM_NOTE] if data.stream else []
        lines += [
            f"with open({data.path!r}, encoding='utf-8') as handle:",
            "    header = handle.readline().strip().split(',')",
            f"table = np.loadtxt({data.path!r}, delimiter=',', skiprows=1, ndmin=2)",
            "table = table.astype(np.float32)",
            f"label_at = header.index({data.label_column!r})",
            "x = np.delete(table, label_at, axis=1)",
            "y = table[:, label_at:label_at + 1]",
        ]
        return ScriptData(array_dataset_lines(project, lines))


SOURCE = CsvSource()


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
    by its line and column. ``where`` and ``classes`` as for
    :func:`~engine.data_sources.numpy.numpy_arrays`.
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
    return fit_to_model(x, y, model, loss, field, f"{where}.label_column", str(path), classes)


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
    block = np.empty((_BLOCK_ROWS, len(header)), dtype=np.float32)
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
            if count == _BLOCK_ROWS:
                blocks.append(block)
                block = np.empty_like(block)
                count = 0
    blocks.append(block[:count])
    return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)


def _csv_cells(path: Path) -> int:
    """Cells in the file (less the header's), from the cells per byte of its whole lines
    in the first MiB."""
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        sample = handle.read(_SAMPLE_BYTES)
    lines = sample.split(b"\n")
    if len(sample) == size:  # the whole file: count it
        body = [line for line in lines[1:] if line.strip()]
        return sum(line.count(b",") + 1 for line in body)
    whole = [line for line in lines[1:-1] if line.strip()]  # the last may be cut
    if not whole:
        return 0
    per_byte = sum(line.count(b",") + 1 for line in whole) / sum(len(line) + 1 for line in whole)
    return int(per_byte * (size - len(lines[0]) - 1))
