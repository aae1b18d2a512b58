"""Small image folders for tests, written without an imaging library (PNG is zlib + CRCs)."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import numpy as np


def png_bytes(pixels: np.ndarray) -> bytes:
    """An 8-bit grayscale ([h, w] or [h, w, 1]) or RGB ([h, w, 3]) PNG of ``pixels``."""
    image = np.asarray(pixels, dtype=np.uint8)
    if image.ndim == 3 and image.shape[2] == 1:
        image = image[:, :, 0]
    color_type = 0 if image.ndim == 2 else 2
    rows = image.reshape(image.shape[0], -1)
    raw = b"".join(b"\x00" + row.tobytes() for row in rows)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", image.shape[1], image.shape[0], 8, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def class_pattern(label: int, size: int) -> np.ndarray:
    """A bright band whose place tells the class: learnable by a dense model in a few steps."""
    image = np.zeros((size, size), dtype=np.float32)
    band = max(1, size // 4)
    start = (label * band * 3 // 2) % (size - band + 1)
    image[start : start + band, :] = 1.0
    return image


def write_image_folder(
    root: Path,
    classes: tuple[str, ...] = ("circle", "square", "triangle"),
    per_class: int = 12,
    size: int = 8,
    seed: int = 0,
) -> Path:
    """``root/<class>/<n>.png`` grayscale images of a learnable pattern plus noise."""
    rng = np.random.default_rng(seed)
    for label, name in enumerate(classes):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            noisy = class_pattern(label, size) * 200 + rng.uniform(0, 55, (size, size))
            (folder / f"{index:03d}.png").write_bytes(png_bytes(noisy))
    return root


def write_linked_image_folder(root: Path, files: int, classes: int = 10) -> Path:
    """``root/classN/*.png``: ``files`` hard links of a few learnable 8x8 PNGs, one source
    per class (a file takes at most ~65,000 links), so tens of thousands of files cost
    inodes, not images: a folder at a user's scale in a second."""
    sources = []
    for label in range(classes):
        (root / f"class{label}").mkdir(parents=True, exist_ok=True)
        source = root.parent / f"{root.name}-source{label}.png"
        source.write_bytes(png_bytes(class_pattern(label % 4, 8) * 255))
        sources.append(source)
    for index in range(files):
        label = index % classes
        os.link(sources[label], root / f"class{label}" / f"{index:06d}.png")
    return root
