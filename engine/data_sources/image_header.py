"""How many pixels an image file says it has, read from its header before any decoder runs.

A decoder allocates what the header declares: a PNG of a few hundred kilobytes of
compressed zeros can declare 60,000 x 60,000 pixels (10 GiB decoded), and a prediction
or a training run that decodes it dies of memory, taking everything else in the process
with it. The header is read here (PNG, GIF, BMP, JPEG's frame header), and an image that
declares more than :data:`MAX_PIXELS` is refused before TensorFlow sees it.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

MAX_PIXELS = 100_000_000
"""A 100-megapixel image, larger than any camera's, is 300 MB decoded and 1.2 GB as the
float32 a resize makes of it; beyond that an image is a bomb, not a photograph."""
MAX_IMAGE_BYTES = 256 * 1024 * 1024
"""The largest image file a prediction reads whole (a 100-megapixel PNG is far smaller)."""
_JPEG_FRAMES = {0xC0 + n for n in range(16)} - {0xC4, 0xC8, 0xCC}
"""JPEG's start-of-frame markers (SOF0-SOF15; C4, C8 and CC are other segments)."""
_JPEG_SEGMENTS = 4096
"""How many segments before the frame header are read at most (EXIF, ICC and the like)."""


def declared_size(handle: BinaryIO) -> tuple[int, int] | None:
    """(width, height) as the image's header declares them; None when the format is none
    of these or its header is cut short (the decoder then says so)."""
    head = handle.read(32)
    if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR" and len(head) >= 24:
        return struct.unpack(">II", head[16:24])
    if head.startswith(b"GIF8") and len(head) >= 10:
        return struct.unpack("<HH", head[6:10])
    if head.startswith(b"BM") and len(head) >= 26:
        width, height = struct.unpack("<ii", head[18:26])
        return abs(width), abs(height)  # a negative height is a top-down BMP
    if head.startswith(b"\xff\xd8"):
        return _jpeg_size(handle)
    return None


def _jpeg_size(handle: BinaryIO) -> tuple[int, int] | None:
    """The frame header's size, found by skipping segments by their lengths."""
    handle.seek(2)
    for _ in range(_JPEG_SEGMENTS):
        marker = handle.read(2)
        while len(marker) == 2 and marker[0] == 0xFF and marker[1] == 0xFF:  # fill bytes
            marker = marker[1:] + handle.read(1)
        if len(marker) < 2 or marker[0] != 0xFF:
            return None
        length_bytes = handle.read(2)
        if len(length_bytes) < 2:
            return None
        (length,) = struct.unpack(">H", length_bytes)
        if marker[1] in _JPEG_FRAMES:
            frame = handle.read(5)
            if len(frame) < 5:
                return None
            height, width = struct.unpack(">HH", frame[1:5])
            return width, height
        if length < 2:
            return None
        handle.seek(length - 2, 1)
    return None


def pixels_problem(handle: BinaryIO) -> str | None:
    """Why the image is too large to decode, or None; reads its header only."""
    size = declared_size(handle)
    if size is None or size[0] * size[1] <= MAX_PIXELS:
        return None
    return (
        f"declares {size[0]:,} x {size[1]:,} pixels, more than the {MAX_PIXELS:,} an image "
        "may have here (decoding it would take more memory than a photograph)"
    )
