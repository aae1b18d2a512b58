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
from collections.abc import Callable
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
