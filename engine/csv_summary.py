"""A run's ``metrics.csv`` or ``eval.csv`` in one row: its last row, its best one and the
smoothed value of its key column (:mod:`engine.smoothed_loss`), cheaply.

The runs list shows each run's last step, final loss and smoothed loss. Reading the
whole file for that cost 43 s for a run of 10^7 steps (1.3 GB), at every refresh of
the list. Here the last row comes from the file's tail (a few kilobytes), and the best
row from a scan that is kept, per file, with the size and modification time it saw
and the offset it reached: a file that grew is scanned from there on (the line before
that offset must still be where it was, else the file was rewritten, as a resume
rewrites ``metrics.csv``, and it is scanned again from the start). :func:`peek` never
scans (it is for the window's thread); :func:`scan` does (for a worker thread, or the
command line).
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .fileio import open_bytes
from .smoothed_loss import SmoothedLoss

TAIL_BYTES = 64 * 1024
"""Read from the end of the file for its last row: far more than the longest row."""
CHUNK_BYTES = 4 * 1024 * 1024
"""A scan reads this much at a time, cut back to whole lines."""


@dataclass(frozen=True)
class CsvSummary:
    """The columns of a file, its last whole row, its row with the lowest ``key``, and the
    smoothed ``key`` (the mean of its last tenth of rows).

    ``complete`` is False when the best row and the smoothed value cover only the part
    of the file scanned so far (:func:`peek` of a file that grew since its last scan).
    """

    header: tuple[str, ...]
    last: dict[str, float] | None
    best: dict[str, float] | None
    complete: bool
    smoothed: float | None = None


@dataclass
class _Scanned:
    size: int
    mtime_ns: int
    offset: int
    """Bytes scanned, up to the end of a whole line."""
    check: bytes
    """The line that ends at ``offset`` (with its line feed): still there means only appended."""
    header: tuple[str, ...]
    key: str
    best_line: bytes | None
    best_value: float
    last_line: bytes | None
    smoothed: SmoothedLoss


_scans: dict[Path, _Scanned] = {}
_lock = threading.Lock()


def peek(path: Path, key: str) -> CsvSummary:
    """What is known without a scan: the header and last row from the file's ends, the best
    row of the last scan. A file no longer than its tail is scanned: that is all its tail.
    Raises OSError when the file cannot be read."""
    with open_bytes(path) as handle:  # never through a link: a run folder may be crafted
        stat = os.fstat(handle.fileno())
        if stat.st_size <= TAIL_BYTES:
            return _scan(path, key, handle, stat)
        with _lock:
            scanned = _scans.get(path)
        if scanned is not None and scanned.key == key and _unchanged(scanned, stat):
            return _summary(scanned)
        header = _header(handle.readline())
        last = _last_line(handle, header, stat.st_size)
        still = scanned is not None and scanned.key == key and _only_appended(handle, scanned)
    if not still or scanned is None:
        return CsvSummary(header, _row(header, last), None, complete=False)
    return CsvSummary(
        header,
        _row(header, last),
        _row(header, scanned.best_line),
        complete=False,
        smoothed=scanned.smoothed.value(),
    )


def scan(path: Path, key: str) -> CsvSummary:
    """The summary with the best row over every row, reading only what the last scan did not.

    Raises OSError when the file cannot be read.
    """
    with open_bytes(path) as handle:  # never through a link: a run folder may be crafted
        return _scan(path, key, handle, os.fstat(handle.fileno()))


def _scan(path: Path, key: str, handle: BinaryIO, stat: os.stat_result) -> CsvSummary:
    with _lock:
        scanned = _scans.get(path)
    if scanned is not None and scanned.key == key and _unchanged(scanned, stat):
        return _summary(scanned)
    if scanned is None or scanned.key != key or not _only_appended(handle, scanned):
        handle.seek(0)
        first = handle.readline()
        whole = first.endswith(b"\n")
        scanned = _Scanned(
            size=0,
            mtime_ns=0,
            offset=len(first) if whole else 0,
            check=first if whole else b"",
            header=_header(first),
            key=key,
            best_line=None,
            best_value=math.inf,
            last_line=None,
            smoothed=SmoothedLoss(),
        )
    else:  # a copy: another thread may read the kept one
        scanned = _Scanned(**{**vars(scanned), "smoothed": scanned.smoothed.copy()})
    _scan_from(handle, scanned)
    scanned.size, scanned.mtime_ns = stat.st_size, stat.st_mtime_ns
    with _lock:
        _scans[path] = scanned
    return _summary(scanned)


def _unchanged(scanned: _Scanned, stat: os.stat_result) -> bool:
    return scanned.size == stat.st_size and scanned.mtime_ns == stat.st_mtime_ns


def _only_appended(handle: BinaryIO, scanned: _Scanned) -> bool:
    """Whether the line the last scan ended with is still where it was."""
    start = scanned.offset - len(scanned.check)
    if start < 0:
        return False
    handle.seek(start)
    return handle.read(len(scanned.check)) == scanned.check


def _scan_from(handle: BinaryIO, scanned: _Scanned) -> None:
    """Reads from ``scanned.offset`` to the last whole line, keeping the best and last rows."""
    handle.seek(scanned.offset)
    try:
        column = scanned.header.index(scanned.key)
    except ValueError:
        column = -1
    carry = b""
    while True:
        chunk = handle.read(CHUNK_BYTES)
        if not chunk:
            return
        data = carry + chunk
        end = data.rfind(b"\n")
        if end < 0:  # no line ends in this chunk yet
            carry = data
            continue
        whole, carry = data[: end + 1], data[end + 1 :]
        lines = whole[:-1].split(b"\n")
        scanned.offset += len(whole)
        scanned.check = lines[-1] + b"\n"
        _take(lines, column, scanned)


def _take(lines: list[bytes], column: int, scanned: _Scanned) -> None:
    """Keeps the last well-formed line and the one with the lowest finite key among ``lines``,
    and adds their keys to the smoothed value."""
    width = len(scanned.header)
    for line in reversed(lines):
        if line.count(b",") + 1 == width:
            scanned.last_line = line
            break
    if column < 0:
        return
    values, rows = _column(lines, column, width)
    scanned.smoothed.extend(values[rows])
    values[~np.isfinite(values) | ~rows] = math.inf  # never the best
    if not len(values):
        return
    index = int(np.argmin(values))
    if values[index] < scanned.best_value:
        scanned.best_value = float(values[index])
        scanned.best_line = lines[index]


def _column(lines: list[bytes], column: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``column`` of every line as floats (NaN and inf as written), and which lines are
    rows: a line cut short (a crash's last line) or with a cell that is no number is not."""
    try:
        values = np.loadtxt(lines, delimiter=",", usecols=column, ndmin=1, dtype=np.float64)
        if len(values) != len(lines):
            raise ValueError("rows were skipped")
        rows = np.ones(len(lines), dtype=bool)
    except ValueError:  # a cell that is no number: each row on its own
        cells = [_cell(line, column, width) for line in lines]
        values = np.array([math.nan if cell is None else cell for cell in cells], np.float64)
        rows = np.array([cell is not None for cell in cells], dtype=bool)
    rows &= np.fromiter((line.count(b",") + 1 == width for line in lines), bool, len(lines))
    return values, rows


