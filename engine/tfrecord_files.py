"""TFRecord files read without TensorFlow: whether each record's declared length fits.

A TFRecord file is a run of records, each ``uint64 length``, ``uint32`` checksum of the
length, ``length`` bytes of data and a ``uint32`` checksum of the data. TensorFlow's
reader allocates what the length declares before it reads: a crafted record of 2^60
bytes (with a valid checksum) kills the engine with SIGSEGV. Walking the lengths first
costs a 12-byte read per record (and a decompression pass for GZIP or ZLIB files), so
``distloop validate``, ``distloop run`` and the engine's data loading do it before
TensorFlow reads a record; the window's per-edit checks do not.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, Protocol

from .fileio import open_regular

_HEADER = struct.Struct("<QI")
"""A record's length and its length's checksum."""
_FOOTER_BYTES = 4
_MAX_EXPANSION = 1032
"""DEFLATE's largest expansion: a compressed file's records hold at most this many bytes
per byte stored."""
_CHUNK = 1 << 20


class _Stream(Protocol):
    def read(self, size: int) -> bytes: ...


class _ZlibStream:
    """A ZLIB-compressed file read as its decompressed bytes (gzip has its own reader)."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self._inflate = zlib.decompressobj()
        self._pending = b""

    def read(self, size: int) -> bytes:
        out = b""
        while len(out) < size:
            if not self._pending:
                self._pending = self._handle.read(_CHUNK)
                if not self._pending:
                    return out + self._inflate.flush()
            piece = self._inflate.decompress(self._pending, size - len(out))
            self._pending = self._inflate.unconsumed_tail
            out += piece
            if self._inflate.eof:
                break
        return out


def oversized_record(path: str, compression: str = "none") -> tuple[int, int] | None:
    """The number and declared length of the first record of ``path`` that declares more
    bytes than the file can hold; None when every length fits. A file that is unreadable
    otherwise, or no regular file, is left to TensorFlow's reader and the data checks,
    which name it."""
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if compression == "none":
                return _walk(handle, size, skip=_seek)
            stream: _Stream = (
                gzip.GzipFile(fileobj=handle) if compression == "GZIP" else _ZlibStream(handle)
            )
            return _walk(stream, size * _MAX_EXPANSION, skip=_read_past)
    except (OSError, EOFError, zlib.error):
        return None


def oversized_record_problem(path: str, compression: str, where: str) -> str | None:
    """:func:`oversized_record` in words, for the field ``where``."""
    found = oversized_record(path, compression)
    if found is None:
        return None
    number, length = found
    if number == 0:
        return unreadable_file(path, 0, compression, where)
    return (
        f"{path} is cut short or damaged after record {number - 1} (record {number} declares "
        f"{length} bytes, more than the file holds); write it again, or remove it from the "
        "pattern"
    )


def unreadable_file(file: str, records: int, compression: str, where: str) -> str:
    """Why ``file`` stops being readable after its first ``records`` records, in words:
    TensorFlow's own message names a graph node, not the file."""
    if records == 0 and compression not in ("", "none"):
        return (
            f"{file} is not a {compression}-compressed TFRecord file; set "
            f"{where}.compression to how the files were written"
        )
    if records == 0:
        return (
            f"{file} is not a TFRecord file; choose TFRecord files (or, for compressed "
            f"ones, set {where}.compression to GZIP or ZLIB)"
        )
    return (
        f"{file} is cut short or damaged after record {records - 1}; write it again, or "
        "remove it from the pattern"
    )


def _seek(stream: BinaryIO, count: int) -> None:
    stream.seek(count, os.SEEK_CUR)


def _read_past(stream: _Stream, count: int) -> None:
    while count > 0:
        got = len(stream.read(min(count, _CHUNK)))
        if not got:
            return
        count -= got


def _walk(stream: _Stream, limit: int, skip: Callable[[Any, int], None]) -> tuple[int, int] | None:
    """Follows the records' lengths through ``stream`` (at most ``limit`` bytes long)."""
    offset, number = 0, 0
    while True:
        header = stream.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return None  # the end, or a file cut short: TensorFlow names that
        (length, _) = _HEADER.unpack(header)
        offset += _HEADER.size + length + _FOOTER_BYTES
        if offset > limit:
            return number, length
        skip(stream, length + _FOOTER_BYTES)
        number += 1


def first_labels(
    paths: list[str], compression: str, label: str, limit: int, max_bytes: int
) -> tuple[list[float], bool] | None:
    """The ``label`` feature of the first ``limit`` ``tf.train.Example`` records of the
    files ``paths`` (in their order), reading at most ``max_bytes`` of records, and whether
    they are all the records; a label of several values (one-hot) as the place of its
    largest. None when a record holds no such feature or cannot be parsed (the run names
    why)."""
    labels: list[float] = []
    budget = max_bytes
    try:
        for path in paths:
            with open_regular(path) as handle:
                stream: _Stream = handle
                if compression == "GZIP":
                    stream = gzip.GzipFile(fileobj=handle)
                elif compression == "ZLIB":
                    stream = _ZlibStream(handle)
                while True:
                    header = stream.read(_HEADER.size)
                    if len(header) < _HEADER.size:
                        break
                    (length, _) = _HEADER.unpack(header)
                    budget -= _HEADER.size + length + _FOOTER_BYTES
                    if budget < 0 or len(labels) == limit:
                        return labels, False
                    values = _feature_values(stream.read(length), label.encode())
                    stream.read(_FOOTER_BYTES)
                    if not values:
                        return None
                    labels.append(values[0] if len(values) == 1 else values.index(max(values)))
    except (OSError, EOFError, zlib.error, ValueError, IndexError, struct.error):
        return None
    return labels, True


def _feature_values(example: bytes, name: bytes) -> list[float]:
    """The values of feature ``name`` in a serialized ``tf.train.Example``, read as its
    protobuf fields: Example.features (1) > Features.feature (1, a map entry of key 1 and
    value 2) > Feature's float_list (2) or int64_list (3) > their value (1)."""
    for number, _, features in _fields(example):
        if number != 1:
            continue
        for entry_number, _, entry in _fields(features):
            if entry_number != 1:
                continue
            parts = {field: value for field, _, value in _fields(entry)}
            if parts.get(1) != name or 2 not in parts:
                continue
            return [
                value
                for kind, _, values in _fields(parts[2])
                if kind in (2, 3)
                for value in _list_values(values, floats=kind == 2)
            ]
    return []


def _list_values(message: bytes, floats: bool) -> list[float]:
    """A FloatList's or an Int64List's values, packed or not."""
    values: list[float] = []
    for _, wire, value in _fields(message):
        if wire == 2 and floats:
            values += struct.unpack(f"<{len(value) // 4}f", value)
        elif wire == 2:
            position = 0
            while position < len(value):
                number, position = _varint(value, position)
                values.append(number - (1 << 64) if number >= 1 << 63 else number)
        elif wire == 5:
            values.append(struct.unpack("<f", value)[0])
        elif wire == 0:
            values.append(value - (1 << 64) if value >= 1 << 63 else value)
    return values


def _fields(message: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of each field of a protobuf message: an int for a
    varint, the bytes otherwise."""
    position = 0
    while position < len(message):
        key, position = _varint(message, position)
        wire = key & 7
        if wire == 0:
            value, position = _varint(message, position)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, position = message[position : position + size], position + size
        elif wire == 2:
            size, position = _varint(message, position)
            value, position = message[position : position + size], position + size
        else:
            raise ValueError(f"protobuf wire type {wire} is not one an Example uses")
        yield key >> 3, wire, value


def _varint(message: bytes, position: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        byte = message[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7
