"""TensorBoard event files written without TensorFlow (for processes that never import it).

An event file is a TFRecord file of ``Event`` protocol buffers. The few messages and
fields written here are encoded by hand in protocol buffers' wire format, so a
TensorFlow-free process (a study's runner) adds summaries next to the engine's own
(``engine.tf.tensorboard``) without a second copy of TensorFlow's start-up in it.

Messages (field numbers as in TensorFlow's ``event.proto`` and ``summary.proto``):
``Event`` {wall_time 1, step 2, file_version 3, summary 5}; ``Summary`` {value 1};
``Summary.Value`` {tag 1, simple_value 2, tensor 8, metadata 9}; ``SummaryMetadata``
{plugin_data 1 {plugin_name 1, content 2}}.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path


def varint(value: int) -> bytes:
    """A protocol buffer varint; a negative int as its 64-bit two's complement."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_varint(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def field_double(number: int, value: float) -> bytes:
    return varint(number << 3 | 1) + struct.pack("<d", value)


def field_float(number: int, value: float) -> bytes:
    return varint(number << 3 | 5) + struct.pack("<f", value)


def field_bytes(number: int, data: bytes) -> bytes:
    """A length-delimited field: bytes, a string (UTF-8) or a nested message."""
    return varint(number << 3 | 2) + varint(len(data)) + data


def field_text(number: int, text: str) -> bytes:
    """A protobuf string, which must be UTF-8: a lone surrogate (JSON's ``"\\ud800"``, in
    a study's values or a run's name from someone else's file) is written as its escape
    rather than failing the summary that holds it."""
    return field_bytes(number, text.encode("utf-8", "backslashreplace"))


NULL_TENSOR = field_varint(1, 1) + field_bytes(2, field_bytes(2, b""))
"""A ``TensorProto`` of dtype float and shape (0,): what a plugin's summary carries when
its data is all in the metadata (TensorBoard's own ``NULL_TENSOR``)."""


def plugin_value(tag: str, plugin_name: str, content: bytes) -> bytes:
    """A ``Summary.Value`` whose data is a plugin's content in its metadata."""
    metadata = field_bytes(1, field_text(1, plugin_name) + field_bytes(2, content))
    return field_text(1, tag) + field_bytes(8, NULL_TENSOR) + field_bytes(9, metadata)


def scalar_value(tag: str, value: float) -> bytes:
    return field_text(1, tag) + field_float(2, value)


def event(wall_time: float, step: int = 0, values: list[bytes] | None = None) -> bytes:
    """An ``Event`` with a ``Summary`` of ``values``; none: the file-version event."""
    head = field_double(1, wall_time) + field_varint(2, step)
    if values is None:
        return head + field_text(3, "brain.Event:2")
    return head + field_bytes(5, b"".join(field_bytes(1, value) for value in values))


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C (Castagnoli), rotated and offset."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord: length, its checksum, the data, its checksum."""
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", masked_crc32c(length))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


def write_events(folder: Path, events: list[bytes], suffix: str) -> Path:
    """A new event file in ``folder`` holding ``events`` after the file-version event.

    The whole file is written under a temporary name, then renamed: TensorBoard, reading
    the folder meanwhile, never sees half a record. A link in its place is never followed.
    """
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time()
    name = f"events.out.tfevents.{now:.6f}.{socket.gethostname()}.{suffix}"
    temporary = folder / f".{name}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(temporary, flags, 0o666), "wb") as out:
        out.write(b"".join(record(item) for item in [event(now), *events]))
    os.replace(temporary, folder / name)
    return folder / name