def _cell(line: bytes, column: int, width: int) -> float | None:
    cells = line.split(b",")
    if len(cells) != width:
        return None
    try:
        return float(cells[column])
    except ValueError:
        return None


def _header(line: bytes) -> tuple[str, ...]:
    text = line.decode("utf-8", errors="replace").strip()
    return tuple(text.split(",")) if text else ()


def _last_line(handle: BinaryIO, header: tuple[str, ...], size: int) -> bytes | None:
    """The last whole, well-formed row of the file (not the header), from its tail."""
    header_end = handle.tell()
    start = max(header_end, size - TAIL_BYTES)
    handle.seek(start)
    tail = handle.read(size - start)
    end = tail.rfind(b"\n")
    if end < 0:
        return None
    lines = tail[:end].split(b"\n")
    if start > header_end:
        lines = lines[1:]  # the first may be cut
    return next((line for line in reversed(lines) if _row(header, line) is not None), None)


def _row(header: tuple[str, ...], line: bytes | None) -> dict[str, float] | None:
    if line is None:
        return None
    cells = line.split(b",")
    if len(cells) != len(header):
        return None
    try:
        return {name: float(cell) for name, cell in zip(header, cells, strict=True)}
    except ValueError:
        return None


def _summary(scanned: _Scanned) -> CsvSummary:
    return CsvSummary(
        scanned.header,
        _row(scanned.header, scanned.last_line),
        _row(scanned.header, scanned.best_line),
        complete=True,
        smoothed=scanned.smoothed.value(),
    )
